#!/usr/bin/python3
"""Writes tests/golden/attention.json: scaled dot-product attention, forward out and dqkv.

Run: /usr/bin/python3 tests/golden/gen_golden_attention.py   (fixed seed: reproducible)
torch 1.13 has no F.scaled_dot_product_attention, so the reference is written out here in
float64: softmax(q k^T / sqrt(D) + mask) v per head, with a query that sees no key giving 0
(and no gradient). Each case: qkv [B, T, 3C] (or [B, T, C + 2 n_kv_head D] where n_kv_head is given:
grouped-query attention), n_head, causal, key_mask ([B, T] 0/1 or null),
dout, out and dqkv. bf16 and f16 cases state our contract: inputs and dout are 16-bit values,
the op runs in f32 (here f64), out and dqkv round once to the dtype.
"""
import json
import math
import os

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
DT = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def flat(t):
    return [float("%.8g" % v) for v in t.detach().float().reshape(-1).tolist()]


def rand(shape, dtype):
    x = torch.randn(shape)
    if dtype == "f32":
        return torch.round(x * 1e4) / 1e4  # short decimals parse to the same float in C++
    return x.to(DT[dtype])


def attention(qkv, n_head, causal, key_mask, n_kv_head=None):
    """Grouped-query attention where n_kv_head < n_head: qkv is H query heads, then K key heads, then
    K value heads; each kv head is repeated for its H / K query heads (Hugging Face's repeat_kv)."""
    kv = n_kv_head or n_head
    b, t, w = qkv.shape
    d = w // (n_head + 2 * kv)
    c = n_head * d
    q, k, v = qkv.split([c, kv * d, kv * d], dim=2)
    q = q.reshape(b, t, n_head, d).transpose(1, 2)
    k, v = (x.reshape(b, t, kv, d).transpose(1, 2).repeat_interleave(n_head // kv, dim=1) for x in (k, v))
    s = q @ k.transpose(-1, -2) / math.sqrt(d)
    vis = torch.ones(b, 1, t, t, dtype=torch.bool)
    if causal:
        vis = vis & torch.ones(t, t, dtype=torch.bool).tril()
    if key_mask is not None:
        vis = vis & (key_mask != 0)[:, None, None, :]
    s = s.masked_fill(~vis, -math.inf)
    m = s.max(dim=-1, keepdim=True).values.detach()
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(s - m) * vis
    l = e.sum(dim=-1, keepdim=True)
    p = e / torch.where(l > 0, l, torch.ones_like(l))  # a query with no visible key: p = 0
    return (p @ v).transpose(1, 2).reshape(b, t, c)


def case(name, dtype, b, t, c, n_head, causal, key_mask=None, n_kv_head=None):
    kv = n_kv_head or n_head
    qkv = rand((b, t, c + 2 * kv * (c // n_head)), dtype)
    dout = rand((b, t, c), dtype)
    mask = None if key_mask is None else torch.tensor(key_mask, dtype=torch.int32)
    x = qkv.double().requires_grad_(True)
    out = attention(x, n_head, causal, mask, n_kv_head)
    out.backward(dout.double())
    rnd = (lambda y: y.float()) if dtype == "f32" else (lambda y: y.to(DT[dtype]))
    rec = {"name": name, "dtype": dtype, "B": b, "T": t, "C": c, "n_head": n_head, "causal": causal,
           "key_mask": None if mask is None else mask.reshape(-1).tolist(),
           "qkv": flat(qkv), "dout": flat(dout), "out": flat(rnd(out)), "dqkv": flat(rnd(x.grad))}
    if n_kv_head is not None:
        rec["n_kv_head"] = n_kv_head
    return rec


def main():
    torch.manual_seed(1234)
    cases = []
    for dt in ("f32", "bf16", "f16"):
        if dt != "f16":
            cases.append(case("full_h1_t5", dt, 2, 5, 8, 1, False))
            cases.append(case("causal_h2_t7", dt, 2, 7, 8, 2, True))
        # Trailing padding, a padded key in the middle, a sequence that is all padding.
        pad = [[1, 1, 1, 1, 0, 0], [1, 0, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0]]
        cases.append(case("mask_h3_t6", dt, 3, 6, 12, 3, False, pad))
        # Causal with key 0 padded: query 0 sees no key.
        cases.append(case("causal_mask_first_padded", dt, 2, 6, 8, 2, True, [[0, 1, 1, 1, 1, 0], [1] * 6]))
    # Past one block of 64 keys and not a multiple of it.
    for dt in ("f32", "bf16"):
        cases.append(case("causal_h2_t70", dt, 1, 70, 4, 2, True))
    cases.append(case("mask_h2_t100", "f32", 2, 100, 4, 2, False, [[1] * 80 + [0] * 20, [1] * 65 + [0] * 35]))
    cases.append(case("causal_mask_h1_t100", "f32", 1, 100, 4, 1, True, [[1] * 3 + [0] * 4 + [1] * 93]))
    # Grouped-query (4 query heads on 2 kv heads) and multi-query (1 kv head), past a block of keys.
    for dt in ("f32", "bf16", "f16"):
        cases.append(case("gqa_h4_kv2_causal_t9", dt, 2, 9, 16, 4, True, n_kv_head=2))
        cases.append(case("mqa_h3_kv1_mask_t6", dt, 3, 6, 12, 3, False, pad, n_kv_head=1))
    cases.append(case("gqa_h6_kv2_causal_t70", "f32", 1, 70, 24, 6, True, n_kv_head=2))
    with open(os.path.join(HERE, "attention.json"), "w") as f:
        json.dump({"generator": "tests/golden/gen_golden_attention.py", "torch": torch.__version__, "cases": cases}, f,
                  separators=(",", ":"))


if __name__ == "__main__":
    main()
