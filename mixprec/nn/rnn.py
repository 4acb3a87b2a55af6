"""Recurrent layers: RNNCell, LSTMCell, GRUCell (one step) and RNN, LSTM, GRU (over a sequence).

Parameter names, shapes, order and init are torch's, so a torch state_dict
loads as it is. With G gates (RNN 1, GRU 3, LSTM 4) and hidden size H:

    cells        weight_ih (G*H, input_size), weight_hh (G*H, H), bias_ih (G*H), bias_hh (G*H)
    RNN/LSTM/GRU weight_ih_l{k}, weight_hh_l{k}, bias_ih_l{k}, bias_hh_l{k} for layer k, then the same
                 with the suffix _reverse for the backward direction of a bidirectional layer; an
                 LSTM with proj_size P adds weight_hr_l{k} (P, H) and its state h has P features

every one drawn from U(-1/sqrt(H), 1/sqrt(H)). The math and the autocast policy
live in the ops (mixprec/ops/rnn.py): each time step is one cell op, so under
CUDA autocast every step runs in float16; nn.LSTM's layers run as the lstm_layer
op (torch's oneDNN mkldnn_rnn_layer), lower precision under CPU autocast, except
with projections or packed input, where torch does not use oneDNN either.
"""
from __future__ import annotations

import math
import warnings

from ..amp.autocast_mode import is_autocast_enabled
from ..ops.matmul import linear
from ..ops.rnn import gru_cell, lstm_cell, lstm_layer, rnn_relu_cell, rnn_tanh_cell, run_layer
from ..ops.shape import cat, stack
from ..tensor import Tensor, tensor
from ..creation import empty, zeros
from . import functional as F
from . import init
from .layers import _factory
from .module import Module
from .parameter import Parameter
from .utils.rnn import PackedSequence, packed_data, packed_lengths, pad_packed_sequence

_CELLS = {"RNN_TANH": rnn_tanh_cell, "RNN_RELU": rnn_relu_cell, "LSTM": lstm_cell, "GRU": gru_cell}
_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _rnn_mode(nonlinearity, who):
    if nonlinearity not in ("tanh", "relu"):
        raise ValueError(f"{who}: unknown nonlinearity {nonlinearity!r}; expected 'tanh' or 'relu'")
    return "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"


def _check_size(who, what, value):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{who}: {what} should be of type int, got {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"{who}: {what} must be greater than zero, got {value}")


def _reset_uniform(module):
    """torch's init for every recurrent parameter: U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
    stdv = 1.0 / math.sqrt(module.hidden_size) if module.hidden_size > 0 else 0.0
    for p in module.parameters():
        init.uniform_(p, -stdv, stdv)


def _check_dtype(who, input, weight):
    """Outside autocast the input must have the parameters' dtype (inside, autocast casts them)."""
    if input.dtype != weight.dtype and not is_autocast_enabled(input.device.type):
        raise ValueError(f"{who}: input must have the dtype of the parameters ({weight.dtype.name}), got "
                         f"{input.dtype.name} (cast the input or the module, or run under mp.autocast)")


# ---------------------------------------------------------------- cells
class RNNCellBase(Module):
    """The parameters and checks the three cells share."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int, device=None, dtype=None):
        super().__init__()
        who = type(self).__name__
        _check_size(who, "input_size", input_size)
        _check_size(who, "hidden_size", hidden_size)
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        kw = _factory(device, dtype)
        self.weight_ih = Parameter(empty(num_chunks * hidden_size, input_size, **kw))
        self.weight_hh = Parameter(empty(num_chunks * hidden_size, hidden_size, **kw))
        if bias:
            self.bias_ih = Parameter(empty(num_chunks * hidden_size, **kw))
            self.bias_hh = Parameter(empty(num_chunks * hidden_size, **kw))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        _reset_uniform(self)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def _batch(self, input, states):
        """(input (N, I), states (N, H) each, batched?): unbatched 1-D inputs and states get a batch dim;
        missing states are zeros."""
        who = type(self).__name__
        if not isinstance(input, Tensor) or input.ndim not in (1, 2):
            raise ValueError(f"{who}: expected input to be 1D or 2D, got "
                             + (f"{input.ndim}D instead" if isinstance(input, Tensor) else type(input).__name__))
        if input.shape[-1] != self.input_size:
            raise ValueError(f"{who}: expected input[..., {self.input_size}], got input of shape "
                             f"{tuple(input.shape)}")
        _check_dtype(who, input, self.weight_ih)
        batched = input.ndim == 2
        x = input if batched else input.unsqueeze(0)
        out = []
        for i, h in enumerate(states):
            name = "hx" if len(states) == 1 else f"hx[{i}]"
            if h is None:
                h = zeros(x.shape[0], self.hidden_size, dtype=input.dtype, device=input.device)
            elif not isinstance(h, Tensor) or h.ndim != input.ndim:
                raise ValueError(f"{who}: expected {name} to be {input.ndim}D like the input, got "
                                 + (f"{h.ndim}D" if isinstance(h, Tensor) else type(h).__name__))
            elif not batched:
                h = h.unsqueeze(0)
            out.append(h)
        return x, out, batched

    def _weights(self):
        return self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh


class RNNCell(RNNCellBase):
    """An Elman RNN cell: h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (nonlinearity='relu': relu)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh",
                 device=None, dtype=None):
        _rnn_mode(nonlinearity, "RNNCell")
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        x, (h,), batched = self._batch(input, [hx])
        out = _CELLS[_rnn_mode(self.nonlinearity, "RNNCell")](x, h, *self._weights())
        return out if batched else out.squeeze(0)


class LSTMCell(RNNCellBase):
    """An LSTM cell: (h, c) -> (h', c') through the input, forget, cell and output gates (torch's order)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        if hx is not None and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
            raise TypeError(f"LSTMCell: hx must be a pair (h, c), got {type(hx).__name__}")
        x, (h, c), batched = self._batch(input, list(hx) if hx is not None else [None, None])
        h, c = lstm_cell(x, (h, c), *self._weights())
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """A GRU cell: h' = (1 - z) n + z h, from the reset (r), update (z) and new (n) gates (torch's order)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        x, (h,), batched = self._batch(input, [hx])
        out = gru_cell(x, h, *self._weights())
        return out if batched else out.squeeze(0)


# ---------------------------------------------------------------- over a sequence
class RNNBase(Module):
    """The layers, directions, parameters and input handling RNN, LSTM and GRU share (see the module docstring).

    forward(input, hx) takes input (T, N, input_size) — (N, T, input_size) with
    batch_first, (T, input_size) unbatched — or a PackedSequence, and the initial
    state(s) (num_layers * num_directions, N, H) (zeros when omitted); it returns
    the last layer's output at every step, (T, N, num_directions * H), and the
    final state of every layer and direction.
    """

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device=None, dtype=None):
        super().__init__()
        who = type(self).__name__
        _check_size(who, "input_size", input_size)
        _check_size(who, "hidden_size", hidden_size)
        _check_size(who, "num_layers", num_layers)
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout <= 1:
            raise ValueError(f"{who}: dropout should be a number in range [0, 1] representing the probability of "
                             f"an element being zeroed, got {dropout!r}")
        if dropout > 0 and num_layers == 1:
            warnings.warn(f"{who}: dropout applies between recurrent layers (after all but the last), so "
                          f"dropout={dropout} with num_layers=1 does nothing", UserWarning, stacklevel=3)
        if isinstance(proj_size, bool) or not isinstance(proj_size, int) or proj_size < 0:
            raise ValueError(f"{who}: proj_size should be a positive integer or zero to disable projections, "
                             f"got {proj_size!r}")
        if proj_size and mode != "LSTM":
            raise ValueError(f"{who}: proj_size is only supported by LSTM")
        if proj_size >= hidden_size:
            raise ValueError(f"{who}: proj_size ({proj_size}) has to be smaller than hidden_size ({hidden_size})")
        self.mode = mode
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.proj_size = bidirectional, proj_size
        kw = _factory(device, dtype)
        gates = _GATES[mode] * hidden_size
        out_size = proj_size or hidden_size
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else out_size * self.num_directions
            for suffix in self._suffixes():
                shapes = [("weight_ih", (gates, layer_input)), ("weight_hh", (gates, out_size))]
                if bias:
                    shapes += [("bias_ih", (gates,)), ("bias_hh", (gates,))]
                if proj_size:
                    shapes += [("weight_hr", (proj_size, hidden_size))]
                for name, shape in shapes:
                    self.register_parameter(f"{name}_l{layer}{suffix}", Parameter(empty(*shape, **kw)))
        self.reset_parameters()

    @property
    def num_directions(self) -> int:
        return 2 if self.bidirectional else 1

    def _suffixes(self):
        return ("", "_reverse") if self.bidirectional else ("",)

    def reset_parameters(self):
        _reset_uniform(self)

    def flatten_parameters(self):
        """Nothing to do: torch packs weights for cuDNN here; mixprec keeps them as they are."""

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        for name, default in (("bias", True), ("batch_first", False), ("dropout", 0.0), ("bidirectional", False)):
            if getattr(self, name) != default:
                s += f", {name}={getattr(self, name)}"
        if self.mode == "RNN_RELU":
            s += ", nonlinearity=relu"
        return s

    # ---- forward ----
    def forward(self, input, hx=None):
        who = type(self).__name__
        x, lengths, batched = self._time_major(who, input)
        states = self._initial_states(who, x, hx, batched)
        finals = [[] for _ in states]
        for layer in range(self.num_layers):
            outputs = []
            for direction, suffix in enumerate(self._suffixes()):
                k = layer * self.num_directions + direction
                out, final = self._run(x, tuple(s[k] for s in states), layer, suffix, lengths)
                outputs.append(out)
                for store, f in zip(finals, final):
                    store.append(f)
            x = outputs[0] if len(outputs) == 1 else cat(outputs, dim=2)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        finals = [stack(f) for f in finals]
        if isinstance(input, PackedSequence):
            order = None if input.sorted_indices is None else input.sorted_indices.numpy()
            output = PackedSequence(packed_data(x, input.batch_sizes.numpy(), order), *input[1:])
        elif not batched:
            output, finals = x.squeeze(1), [f.squeeze(1) for f in finals]
        else:
            output = x.transpose(0, 1) if self.batch_first else x
        return output, (tuple(finals) if self.mode == "LSTM" else finals[0])

    def _time_major(self, who, input):
        """(input as (T, N, I), lengths (N,) int Tensor for packed input else None, batched?)."""
        if isinstance(input, PackedSequence):
            x, _ = pad_packed_sequence(input)
            lengths = tensor(packed_lengths(input), device=x.device)
            batched = True
        elif isinstance(input, Tensor):
            if input.ndim not in (2, 3):
                raise ValueError(f"{who}: expected input to be 2D (unbatched) or 3D, got {input.ndim}D instead")
            batched, lengths = input.ndim == 3, None
            x = input.unsqueeze(1) if not batched else input.transpose(0, 1) if self.batch_first else input
        else:
            raise TypeError(f"{who}: expected a Tensor or a PackedSequence input, got {type(input).__name__}")
        if x.shape[-1] != self.input_size:
            raise ValueError(f"{who}: input.size(-1) must be equal to input_size. Expected {self.input_size}, got "
                             f"{x.shape[-1]}")
        if x.shape[0] == 0:
            raise ValueError(f"{who}: the input has no time steps (shape {tuple(input.shape)})"
                             if isinstance(input, Tensor) else f"{who}: the packed input is empty")
        _check_dtype(who, x, self.weight_ih_l0)
        return x, lengths, batched

    def _initial_states(self, who, x, hx, batched):
        """The initial state(s), each (num_layers * num_directions, N, size); zeros where hx is omitted."""
        n = x.shape[1]
        layers = self.num_layers * self.num_directions
        sizes = [self.proj_size or self.hidden_size] + ([self.hidden_size] if self.mode == "LSTM" else [])
        if self.mode == "LSTM" and hx is not None:
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise TypeError(f"{who}: hx must be a pair (h_0, c_0), got {type(hx).__name__}")
            given = list(hx)
        else:
            given = [hx]
        states = []
        for i, (h, size) in enumerate(zip(given if hx is not None else [None] * len(sizes), sizes)):
            name = "hx" if len(sizes) == 1 else f"hx[{i}]"
            expected = (layers, n, size)
            if h is None:
                states.append(zeros(*expected, dtype=x.dtype, device=x.device))
                continue
            if not isinstance(h, Tensor) or h.ndim != (3 if batched else 2):
                raise RuntimeError(f"{who}: for {'batched 3-D' if batched else 'unbatched 2-D'} input, {name} "
                                   f"should be {3 if batched else 2}-D, got "
                                   + (f"{h.ndim}-D" if isinstance(h, Tensor) else type(h).__name__))
            h = h if batched else h.unsqueeze(1)
            if tuple(h.shape) != expected:
                raise RuntimeError(f"{who}: expected {name} of size {expected}, got {tuple(h.shape)}")
            states.append(h)
        return states

    def _run(self, x, state, layer, suffix, lengths):
        """One layer in one direction: (outputs (T, N, H_out), final state)."""
        def p(name):
            return getattr(self, f"{name}_l{layer}{suffix}")
        w_ih, w_hh = p("weight_ih"), p("weight_hh")
        b_ih, b_hh = (p("bias_ih"), p("bias_hh")) if self.bias else (None, None)
        reverse = suffix == "_reverse"
        cell = _CELLS[self.mode]
        if self.mode == "LSTM":
            if not self.proj_size and lengths is None:  # torch's oneDNN layer (mkldnn_rnn_layer)
                out, h, c = lstm_layer(x, list(state), w_ih, w_hh, b_ih, b_hh, reverse)
                return out, (h, c)
            w_hr = p("weight_hr") if self.proj_size else None

            def step(x_t, s):
                h, c = cell(x_t, s, w_ih, w_hh, b_ih, b_hh)
                return (h if w_hr is None else linear(h, w_hr)), c
        else:
            def step(x_t, s):
                return cell(x_t, s[0], w_ih, w_hh, b_ih, b_hh),
        return run_layer(step, x, state, reverse, lengths)


class RNN(RNNBase):
    """A multi-layer Elman RNN over a sequence: h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh) per layer."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, nonlinearity: str = "tanh",
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device=None, dtype=None):
        super().__init__(_rnn_mode(nonlinearity, "RNN"), input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, 0, device, dtype)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """A multi-layer LSTM over a sequence; forward returns (output, (h_n, c_n)). proj_size projects each h."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device, dtype)


class GRU(RNNBase):
    """A multi-layer GRU over a sequence; forward returns (output, h_n)."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, device=None,
                 dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, 0,
                         device, dtype)
