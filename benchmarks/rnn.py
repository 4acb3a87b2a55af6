"""Recurrent layers and ctc_loss on the CPU: mixprec against PyTorch eager in the same process.

A recurrent layer is a Python loop over time steps, each step a handful of
small ops (two linears and the gate math, vectorised over the batch and the
gates), so on small models the time is mostly the framework's per-op overhead.
Workloads (float32, forward + backward):

  lstm      nn.LSTM(32, 64) over T=20 steps, batch 16
  lstm-2x2  nn.LSTM(32, 64, num_layers=2, bidirectional=True), same input
  gru       nn.GRU(32, 64), same input
  lstmcell  nn.LSTMCell(32, 64) stepped by hand 20 times
  ctc       ctc_loss of log_softmax(logits) (T=50, N=16, C=28), targets of length 12

Each workload is timed for mixprec and, when PyTorch is importable, for PyTorch
(one thread; NumPy's BLAS too) on the same weights and data; the ratio is
mixprec / PyTorch.
Timings are the best of ``--repeat`` runs of ``--number`` calls, the two taking
turns within each round.

    python benchmarks/rnn.py [--number 5] [--repeat 5]
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # NumPy's BLAS on one thread, like
    os.environ.setdefault(_var, "1")  # torch below: these GEMMs are tiny, and threads only contend for the cores

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import mixprec as mp  # noqa: E402
import _env  # noqa: E402  (benchmarks/ is on sys.path when one of its scripts runs)
from dispatch import best_times  # noqa: E402  (benchmarks/dispatch.py: turn-taking best-of timing)

try:
    import torch
except ImportError:  # the PyTorch column is skipped
    torch = None

T, N, IN, HIDDEN = 20, 16, 32, 64
CTC_T, CTC_C, CTC_S = 50, 28, 12


def _layer_step(lib, make, stepwise=False):
    """A forward + backward of one recurrent module on fixed data (mixprec and torch share the weights)."""
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((T, N, IN), dtype=np.float32)
    mp.manual_seed(0)  # the same weights for both libraries
    m_mod = make(mp.nn)
    if lib == "mixprec":
        mod, x = m_mod, mp.tensor(x_np)
    else:
        mod = make(torch.nn)
        mod.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in m_mod.state_dict().items()})
        x = torch.from_numpy(x_np)

    def step():
        if stepwise:
            h = c = None
            outs = []
            for t in range(T):
                h, c = mod(x[t], None if h is None else (h, c))
                outs.append(h)
            loss = sum(o.sum() for o in outs)
        else:
            loss = mod(x)[0].sum()
        mod.zero_grad()
        loss.backward()
        return loss
    return step


def _ctc_step(lib):
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((CTC_T, N, CTC_C), dtype=np.float32)
    targets = rng.integers(1, CTC_C, (N, CTC_S))
    in_len, tgt_len = rng.integers(CTC_T - 10, CTC_T + 1, N), rng.integers(CTC_S - 4, CTC_S + 1, N)
    if lib == "mixprec":
        x = mp.tensor(logits, requires_grad=True)
        args = (mp.tensor(targets), mp.tensor(in_len), mp.tensor(tgt_len))
        loss_fn = mp.nn.functional.ctc_loss
    else:
        x = torch.tensor(logits, requires_grad=True)
        args = (torch.from_numpy(targets), torch.from_numpy(in_len), torch.from_numpy(tgt_len))
        loss_fn = torch.nn.functional.ctc_loss

    def step():
        x.grad = None
        loss = loss_fn(x.log_softmax(2), *args)
        loss.backward()
        return loss
    return step


WORKLOADS = {
    f"lstm: LSTM({IN}, {HIDDEN}), T={T}, N={N}": lambda lib: _layer_step(lib, lambda nn: nn.LSTM(IN, HIDDEN)),
    "lstm-2x2: 2 layers, bidirectional": lambda lib: _layer_step(
        lib, lambda nn: nn.LSTM(IN, HIDDEN, num_layers=2, bidirectional=True)),
    f"gru: GRU({IN}, {HIDDEN})": lambda lib: _layer_step(lib, lambda nn: nn.GRU(IN, HIDDEN)),
    f"lstmcell: LSTMCell x {T} steps": lambda lib: _layer_step(lib, lambda nn: nn.LSTMCell(IN, HIDDEN), True),
    f"ctc: T={CTC_T}, N={N}, C={CTC_C}, S={CTC_S}": _ctc_step,
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--number", type=int, default=5, help="calls per timing run")
    ap.add_argument("--repeat", type=int, default=5, help="timing runs; the best is reported")
    args = ap.parse_args(argv)
    if torch is not None:
        torch.set_num_threads(1)
    print(_env.describe(torch))
    head = f"{'workload (forward + backward, float32)':42} {'mixprec ms':>11} {'torch ms':>9} {'ratio':>6}"
    print("\n" + head + "\n" + "-" * len(head))
    for label, make in WORKLOADS.items():
        fns = {"mixprec": make("mixprec")}
        if torch is not None:
            fns["torch"] = make("torch")
            same = abs(float(fns["mixprec"]().item()) - float(fns["torch"]().item()))
        t = best_times(fns, args.number, args.repeat)
        t_t = t.get("torch")
        print(f"{label:42} {t['mixprec'] * 1e3:11.2f} "
              + (f"{t_t * 1e3:9.2f} {t['mixprec'] / t_t:6.1f}   (|loss difference| {same:.1e})" if t_t else
                 f"{'-':>9} {'-':>6}"))
    print("\nratio = mixprec time / PyTorch eager time (one thread) in this process")


if __name__ == "__main__":
    main()
