"""mp.cuda.amp and mp.cpu.amp: torch's deprecated per-device aliases still work, and warn as torch 2.13's do
(FutureWarning, the replacement named, reported at the caller's line)."""
import pytest

import mixprec as mp

F16, BF16, F32 = mp.float16, mp.bfloat16, mp.float32
NO_GPU = "ignore:(autocast|GradScaler).*CUDA is not available:UserWarning"  # cuda names without a GPU


def _fwd(ctx, x):
    return x


ALIASES = [  # (name under <lib>.<device>.amp, call, torch's replacement as named in the warning)
    ("cuda.amp.autocast", lambda amp: amp.autocast(), "amp.autocast('cuda', args...)"),
    ("cpu.amp.autocast", lambda amp: amp.autocast(), "amp.autocast('cpu', args...)"),
    ("cuda.amp.GradScaler", lambda amp: amp.GradScaler(), "amp.GradScaler('cuda', args...)"),
    ("cpu.amp.GradScaler", lambda amp: amp.GradScaler(), "amp.GradScaler('cpu', args...)"),
    ("cuda.amp.custom_fwd", lambda amp: amp.custom_fwd(_fwd), "amp.custom_fwd(args..., device_type='cuda')"),
    ("cuda.amp.custom_bwd", lambda amp: amp.custom_bwd(_fwd), "amp.custom_bwd(args..., device_type='cuda')"),
]


@pytest.mark.filterwarnings(NO_GPU)
@pytest.mark.parametrize("name, call, replacement", ALIASES, ids=[a[0] for a in ALIASES])
def test_deprecated_aliases_warn_as_torchs(torch, name, call, replacement):
    device = name.split(".")[0]
    for lib, prefix in ((torch, "torch"), (mp, "mp")):
        amp = getattr(getattr(lib, device), "amp")
        with pytest.warns(FutureWarning) as record:
            call(amp)
        messages = [str(w.message) for w in record if w.category is FutureWarning]
        assert messages == [f"`{prefix}.{name}(args...)` is deprecated. Please use `{prefix}.{replacement}` "
                            "instead."]
        assert [w.filename for w in record if w.category is FutureWarning] == [__file__]


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_cpu_aliases_fix_the_device_type():
    with mp.cpu.amp.autocast():
        assert mp.amp.get_autocast_dtype("cpu") == BF16 and mp.amp.is_autocast_enabled("cpu")
    assert mp.cpu.amp.autocast().device_type == "cpu" and mp.cpu.amp.GradScaler()._device == "cpu"


@pytest.mark.gpu
@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_cuda_aliases_fix_the_device_type():
    with mp.cuda.amp.autocast(dtype=BF16):
        assert mp.amp.get_autocast_dtype("cuda") == BF16
    with mp.cuda.amp.autocast(enabled=False):
        assert not mp.amp.is_autocast_enabled("cuda")
    assert mp.cuda.amp.autocast().device_type == "cuda"


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_cuda_custom_fwd_alias_leaves_inputs_alone_outside_a_region():
    calls = []

    @mp.cuda.amp.custom_fwd(cast_inputs=F32)
    def fwd(ctx, x):
        calls.append(x.dtype)
        return x

    class Ctx:
        pass
    fwd(Ctx(), mp.randn(2, dtype=F16))
    assert calls == [F16]  # no CUDA region is active: inputs are left alone
