"""Recurrent layers (mp.nn.RNN/LSTM/GRU and their cells) and mp.nn.utils.rnn against torch, and under autocast.

torch (CPU, float64) is the oracle: its state_dicts load into mixprec's modules
as they are, and outputs, final states and gradients (input, initial states,
every parameter) must agree. The per-op checks (gradcheck, forward mode, half
precision) live in tests/op_cases/rnn.py.
"""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp
import mixprec.nn.utils.rnn as mrnn
from mixprec import nn

F64 = mp.float64


def _torch():
    return pytest.importorskip("torch")


def _pair(torch, cls, *args, dtype="float64", **kwargs):
    """(torch module, mixprec module with torch's state_dict loaded)."""
    t = getattr(torch.nn, cls)(*args, dtype=getattr(torch, dtype), **kwargs)
    m = getattr(nn, cls)(*args, dtype=getattr(mp, dtype), **kwargs)
    assert [(k, tuple(v.shape)) for k, v in t.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in m.state_dict().items()]
    m.load_state_dict({k: mp.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})
    return t, m


def _flat(out):
    """Every tensor of a (nested) module output, PackedSequence data included."""
    if isinstance(out, (tuple, list)) and not hasattr(out, "batch_sizes"):
        return [t for o in out for t in _flat(o)]
    return [out.data if hasattr(out, "batch_sizes") else out]


def _close(a, b, tol=1e-12):
    np.testing.assert_allclose(np.asarray(a.detach().numpy() if hasattr(a, "detach") else a.numpy(), np.float64),
                               np.asarray(b.detach().numpy() if hasattr(b, "detach") else b.numpy(), np.float64),
                               rtol=tol, atol=tol)


def _compare(t_mod, m_mod, t_inputs, m_inputs, call=lambda mod, *xs: mod(*xs)):
    """Forward and backward of both modules on the same inputs: outputs, input and parameter gradients agree."""
    t_out, m_out = _flat(call(t_mod, *t_inputs)), _flat(call(m_mod, *m_inputs))
    assert len(t_out) == len(m_out)
    rng = np.random.default_rng(0)
    seeds = [rng.standard_normal(tuple(o.shape)) for o in t_out]
    for a, b in zip(m_out, t_out):
        assert a.shape == tuple(b.shape)
        _close(a, b)
    sum((o * _torch().tensor(s)).sum() for o, s in zip(t_out, seeds)).backward()
    sum((o * mp.tensor(s)).sum() for o, s in zip(m_out, seeds)).backward()
    for a, b in zip(m_inputs, t_inputs):
        if getattr(b, "requires_grad", False):
            _close(a.grad, b.grad)
    for (name, p), q in zip(m_mod.named_parameters(), t_mod.parameters()):
        _close(p.grad, q.grad)


def _inputs(torch, *shapes, seed=0):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s) for s in shapes]
    return ([torch.tensor(a, requires_grad=True) for a in arrays],
            [mp.tensor(a, dtype=F64, requires_grad=True) for a in arrays])


# ----------------------------------------------------------------- against torch
SEQUENCE_CONFIGS = [
    ("LSTM", dict(num_layers=2, bidirectional=True)),
    ("LSTM", dict(proj_size=2, num_layers=2, batch_first=True)),
    ("LSTM", dict(bias=False, bidirectional=True, proj_size=3)),
    ("GRU", dict(num_layers=2, bidirectional=True, batch_first=True)),
    ("RNN", dict(nonlinearity="relu", num_layers=2)),
    ("RNN", dict(bias=False, bidirectional=True)),
]


@pytest.mark.parametrize("cls,kwargs", SEQUENCE_CONFIGS, ids=[f"{c}-{'-'.join(k)}" for c, k in SEQUENCE_CONFIGS])
def test_sequence_module_matches_torch(cls, kwargs):
    torch = _torch()
    t, m = _pair(torch, cls, 3, 4, **kwargs)
    layers = m.num_layers * m.num_directions
    x_shape = (2, 5, 3) if m.batch_first else (5, 2, 3)
    states = [(layers, 2, m.proj_size or 4)] + ([(layers, 2, 4)] if cls == "LSTM" else [])
    t_in, m_in = _inputs(torch, x_shape, *states)
    if cls == "LSTM":
        _compare(t, m, t_in, m_in, lambda mod, x, h, c: mod(x, (h, c)))
    else:
        _compare(t, m, t_in, m_in)


@pytest.mark.parametrize("cls", ["LSTM", "GRU", "RNN"])
def test_sequence_module_default_state_and_unbatched_input(cls):
    torch = _torch()
    t, m = _pair(torch, cls, 3, 4, num_layers=2, bidirectional=True)
    t_in, m_in = _inputs(torch, (5, 2, 3))
    _compare(t, m, t_in, m_in)             # h0 (and c0) default to zeros
    t_in, m_in = _inputs(torch, (5, 3), seed=1)
    _compare(t, m, t_in, m_in)             # (T, input_size): no batch dim in, none out
    assert m(m_in[0])[0].shape == (5, 8)


@pytest.mark.parametrize("cls,kwargs", [("LSTM", dict(num_layers=2, bidirectional=True)),
                                        ("LSTM", dict(proj_size=2, bidirectional=True)),
                                        ("GRU", dict(bidirectional=True)), ("RNN", {})])
def test_packed_sequence_matches_torch(cls, kwargs):
    torch = _torch()
    from torch.nn.utils import rnn as trnn
    t, m = _pair(torch, cls, 3, 4, **kwargs)
    lengths = [3, 5, 1, 4]
    layers = m.num_layers * m.num_directions
    states = [(layers, 4, m.proj_size or 4)] + ([(layers, 4, 4)] if cls == "LSTM" else [])
    t_in, m_in = _inputs(torch, *[(n, 3) for n in lengths], *states)

    def call(mod, *args):  # initial states in the caller's batch order, as torch takes them
        packed = (trnn if mod is t else mrnn).pack_sequence(list(args[:4]), enforce_sorted=False)
        return mod(packed, tuple(args[4:]) if cls == "LSTM" else args[4])
    _compare(t, m, t_in, m_in, call)
    m_seqs = m_in[:4]
    packed = m(mrnn.pack_sequence(m_seqs, enforce_sorted=False))[0]
    padded, got = mrnn.pad_packed_sequence(packed, batch_first=True)
    assert got.tolist() == lengths and padded.shape == (4, 5, m.num_directions * (m.proj_size or 4))
    assert np.all(padded.numpy()[2, 1:] == 0)  # past a sequence's end its output is padding


@pytest.mark.parametrize("cls", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cells_match_torch(cls):
    torch = _torch()
    t, m = _pair(torch, cls, 3, 4)
    lstm = cls == "LSTMCell"
    t_in, m_in = _inputs(torch, (2, 3), (2, 4), *([(2, 4)] if lstm else []))
    if lstm:
        _compare(t, m, t_in, m_in, lambda mod, x, h, c: mod(x, (h, c)))
    else:
        _compare(t, m, t_in, m_in)
    t_in, m_in = _inputs(torch, (3,), seed=2)  # unbatched, default state
    _compare(t, m, t_in, m_in)


def test_relu_cell_and_cell_without_bias_match_torch():
    torch = _torch()
    t, m = _pair(torch, "RNNCell", 3, 4, bias=False, nonlinearity="relu")
    assert m.bias_ih is None and "bias_ih" not in m.state_dict()
    assert repr(m) == repr(t) == "RNNCell(3, 4, bias=False, nonlinearity=relu)"
    t_in, m_in = _inputs(torch, (2, 3), (2, 4))
    _compare(t, m, t_in, m_in)


def test_cell_ops_match_torch_functions():
    """mp.lstm_cell & co. take torch.lstm_cell's arguments and give its results."""
    torch = _torch()
    rng = np.random.default_rng(3)
    x, h, c = rng.standard_normal((2, 3)), rng.standard_normal((2, 4)), rng.standard_normal((2, 4))
    for name, gates in (("rnn_tanh_cell", 1), ("rnn_relu_cell", 1), ("gru_cell", 3), ("lstm_cell", 4)):
        w = [rng.standard_normal(s) for s in ((gates * 4, 3), (gates * 4, 4), (gates * 4,), (gates * 4,))]
        state = [h, c] if gates == 4 else h
        conv = [lambda a: torch.tensor(a), lambda a: mp.tensor(a)]
        outs = []
        for to in conv:
            s = [to(v) for v in state] if gates == 4 else to(state)
            outs.append(_flat(getattr(torch if to is conv[0] else mp, name)(to(x), s, *map(to, w))))
        for a, b in zip(outs[1], outs[0]):
            _close(a, b)


def test_torch_init_ranges_and_parameter_order():
    m = nn.LSTM(3, 16, num_layers=2, bidirectional=True, proj_size=4)
    assert list(m.state_dict())[:5] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_hr_l0"]
    assert list(m.state_dict())[5] == "weight_ih_l0_reverse"
    assert m.weight_ih_l1.shape == (64, 8) and m.weight_hh_l1.shape == (64, 4) and m.weight_hr_l1.shape == (4, 16)
    for p in m.parameters():
        v = p.numpy()
        assert p.dtype == mp.float32 and np.all(np.abs(v) <= 0.25) and v.std() > 0.1  # U(-1/sqrt(16), 1/sqrt(16))
    assert repr(m) == "LSTM(3, 16, proj_size=4, num_layers=2, bidirectional=True)"


def test_empty_batch_runs_and_empty_sequence_is_refused():
    """torch's behaviour: a batch of 0 sequences gives empty outputs (and gradients); 0 time steps is an error."""
    x = mp.randn(4, 0, 3, requires_grad=True)
    out, (h, c) = nn.LSTM(3, 5, bidirectional=True)(x)
    assert out.shape == (4, 0, 10) and h.shape == c.shape == (2, 0, 5)
    out.sum().backward()
    assert x.grad.shape == (4, 0, 3)
    assert nn.GRUCell(3, 5)(mp.randn(0, 3)).shape == (0, 5)
    with pytest.raises(ValueError, match="GRU: the input has no time steps"):
        nn.GRU(3, 5)(mp.randn(0, 2, 3))


def test_dropout_between_layers_only_when_training():
    m = nn.GRU(3, 4, num_layers=2, dropout=1.0)
    x = mp.randn(5, 2, 3)
    m.eval()
    evaluated = m(x)[0].numpy()
    m.train()
    out, h = m(x)
    # dropout=1 zeroes the second layer's input: its output is that layer run on zeros
    alone = nn.GRU(4, 4)
    alone.load_state_dict({k[:-1] + "0": v for k, v in m.state_dict().items() if k.endswith("l1")})
    np.testing.assert_allclose(out.numpy(), alone(mp.zeros(5, 2, 4))[0].numpy(), rtol=1e-6, atol=1e-7)
    assert not np.allclose(out.numpy(), evaluated)
    with pytest.warns(UserWarning, match="num_layers=1"):
        nn.LSTM(3, 4, dropout=0.5)


# ----------------------------------------------------------------- nn.utils.rnn
def test_pad_and_pack_helpers_match_torch():
    torch = _torch()
    from torch.nn.utils import rnn as trnn
    lengths = [2, 4, 1]
    t_seqs, m_seqs = _inputs(torch, *[(n, 3) for n in lengths])
    for kw in (dict(), dict(batch_first=True, padding_value=-1.0), dict(padding_side="left")):
        _close(mrnn.pad_sequence(m_seqs, **kw), trnn.pad_sequence(t_seqs, **kw), 0)
    t_pad, m_pad = trnn.pad_sequence(t_seqs), mrnn.pad_sequence(m_seqs)
    t_pk = trnn.pack_padded_sequence(t_pad, lengths, enforce_sorted=False)
    m_pk = mrnn.pack_padded_sequence(m_pad, mp.tensor(lengths), enforce_sorted=False)
    for a, b in zip(m_pk, t_pk):
        np.testing.assert_array_equal(a.numpy(), b.detach().numpy())
    t_back, t_len = trnn.pad_packed_sequence(t_pk, batch_first=True, padding_value=9.0, total_length=6)
    m_back, m_len = mrnn.pad_packed_sequence(m_pk, batch_first=True, padding_value=9.0, total_length=6)
    _close(m_back, t_back, 0)
    assert m_len.tolist() == t_len.tolist() == lengths
    sorted_pk = mrnn.pack_sequence([m_seqs[1], m_seqs[0], m_seqs[2]])
    assert sorted_pk.sorted_indices is None and sorted_pk.batch_sizes.tolist() == [3, 2, 1, 1]
    # gradients flow through packing and padding
    (m_back * mp.arange(6, dtype=F64).reshape(1, 6, 1)).sum().backward()
    np.testing.assert_array_equal(m_seqs[1].grad.numpy(), np.repeat(np.arange(4.0)[:, None], 3, axis=1))


def test_pack_helpers_reject_bad_input():
    x = mp.randn(4, 3, 2)
    with pytest.raises(ValueError, match="sorted in decreasing order"):
        mrnn.pack_padded_sequence(x, [2, 4, 1])
    with pytest.raises(ValueError, match="between 1 and the padded length 4"):
        mrnn.pack_padded_sequence(x, [5, 4, 1])
    with pytest.raises(ValueError, match="between 1 and the padded length 4"):
        mrnn.pack_padded_sequence(x, [4, 2, 0])
    with pytest.raises(ValueError, match="3 ints"):
        mrnn.pack_padded_sequence(x, [4, 2])
    with pytest.raises(ValueError, match="total_length must be at least the longest length 4"):
        mrnn.pad_packed_sequence(mrnn.pack_padded_sequence(x, [4, 2, 1]), total_length=3)
    with pytest.raises(ValueError, match="empty list"):
        mrnn.pad_sequence([])
    with pytest.raises(RuntimeError, match="trailing shape"):
        mrnn.pad_sequence([mp.zeros(2, 3), mp.zeros(2, 4)])


# ----------------------------------------------------------------- bad input
def test_modules_reject_bad_input_with_clear_errors():
    lstm, gru, cell = nn.LSTM(3, 4, num_layers=2), nn.GRU(3, 4), nn.LSTMCell(3, 4)
    with pytest.raises(ValueError, match="LSTM: expected input to be 2D .*, got 4D"):
        lstm(mp.zeros(2, 2, 2, 3))
    with pytest.raises(ValueError, match="input_size. Expected 3, got 5"):
        gru(mp.zeros(4, 2, 5))
    with pytest.raises(RuntimeError, match=r"expected hx of size \(1, 2, 4\), got \(1, 3, 4\)"):
        gru(mp.zeros(4, 2, 3), mp.zeros(1, 3, 4))
    with pytest.raises(RuntimeError, match=r"expected hx\[1\] of size \(2, 2, 4\)"):
        lstm(mp.zeros(4, 2, 3), (mp.zeros(2, 2, 4), mp.zeros(1, 2, 4)))
    with pytest.raises(RuntimeError, match="unbatched 2-D input, hx should be 2-D"):
        gru(mp.zeros(4, 3), mp.zeros(1, 2, 4))
    with pytest.raises(TypeError, match=r"pair \(h_0, c_0\)"):
        lstm(mp.zeros(4, 2, 3), mp.zeros(2, 2, 4))
    with pytest.raises(ValueError, match="dtype of the parameters \\(float32\\), got float64"):
        gru(mp.zeros(4, 2, 3, dtype=F64))
    with pytest.raises(ValueError, match="no time steps"):
        gru(mp.zeros(0, 2, 3))
    with pytest.raises(ValueError, match="LSTMCell: expected input\\[..., 3\\]"):
        cell(mp.zeros(2, 5))
    with pytest.raises(ValueError, match="expected hx\\[0\\] to be 2D like the input"):
        cell(mp.zeros(2, 3), (mp.zeros(4), mp.zeros(2, 4)))
    with pytest.raises(ValueError, match="proj_size is only supported by LSTM"):
        nn.RNNBase("GRU", 3, 4, proj_size=2)
    with pytest.raises(ValueError, match="has to be smaller than hidden_size"):
        nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError, match="unknown nonlinearity 'gelu'"):
        nn.RNN(3, 4, nonlinearity="gelu")
    with pytest.raises(ValueError, match="hidden_size must be greater than zero"):
        nn.GRUCell(3, 0)
    with pytest.raises(ValueError, match="dropout should be a number in range"):
        nn.LSTM(3, 4, num_layers=2, dropout=1.5)


def test_cell_ops_reject_bad_input_naming_the_argument():
    x, h, w_ih, w_hh = mp.zeros(2, 3), mp.zeros(2, 4), mp.zeros(12, 3), mp.zeros(12, 4)
    with pytest.raises(RuntimeError, match=r"gru_cell: w_ih must have shape \(12, 3\).*got \(12, 5\)"):
        mp.gru_cell(x, h, mp.zeros(12, 5), w_hh)
    with pytest.raises(RuntimeError, match=r"gru_cell: hx must have shape \(2, 4\) \(the input's batch size\)"):
        mp.gru_cell(x, mp.zeros(3, 4), w_ih, w_hh)
    with pytest.raises(RuntimeError, match=r"b_hh must have shape \(12,\)"):
        mp.gru_cell(x, h, w_ih, w_hh, mp.zeros(12), mp.zeros(4))
    with pytest.raises(RuntimeError, match="expected input to be 2-D"):
        mp.rnn_tanh_cell(mp.zeros(3), h, mp.zeros(4, 3), mp.zeros(4, 4))
    with pytest.raises(TypeError, match=r"lstm_cell: hx must be a pair \(h, c\)"):
        mp.lstm_cell(x, h, mp.zeros(16, 3), mp.zeros(16, 4))
    with pytest.raises(TypeError, match="one dtype, got float32 and float64"):
        mp.gru_cell(x, h.double(), w_ih, w_hh)
    with pytest.raises(TypeError, match="floating-point inputs, got int64"):
        mp.rnn_tanh_cell(x.long(), h.long(), mp.zeros(4, 3).long(), mp.zeros(4, 4).long())


# ----------------------------------------------------------------- autocast
def _ran(trace, name):
    return [r for r in trace.records if r.name == name]


@pytest.mark.parametrize("cls", ["GRU", "RNN", "GRUCell", "RNNCell", "LSTMCell"])
def test_cpu_autocast_matches_torch_bit_for_bit(cls):
    """No cell is on the CPU list: inside, linear (lower precision on CPU) casts its own inputs, and promotion
    decides the state's dtype (bfloat16 for RNN, float32 next to a float32 state for GRU and LSTM cells) —
    torch's CPU cells do the same, to the last bit."""
    torch = _torch()
    t, m = _pair(torch, cls, 3, 4, dtype="float32")
    x = np.random.default_rng(0).standard_normal((6, 2, 3) if "Cell" not in cls else (2, 3)).astype(np.float32)
    with torch.autocast("cpu"):
        expected = _flat(t(torch.tensor(x)))
    with mp.autocast("cpu"):
        got = _flat(m(mp.tensor(x)))
    for a, b in zip(got, expected):
        assert a.dtype.name == str(b.dtype).replace("torch.", "")
        np.testing.assert_allclose(a.numpy().astype(np.float32), b.detach().float().numpy(), rtol=2e-7, atol=1e-7)


def test_cpu_autocast_runs_lstm_layers_in_bfloat16_and_the_state_stays_close():
    """nn.LSTM's layers are lstm_layer (torch's mkldnn_rnn_layer), lower precision on CPU: every matmul, the
    gates and the state run in bfloat16; over 12 steps the result stays within a few bfloat16 ulps of float64."""
    m = nn.LSTM(8, 16, num_layers=2)
    x = mp.randn(12, 4, 8)
    with mp.amp.trace() as tr, mp.autocast("cpu"):
        out, (h, c) = m(x)
    assert out.dtype == h.dtype == c.dtype == mp.bfloat16
    layers = _ran(tr, "lstm_layer")
    assert len(layers) == 2 and all(r.policy is mp.amp.CastPolicy.LOWER_PRECISION_FP for r in layers)
    linears = _ran(tr, "linear")
    assert len(linears) == 2 * 2 * 12 and all(r.run_dtypes[0] == mp.bfloat16 for r in linears)
    exact = m.double()(x.double())
    for low, ref in zip((out, h, c), (exact[0], *exact[1])):
        err = np.abs(low.numpy().astype(np.float64) - ref.detach().numpy())
        assert np.all(np.isfinite(low.numpy().astype(np.float64)))
        assert err.max() < 0.05 and err.mean() < 0.01  # bfloat16: 8 bits of mantissa, 12 steps


def test_cpu_autocast_backward_through_lstm_gives_float32_weight_grads():
    m = nn.LSTM(3, 5, bidirectional=True)
    x = mp.randn(6, 2, 3, requires_grad=True)
    with mp.autocast("cpu"):
        out, _ = m(x)
    out.float().pow(2).mean().backward()
    for p in m.parameters():
        assert p.grad.dtype == mp.float32 and np.all(np.isfinite(p.grad.numpy())) and np.any(p.grad.numpy() != 0)
    assert x.grad.dtype == mp.float32


def test_cuda_autocast_policy_applies_to_each_cell_step():
    """The CUDA list has the cells: under a CUDA region every input and the state go to float16 once, at the top
    of each cell (checked through the resolver, which needs no GPU)."""
    for op in ("lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell"):
        assert mp.amp.op_policy(op, "cuda") is mp.amp.CastPolicy.LOWER_PRECISION_FP
        assert mp.amp.op_policy(op, "cpu") is None
        assert mp.amp.resolve_dtypes(op, "cuda", mp.float16, (mp.float32, mp.float32)) == (mp.float16, mp.float16)
    assert mp.amp.op_policy("mkldnn_rnn_layer", "cpu") is mp.amp.CastPolicy.LOWER_PRECISION_FP
    assert mp.amp.op_policy("lstm_layer", "cuda") is None


@pytest.mark.gpu
@pytest.mark.parametrize("cls", ["LSTM", "GRU", "RNN"])
def test_cuda_autocast_runs_every_cell_in_float16(cls):
    m = getattr(nn, cls)(8, 16, num_layers=2).to("cuda")
    x = mp.randn(10, 4, 8, device="cuda")
    with mp.amp.trace() as tr, mp.autocast("cuda"):
        out, _ = m(x)
    cells = [r for r in tr.records if r.name.endswith("_cell")]
    assert len(cells) == 2 * 10 and all(set(r.run_dtypes) == {mp.float16} for r in cells)
    assert out.dtype == mp.float16
    exact = m.double()(x.double())[0]
    assert np.abs(out.cpu().numpy().astype(np.float64) - exact.cpu().detach().numpy()).max() < 0.02
