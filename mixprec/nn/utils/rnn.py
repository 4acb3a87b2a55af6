"""mp.nn.utils.rnn: batching sequences of different lengths."""
from __future__ import annotations

from ...ops.shape import cat, stack
from ...tensor import Tensor, full


def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0, padding_side: str = "right"):
    """Stack tensors of shapes (L_i, *) into one (L_max, B, *) tensor (batch_first: (B, L_max, *)), padding
    each to the longest with ``padding_value`` on the right (or the left). Differentiable in the sequences."""
    if isinstance(sequences, Tensor) or not isinstance(sequences, (list, tuple)):
        raise TypeError(f"pad_sequence: expected a list or tuple of Tensors, got {type(sequences).__name__}")
    if not sequences:
        raise ValueError("pad_sequence: expected at least one sequence, got an empty list")
    if padding_side not in ("left", "right"):
        raise ValueError(f"pad_sequence: padding_side must be 'left' or 'right', got {padding_side!r}")
    for i, s in enumerate(sequences):
        if not isinstance(s, Tensor):
            raise TypeError(f"pad_sequence: sequence {i} is a {type(s).__name__}, not a Tensor")
        if s.ndim == 0 or s.shape[1:] != sequences[0].shape[1:] or s.dtype != sequences[0].dtype:
            raise ValueError(f"pad_sequence: every sequence needs shape (L, *) with the same trailing dims and "
                             f"dtype as sequence 0 {tuple(sequences[0].shape)} {sequences[0].dtype.name}; sequence "
                             f"{i} has shape {tuple(s.shape)} and dtype {s.dtype.name}")
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        missing = longest - s.shape[0]
        if missing:
            pad = full((missing, *s.shape[1:]), padding_value, dtype=s.dtype, device=s.device)
            s = cat([s, pad] if padding_side == "right" else [pad, s])
        padded.append(s)
    return stack(padded, dim=0 if batch_first else 1)
