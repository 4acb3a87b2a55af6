"""Recurrent cells (RNN tanh/relu, LSTM, GRU) and one LSTM layer over a sequence.

Each cell is a composite of ``linear`` and pointwise ops, written as torch's
ATen cells are, so float64 results match torch's and both modes of autograd
(of any order) come from the ops it is built of:

    rnn_tanh_cell   h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)          (rnn_relu_cell: relu)
    lstm_cell       i, f, g, o = chunks of (x W_ih^T + b_ih + h W_hh^T + b_hh)
                    c' = sigmoid(f) c + sigmoid(i) tanh(g);  h' = sigmoid(o) tanh(c')
    gru_cell        r, z, n from x W_ih^T + b_ih and h W_hh^T + b_hh (3 chunks each):
                    r = sigmoid(i_r + h_r), z = sigmoid(i_z + h_z), n = tanh(i_n + r h_n)
                    h' = (h - n) z + n

Autocast, as torch. CUDA lists the four cells (its docs say RNNCell, LSTMCell,
GRUCell) lower precision: every input, the state included, is cast once at the
top and the whole cell runs in float16. The CPU list names no cell: inside a
cell ``linear`` (lower precision on CPU) casts its own inputs, so the gates are
bfloat16 and ordinary promotion decides the rest — an RNN cell's new state is
bfloat16, while an LSTM cell (next to its float32 c) and a GRU cell (next to
its float32 h) return float32. The CPU list also names ``mkldnn_rnn_layer``,
torch's oneDNN kernel for one LSTM layer over a whole sequence (what nn.LSTM
runs on a CPU): here that is :func:`lstm_layer`, lower precision on CPU.

:func:`run_layer` is the one loop over time steps, shared by lstm_layer and the
sequence modules of mixprec/nn/rnn.py; the batch and the gates are vectorised.
"""
from __future__ import annotations

from .. import dtypes as _dt
from ..tensor import Tensor
from . import autocast as _autocast
from .elementwise import where
from .matmul import linear
from .registry import register
from .shape import stack

_CELL_DATA = (0, 1, 2, 3, 4, 5)  # input, hx, w_ih, w_hh, b_ih, b_hh


# ---------------------------------------------------------------- checks
def _check_cell(name, input, states, w_ih, w_hh, b_ih, b_hh, n_gates):
    """The shapes and dtypes a cell needs, with a message naming the argument at fault.

    ``states`` are (name, tensor) pairs. The hidden size H is the last state's
    width; w_hh reads the first state, of width R (R = H, except for the h of an
    LSTM with projections, which torch's lstm_cell does not take and this one does).
    """
    tensors = [("input", input), *states, ("w_ih", w_ih), ("w_hh", w_hh), ("b_ih", b_ih), ("b_hh", b_hh)]
    for what, t in tensors:
        if t is not None and not isinstance(t, Tensor):
            raise TypeError(f"{name}: {what} must be a Tensor, got {type(t).__name__}")
    for what, t in tensors[:len(states) + 1]:
        if t.ndim != 2:
            raise RuntimeError(f"{name}: expected {what} to be 2-D (batch, features), got shape {tuple(t.shape)}"
                               + (" (nn cells accept an unbatched 1-D input)" if what == "input" else ""))
    batch, input_size = input.shape
    read, hidden = states[0][1].shape[1], states[-1][1].shape[1]
    rows = n_gates * hidden
    source = f"hidden_size {hidden} from {states[-1][0]}"
    expected = {"w_ih": ((rows, input_size), f"{n_gates} * {source}, input_size from the input"),
                "w_hh": ((rows, read), f"{n_gates} * {source}, {read} from {states[0][0]}"),
                "b_ih": ((rows,), f"{n_gates} * {source}"), "b_hh": ((rows,), f"{n_gates} * {source}")}
    for what, t in states:
        expected[what] = ((batch, t.shape[1]), "the input's batch size")
    for what, t in tensors[1:]:
        if t is not None and tuple(t.shape) != expected[what][0]:
            shape, why = expected[what]
            raise RuntimeError(f"{name}: {what} must have shape {shape} ({why}), got {tuple(t.shape)}")
    dtypes = {t.dtype for _, t in tensors if t is not None}
    regions = _autocast.active_regions()  # inside a region, linear casts its own inputs (torch's CPU cells)
    if len(dtypes) > 1 and not (regions and input.device.type in regions):
        raise TypeError(f"{name}: expected every input, state, weight and bias in one dtype, got "
                        f"{' and '.join(sorted(d.name for d in dtypes))} (cast them, or run under mp.autocast)")
    if not _dt.is_floating(input.dtype):
        raise TypeError(f"{name}: expected floating-point inputs, got {input.dtype.name}")


def _pair(name, hx):
    if not isinstance(hx, (list, tuple)) or len(hx) != 2:
        raise TypeError(f"{name}: hx must be a pair (h, c) of Tensors, got {type(hx).__name__}"
                        + (f" of length {len(hx)}" if isinstance(hx, (list, tuple)) else ""))
    return hx


# ---------------------------------------------------------------- cells
def _chunks(gates, n):
    """The n gate blocks of (N, n * H) gates, as n (N, H) views (one op, so backward stacks them once)."""
    return gates.reshape(gates.shape[0], n, gates.shape[1] // n).unbind(1)


def _rnn_cell(name, activation, input, hx, w_ih, w_hh, b_ih, b_hh):
    _check_cell(name, input, [("hx", hx)], w_ih, w_hh, b_ih, b_hh, 1)
    return activation(linear(input, w_ih, b_ih) + linear(hx, w_hh, b_hh))


@register("rnn_tanh_cell", promote=_CELL_DATA, composite=True)
def rnn_tanh_cell(ctx, input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One Elman RNN step: tanh(input @ w_ih.T + b_ih + hx @ w_hh.T + b_hh), shapes (N, I), (N, H) -> (N, H)."""
    return _rnn_cell("rnn_tanh_cell", Tensor.tanh, input, hx, w_ih, w_hh, b_ih, b_hh)


@register("rnn_relu_cell", promote=_CELL_DATA, composite=True)
def rnn_relu_cell(ctx, input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One Elman RNN step with relu: relu(input @ w_ih.T + b_ih + hx @ w_hh.T + b_hh)."""
    return _rnn_cell("rnn_relu_cell", Tensor.relu, input, hx, w_ih, w_hh, b_ih, b_hh)


@register("lstm_cell", promote=_CELL_DATA, composite=True)
def lstm_cell(ctx, input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One LSTM step from hx = (h, c) to (h', c'); the 4 * H gate rows of w_ih/w_hh are in torch's order i, f, g, o.

    h may be narrower than c (w_hh of shape (4 * H, P)): that is the projected
    state of nn.LSTM with proj_size, which torch's lstm_cell does not accept.
    """
    h, c = _pair("lstm_cell", hx)
    _check_cell("lstm_cell", input, [("hx[0]", h), ("hx[1]", c)], w_ih, w_hh, b_ih, b_hh, 4)
    gates = linear(h, w_hh, b_hh) + linear(input, w_ih, b_ih)
    ingate, forgetgate, cellgate, outgate = _chunks(gates, 4)
    ingate, forgetgate, cellgate, outgate = ingate.sigmoid(), forgetgate.sigmoid(), cellgate.tanh(), outgate.sigmoid()
    cy = forgetgate * c + ingate * cellgate
    return outgate * cy.tanh(), cy


@register("gru_cell", promote=_CELL_DATA, composite=True)
def gru_cell(ctx, input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One GRU step; the 3 * H gate rows of w_ih/w_hh are in torch's order r (reset), z (update), n (new)."""
    _check_cell("gru_cell", input, [("hx", hx)], w_ih, w_hh, b_ih, b_hh, 3)
    i_r, i_z, i_n = _chunks(linear(input, w_ih, b_ih), 3)
    h_r, h_z, h_n = _chunks(linear(hx, w_hh, b_hh), 3)
    resetgate = (h_r + i_r).sigmoid()
    inputgate = (h_z + i_z).sigmoid()
    newgate = (i_n + h_n * resetgate).tanh()
    return (hx - newgate) * inputgate + newgate


# ---------------------------------------------------------------- over a sequence
def run_layer(step, input, state, reverse=False, lengths=None):
    """Run ``step(x_t, state) -> state`` over the time steps of ``input`` (T, N, I); state[0] is the output.

    Returns (outputs (T, N, H), final state). ``reverse`` walks from the last step
    to the first. ``lengths`` (an int Tensor (N,), or None for full sequences)
    makes it pack-aware: sample n only advances at steps t < lengths[n], its
    output is 0 after that, and its final state is the one at its own last
    step — in the reverse direction it starts from there. That is exactly what
    torch computes for a PackedSequence.
    """
    inputs = input.unbind(0)
    steps = range(len(inputs) - 1, -1, -1) if reverse else range(len(inputs))
    outputs = [None] * len(inputs)
    for t in steps:
        new = step(inputs[t], state)
        if not isinstance(new, tuple):
            new = (new,)
        if lengths is None:
            state = new
            outputs[t] = new[0]
        else:
            alive = (lengths > t).unsqueeze(1)  # (N, 1): which samples still have a step t
            state = tuple(where(alive, n, s) for n, s in zip(new, state))
            outputs[t] = where(alive, new[0], 0.0)
    if not outputs:
        raise RuntimeError("run_layer: the input sequence is empty (0 time steps)")
    return stack(outputs), state


@register("lstm_layer", aliases=("mkldnn_rnn_layer",), promote=_CELL_DATA, composite=True)
def lstm_layer(ctx, input, hx, w_ih, w_hh, b_ih=None, b_hh=None, reverse=False):
    """One LSTM layer in one direction over a (T, N, I) sequence from hx = (h0, c0): (output (T, N, H), h_n, c_n).

    nn.LSTM runs its layers through this op, as torch's nn.LSTM runs oneDNN's
    ``mkldnn_rnn_layer`` on a CPU: so it is lower precision under CPU autocast
    (the whole layer, state included, in bfloat16). On CUDA it has no policy;
    each lstm_cell step inside is lower precision there.
    """
    if input.ndim != 3 or input.shape[0] == 0:
        raise RuntimeError(f"lstm_layer: expected a 3-D input (seq_len, batch, input_size) with at least one time "
                           f"step, got shape {tuple(input.shape)}")
    h0, c0 = _pair("lstm_layer", hx)
    out, (h, c) = run_layer(lambda x, s: lstm_cell(x, s, w_ih, w_hh, b_ih, b_hh), input, (h0, c0), reverse)
    return out, h, c
