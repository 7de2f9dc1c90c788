"""A 2-rank DistributedDataParallel training loop for the CUDA backend's proof (run with
`torchrun --nproc-per-node 2 ddp.py --seconds N`), started plainly. Each rank prints
`ready <pid> <rank>` once warm and trains on its own GPU (cuda:<rank>) until N seconds pass."""
import argparse
import os
import time

import torch
import torch.distributed as dist


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30)
    a = ap.parse_args()
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    torch.cuda.set_device(rank)
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(2048, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 10)).cuda()
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank])
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    end = time.monotonic() + a.seconds
    i = 0
    while time.monotonic() < end:
        x = torch.randn(512, 2048, device="cuda")
        y = torch.randint(0, 10, (512,), device="cuda")
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss.item()
        i += 1
        if i == 50:
            print(f"ready {os.getpid()} {rank}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
