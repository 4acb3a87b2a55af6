"""mp.finfo and mp.iinfo against torch.finfo/torch.iinfo, field by field."""
import pytest

import mixprec as mp

FLOATS = ["float16", "bfloat16", "float32", "float64", "complex64", "complex128"]
INTS = ["uint8", "int8", "int16", "int32", "int64"]


@pytest.mark.parametrize("name", FLOATS)
def test_finfo_matches_torch(torch, name):
    ours, theirs = mp.finfo(getattr(mp, name)), torch.finfo(getattr(torch, name))
    for field in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
        assert getattr(ours, field) == getattr(theirs, field), field
    assert ours.dtype == theirs.dtype


@pytest.mark.parametrize("name", INTS)
def test_iinfo_matches_torch(torch, name):
    ours, theirs = mp.iinfo(getattr(mp, name)), torch.iinfo(getattr(torch, name))
    assert (ours.bits, ours.min, ours.max, ours.dtype) == (theirs.bits, theirs.min, theirs.max, theirs.dtype)


def test_the_float16_numbers():
    f = mp.finfo(mp.float16)
    assert (f.max, f.eps, f.tiny) == (65504.0, 2.0 ** -10, 2.0 ** -14)
    assert mp.finfo().dtype == "float32"


def test_wrong_kind_is_refused():
    with pytest.raises(TypeError, match="iinfo"):
        mp.finfo(mp.int32)
    with pytest.raises(TypeError, match="finfo"):
        mp.iinfo(mp.float32)
    with pytest.raises(TypeError, match="iinfo needs an integer"):
        mp.iinfo(mp.bool)
