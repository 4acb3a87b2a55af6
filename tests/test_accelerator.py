"""mp.accelerator: torch.accelerator's device-agnostic calls; mixprec's accelerator is CUDA."""
import pytest

import mixprec as mp


@pytest.mark.skipif(mp.is_cuda_available(), reason="the behaviour without a usable GPU")
def test_without_an_accelerator_as_torchs(torch):
    for lib in (torch, mp):
        assert lib.accelerator.is_available() is False
        assert lib.accelerator.device_count() == 0
        assert lib.accelerator.current_accelerator() is None
        for call in (lib.accelerator.current_device_index, lib.accelerator.synchronize):
            with pytest.raises(RuntimeError):
                call()
    with pytest.raises(mp.DeviceUnavailableError, match="mp.accelerator.synchronize: no accelerator"):
        mp.accelerator.synchronize()


@pytest.mark.gpu
def test_with_a_gpu_the_accelerator_is_cuda():
    assert mp.accelerator.is_available() and mp.accelerator.device_count() == mp.cuda.device_count()
    assert mp.accelerator.current_accelerator().type == "cuda"
    assert mp.accelerator.current_device_index() == mp.cuda.current_device()
    mp.accelerator.synchronize()
    with mp.accelerator.device_index(0):
        assert mp.accelerator.current_stream() == mp.cuda.current_stream()
    free, total = mp.accelerator.get_memory_info()
    assert 0 <= free <= total
