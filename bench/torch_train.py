#!/usr/bin/env python3
"""PyTorch peer for bench_train: the same 784-256-256-10 ReLU MLP, AdamW (lr 1e-3, weight decay
0.01), global batch 64, on the same MNIST IDX files in file order, printing the same JSON lines.

Run with Debian's python (the one with torch):
  /usr/bin/python3 bench/torch_train.py [--threads T] [--steps N]          single process
  /usr/bin/python3 bench/torch_train.py --world 2 [--steps N]              gloo DDP and ZeRO-1, 1 thread per rank
  /usr/bin/python3 bench/torch_train.py --matmul [--threads T]             torch.mm GFLOP/s, f32

Timing as bench_train: step_ms = median per-step time (rank 0), samples_per_s = batch x steps /
total seconds (slowest rank).
"""
import argparse
import json
import os
import socket
import statistics
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

BATCH = 64
TIMING = "step_ms=median per step (rank 0); samples_per_s=batch*steps/total"


def blas_name():
    """Which BLAS torch's generic build loaded (Debian: reference BLAS unless OpenBLAS is on the path)."""
    torch.mm(torch.ones(2, 2), torch.ones(2, 2))
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f if "blas" in line and "/" in line}
    for path in sorted(paths):
        if "openblas" in path:
            return "openblas-openmp" if "openmp" in path else "openblas"
    return "reference" if any("libblas" in path for path in paths) else "unknown"


def read_idx(path):
    """An IDX file (uint8 payload) as a numpy array; the magic's last byte is the rank."""
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:3] != b"\x00\x00\x08":
        raise ValueError(f"{path}: not a uint8 IDX file (magic {raw[:4].hex()})")
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        raise ValueError(f"{path}: {data.size} payload bytes, header says {dims}")
    return data.reshape(dims)


def load_mnist(data_dir):
    x = read_idx(os.path.join(data_dir, "train-images-idx3-ubyte")).reshape(-1, 784)
    y = read_idx(os.path.join(data_dir, "train-labels-idx1-ubyte"))
    x = (torch.from_numpy(x.astype(np.float32)) / 255.0 - 0.1307) / 0.3081
    return x.contiguous(), torch.from_numpy(y.astype(np.int64))


def make_mlp():
    torch.manual_seed(42)
    return torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                               torch.nn.ReLU(), torch.nn.Linear(256, 10))


def train(model, opt, x, y, args, rank=0, world=1):
    """Times args.steps steps after args.warmup; rank r's micro-batch as in bench_train."""
    micro, per_epoch = BATCH // world, x.shape[0] // BATCH
    times, loss = [], None
    t0 = None
    for s in range(args.warmup + args.steps):
        if s == args.warmup:
            if world > 1:
                dist.barrier()
            t0 = time.perf_counter()
        ts = time.perf_counter()
        b = (s % per_epoch) * BATCH + rank * micro
        opt.zero_grad(set_to_none=True)
        # --dtype bf16: PyTorch's CPU autocast (matmuls in bf16, fp32 weights and loss), the peer of
        # zerotrain's bf16 mixed precision.
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.dtype == "bf16"):
            logits = model(x[b:b + micro])
        loss = F.cross_entropy(logits.float(), y[b:b + micro])
        loss.backward()
        opt.step()
        if s >= args.warmup:
            times.append((time.perf_counter() - ts) * 1e3)
    total = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
    final = torch.tensor([loss.item()], dtype=torch.float64)
    if world > 1:
        dist.all_reduce(total, op=dist.ReduceOp.MAX)
        dist.all_reduce(final)
    return statistics.median(times), statistics.fmean(times), BATCH * args.steps / total.item(), final.item() / world


def emit(stage, world, threads, args, res, **extra):
    med, mean, sps, loss = res
    line = {"bench": "mlp_train", "impl": "pytorch", "stage": stage, "world": world, "threads": threads,
            "batch": BATCH, "steps": args.steps, "samples_per_s": round(sps, 1), "step_ms": round(med, 4),
            "step_ms_mean": round(mean, 4), "final_loss": round(loss, 4), "torch": torch.__version__,
            "dtype": args.dtype,
            "blas": blas_name()}
    line.update(extra)
    line["timing"] = TIMING
    print(json.dumps(line), flush=True)


def single(args):
    torch.set_num_threads(args.threads)
    x, y = load_mnist(args.data)
    model = make_mlp()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    emit(0, 1, args.threads, args, train(model, opt, x, y, args), variant="single")


def worker(rank, world, port, args):
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel as DDP

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    x, y = load_mnist(args.data)
    # Stage 0: DDP with AdamW; stage 1: DDP with ZeroRedundancyOptimizer(AdamW) (optimizer states sharded).
    for stage, variant in ((0, "ddp"), (1, "ddp+zero_redundancy_optimizer")):
        model = DDP(make_mlp())
        if stage == 0:
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
        else:
            opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, lr=1e-3,
                                          weight_decay=0.01)
        res = train(model, opt, x, y, args, rank, world)
        if rank == 0:
            emit(stage, world, 1, args, res, backend="gloo", variant=variant)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def matmul(args):
    """torch.mm GFLOP/s, f32, on bench/ops's shapes; about one second per shape."""
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    for m, k, n in ((64, 784, 256), (1024, 1024, 1024)):
        a, b = torch.rand(m, k) * 2 - 1, torch.rand(k, n) * 2 - 1
        torch.mm(a, b)  # warm-up
        iters, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < 1.0:
            torch.mm(a, b)
            iters += 1
        sec = time.perf_counter() - t0
        print(json.dumps({"op": "matmul", "impl": "pytorch", "shape": f"{m}x{k}@{k}x{n}", "dtype": "f32",
                          "threads": args.threads, "blas": blas_name(), "gflops": round(2.0 * m * k * n * iters / sec / 1e9, 2)}),
              flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default="data/mnist")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--world", type=int, default=1, help="ranks for gloo DDP / ZeRO (1 thread each)")
    p.add_argument("--matmul", action="store_true", help="only the torch.mm GFLOP/s lines")
    p.add_argument("--dtype", choices=("f32", "bf16"), default="f32", help="bf16: torch.autocast on CPU")
    args = p.parse_args()
    if args.matmul:
        matmul(args)
    elif args.world > 1:
        if BATCH % args.world:
            p.error(f"--world {args.world} does not divide the global batch {BATCH}")
        mp.spawn(worker, args=(args.world, free_port(), args), nprocs=args.world, join=True)
    else:
        single(args)


if __name__ == "__main__":
    main()
