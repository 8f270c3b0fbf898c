#!/usr/bin/env python3
"""PyTorch peer for bench_gpt: the same GPT-2-style model (the class of tests/oracle/gen_gpt_oracle.py,
imported, at the shape the flags give; --family llama: Hugging Face's LlamaForCausalLM written in plain
torch, the class of tests/oracle/gen_llama_oracle.py, with --kv-heads, --ffn and --tie), AdamW (lr 1e-4, weight decay 0.01), the same deterministic
random tokens (Note [bench tokens] in bench/train/bench_gpt.cpp), the same JSON fields.

Run with Debian's python (the one with torch):
  /usr/bin/python3 bench/torch_gpt.py [shape flags] [--threads T]              one process
  /usr/bin/python3 bench/torch_gpt.py [shape flags] --world 2 [--variants ddp,zero]
      gloo, spawned processes: DDP + AdamW ("stage" 0) and DDP + ZeroRedundancyOptimizer(AdamW)
      ("stage" 1, optimizer states sharded)
--batch is the micro-batch per rank; --dtype bf16 runs under torch.autocast("cpu", bfloat16) with
fp32 weights. Timing as bench_gpt: step_s = median per-step time (rank 0), tokens_per_s = global
tokens x steps / total seconds (slowest rank); peak_rss_mib = process peak RSS, max over ranks (torch
1.13 has no CPU allocator statistics, so peak_mib is null).
"""
import argparse
import json
import os
import resource
import socket
import statistics
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "oracle"))
sys.path.insert(0, HERE)
import gen_gpt_oracle as oracle  # noqa: E402  (the model class; its shape lives in module globals)
import gen_llama_oracle as llama_oracle  # noqa: E402  (the same for the Llama family)
from torch_train import blas_name  # noqa: E402

TIMING = ("step_s=median per step (rank 0); tokens_per_s=global tokens*steps/total (slowest rank); "
          "peak_rss_mib=process peak RSS (max over ranks)")
M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def splitmix64(x):
    """Vectorised splitmix64 over a uint64 array (wrapping arithmetic, as in bench_gpt.cpp)."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def batch_of(args, step, rank, world):
    """Rank rank's rows of global step `step`: x [batch, ctx], y [batch*ctx] (Note [bench tokens])."""
    T = args.ctx
    row0 = step * args.batch * world + rank * args.batch
    idx = np.uint64(args.seed) + (np.uint64(row0) + np.arange(args.batch, dtype=np.uint64)[:, None]) * np.uint64(T + 1) \
        + np.arange(T + 1, dtype=np.uint64)[None, :]
    tok = (splitmix64(idx) % np.uint64(args.vocab)).astype(np.int64)
    return torch.from_numpy(tok[:, :T].copy()), torch.from_numpy(tok[:, 1:].reshape(-1).copy())


def make_llama(args):
    """The Llama oracle's class at this shape, initialised as make_llama: every matrix N(0, 0.02),
    RMSNorm gains 1."""
    o = llama_oracle
    o.VOCAB, o.BLOCK, o.N_LAYER, o.N_HEAD, o.N_EMBD, o.INTERMEDIATE = (args.vocab, args.ctx, args.layers, args.heads,
                                                                      args.embd, args.ffn)
    o.RMS_EPS = 1e-5
    torch.manual_seed(args.seed)
    model = o.Llama({"n_kv_head": args.kv_heads, "qkv_bias": False, "tie": args.tie})
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.02)
    return model


def make_gpt(args):
    """The oracle's Gpt at this shape (it reads its sizes from module globals) with GPT-2's init, as
    make_gpt: matrices N(0, 0.02), biases 0, LayerNorm gains 1 (the scales only change the loss)."""
    oracle.VOCAB, oracle.BLOCK, oracle.N_LAYER, oracle.N_HEAD, oracle.N_EMBD = (args.vocab, args.ctx, args.layers,
                                                                               args.heads, args.embd)
    torch.manual_seed(args.seed)
    model = oracle.Gpt()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.02)
            elif ".ln_" not in name and not name.startswith("ln_f"):
                p.zero_()
    return model


def use_sdpa():
    """The oracles' attention through F.scaled_dot_product_attention (PyTorch >= 2.0: FlashAttention-2
    or the memory-efficient kernel on a GPU), as a practitioner's model runs it; the same product."""
    def gpt_attention(self, qkv):
        bn, tn, c3 = qkv.shape
        c, h = c3 // 3, oracle.N_HEAD
        q, k, v = (t.reshape(bn, tn, h, c // h).transpose(1, 2) for t in qkv.split(c, dim=-1))
        return F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(bn, tn, c)

    def llama_forward(self, x):
        o = llama_oracle
        bn, tn, _ = x.shape
        d = o.N_EMBD // o.N_HEAD
        q = self.q_proj(x).view(bn, tn, o.N_HEAD, d).transpose(1, 2)
        k = self.k_proj(x).view(bn, tn, self.kv, d).transpose(1, 2)
        v = self.v_proj(x).view(bn, tn, self.kv, d).transpose(1, 2)
        cos, sin = (t.to(x.device) for t in o.rope_cos_sin(tn, d, q.dtype))
        q = q * cos + o.rotate_half(q, self.bug) * sin
        k = k * cos + o.rotate_half(k, self.bug) * sin
        rep = o.N_HEAD // self.kv
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(out.transpose(1, 2).reshape(bn, tn, o.N_EMBD))

    oracle.Block.attention = gpt_attention
    llama_oracle.Attention.forward = llama_forward


def train(model, opt, args, dtype, rank=0, world=1):
    dev = torch.device(args.device)
    batches = [tuple(t.to(dev) for t in batch_of(args, s, rank, world)) for s in range(args.warmup + args.steps)]
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    times, loss, t0 = [], None, None
    for s, (x, y) in enumerate(batches):
        if s == args.warmup:
            if world > 1:
                dist.barrier()
            sync()
            t0 = time.perf_counter()
        ts = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dtype == "bf16"):
            logits = model(x)
        loss = F.cross_entropy(logits.float().reshape(-1, args.vocab), y)
        loss.backward()
        opt.step()
        sync()
        if s >= args.warmup:
            times.append(time.perf_counter() - ts)
    stats = torch.tensor([time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0],
                         dtype=torch.float64)
    final = torch.tensor([loss.item()], dtype=torch.float64)
    if world > 1:
        dist.all_reduce(stats, op=dist.ReduceOp.MAX)
        dist.all_reduce(final)
    total, rss = stats.tolist()
    tokens = args.batch * world * args.ctx * args.steps
    return {"tokens_per_s": round(tokens / total, 1), "step_s": round(statistics.median(times), 4),
            "step_s_mean": round(statistics.fmean(times), 4), "final_loss": round(final.item() / world, 4),
            "peak_mib": None, "peak_rss_mib": round(rss, 1)}


def emit(args, model, stage, world, threads, dtype, res, **extra):
    line = {"bench": "gpt_train", "impl": "pytorch", "model": args.name, "family": args.family, "layers": args.layers,
            "embd": args.embd,
            "heads": args.heads, "vocab": args.vocab, "ctx": args.ctx,
            "params": sum(p.numel() for p in model.parameters()), "world": world, "threads": threads,
            "stage": stage, "dtype": dtype, "checkpointing": False, "batch": args.batch,
            "global_batch": args.batch * world, "steps": args.steps, "warmup": args.warmup}
    line.update(res)
    line.update(extra)
    line.update({"torch": torch.__version__, "blas": blas_name(), "timing": TIMING})
    print(json.dumps(line), flush=True)


def single(args):
    torch.set_num_threads(args.threads)
    for dtype in args.dtype:
        model = args.make(args).to(args.device)
        fused = {"fused": True} if args.device == "cuda" else {}  # the GPU's one-kernel AdamW, as trainers set it
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, **fused)
        run = torch.compile(model) if args.compile else model
        res = train(run, opt, args, dtype)
        if args.device == "cuda":
            res["peak_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
            torch.cuda.reset_peak_memory_stats()
        emit(args, model, 0, 1, args.threads, dtype, res, variant="single", device=args.device,
             attention=args.attention, compiled=bool(args.compile))


def worker(rank, world, port, args):
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel as DDP

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    for dtype in args.dtype:
        for variant in args.variants:
            model = DDP(args.make(args))
            if variant == "ddp":
                opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
            else:
                opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, lr=1e-4,
                                              weight_decay=0.01)
            res = train(model, opt, args, dtype, rank, world)
            if rank == 0:
                emit(args, model.module, 0 if variant == "ddp" else 1, world, args.threads, dtype, res, backend="gloo",
                     variant="ddp" if variant == "ddp" else "ddp+zero_redundancy_optimizer")
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--name", default="gpt")
    p.add_argument("--family", default="gpt", choices=["gpt", "llama"])
    p.add_argument("--kv-heads", type=int, default=0, help="llama: key/value heads (0: --heads)")
    p.add_argument("--ffn", type=int, default=0, help="llama: the SwiGLU width (0: 8/3 --embd rounded up to 64)")
    p.add_argument("--tie", type=int, default=1, help="llama: the head tied to the embedding (1) or not (0)")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--embd", type=int, default=192)
    p.add_argument("--heads", type=int, default=6)
    p.add_argument("--vocab", type=int, default=16384)
    p.add_argument("--ctx", type=int, default=256)
    p.add_argument("--batch", type=int, default=8, help="micro-batch per rank")
    p.add_argument("--dtype", default="f32", help="comma-separated: f32, bf16 (torch.autocast on CPU)")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--world", type=int, default=1, help="ranks (gloo, spawned processes)")
    p.add_argument("--variants", default="ddp,zero", help="world > 1: ddp, zero (DDP + ZeroRedundancyOptimizer)")
    p.add_argument("--threads", type=int, default=0, help="threads per rank (0: cores / world)")
    p.add_argument("--device", default="cpu", help="cpu, or cuda (one process; bf16 is autocast on the GPU)")
    p.add_argument("--attention", default="eager", choices=["eager", "sdpa"],
                   help="the oracle's softmax(q k^T) v, or F.scaled_dot_product_attention (PyTorch >= 2.0)")
    p.add_argument("--compile", type=int, default=0, help="one process: the model through torch.compile (1)")
    args = p.parse_args()
    args.dtype = args.dtype.split(",")
    args.variants = args.variants.split(",")
    if any(d not in ("f32", "bf16") for d in args.dtype) or any(v not in ("ddp", "zero") for v in args.variants):
        p.error("--dtype takes f32,bf16 and --variants ddp,zero")
    if args.embd % args.heads:
        p.error(f"--embd {args.embd} is not a multiple of --heads {args.heads}")
    args.threads = args.threads or max(1, (os.cpu_count() or 1) // args.world)
    args.kv_heads = args.kv_heads or args.heads
    args.ffn = args.ffn or (8 * args.embd // 3 + 63) // 64 * 64
    args.tie = bool(args.tie)
    args.make = make_llama if args.family == "llama" else make_gpt
    if args.attention == "sdpa":
        if not hasattr(F, "scaled_dot_product_attention"):
            p.error(f"--attention sdpa needs PyTorch >= 2.0, this is {torch.__version__}")
        use_sdpa()
    if args.compile and (args.world > 1 or not hasattr(torch, "compile")):
        p.error("--compile runs one process on PyTorch >= 2.0")
    if args.world > 1:
        mp.spawn(worker, args=(args.world, free_port(), args), nprocs=args.world, join=True)
    else:
        single(args)


if __name__ == "__main__":
    main()
