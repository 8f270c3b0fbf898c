#!/usr/bin/python3
"""Writes tests/golden/llama.json from PyTorch (Debian's python3-torch 1.13): the Llama family's
ops as Hugging Face's modeling_llama writes them, forward and backward, in f32, bf16 and f16.

Run: /usr/bin/python3 tests/golden/gen_golden_llama.py   (fixed seed: reproducible)
Cases have gen_golden.py's format. Each op is computed in float64 from the stored values and
rounded once to the dtype (our contract: 16-bit values in, f32 compute, one rounding out):
  rms_norm  LlamaRMSNorm: x * rsqrt(mean(x^2) + eps) * weight            params {eps}
  rope      apply_rotary_pos_emb with rotate_half on the q and k heads of a packed qkv
            [B, T, (H + 2K) D] (v passes), positions 0..T-1, inv_freq = 1 / theta^(2i/D)
                                                                         params {n_head, n_kv_head, theta}
  swiglu    silu(gate) * up of gate_up [..., 2I] (gate first: Phi-3's gate_up_proj)
  add_rms_norm  s + rms_norm(s) with s = x + r: a pre-norm block's two uses of its residual sum
"""
import json
import os

import torch
import torch.nn.functional as F

from gen_golden import HERE, Builder


def once(fn):
    """fn computed in float64, its result back in the input's dtype (one rounding)."""
    return lambda *xs: fn(*(x.double() for x in xs)).to(xs[0].dtype)


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rope(qkv, n_head, n_kv_head, theta):
    b, t, w = qkv.shape
    d = w // (n_head + 2 * n_kv_head)
    inv_freq = 1.0 / (theta ** (torch.arange(0, d, 2).float() / d))  # as transformers, in f32
    freqs = torch.outer(torch.arange(t).float(), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1).double()
    cos, sin = emb.cos()[None, :, None, :], emb.sin()[None, :, None, :]
    qk = qkv[..., : (n_head + n_kv_head) * d].reshape(b, t, n_head + n_kv_head, d)
    rotated = (qk * cos + rotate_half(qk) * sin).reshape(b, t, -1)
    return torch.cat((rotated, qkv[..., (n_head + n_kv_head) * d:]), dim=-1)


def swiglu(gu):
    gate, up = gu.chunk(2, dim=-1)
    return F.silu(gate) * up


def main():
    torch.manual_seed(2468)
    b = Builder()
    for dt in ("f32", "bf16", "f16"):
        b.case("rms_norm_4x37", "rms_norm", dt, [((4, 37), False), ((37,), False)],
               once(lambda x, w: rms_norm(x, w, 1e-6)), {"eps": 1e-6})
        b.case("rope_gqa_h4_kv2_d8", "rope", dt, [((2, 5, 64), False)], once(lambda x: rope(x, 4, 2, 10000.0)),
               {"n_head": 4, "n_kv_head": 2, "theta": 10000.0})
        b.case("swiglu_3x2x10", "swiglu", dt, [((3, 2, 20), False)], once(swiglu), scale=2.0)
    b.case("rms_norm_3d_eps", "rms_norm", "f32", [((2, 3, 16), False), ((16,), False)],
           once(lambda x, w: rms_norm(x, w, 1e-5)), {"eps": 1e-5}, scale=3.0)
    b.case("rms_norm_narrow", "rms_norm", "f32", [((5, 3), False), ((3,), False)],
           once(lambda x, w: rms_norm(x, w, 1e-3)), {"eps": 1e-3})
    b.case("rms_norm_t", "rms_norm", "f32", [((6, 9), True), ((6,), False)],  # a strided input
           once(lambda x, w: rms_norm(x, w, 1e-6)), {"eps": 1e-6})
    # Long positions (angles past 2 pi many times), multi-query, Llama 3's theta.
    b.case("rope_mqa_t40_theta500k", "rope", "f32", [((1, 40, 48), False)],
           once(lambda x: rope(x, 4, 1, 500000.0)), {"n_head": 4, "n_kv_head": 1, "theta": 500000.0})
    b.case("rope_mha_h2_d6", "rope", "f32", [((2, 3, 36), False)], once(lambda x: rope(x, 2, 2, 100.0)),
           {"n_head": 2, "n_kv_head": 2, "theta": 100.0})
    b.case("swiglu_wide", "swiglu", "f32", [((2, 70), False)], once(swiglu), scale=4.0)
    b.case("add_rms_norm_2x3x20", "add_rms_norm", "f32", [((2, 3, 20), False), ((2, 3, 20), False), ((20,), False)],
           once(lambda x, r, w: (x + r) + rms_norm(x + r, w, 1e-5)), {"eps": 1e-5})  # Note [fused residual norms]
    with open(os.path.join(HERE, "llama.json"), "w") as f:
        json.dump({"generator": "tests/golden/gen_golden_llama.py", "torch": torch.__version__, "cases": b.cases}, f,
                  separators=(",", ":"))


if __name__ == "__main__":
    main()
