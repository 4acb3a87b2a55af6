"""Batches of sequences of different lengths, as torch.nn.utils.rnn has them.

    pad_sequence(seqs)                  a list of (L_i, *) tensors -> one (max L, N, *) tensor, padded
    pack_padded_sequence(x, lengths)    a padded batch -> a PackedSequence (only the real steps)
    pad_packed_sequence(packed)         and back: (padded, lengths)
    pack_sequence(seqs)                 pad_sequence, then pack_padded_sequence

A PackedSequence stores the real time steps only, time-major: the batch_sizes[0]
samples that have a step 0, then the batch_sizes[1] samples that have a step 1,
and so on, samples ordered by decreasing length (``sorted_indices`` maps that
order to the caller's batch, ``unsorted_indices`` back). nn.RNN/LSTM/GRU accept
one and return one, as torch's do. Every conversion is one gather or one
index_put, so gradients flow through it.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...ops.shape import cat, index_put
from ...creation import full
from ...tensor import Tensor, tensor


class PackedSequence(NamedTuple):
    """The real time steps of a batch of sequences (see the module docstring); build it with pack_*."""
    data: Tensor                          # (sum of lengths, *features), time-major
    batch_sizes: Tensor                   # int64 (max length,): how many samples have each time step
    sorted_indices: Tensor | None = None  # the batch position of the j-th longest sample (None: already sorted)
    unsorted_indices: Tensor | None = None


def _positions(batch_sizes, sorted_indices):
    """(time, batch) index of each row of a PackedSequence's data, in the caller's batch order (NumPy)."""
    sizes = np.asarray(batch_sizes, dtype=np.int64)
    t = np.repeat(np.arange(len(sizes)), sizes)
    rank = np.arange(sizes.sum()) - np.repeat(np.cumsum(sizes) - sizes, sizes)  # j-th longest sample
    n = rank if sorted_indices is None else np.asarray(sorted_indices, dtype=np.int64)[rank]
    return t, n


def packed_data(padded, batch_sizes, sorted_indices=None):
    """The PackedSequence data of a padded (T, N, *) batch: its real steps, time-major, in packed order."""
    t, b = _positions(batch_sizes, sorted_indices)
    return padded[tensor(t, device=padded.device), tensor(b, device=padded.device)]


def packed_lengths(sequence: PackedSequence) -> np.ndarray:
    """Each sample's length, in the caller's batch order (NumPy int64)."""
    sizes = sequence.batch_sizes.numpy()
    by_rank = (sizes[None, :] > np.arange(sizes[0] if len(sizes) else 0)[:, None]).sum(axis=1)
    if sequence.sorted_indices is None:
        return by_rank
    lengths = np.empty_like(by_rank)
    lengths[sequence.sorted_indices.numpy()] = by_rank
    return lengths


def _host_lengths(lengths, n):
    if isinstance(lengths, Tensor):
        if lengths.dtype.kind not in "iu":
            raise TypeError(f"pack_padded_sequence: lengths must hold integers, got a {lengths.dtype.name} tensor")
        lengths = lengths.numpy()
    values = np.asarray(lengths)
    if values.ndim != 1 or values.shape[0] != n or (values.size and values.dtype.kind not in "iu"):
        raise ValueError(f"pack_padded_sequence: expected lengths to be {n} ints, one per sequence of the batch, "
                         f"got {lengths!r}")
    return values.astype(np.int64)


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True) -> PackedSequence:
    """Pack a padded batch (T, N, *) ((N, T, *) with batch_first) whose sample n has lengths[n] real steps.

    enforce_sorted=True expects the lengths in decreasing order; False sorts them
    (and records the permutation, so the packed result unpacks to this order).
    """
    if not isinstance(input, Tensor) or input.ndim < 2:
        raise ValueError("pack_padded_sequence: expected a Tensor with a time and a batch dim, got "
                         + (f"shape {tuple(input.shape)}" if isinstance(input, Tensor) else type(input).__name__))
    if batch_first:
        input = input.transpose(0, 1)
    steps, n = input.shape[:2]
    lengths = _host_lengths(lengths, n)
    if lengths.size and (lengths.min() <= 0 or lengths.max() > steps):
        raise ValueError(f"pack_padded_sequence: every length must be between 1 and the padded length {steps}, "
                         f"got {lengths.tolist()}")
    if enforce_sorted:
        if np.any(np.diff(lengths) > 0):
            raise ValueError(f"pack_padded_sequence: lengths must be sorted in decreasing order when "
                             f"enforce_sorted=True, got {lengths.tolist()}; pass enforce_sorted=False to sort them")
        order = None
    else:
        order = np.argsort(-lengths, kind="stable")
    batch_sizes = (lengths[None, :] > np.arange(lengths.max() if lengths.size else 0)[:, None]).sum(axis=1)
    data = packed_data(input, batch_sizes, order)
    if order is None:
        return PackedSequence(data, tensor(batch_sizes))
    return PackedSequence(data, tensor(batch_sizes), tensor(order), tensor(np.argsort(order)))


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """(padded, lengths) of a PackedSequence, in its batch order: padded is (T, N, *), (N, T, *) with batch_first.

    T is the longest length, or total_length when given (at least that); lengths is int64 (N,).
    """
    if not isinstance(sequence, PackedSequence):
        raise TypeError(f"pad_packed_sequence: expected a PackedSequence, got {type(sequence).__name__}")
    data, sizes = sequence.data, sequence.batch_sizes.numpy()
    steps = len(sizes)
    if total_length is not None:
        if total_length < steps:
            raise ValueError(f"pad_packed_sequence: total_length must be at least the longest length {steps}, "
                             f"got {total_length}")
        steps = total_length
    n = int(sizes[0]) if len(sizes) else 0
    t, b = _positions(sizes, None if sequence.sorted_indices is None else sequence.sorted_indices.numpy())
    padded = full((steps, n) + tuple(data.shape[1:]), padding_value, dtype=data.dtype, device=data.device)
    padded = index_put(padded, (tensor(t, device=data.device), tensor(b, device=data.device)), data)
    lengths = tensor(packed_lengths(sequence))
    return (padded.transpose(0, 1) if batch_first else padded), lengths


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stack sequences (L_i, *) into (max L, N, *) — (N, max L, *) with batch_first —, padding with padding_value.

    padding_side="left" puts the padding before each sequence instead of after it.
    """
    if isinstance(sequences, Tensor) or not isinstance(sequences, (list, tuple)):
        raise TypeError(f"pad_sequence: expected a list or tuple of Tensors, got {type(sequences).__name__}")
    if not sequences:
        raise ValueError("pad_sequence: expected at least one sequence, got an empty list")
    if padding_side not in ("right", "left"):
        raise ValueError(f"pad_sequence: padding_side must be 'left' or 'right', got {padding_side!r}")
    first = sequences[0]
    for i, s in enumerate(sequences):
        if not isinstance(s, Tensor) or s.ndim == 0:
            raise TypeError(f"pad_sequence: sequence {i} must be a Tensor with a time dim, got "
                            + ("a 0-d tensor" if isinstance(s, Tensor) else type(s).__name__))
        if s.shape[1:] != first.shape[1:] or s.dtype != first.dtype:
            raise RuntimeError(f"pad_sequence: every sequence needs the trailing shape and dtype of sequence 0 "
                               f"{tuple(first.shape)} {first.dtype.name}; sequence {i} has shape {tuple(s.shape)} "
                               f"and dtype {s.dtype.name}")
    lengths = np.array([s.shape[0] for s in sequences], dtype=np.int64)
    longest = int(lengths.max())
    offsets = longest - lengths if padding_side == "left" else np.zeros_like(lengths)
    t = np.concatenate([np.arange(n) + o for n, o in zip(lengths, offsets)])
    b = np.repeat(np.arange(len(sequences)), lengths)
    padded = full((longest, len(sequences)) + tuple(first.shape[1:]), padding_value, dtype=first.dtype,
                  device=first.device)
    padded = index_put(padded, (tensor(t, device=first.device), tensor(b, device=first.device)), cat(sequences))
    return padded.transpose(0, 1) if batch_first else padded


def pack_sequence(sequences, enforce_sorted=True) -> PackedSequence:
    """Pack a list of sequences (L_i, *) directly (pad_sequence, then pack_padded_sequence)."""
    sequences = list(sequences)
    lengths = [s.shape[0] if isinstance(s, Tensor) and s.ndim else 0 for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)
