"""mp.cpu: torch.cpu's device-generic names answer as torch's do on the CPU."""
import pytest

import mixprec as mp


def test_cpu_namespace_matches_torchs(torch):
    for lib in (torch, mp):
        assert lib.cpu.is_available() is True
        assert lib.cpu.device_count() == 1
        assert lib.cpu.current_device() == "cpu"
        assert lib.cpu.synchronize() is None
        s = lib.cpu.Stream()
        with lib.cpu.stream(s):
            pass
        assert isinstance(lib.cpu.current_stream(), lib.cpu.Stream)
        assert lib.cpu.StreamContext(None).__enter__() is None
    with pytest.raises(ValueError, match="mp.cpu.synchronize: expected the device 'cpu'"):
        mp.cpu.synchronize("cuda:0")
    with pytest.raises(TypeError, match="mp.cpu.stream expects an mp.cpu.Stream"):
        mp.cpu.stream(3)
