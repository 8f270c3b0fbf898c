#!/usr/bin/env python3
"""Peer for bench_comm: PyTorch gloo collectives' bus bandwidth (fp32), as nccl-tests defines it.

Run with Debian's python (the one with torch):  /usr/bin/python3 bench/comm_peer_torch.py [ranks]
Prints one JSON line per op and size, like `mpirun -np 2 bench_comm`.
"""
import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

SIZES_MIB = (1, 16, 128)


def iters_for(mib):
    return max(5, min(100, 100 // mib))  # as bench_comm


def time_op(op, iters):
    """Seconds per call, the slowest rank's view."""
    for _ in range(2):  # warm-up
        op()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        op()
    s = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64)
    dist.all_reduce(s, op=dist.ReduceOp.MAX)
    return s.item()


def worker(rank, n, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=n)
    for mib in SIZES_MIB:
        elems = (mib << 20) // 4 // n * n
        nbytes = elems * 4
        full = torch.ones(elems)
        shard = torch.ones(elems // n)
        slots = list(full.chunk(n))  # all_gather writes each rank's shard into its slot of `full`
        cases = [
            ("all_reduce", 2.0 * (n - 1) / n, lambda: dist.all_reduce(full)),
            ("all_gather", (n - 1) / n, lambda: dist.all_gather(slots, shard)),
        ]
        for name, factor, op in cases:
            s = time_op(op, iters_for(mib))
            algbw = nbytes / s / 1e9
            if rank == 0:
                print(json.dumps({"op": name, "backend": "gloo", "ranks": n, "bytes": nbytes,
                                  "iters": iters_for(mib), "time_us": round(s * 1e6, 1),
                                  "algbw_GBps": round(algbw, 3), "busbw_GBps": round(algbw * factor, 3)}),
                      flush=True)
        if rank == 0:
            print(json.dumps({"op": "reduce_scatter", "backend": "gloo", "ranks": n, "bytes": nbytes,
                              "busbw_GBps": None, "note": "gloo has no reduce_scatter"}), flush=True)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    ranks = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    mp.spawn(worker, args=(ranks, free_port()), nprocs=ranks, join=True)
