"""mixprec.backend.devices: parsing device names, the default device, moves between devices, mixed devices."""
from __future__ import annotations

import numpy as np
import pytest

import mixprec as mp
from mixprec.backend import devices


# ------------------------------------------------------------------ parsing
def test_device_parsing():
    assert devices.as_device("cpu") is devices.CPU
    assert devices.as_device("cpu:0") is devices.CPU
    assert devices.as_device(mp.Device("cpu")) is devices.CPU
    d = mp.Device("cuda", 1)
    assert (d.type, d.index, str(d), repr(d)) == ("cuda", 1, "cuda:1", "device('cuda:1')")
    assert d == "cuda:1" and d == "cuda" and d != "cuda:0" and d != "cpu" and d != "nonsense"
    assert mp.Device("cpu") == "cpu" and mp.Device("cpu") == mp.Device("cpu")
    assert hash(mp.Device("cuda", 0)) == hash(mp.Device("cuda", 0))


@pytest.mark.parametrize("spec", ["gpu", "cuda:x", "cuda:-1", "cpu:1", "CUDA", "", "cuda:"])
def test_bad_device_strings(spec):
    with pytest.raises(ValueError, match="unknown device"):
        devices.as_device(spec)
    with pytest.raises(ValueError, match="unknown device"):
        mp.zeros(2, device=spec)


@pytest.mark.parametrize("spec", [0, None, 1.5, ["cpu"]])
def test_non_string_devices(spec):
    with pytest.raises(TypeError, match="device must be a string"):
        devices.as_device(spec)


def test_device_constructor_validates():
    with pytest.raises(ValueError, match="unknown device type"):
        mp.Device("tpu")
    with pytest.raises(ValueError, match="invalid device index"):
        mp.Device("cuda", -1)


# ------------------------------------------------------------------ default device
def test_device_context_and_default_device():
    assert mp.get_default_device() == "cpu"
    with mp.device("cpu") as d:
        assert d is devices.CPU and mp.zeros(1).device == "cpu"
    mp.set_default_device("cpu")
    assert mp.get_default_device() is devices.CPU
    with pytest.raises(ValueError):
        mp.device("tpu")


@pytest.mark.gpu
def test_device_context_on_cuda():
    with mp.device("cuda"):
        assert mp.zeros(2).device.type == "cuda"
        assert mp.randn(2).device.type == "cuda"
        assert mp.tensor([1.0]).device.type == "cuda"
    assert mp.zeros(2).device == "cpu"
    mp.set_default_device("cuda")
    try:
        assert mp.ones(1).device.type == "cuda"
    finally:
        mp.set_default_device("cpu")


@pytest.mark.gpu
def test_moving_between_devices_keeps_values_and_gradients():
    x = mp.tensor([1.0, 2.0], requires_grad=True)
    y = x.cuda()
    assert y.device.type == "cuda" and y.cpu().tolist() == [1.0, 2.0]
    (y * y).sum().backward()
    assert x.grad.device == "cpu" and x.grad.tolist() == [2.0, 4.0]


# ------------------------------------------------------------------ mixed devices
class _FakeGpuArray:
    """Stands in for a CuPy array: enough for the dispatcher to see a second device."""
    shape, ndim, size, dtype = (2,), 1, 2, np.dtype(np.float32)


def test_mixing_devices_names_both(monkeypatch):
    cuda0 = mp.Device("cuda", 0)
    monkeypatch.setattr(devices, "device_of_array", lambda a: cuda0)
    gpu = mp.Tensor._wrap(_FakeGpuArray())
    assert gpu.device == "cuda:0"
    with pytest.raises(RuntimeError, match=r"add: expected all tensors on one device, got cpu and cuda:0"):
        mp.ones(2) + gpu
    with pytest.raises(RuntimeError, match=r"mul: .* got cuda:0 and cpu"):
        gpu * mp.ones(2)
    with pytest.raises(RuntimeError, match=r"cat: .* got cpu and cuda:0"):
        mp.cat([mp.ones(2), gpu])


@pytest.mark.gpu
def test_mixing_real_devices_names_both():
    with pytest.raises(RuntimeError, match=r"add: .*got cpu and cuda:\d"):
        mp.ones(2) + mp.ones(2, device="cuda")


def test_device_objects_are_made_without_a_gpu_as_torchs(torch):
    """mp.device("cuda") is a value (type, index), as torch.device: no GPU is needed until it is used."""
    for spec in (("cuda",), ("cuda", 1), ("cuda:1",), ("cpu",)):
        d, td = mp.device(*spec), torch.device(*spec)
        assert (d.type, d.index, str(d)) == (td.type, td.index, str(td))
        assert isinstance(d, mp.Device) and mp.device(d) == d
    assert (mp.device("cuda:1") == mp.device("cuda", 1)) == (torch.device("cuda:1") == torch.device("cuda", 1))
    assert (mp.device("cuda") == mp.device("cuda:0")) == (torch.device("cuda") == torch.device("cuda:0"))
    assert mp.device("cpu") == mp.ones(1).device and mp.ones(1).device == mp.device("cpu")
    with pytest.raises(ValueError, match="unknown device"):
        mp.device("cuda:x")


@pytest.mark.skipif(mp.is_cuda_available(), reason="the behaviour without a usable GPU")
def test_using_a_cuda_device_without_a_gpu_says_why():
    d = mp.device("cuda")
    with pytest.raises(mp.DeviceUnavailableError, match="not available"):
        mp.zeros(2, device=d)
    with pytest.raises(mp.DeviceUnavailableError, match="not available"):
        with d:
            pass
    assert mp.get_default_device() == "cpu"


def test_device_context_nests_and_restores():
    with mp.device("cpu"):
        with mp.device("cpu") as inner:
            assert inner is devices.CPU
        assert mp.get_default_device() is devices.CPU
    assert mp.get_default_device() is devices.CPU
