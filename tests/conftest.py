"""Shared fixtures: the device list every op test runs on ("cuda" only with a usable GPU)."""
import pytest

import mixprec as mp

CUDA_OK = mp.is_cuda_available()


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="needs a CUDA device (mp.is_cuda_available() is False)")
    for item in items:
        if "gpu" in item.keywords and not CUDA_OK:
            item.add_marker(skip)


DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


@pytest.fixture(params=DEVICES)
def device(request):
    """Each test using this fixture runs on the CPU and, marked gpu, on CUDA."""
    return request.param


@pytest.fixture
def torch():
    """PyTorch (CPU) as the oracle where torch defines the behaviour; the test is skipped without it."""
    return pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _seed():
    mp.manual_seed(0)


@pytest.fixture(autouse=True)
def _clean_device_checks():
    """A test that fails before the host waits leaves its GPU check flags set: drop them, not to fail the next."""
    yield
    if CUDA_OK:
        mp.backend.device_checks.discard_device_errors()


@pytest.fixture
def user_ops():
    """Register ops for one test, as a user would (``user_ops(name, forward, **options)``);
    they and any autocast registration of them are removed afterwards."""
    from mixprec.ops import autocast, registry
    made = []

    def make(name, forward, **options):
        op = registry.register(name, **options)(forward)
        made.append(name)
        return op
    yield make
    for name in made:
        op = registry.unregister(name)
        for key in [k for k in autocast.REGISTERED if k[0] is op]:
            del autocast.REGISTERED[key]
