"""einsum: Einstein summation, built from permute, reshape, sum and matmul (as torch builds it from bmm).

    einsum("bij,bjk->bik", a, b)        batched matrix product
    einsum("ii->i", a)                  a diagonal (a repeated label)
    einsum("...ij,...jk", a, b)         ellipsis: broadcast leading dims; no "->": implicit output
    einsum(a, [0, 1], b, [1, 2], [0, 2])  the sublist form

Each operand first loses its repeated labels (a strided view of the diagonal)
and the labels nobody else needs (summed). Then operands are contracted left to
right, each pair as one matmul: shared labels that are still needed become
batch dims, shared labels that are not are the inner dimension. Because the
pieces are ordinary ops, both modes of autograd come from them, and under
autocast the matmuls run in the region's lower precision — a float32 einsum
inside ``mp.autocast("cpu")`` gives bfloat16, as torch's does. A label of size
1 in one operand broadcasts against the others (torch's rule).
"""
from __future__ import annotations

import string

import numpy as np

from ..tensor import Tensor
from .autocast import active_regions
from .registry import register

_LETTERS = string.ascii_uppercase + string.ascii_lowercase  # the sublist form's 0..51, as torch numbers them


def _error(msg):
    return RuntimeError(f"einsum: {msg}")


@register("einsum", promote=(), composite=True)
def einsum(ctx, equation, *operands):
    """Sum of products over the labels the equation contracts (see the module docstring)."""
    if isinstance(equation, Tensor):
        equation, operands = _from_sublists((equation,) + operands)
    elif len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not isinstance(equation, str):
        raise TypeError(f"einsum: the equation must be a string, got {type(equation).__name__}")
    if not operands:
        raise _error("expected at least one operand after the equation")
    for i, t in enumerate(operands):
        if not isinstance(t, Tensor):
            raise TypeError(f"einsum: operand {i} must be a Tensor, got {type(t).__name__}")
    dtypes = {t.dtype for t in operands}
    regions = active_regions()
    if len(dtypes) > 1 and not (regions and operands[0].device.type in regions):
        raise TypeError(f"einsum: operands must have one dtype, got {' and '.join(sorted(d.name for d in dtypes))}"
                        " (cast them, or run under mp.autocast)")
    terms, out_labels, sizes = _parse(equation, operands)
    return _contract(list(operands), terms, out_labels, sizes)


# ---------------------------------------------------------------- parsing
def _parse(equation, operands):
    """Per operand its labels (a letter, or an int -k for the k-th ellipsis dim from the right), the output's
    labels and every label's (broadcast) size."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    pieces = lhs.split(",")
    if len(pieces) != len(operands):
        raise _error(f"the equation {equation!r} has {len(pieces)} operand terms but {len(operands)} operands were "
                     "given")
    terms, sizes, n_ellipsis = [], {}, 0
    for i, (piece, t) in enumerate(zip(pieces, operands)):
        letters = _letters(piece, f"operand {i}", equation)
        if "..." in letters:
            at = letters.index("...")
            n = t.ndim - (len(letters) - 1)
            if n < 0:
                raise _error(f"operand {i} has {t.ndim} dims, fewer than the {len(letters) - 1} labels of {piece!r}")
            labels = letters[:at] + list(range(-n, 0)) + letters[at + 1:]
            n_ellipsis = max(n_ellipsis, n)
        else:
            labels = letters
            if len(labels) != t.ndim:
                raise _error(f"operand {i} has {t.ndim} dims but its term {piece!r} names {len(labels)} (use '...' "
                             "for dims the term does not name)")
        seen = {}
        for label, size in zip(labels, t.shape):
            if label in seen and seen[label] != size:
                raise _error(f"label {_show(label)} is repeated in operand {i} with different sizes "
                             f"({seen[label]} and {size})")
            seen[label] = size
            if label not in sizes or sizes[label] == 1:
                sizes[label] = size
            elif size not in (1, sizes[label]):
                raise _error(f"label {_show(label)} has size {size} in operand {i}, which does not broadcast "
                             f"with size {sizes[label]} seen before")
        terms.append(labels)
    everywhere = [label for labels in terms for label in labels]
    if arrow:
        letters = _letters(rhs, "the output", equation)
        out = [x for x in letters if x != "..."]
        if "..." in letters:
            at = letters.index("...")
            out = letters[:at] + list(range(-n_ellipsis, 0)) + letters[at + 1:]
        for label in out:
            if out.count(label) > 1:
                raise _error(f"output label {_show(label)} appears more than once")
            if label not in sizes:
                raise _error(f"output label {_show(label)} appears in no operand")
    else:  # implicit: the ellipsis dims, then the labels used once, in ASCII order
        out = list(range(-n_ellipsis, 0)) + sorted(x for x in sizes if isinstance(x, str) and everywhere.count(x) == 1)
    return terms, out, sizes


def _letters(piece, where, equation):
    """A term's labels, with "..." kept as one item; anything but letters and one ellipsis is refused."""
    out, i = [], 0
    while i < len(piece):
        c = piece[i]
        if piece.startswith("...", i):
            if "..." in out:
                raise _error(f"{where} has more than one ellipsis in {equation!r}")
            out.append("...")
            i += 3
            continue
        if c not in _LETTERS:
            raise _error(f"invalid label {c!r} for {where} in {equation!r}: labels are letters a-z, A-Z "
                         "(and one '...')")
        out.append(c)
        i += 1
    return out


def _show(label):
    return repr(label) if isinstance(label, str) else "'...'"


def _from_sublists(args):
    """einsum(a, [0, 1], b, [1, 2], [0, 2]) -> ("Ab,bC->AC"-style equation, (a, b))."""
    out = args[-1] if len(args) % 2 == 1 else None
    pairs = args[:-1] if out is not None else args
    operands, terms = pairs[0::2], pairs[1::2]
    if not all(isinstance(t, Tensor) for t in operands):
        raise _error("the sublist form needs a subscript list after every operand (and optionally one for the "
                     "output)")

    def term(sub):
        if not isinstance(sub, (list, tuple)):
            raise TypeError(f"einsum: subscripts must be lists of ints in [0, 52) and Ellipsis, got {sub!r}")
        parts = []
        for s in sub:
            if s is Ellipsis:
                parts.append("...")
            elif isinstance(s, (int, np.integer)) and not isinstance(s, bool) and 0 <= s < len(_LETTERS):
                parts.append(_LETTERS[s])
            else:
                raise _error(f"subscript {s!r} must be an int in [0, 52) or Ellipsis")
        return "".join(parts)
    equation = ",".join(term(t) for t in terms) + ("" if out is None else "->" + term(out))
    return equation, tuple(operands)


# ---------------------------------------------------------------- contraction
def _contract(operands, terms, out, sizes):
    needed_by = [set(out).union(*terms[i + 1:]) for i in range(len(terms))]  # labels anyone after i needs
    later = [set().union(*(terms[:i] + terms[i + 1:])) | set(out) for i in range(len(terms))]
    tensors = [_reduce_alone(t, labels, later[i]) for i, (t, labels) in enumerate(zip(operands, terms))]
    acc, acc_labels = tensors[0]
    for i in range(1, len(tensors)):
        acc, acc_labels = _pair(acc, acc_labels, *tensors[i], needed_by[i], sizes)
    return acc.permute(*[acc_labels.index(x) for x in out])  # a new tensor even when nothing moves


def _reduce_alone(t, labels, others):
    """Take the diagonal of each repeated label, then sum out the labels no other term (nor the output) has."""
    labels = list(labels)
    for label in list(dict.fromkeys(labels)):
        while labels.count(label) > 1:
            a = labels.index(label)
            b = labels.index(label, a + 1)
            rest = [i for i in range(len(labels)) if i not in (a, b)]
            n = t.shape[a]
            # the diagonal of dims a and b: move them last, flatten them, take every (n + 1)-th element
            t = t.permute(*rest, a, b).reshape(*[t.shape[i] for i in rest], n * n)[..., ::n + 1]
            labels = [labels[i] for i in rest] + [label]
    alone = [i for i, x in enumerate(labels) if x not in others]
    if alone:
        t = t.sum(dim=tuple(alone))
        labels = [x for i, x in enumerate(labels) if i not in alone]
    return t, labels


def _pair(a, la, b, lb, needed, sizes):
    """Contract two operands with one matmul: (batch, a only, shared) @ (batch, shared, b only)."""
    batch = [x for x in la if x in lb and x in needed]
    shared = [x for x in la if x in lb and x not in needed]
    a_only = [x for x in la if x not in lb]
    b_only = [x for x in lb if x not in la]
    a = _broadcast_shared(a, la, shared, sizes)
    b = _broadcast_shared(b, lb, shared, sizes)
    k = int(np.prod([sizes[x] for x in shared]))
    a_dims = [a.shape[la.index(x)] for x in a_only]
    b_dims = [b.shape[lb.index(x)] for x in b_only]
    a3 = a.permute(*[la.index(x) for x in batch + a_only + shared])
    a3 = a3.reshape(*a3.shape[:len(batch)], int(np.prod(a_dims)), k)
    b3 = b.permute(*[lb.index(x) for x in batch + shared + b_only])
    b3 = b3.reshape(*b3.shape[:len(batch)], k, int(np.prod(b_dims)))
    product = a3 @ b3  # batch dims of size 1 broadcast here
    return product.reshape(*product.shape[:len(batch)], *a_dims, *b_dims), batch + a_only + b_only


def _broadcast_shared(t, labels, shared, sizes):
    """A contracted label of size 1 here but n in the other operand: expand it (it multiplies every term)."""
    shape = list(t.shape)
    wide = [labels.index(x) for x in shared if shape[labels.index(x)] != sizes[x]]
    for i in wide:
        shape[i] = sizes[labels[i]]
    return t.expand(*shape) if wide else t
