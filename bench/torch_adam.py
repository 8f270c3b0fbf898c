#!/usr/bin/env python3
"""PyTorch's peer of zt_bench_offload: torch.optim.AdamW.step on one f32 tensor per size, in
memory (PyTorch 1.13 has no disk offload), in elements/s; JSON lines as zt_bench_offload's
"adam_memory" rows, op "adam_torch".

Run with Debian's python (the one with torch):
  /usr/bin/python3 bench/torch_adam.py [--sizes 16M,64M,128M] [--threads T] [--steps S]
"""
import argparse
import json
import os
import statistics
import time

import torch


def parse_sizes(s):
    """ "16M" = 16 * 2**20 elements, as zt_bench_offload reads it."""
    out = []
    for item in filter(None, s.split(",")):
        shift = 10 * (1 + "KMG".index(item[-1])) if item[-1] in "KMG" else 0
        out.append(int(item.rstrip("KMG")) << shift)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="16M,64M,128M")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--steps", type=int, default=3)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    for n in parse_sizes(args.sizes):
        param = torch.nn.Parameter(torch.full((n,), 0.5))
        param.grad = torch.full((n,), 0.01)
        opt = torch.optim.AdamW([param], lr=1e-3, weight_decay=0.01)  # foreach=None: the single-tensor path in 1.13
        opt.step()  # warm-up: creates and pages in the states
        times = []
        for _ in range(max(1, args.steps)):
            t0 = time.perf_counter()
            opt.step()
            times.append(time.perf_counter() - t0)
        step_s = statistics.median(times)
        print(json.dumps({"bench": "offload", "op": "adam_torch", "type": "AdamW", "dtype": "f32", "n": n,
                          "threads": args.threads, "step_s": step_s, "elems_per_s": n / step_s, "impl": "pytorch",
                          "torch": torch.__version__}), flush=True)
        del opt, param


if __name__ == "__main__":
    main()
