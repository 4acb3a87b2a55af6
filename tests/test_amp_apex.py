"""apex's API on mixprec: initialize with lists and num_losses, the scale_loss loop, loss_scaler, amp.state_dict.

apex itself is not installable here (a deprecated CUDA extension); its documented behaviour is the reference, and
the mixprec loop (GradScaler.step) is the oracle for the numbers: the apex loop must give the same bits.
"""
import numpy as np
import pytest

import mixprec as mp
import mixprec.nn.functional as F
from mixprec.amp import apex


def mlp(seed=0):
    mp.manual_seed(seed)
    return mp.nn.Sequential(mp.nn.Linear(6, 12), mp.nn.LayerNorm(12), mp.nn.ReLU(), mp.nn.Linear(12, 3))


def batches(steps, poison_step=3, seed=5):
    rng = np.random.default_rng(seed)
    xs = rng.standard_normal((steps, 4, 6)).astype(np.float32)
    if poison_step is not None:
        xs[poison_step, 0, 0] = np.inf
    return [(mp.tensor(x), mp.tensor(rng.integers(0, 3, 4))) for x in xs]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the injected overflow
@pytest.mark.parametrize("level", ["O1", "O2"])
@pytest.mark.parametrize("fused", [False, True])
def test_the_apex_loop_gives_the_bits_of_the_gradscaler_loop(level, fused):
    """scale_loss + optimizer.step() (apex) vs scaler.step + update (torch/mixprec), skipped step included."""
    results = []
    for apex_loop in (False, True):
        model = mlp()
        opt = mp.optim.Adam(model.parameters(), lr=1e-2, fused=fused)
        model, opt = mp.amp.initialize(model, opt, level)
        scaler = mp.amp.loss_scaler()
        skipped = []
        for x, y in batches(6):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            before = [p.numpy().copy() for p in model.parameters()]
            if apex_loop:
                with mp.amp.scale_loss(loss, opt) as scaled:
                    scaled.backward()
                opt.step()
            else:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            skipped.append(all(np.array_equal(a, p.numpy()) for a, p in zip(before, model.parameters())))
        results.append(([p.numpy() for p in model.parameters()], scaler.get_scale(), skipped))
    (a, scale_a, skip_a), (b, scale_b, skip_b) = results
    assert all(np.array_equal(u, v) for u, v in zip(a, b))
    assert scale_a == scale_b == 2.0 ** 15 and skip_a == skip_b == [False, False, False, True, False, False]


def test_lists_of_models_and_optimizers_come_back_as_lists_each_set_up_as_alone():
    """Two models, two optimizers, one initialize (apex's multi-model form) == each model initialized alone."""
    together = [mlp(1), mlp(2)]
    opts = [mp.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in together]
    models, optimizers = mp.amp.initialize(together, opts, "O2")
    scaler = mp.amp.loss_scaler()
    assert isinstance(models, list) and models == together and optimizers == opts
    assert all(mp.amp.MasterWeights.of(o) is not None for o in optimizers)
    alone = []
    for seed in (1, 2):
        m = mlp(seed)
        alone.append((*mp.amp.initialize(m, mp.optim.SGD(m.parameters(), lr=0.1, momentum=0.9), "O2"),
                      mp.amp.loss_scaler()))
    for x, y in batches(4, poison_step=None):
        for (m, o, s), (m2, o2, s2) in zip(alone, [(mm, oo, scaler) for mm, oo in zip(models, optimizers)]):
            for model, opt, sc in ((m, o, s), (m2, o2, s2)):
                opt.zero_grad()
                sc.scale(F.cross_entropy(model(x), y)).backward()
                sc.step(opt)
        scaler.update()
        for _, _, s in alone:
            s.update()
    for (m, _, _), m2 in zip(alone, models):
        for p, q in zip(m.parameters(), m2.parameters()):
            assert p.dtype == mp.float16 or p.shape == (12,)  # LayerNorm stays float32
            assert np.array_equal(p.numpy(), q.numpy())


def test_one_optimizer_over_two_models_keeps_each_models_masters_in_its_checkpoint():
    a, b = mlp(1), mlp(2)
    opt = mp.optim.SGD(list(a.parameters()) + list(b.parameters()), lr=0.1)
    (a, b), opt = mp.amp.initialize([a, b], opt, "O2")
    scaler = mp.amp.loss_scaler()
    x, y = batches(1, poison_step=None)[0]
    scaler.scale(F.cross_entropy(a(x), y) + F.cross_entropy(b(x), y)).backward()
    scaler.step(opt)
    ext = mp.amp.MasterWeights.of(opt)
    for model in (a, b):
        for name, value in model.state_dict().items():
            p = dict(model.named_parameters()).get(name)
            if p is not None and p.dtype == mp.float16:
                assert value.dtype == mp.float32 and np.array_equal(value.numpy(), ext.master_of(p).numpy())


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the injected overflow
def test_two_losses_with_their_own_scalers_meet_in_one_step():
    """num_losses=2: each loss is scaled by its own scaler; the step sees the sum of the unscaled gradients; an
    overflow in one loss skips the step and backs off only that loss's scale."""
    model = mlp()
    opt = mp.optim.SGD(model.parameters(), lr=0.1)
    model, opt = mp.amp.initialize(model, opt, "O0", loss_scale="dynamic", num_losses=2)
    scalers = [mp.amp.loss_scaler(0), mp.amp.loss_scaler(1)]
    assert len(scalers) == 2 and scalers[0] is not scalers[1]
    reference = mlp()
    x, y = batches(1, poison_step=None)[0]
    losses = [F.cross_entropy(model(x), y), (model(x) ** 2).mean()]
    for i, loss in enumerate(losses):
        with mp.amp.scale_loss(loss, opt, loss_id=i) as scaled:
            assert scaled.item() == pytest.approx(loss.item() * 2.0 ** 16)
            scaled.backward()
    (F.cross_entropy(reference(x), y) + (reference(x) ** 2).mean()).backward()
    for p, q in zip(model.parameters(), reference.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-6, atol=1e-7)
    before = [p.numpy().copy() for p in model.parameters()]
    opt.step()
    assert not all(np.array_equal(a, p.numpy()) for a, p in zip(before, model.parameters()))
    opt.zero_grad()
    with mp.amp.scale_loss(F.cross_entropy(model(x), y), opt, loss_id=0) as scaled:
        scaled.backward()
    with mp.amp.scale_loss((model(x) * np.inf).mean(), opt, loss_id=1) as scaled:
        scaled.backward()
    before = [p.numpy().copy() for p in model.parameters()]
    opt.step()  # skipped: loss 1 overflowed
    assert all(np.array_equal(a, p.numpy()) for a, p in zip(before, model.parameters()))
    assert [s.get_scale() for s in scalers] == [2.0 ** 16, 2.0 ** 15]
    with pytest.raises(ValueError, match=r"loss_id must be an integer in \[0, 2\)"):
        with mp.amp.scale_loss(losses[0], opt, loss_id=2):
            pass


def test_gradients_accumulate_over_scale_loss_blocks_and_a_failed_block_restores_them():
    model = mlp()
    opt = mp.optim.SGD(model.parameters(), lr=0.1)
    model, opt = mp.amp.initialize(model, opt, "O2")
    x, y = batches(1, poison_step=None)[0]
    for _ in range(2):
        with mp.amp.scale_loss(F.cross_entropy(model(x), y), opt) as scaled:
            scaled.backward()
    twice = [p.grad.numpy().copy() for p in mp.amp.master_params(opt)]
    opt.zero_grad()
    with mp.amp.scale_loss(F.cross_entropy(model(x), y), opt) as scaled:
        scaled.backward()
    once = [p.grad.numpy().copy() for p in mp.amp.master_params(opt)]
    for a, b in zip(twice, once):
        np.testing.assert_allclose(a, 2 * b, rtol=1e-6)
    with pytest.raises(ZeroDivisionError):
        with mp.amp.scale_loss(F.cross_entropy(model(x), y), opt) as scaled:
            scaled.backward()
            1 / 0
    assert all(np.array_equal(p.grad.numpy(), b) for p, b in zip(mp.amp.master_params(opt), once))


def test_amp_state_dict_round_trips_loads_apex_checkpoints_and_refuses_bad_ones_atomically():
    model = mlp()
    model, opt = mp.amp.initialize(model, mp.optim.SGD(model.parameters(), lr=0.1), "O2", num_losses=2)
    scalers = [mp.amp.loss_scaler(0), mp.amp.loss_scaler(1)]
    saved = mp.amp.state_dict()
    assert sorted(saved) == ["loss_scaler0", "loss_scaler1"] and saved["loss_scaler0"]["scale"] == 2.0 ** 16
    scalers[1].load_state_dict(dict(saved["loss_scaler1"], scale=8.0))
    assert scalers[1].get_scale() == 8.0
    mp.amp.load_state_dict({"loss_scaler0": {"loss_scale": 1024.0, "unskipped": 7}, "loss_scaler1": saved[
        "loss_scaler1"]})
    assert [s.get_scale() for s in scalers] == [1024.0, 2.0 ** 16] and scalers[0]._get_growth_tracker() == 7
    now = mp.amp.state_dict()
    for bad, error, match in (
            ({"loss_scaler0": saved["loss_scaler0"]}, ValueError, r"expected the keys \['loss_scaler0', 'loss_scaler1"),
            ({"loss_scaler0": saved["loss_scaler0"], "loss_scaler1": dict(saved["loss_scaler1"], scale=-1.0)},
             ValueError, r"\['loss_scaler1'\].*scale must be a finite number > 0"),
            ([1, 2], TypeError, "expects the dict mp.amp.state_dict"),
            ({"loss_scaler0": {"loss_scale": 2.0, "unskipped": -3}, "loss_scaler1": saved["loss_scaler1"]},
             ValueError, "_growth_tracker must be an integer >= 0")):
        with pytest.raises(error, match=match):
            mp.amp.load_state_dict(bad)
        assert mp.amp.state_dict() == now  # nothing changed, not even the first scaler


def test_apex_recipe_runs_verbatim_two_values_back_or_the_models_alone():
    """apex's documented calls: initialize(model, optimizer) gives (model, optimizer); initialize(model) (no
    optimizers, inference) gives the model; the scalers behind scale_loss are mp.amp.loss_scaler(loss_id)."""
    model = mlp()
    optimizer = mp.optim.SGD(model.parameters(), lr=0.1)
    result = mp.amp.initialize(model, optimizer, opt_level="O1", num_losses=2)
    assert type(result) is tuple and len(result) == 2 and result[0] is model and result[1] is optimizer
    model, optimizer = result
    scalers = [mp.amp.loss_scaler(0), mp.amp.loss_scaler(loss_id=1)]
    assert all(isinstance(s, mp.amp.GradScaler) for s in scalers) and scalers[0] is not scalers[1]
    x, y = batches(1, poison_step=None)[0]
    with mp.amp.scale_loss(F.cross_entropy(model(x), y), optimizer, loss_id=1) as scaled_loss:
        assert scaled_loss.item() == pytest.approx(F.cross_entropy(model(x), y).item() * scalers[1].get_scale())
        scaled_loss.backward()
    optimizer.step()
    for bad in (2, -1, True, 0.0):
        with pytest.raises(ValueError, match=r"mp.amp.loss_scaler: loss_id must be an integer in \[0, 2\)"):
            mp.amp.loss_scaler(bad)
    alone = mlp(1)
    assert mp.amp.initialize(alone, opt_level="O2") is alone
    assert alone[0].weight.dtype == mp.float16 and alone(x).dtype == mp.float32
    assert isinstance(mp.amp.loss_scaler(), mp.amp.GradScaler)  # O2 float16: dynamic, as apex
    pair = [mlp(2), mlp(3)]
    assert mp.amp.initialize(pair, None, "O3") == pair
    assert isinstance(mp.amp.loss_scaler(), mp.amp.StaticGradScaler)


def test_bad_arguments_name_what_was_wrong(monkeypatch):
    model = mlp()
    opt = mp.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(TypeError, match=r"model must be an mp.nn.Module \(or a list of them\), got str"):
        mp.amp.initialize([model, "x"], opt)
    with pytest.raises(ValueError, match="the optimizer list is empty"):
        mp.amp.initialize(model, [])
    with pytest.raises(ValueError, match="num_losses must be an integer >= 1"):
        mp.amp.initialize(model, opt, num_losses=0)
    stranger = mp.optim.SGD(mlp().parameters(), lr=0.1)
    mp.amp.initialize(model, opt, "O1")
    with pytest.raises(ValueError, match="not set up by mp.amp.initialize"):
        with mp.amp.scale_loss(mp.tensor(1.0), stranger):
            pass
    monkeypatch.setattr(apex, "_LOSS_SCALERS", [])
    for call in (lambda: mp.amp.scale_loss(mp.tensor(1.0), opt).__enter__(), mp.amp.state_dict,
                 lambda: mp.amp.load_state_dict({}), mp.amp.loss_scaler):
        with pytest.raises(RuntimeError, match="initialize first|initialize\\(model, optimizer, ...\\) first"):
            call()
