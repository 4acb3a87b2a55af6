"""The FP8 recipes (mixprec.amp.fp8.recipes): Transformer Engine's names, parameters and defaults, validated."""
import dataclasses

import ml_dtypes
import numpy as np
import pytest

import mixprec as mp
from mixprec.amp.fp8 import recipes


def test_exported_from_amp():
    assert mp.amp.DelayedScaling is recipes.DelayedScaling
    assert mp.amp.CurrentScaling is recipes.CurrentScaling is mp.amp.Float8CurrentScaling
    assert mp.amp.MXFP8BlockScaling is recipes.MXFP8BlockScaling and mp.amp.Format is recipes.Format


def test_defaults_are_transformer_engines():
    # transformer_engine.common.recipe (TE 2.x docs): DelayedScaling(margin=0, fp8_format=Format.HYBRID,
    # amax_history_len=1024, amax_compute_algo="max", scaling_factor_compute_algo=None), reduce_amax=True;
    # Float8CurrentScaling(fp8_format=Format.HYBRID); MXFP8BlockScaling(fp8_format=Format.E4M3)
    d = mp.amp.DelayedScaling()
    assert (d.margin, d.fp8_format, d.amax_history_len, d.amax_compute_algo, d.scaling_factor_compute_algo,
            d.reduce_amax, d.fp8_dpa, d.fp8_mha) == (0, mp.amp.Format.HYBRID, 1024, "max", None, True, False, False)
    c = mp.amp.CurrentScaling()
    assert (c.fp8_format, c.use_power_2_scales) == (mp.amp.Format.HYBRID, False)
    m = mp.amp.MXFP8BlockScaling()
    assert (m.margin, m.fp8_format, m.block_size) == (0, mp.amp.Format.E4M3, 32)


@pytest.mark.parametrize("fmt, fwd, bwd", [("E4M3", ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fn),
                                           ("E5M2", ml_dtypes.float8_e5m2, ml_dtypes.float8_e5m2),
                                           ("HYBRID", ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2)])
def test_format_names_the_forward_and_backward_dtypes(fmt, fwd, bwd):
    f = mp.amp.Format[fmt]
    assert np.dtype(f.forward) == np.dtype(fwd) and np.dtype(f.backward) == np.dtype(bwd)
    assert f.max_fwd == float(ml_dtypes.finfo(fwd).max) and f.max_bwd == float(ml_dtypes.finfo(bwd).max)
    assert repr(f) == f"Format.{fmt}"


def test_recipes_are_frozen_values():
    d = mp.amp.DelayedScaling(margin=1, amax_history_len=16, amax_compute_algo="most_recent")
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.margin = 2
    assert d == mp.amp.DelayedScaling(margin=1, amax_history_len=16, amax_compute_algo="most_recent")
    assert d.scaled_max == (448.0 / 2, 57344.0 / 2)
    assert hash(d) == hash(mp.amp.DelayedScaling(margin=1, amax_history_len=16, amax_compute_algo="most_recent"))


@pytest.mark.parametrize("make, error, words", [
    (lambda: mp.amp.DelayedScaling(fp8_format=mp.amp.Format.E5M2), ValueError, "E5M2"),
    (lambda: mp.amp.DelayedScaling(fp8_format="HYBRID"), TypeError, "mixprec.amp.Format"),
    (lambda: mp.amp.DelayedScaling(amax_history_len=0), ValueError, "amax_history_len must be an int >= 1"),
    (lambda: mp.amp.DelayedScaling(amax_history_len=2.0), ValueError, "amax_history_len"),
    (lambda: mp.amp.DelayedScaling(amax_history_len=True), ValueError, "amax_history_len"),
    (lambda: mp.amp.DelayedScaling(amax_compute_algo="mean"), ValueError, "\"max\" or \"most_recent\""),
    (lambda: mp.amp.DelayedScaling(amax_compute_algo=max), ValueError, "callable amax_compute_algo"),
    (lambda: mp.amp.DelayedScaling(scaling_factor_compute_algo=lambda *a: 1), ValueError,
     "scaling_factor_compute_algo is not implemented"),
    (lambda: mp.amp.DelayedScaling(margin=0.5), TypeError, "margin must be an int"),
    (lambda: mp.amp.DelayedScaling(margin=1000), ValueError, "margin must be in"),
    (lambda: mp.amp.DelayedScaling(reduce_amax=1), TypeError, "reduce_amax must be a bool"),
    (lambda: mp.amp.DelayedScaling(fp8_dpa=True), ValueError, "fp8_dpa=True is not implemented"),
    (lambda: mp.amp.CurrentScaling(fp8_mha=True), ValueError, "fp8_mha=True is not implemented"),
    (lambda: mp.amp.CurrentScaling(use_power_2_scales="yes"), TypeError, "use_power_2_scales must be a bool"),
    (lambda: mp.amp.CurrentScaling(fp8_format=mp.amp.Format.E5M2), ValueError, "E5M2"),
    (lambda: mp.amp.MXFP8BlockScaling(margin=1), ValueError, "margin=1 is not implemented"),
    (lambda: mp.amp.MXFP8BlockScaling(fp8_format=mp.amp.Format.E5M2), ValueError, "E5M2"),
])
def test_bad_arguments_are_refused_with_what_was_expected(make, error, words):
    with pytest.raises(error, match=words.replace("(", r"\(")):
        make()


def test_the_unimplemented_options_are_accepted_at_their_default():
    mp.amp.DelayedScaling(fp8_dpa=False, fp8_mha=False, scaling_factor_compute_algo=None, reduce_amax=False)
    mp.amp.MXFP8BlockScaling(margin=0, fp8_format=mp.amp.Format.HYBRID)
