"""What gradient buckets buy: DistributedDataParallel's averaging (sync_gradients()) with the default
25 MiB buckets against one all-reduce per tensor (a cap so small every tensor is alone).

The model is ``--tensors`` float32 parameters of ``--numel`` elements each (many small
tensors, as in a deep network's biases and norms). The two wrappers hold identical
models (one wrapper per model: a parameter is averaged by one wrapper at a time) and
run in the same processes, taking turns within each round; the report
is the best of ``--repeat`` rounds of ``--number`` syncs, and the ratio
per-tensor / bucketed (how many times faster the buckets are).

    mpirun -n 2 python benchmarks/ddp_buckets.py [--tensors 200] [--numel 1000]
    (as root add --allow-run-as-root; with more ranks than cores add --oversubscribe)
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import mixprec as mp  # noqa: E402
import mixprec.distributed as dist  # noqa: E402


class Params:
    """Just parameters: the sync cost does not depend on what the model computes."""

    def __init__(self, n, numel, device):
        self.ps = [mp.randn(numel, device=device, requires_grad=True) for _ in range(n)]

    def parameters(self):
        return self.ps

    def __call__(self):
        return None


def time_syncs(ddp, params, number):
    for p in params:  # local gradients, as after a backward pass (re-averaging them is the same work)
        p.grad = mp.ones_like(p)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(number):
        ddp.sync_gradients()
    dist.barrier()
    return (time.perf_counter() - start) / number


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tensors", type=int, default=200)
    ap.add_argument("--numel", type=int, default=1000)
    ap.add_argument("--number", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--backend", default=None, help="nccl or mpi (default: nccl with a GPU, else mpi)")
    args = ap.parse_args()
    dist.init_process_group(args.backend)
    model = Params(args.tensors, args.numel, dist.get_device())
    twin = Params(args.tensors, args.numel, dist.get_device())
    bucketed = dist.DistributedDataParallel(model)
    per_tensor = dist.DistributedDataParallel(twin, bucket_cap_mb=1e-9)  # every tensor its own bucket
    best = {"bucketed": float("inf"), "per tensor": float("inf")}
    for _ in range(args.repeat):
        best["bucketed"] = min(best["bucketed"], time_syncs(bucketed, model.ps, args.number))
        best["per tensor"] = min(best["per tensor"], time_syncs(per_tensor, twin.ps, args.number))
    if dist.get_rank() == 0:
        mb = args.tensors * args.numel * 4 / 2**20
        print(f"{dist.get_world_size()} ranks, backend {dist.get_backend()}, {args.tensors} float32 tensors x "
              f"{args.numel} elements ({mb:.2f} MiB of gradients)")
        print(f"  bucketed   : {len(bucketed.buckets):4d} all-reduce call(s)  {best['bucketed'] * 1e3:8.3f} ms/sync")
        print(f"  per tensor : {len(per_tensor.buckets):4d} all-reduce call(s)  "
              f"{best['per tensor'] * 1e3:8.3f} ms/sync")
        print(f"  per tensor / bucketed = {best['per tensor'] / best['bucketed']:.1f}x")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
