"""Python overhead of mixprec's dispatch and autograd engine on tiny CPU tensors.

On tensors this small the arithmetic is nearly free, so the time per call is the
framework's own Python (or C++) overhead. The workloads:

  op            ``a + b`` on two 4x4 float32 tensors (no graph)
  op+grad       the same with ``a.requires_grad`` (records a graph node)
  cross_entropy F.cross_entropy on (4, 8) logits that require grad, forward and backward
  mlp step      one training step of a 64 -> 64 -> 10 MLP on a batch of 32: forward
                (linear, relu, linear, log_softmax, index the targets, mean),
                backward, SGD with momentum
  tiny step     one training step of an 8 -> 8 -> 8 MLP on a batch of 4 with
                cross_entropy (linear, relu, linear, cross_entropy), backward, SGD
                with momentum: per-op overhead is nearly all of it
  generic step  the tiny model as people write it by hand: 4 layers of ``h @ w + b``
                and relu (none after the last), cross_entropy, backward, SGD (batch 4,
                width 8)

Each is timed for mixprec and, when PyTorch is importable, for PyTorch eager in
the same process: in each of ``--windows`` windows both run ``--number`` calls back
to back (in alternating order), and the ratio reported is the median over the
windows of mixprec's time / PyTorch's, so a slow spell on a shared machine hits
both members of a pair alike. The time columns are medians too. Raw NumPy is
shown as the floor for the single op.

    python benchmarks/dispatch.py [--number 200] [--windows 30]

``--baseline DIR`` also times the same mixprec workloads with dispatch() and the
autograd engine's backward() loaded from another checkout (e.g. the commit before
a change to them) into this process, the two versions taking turns within each
round, and reports current / baseline: whether a change to the hot path costs
anything, measured where machine noise hits both alike. ``--against DIR`` does the
same with the whole mixprec package of another checkout (loaded beside this one
under another name), for changes that reach beyond those two functions.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import mixprec as mp  # noqa: E402
import _env  # noqa: E402  (benchmarks/ is on sys.path when one of its scripts runs)

try:
    import torch
except ImportError:  # the PyTorch column is skipped
    torch = None

# (batch, in, hidden, out) of the two training steps
MLP = (32, 64, 64, 10)
TINY = (4, 8, 8, 8)


def best_times(fns, number, repeat):
    """Seconds per call of each function: the best of ``repeat`` runs of ``number`` calls (the other benchmarks'
    timing loop).

    The functions take turns within each round, so a slow spell on a shared
    machine hits all of them rather than skewing the ratio.
    """
    for fn in fns.values():  # warm-up
        for _ in range(min(number, 50)):
            fn()
    best = {name: float("inf") for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            best[name] = min(best[name], (time.perf_counter() - t0) / number)
    return best


def median_times(fns, number, windows):
    """Per function, the median seconds per call over ``windows`` windows of ``number`` calls, and, for each
    function but the first, the median over the windows of (first's time / its time). The functions run back to
    back in each window, in rotating order."""
    names = list(fns)
    for fn in fns.values():  # warm-up
        for _ in range(min(number, 50)):
            fn()
    times = {name: [] for name in names}
    for w in range(windows):
        for name in names[w % len(names):] + names[:w % len(names)]:
            times[name].append(window(fns[name], number))
    first = times[names[0]]
    ratios = {name: float(np.median([a / b for a, b in zip(first, times[name])])) for name in names[1:]}
    return {name: float(np.median(t)) for name, t in times.items()}, ratios


def load_baseline(tree):
    """dispatch() and engine.backward() from the checkout at ``tree``, as modules of this mixprec."""
    found = {}
    for pkg, name in (("mixprec.ops", "dispatch"), ("mixprec.autograd", "engine")):
        path = Path(tree) / pkg.replace(".", "/") / f"{name}.py"
        spec = importlib.util.spec_from_file_location(f"{pkg}._baseline_{name}", path)
        module = importlib.util.module_from_spec(spec)
        module.__package__ = pkg  # its relative imports resolve to this mixprec
        spec.loader.exec_module(module)
        found[name] = module
    return found["dispatch"].dispatch, found["engine"].backward


@contextlib.contextmanager
def running(dispatch_fn, backward_fn):
    """Every op call and backward() inside goes through the given functions."""
    registry, engine = mp.ops.registry, mp.autograd.engine
    saved = registry.dispatch, engine.backward
    registry.dispatch, engine.backward = dispatch_fn, backward_fn
    try:
        yield
    finally:
        registry.dispatch, engine.backward = saved


def load_package(tree, name="mixprec_against"):
    """The mixprec package of the checkout at ``tree``, imported as ``name`` beside this one (its imports are
    relative, so it uses its own modules throughout)."""
    init = Path(tree) / "mixprec" / "__init__.py"
    spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[str(init.parent)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def window(fn, number):
    """Seconds per call of ``fn`` over ``number`` calls (after one warm call)."""
    fn()
    t0 = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - t0) / number


def paired(time_a, time_b, windows):
    """The best of ``windows`` timings of each of two versions and the median of the paired ratios a / b:
    ``time_a()`` and ``time_b()`` each time one window, back to back in every window (in alternating order),
    so a busy machine slows both members of a pair alike."""
    best, ratios = [float("inf"), float("inf")], []
    for w in range(windows):
        pair = [0.0, 0.0]
        for k in ((0, 1) if w % 2 == 0 else (1, 0)):
            pair[k] = (time_a, time_b)[k]()
        best = [min(best[0], pair[0]), min(best[1], pair[1])]
        ratios.append(pair[0] / pair[1])
    return best[0], best[1], float(np.median(ratios))


def against_baseline(fn, baseline, number, windows):
    """paired(): ``fn`` with the current and with the baseline dispatch and engine."""
    def with_baseline():
        with running(*baseline):
            return window(fn, number)
    return paired(lambda: window(fn, number), with_baseline, windows)


# ------------------------------------------------------------------ workloads
def op_workloads(lib=mp):
    rng = np.random.default_rng(0)
    a_np, b_np = rng.standard_normal((4, 4), dtype=np.float32), rng.standard_normal((4, 4), dtype=np.float32)
    a, b = lib.tensor(a_np), lib.tensor(b_np)
    ag = lib.tensor(a_np, requires_grad=True)
    out = {"numpy": {"op": lambda: a_np + b_np},
           "mixprec": {"op": lambda: a + b, "op+grad": lambda: ag + b}}
    if torch is not None:
        ta, tb = torch.from_numpy(a_np.copy()), torch.from_numpy(b_np.copy())
        tag = ta.clone().requires_grad_(True)
        out["torch"] = {"op": lambda: ta + tb, "op+grad": lambda: tag + tb}
    return out


def cross_entropy_workload(lib):
    """F.cross_entropy forward and backward on (4, 8) logits."""
    rng = np.random.default_rng(0)
    logits_np, target_np = rng.standard_normal((4, 8), dtype=np.float32), rng.integers(0, 8, 4)
    if lib is torch:
        logits, target = torch.tensor(logits_np, requires_grad=True), torch.from_numpy(target_np)
    else:
        logits, target = lib.tensor(logits_np, requires_grad=True), lib.tensor(target_np)
    F = lib.nn.functional

    def run():
        F.cross_entropy(logits, target).backward()
        logits.grad = None
    return run


def generic_step(lib, batch=4, width=8, layers=4):
    """One SGD step of an MLP written with ``@``: ``layers`` layers of h @ w + b, relu between them, cross_entropy."""
    rng = np.random.default_rng(0)
    init = [((rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32), np.zeros(width, np.float32))
            for _ in range(layers)]
    x_np, y_np = rng.standard_normal((batch, width), dtype=np.float32), rng.integers(0, width, batch)
    if lib is torch:
        params = [torch.tensor(a, requires_grad=True) for pair in init for a in pair]
        x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)
    else:
        params = [lib.tensor(a, requires_grad=True) for pair in init for a in pair]
        x, y = lib.tensor(x_np), lib.tensor(y_np)
    opt = lib.optim.SGD(params, lr=0.05)
    F = lib.nn.functional

    def step():
        h = x
        for i in range(layers):
            h = h @ params[2 * i] + params[2 * i + 1]
            if i < layers - 1:
                h = h.relu()
        loss = F.cross_entropy(h, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return step


def mlp_data(sizes):
    batch, n_in, hidden, n_out = sizes
    rng = np.random.default_rng(0)
    init = {"w1": rng.standard_normal((hidden, n_in)) / np.sqrt(n_in), "b1": np.zeros(hidden),
            "w2": rng.standard_normal((n_out, hidden)) / np.sqrt(hidden), "b2": np.zeros(n_out)}
    init = {k: v.astype(np.float32) for k, v in init.items()}
    x = rng.standard_normal((batch, n_in), dtype=np.float32)
    y = rng.integers(0, n_out, batch)
    return init, x, y


def training_step(lib, sizes=MLP, loss="log_softmax"):
    """One SGD step of a two-layer MLP in ``lib`` (a mixprec package or torch: the same code for both).

    loss "log_softmax": -log_softmax(logits)[rows, y].mean(); "cross_entropy": F.cross_entropy.
    """
    init, x_np, y_np = mlp_data(sizes)
    if lib is torch:
        params = {k: torch.tensor(v, requires_grad=True) for k, v in init.items()}
        x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)
    else:
        params = {k: lib.tensor(v, requires_grad=True) for k, v in init.items()}
        x, y = lib.tensor(x_np), lib.tensor(y_np)
    rows = lib.arange(sizes[0])
    opt = lib.optim.SGD(list(params.values()), lr=0.05, momentum=0.9)
    F = lib.nn.functional

    def step():
        h = F.relu(F.linear(x, params["w1"], params["b1"]))
        logits = F.linear(h, params["w2"], params["b2"])
        if loss == "cross_entropy":
            loss_value = F.cross_entropy(logits, y)
        else:
            loss_value = -F.log_softmax(logits, dim=1)[rows, y].mean()
        opt.zero_grad()
        loss_value.backward()
        opt.step()
        return loss_value
    return step


def mixprec_step(sizes=MLP, loss="log_softmax"):
    return training_step(mp, sizes, loss)


def torch_step(sizes=MLP, loss="log_softmax"):
    return training_step(torch, sizes, loss)


STEPS = {  # name: (label, sizes, loss)
    "mlp step": ("mlp step: {0}x{1} -> {2} -> {3}, fwd+bwd+SGD", MLP, "log_softmax"),
    "tiny step": ("tiny step: {0}x{1} -> {2} -> {3}, cross_entropy", TINY, "cross_entropy"),
}


def check_same_training():
    """Both frameworks train the same model to the same loss (so the timed work is the same)."""
    if torch is None:
        return None
    diffs = []
    for _, sizes, loss in STEPS.values():
        ms, ts = mixprec_step(sizes, loss), torch_step(sizes, loss)
        for _ in range(20):
            lm, lt = ms().item(), ts().item()
        diffs.append(abs(lm - lt))
    return max(diffs)


GOALS = {"op": 1.6, "cross_entropy": 3.0, "tiny step": 2.0, "generic step": 2.0}


def workloads():
    """{name: (label, {framework: fn})} of every workload (torch's only when it is importable)."""
    ops = op_workloads()
    found = {}
    for name in ("op", "op+grad"):
        found[name] = (f"{name}: add 4x4 float32", {lib: ops[lib][name] for lib in ("mixprec", "torch", "numpy")
                                                    if lib in ops and name in ops[lib]})
    libs = {"mixprec": mp} | ({"torch": torch} if torch is not None else {})
    found["cross_entropy"] = ("cross_entropy (4, 8): fwd+bwd", {k: cross_entropy_workload(v) for k, v in libs.items()})
    for name, (label, sizes, loss) in STEPS.items():
        found[name] = (label.format(*sizes), {k: training_step(v, sizes, loss) for k, v in libs.items()})
    found["generic step"] = ("generic step: 4x(@, +b, relu), 4x8, CE, SGD", {k: generic_step(v) for k, v in libs.items()})
    return found


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--number", type=int, default=200, help="calls per window (op); the steps use number/10")
    ap.add_argument("--windows", type=int, default=30, help="paired windows; medians are reported")
    ap.add_argument("--repeat", type=int, default=7, help="(--baseline/--against: windows = 10 x repeat)")
    ap.add_argument("--baseline", metavar="DIR", help="a checkout whose dispatch and engine to time against")
    ap.add_argument("--against", metavar="DIR", help="a checkout whose whole mixprec package to time against")
    args = ap.parse_args(argv)

    if torch is not None:
        torch.set_num_threads(1)  # tiny tensors: threads only add overhead, keep both single-threaded
    print(_env.describe(torch))
    diff = check_same_training()
    if diff is not None:
        print(f"same models, same data: |loss_mixprec - loss_torch| after 20 steps <= {diff:.2e}")

    print()
    head = f"{'workload':44} {'mixprec us':>11} {'torch us':>9} {'ratio':>6} {'goal':>5} {'numpy us':>9}"
    print(head)
    print("-" * len(head))
    for name, (label, fns) in workloads().items():
        number = args.number if name.startswith("op") else max(args.number // 10, 5)
        t, ratios = median_times(fns, number, args.windows)
        cells = [f"{label:44}", f"{t['mixprec'] * 1e6:11.2f}",
                 f"{t['torch'] * 1e6:9.2f}" if "torch" in t else f"{'-':>9}",
                 f"{ratios['torch']:6.2f}" if "torch" in ratios else f"{'-':>6}",
                 f"{GOALS[name]:5.1f}" if name in GOALS else f"{'':5}",
                 f"{t['numpy'] * 1e6:9.2f}" if "numpy" in t else f"{'-':>9}"]
        print(" ".join(cells), flush=True)
    print("\nratio = median over paired windows of mixprec time / PyTorch eager time, in this process; times are "
          "medians too")
    if args.baseline:
        baseline = load_baseline(args.baseline)
        ops = op_workloads()["mixprec"]
        print(f"\nthis checkout against the dispatch and engine of {args.baseline}, same process, paired windows")
        print(f"{'workload':44} {'current us':>11} {'baseline us':>12} {'median ratio of pairs':>22}")
        windows = 10 * args.repeat
        for label, fn, number in (("op: add 4x4 float32", ops["op"], max(args.number // 10, 20)),
                                  ("op+grad: add 4x4 float32", ops["op+grad"], max(args.number // 10, 20)),
                                  ("mlp step", mixprec_step(), max(args.number // 200, 5)),
                                  ("tiny step", mixprec_step(TINY, "cross_entropy"), max(args.number // 100, 5))):
            cur, base, ratio = against_baseline(fn, baseline, number, windows)
            print(f"{label:44} {cur * 1e6:11.2f} {base * 1e6:12.2f} {ratio:22.3f}")
        print("(best times of all windows; ratio = current / baseline, the median over the windows' pairs)")
    if args.against:
        other = load_package(args.against)
        ours, theirs = op_workloads(mp)["mixprec"], op_workloads(other)["mixprec"]
        print(f"\nthis checkout against the mixprec package of {args.against}, same process, paired windows")
        print(f"{'workload':44} {'current us':>11} {'other us':>12} {'median ratio of pairs':>22}")
        windows = 10 * args.repeat
        rows = [(f"{name}: add 4x4 float32", ours[name], theirs[name], max(args.number // 10, 20))
                for name in ("op", "op+grad")]
        rows.append(("cross_entropy", cross_entropy_workload(mp), cross_entropy_workload(other),
                     max(args.number // 40, 5)))
        rows += [(name, training_step(mp, sizes, loss), training_step(other, sizes, loss), max(args.number // 200, 5))
                 for name, (_, sizes, loss) in STEPS.items()]
        rows.append(("generic step", generic_step(mp), generic_step(other), max(args.number // 100, 5)))
        for label, fn, fn_other, number in rows:
            cur, base, ratio = paired(lambda: window(fn, number), lambda: window(fn_other, number), windows)
            print(f"{label:44} {cur * 1e6:11.2f} {base * 1e6:12.2f} {ratio:22.3f}")
        print("(best times of all windows; ratio = current / other, the median over the windows' pairs)")


if __name__ == "__main__":
    main()
