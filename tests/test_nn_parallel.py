"""mp.nn.parallel: DataParallel as torch's (no GPU: the module runs as it is; one GPU: inputs moved there;
several: scatter, replicas, gather) and DistributedDataParallel reachable where torch names it."""
import numpy as np
import pytest

import mixprec as mp


def _pair(torch):
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    m = mp.nn.Sequential(mp.nn.Linear(3, 4), mp.nn.ReLU(), mp.nn.Linear(4, 2))
    m.load_state_dict({k: mp.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return tm, m


@pytest.mark.skipif(mp.is_cuda_available(), reason="the behaviour without a usable GPU")
def test_without_a_gpu_data_parallel_calls_the_module_as_torchs(torch):
    tm, m = _pair(torch)
    tdp, dp = torch.nn.DataParallel(tm, device_ids=[0, 1]), mp.nn.DataParallel(m, device_ids=[0, 1])
    assert dp.device_ids == tdp.device_ids == [] and dp.module is m
    assert list(dp.state_dict()) == list(tdp.state_dict())  # "module." prefixed, as torch's
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    out, tout = dp(mp.tensor(x)), tdp(torch.tensor(x))
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-6)
    out.sum().backward()
    tout.sum().backward()
    np.testing.assert_allclose(m[0].weight.grad.numpy(), tm[0].weight.grad.numpy(), rtol=1e-5)


def test_data_parallel_checks_its_module():
    with pytest.raises(TypeError, match="DataParallel: module must be an mp.nn.Module, got function"):
        mp.nn.DataParallel(lambda x: x)


def test_distributed_data_parallel_is_named_where_torch_names_it(torch):
    assert mp.nn.parallel.DistributedDataParallel is mp.distributed.DistributedDataParallel
    assert torch.nn.parallel.DistributedDataParallel is torch.nn.parallel.distributed.DistributedDataParallel


@pytest.mark.gpu
def test_on_one_gpu_inputs_move_to_it_and_parameters_must_be_there():
    m = mp.nn.Linear(3, 2)
    dp = mp.nn.DataParallel(m, device_ids=[0])
    with pytest.raises(RuntimeError, match="DataParallel: the module's parameters and buffers must be on cuda:0"):
        dp(mp.ones(4, 3))
    m.to("cuda")
    out = dp(mp.ones(4, 3))
    assert out.device == "cuda:0" and out.shape == (4, 2)
    with pytest.raises(mp.DeviceUnavailableError):
        mp.nn.DataParallel(m, device_ids=[0, mp.cuda.device_count()])


@pytest.mark.gpu
@pytest.mark.skipif(not mp.is_cuda_available() or mp.cuda.device_count() < 2, reason="needs two GPUs")
def test_on_two_gpus_the_batch_is_split_and_gradients_meet_in_the_parameters():
    m = mp.nn.Linear(3, 2).to("cuda:0")
    x = mp.randn(5, 3)
    ref = m(x.to("cuda:0"))
    ref.sum().backward()
    expected = m.weight.grad.cpu().numpy()
    m.weight.grad = None
    out = mp.nn.DataParallel(m, device_ids=[0, 1])(x)
    assert out.device == "cuda:0"
    np.testing.assert_allclose(out.detach().cpu().numpy(), ref.detach().cpu().numpy(), rtol=1e-5, atol=1e-6)
    out.sum().backward()
    np.testing.assert_allclose(m.weight.grad.cpu().numpy(), expected, rtol=1e-5, atol=1e-6)
