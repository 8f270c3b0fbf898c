#!/usr/bin/python3
"""Writes tests/oracle/gpt_oracle.safetensors, the PyTorch oracle for tests/oracle/gpt_oracle_test.cpp.

Run: /usr/bin/python3 tests/oracle/gen_gpt_oracle.py   (Debian's python3-torch 1.13, CPU)
Byte-for-byte reproducible: fixed seed, one thread, float64 compute (Note [float64 oracle] in
gen_mlp_oracle.py), rounded to float32 only when written.

The model is zerotrain's nn::make_gpt (src/nn/gpt.cpp) written out in plain torch, no transformers
package: GPT-2 with Hugging Face's parameter names but torch.nn.Linear's [out, in] layout (not
Conv1D's transpose), pre-LN blocks, LayerNorm eps 1e-5, GELU's tanh approximation, causal
attention softmax(q k^T / sqrt(D)) v with q, k, v = c_attn's columns [0, C), [C, 2C), [2C, 3C) and
head h at columns [h*D, (h+1)*D) of each, no dropout, and the output projection tied to wte (one
tensor, no lm_head.weight). Sizes: vocab 50, block 16 (positions 12..15 never used), 2 layers,
2 heads, n_embd 24 (head size 12): 16,080 parameters; batch 4 x 12 tokens.

Note [oracle init]: GPT-2's 0.02 init leaves every attention score near 0 (softmax almost
uniform) and every GELU input near 0 (almost linear), so a wrong score scale or GELU variant
would move the logits by less than the tolerance. Larger per-tensor scales (INIT_STD), random
LayerNorm gains and biases, and random Linear biases put each op in its curved regime; the
script prints how far each such bug would move the logits (the "sensitivity" lines).

Tensors (float32 unless noted):
  <name>                initial parameter, e.g. "h.0.attn.c_attn.weight" [72, 24]
  x [STEPS*B, T] i32    input tokens; step k uses rows [k*B, (k+1)*B)
  y [STEPS*B, T] i32    next-token targets (x shifted by one in the same token stream)
  logits [B, T, V]      forward of the initial model on the first batch
  loss [1]              mean cross-entropy over the B*T positions
  grad.<name>           gradient of that loss (wte's includes the tied output projection's)
  step_loss [STEPS]     loss of step k's batch before update k (step_loss[0] == loss)
  step_grad_norm [STEPS]  global L2 norm of step k's gradient (no clipping)
  final.<name>          parameters after STEPS AdamW updates (foreach=False)
"""
import json
import math
import os
import struct

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "gpt_oracle.safetensors")

SEED = 20240611
VOCAB, BLOCK, N_LAYER, N_HEAD, N_EMBD = 50, 16, 2, 2, 24
LN_EPS = 1e-5
B, T = 4, 12  # B divides over 1, 2 and 4 ranks
STEPS = 10
LR, WEIGHT_DECAY, BETAS, EPS = 1e-3, 0.01, (0.9, 0.999), 1e-8
# Note [oracle init]: standard deviation by parameter-name suffix.
INIT_STD = {"wte.weight": 0.3, "wpe.weight": 0.3, "attn.c_attn.weight": 0.3, "attn.c_proj.weight": 0.15,
            "mlp.c_fc.weight": 0.25, "mlp.c_proj.weight": 0.1}
BIAS_STD, LN_GAIN_STD, LN_BIAS_STD = 0.05, 0.2, 0.1


class Block(torch.nn.Module):
    """Pre-LN: x + attn(ln_1(x)), then + mlp(ln_2(x))."""

    def __init__(self, v):
        super().__init__()
        self.v = v  # variant flags for the sensitivity runs; {} is zerotrain's model
        self.ln_1 = torch.nn.LayerNorm(N_EMBD, eps=LN_EPS)
        self.attn = torch.nn.Module()
        self.attn.c_attn = torch.nn.Linear(N_EMBD, 3 * N_EMBD)
        self.attn.c_proj = torch.nn.Linear(N_EMBD, N_EMBD)
        self.ln_2 = torch.nn.LayerNorm(N_EMBD, eps=LN_EPS)
        self.mlp = torch.nn.Module()
        self.mlp.c_fc = torch.nn.Linear(N_EMBD, 4 * N_EMBD)
        self.mlp.c_proj = torch.nn.Linear(4 * N_EMBD, N_EMBD)

    def attention(self, qkv):
        Bn, Tn, C3 = qkv.shape
        C, H = C3 // 3, N_HEAD
        D = C // H
        q, k, v = qkv[..., :C], qkv[..., C:2 * C], qkv[..., 2 * C:]
        heads = lambda t: t.reshape(Bn, Tn, H, D).transpose(1, 2)  # [B, H, T, D]: head h = columns h*D..(h+1)*D
        if self.v.get("interleaved_heads"):
            heads = lambda t: t.reshape(Bn, Tn, D, H).permute(0, 3, 1, 2)
        q, k, v = heads(q), heads(k), heads(v)
        scale = 1.0 / D if self.v.get("scale_1_over_d") else 1.0 / math.sqrt(D)
        att = (q @ k.transpose(-2, -1)) * scale
        if not self.v.get("no_causal"):
            mask = torch.ones(Tn, Tn, dtype=torch.bool, device=q.device).tril()
            att = att.masked_fill(~mask, float("-inf"))
        out = F.softmax(att, dim=-1) @ v  # [B, H, T, D]
        return out.transpose(1, 2).reshape(Bn, Tn, C)

    def forward(self, x):
        x = x + self.attn.c_proj(self.attention(self.attn.c_attn(self.ln_1(x))))
        gelu = "none" if self.v.get("exact_gelu") else "tanh"
        return x + self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x)), approximate=gelu))


class Gpt(torch.nn.Module):
    def __init__(self, v=None):
        super().__init__()
        v = v or {}
        self.v = v
        self.wte = torch.nn.Embedding(VOCAB, N_EMBD)
        self.wpe = torch.nn.Embedding(BLOCK, N_EMBD)
        self.h = torch.nn.ModuleList([Block(v) for _ in range(N_LAYER)])
        self.ln_f = torch.nn.LayerNorm(N_EMBD, eps=LN_EPS)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        x = self.ln_f(x)
        return x @ self.wte.weight.t()  # lm_head tied to wte


def initial_weights():
    g = torch.Generator().manual_seed(SEED)
    init = {}
    for name, p in Gpt().named_parameters():  # registration order = zerotrain's named_parameters order
        suffix = [s for s in INIT_STD if name.endswith(s)]
        if suffix:
            w = torch.randn(p.shape, generator=g) * INIT_STD[suffix[0]]
        elif ".ln_" in name or name.startswith("ln_f"):
            gain = name.endswith("weight")
            w = (1.0 if gain else 0.0) + torch.randn(p.shape, generator=g) * (LN_GAIN_STD if gain else LN_BIAS_STD)
        else:  # a Linear bias
            assert name.endswith("bias"), name
            w = torch.randn(p.shape, generator=g) * BIAS_STD
        init[name] = w.float()
    return init, g


def make_model(init, dtype, v=None):
    model = Gpt(v).to(dtype)
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(init[n])
    return model


def loss_of(model, x, y):
    logits = model(x.long())
    return logits, F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1).long())


def run(init, x, y, dtype):
    model = make_model(init, dtype)
    logits, loss = loss_of(model, x[:B], y[:B])
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    model.zero_grad()
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY, foreach=False)
    losses, norms = [], []
    for k in range(STEPS):
        opt.zero_grad()
        _, step_loss = loss_of(model, x[k * B:(k + 1) * B], y[k * B:(k + 1) * B])
        step_loss.backward()
        norms.append(math.sqrt(sum(float((p.grad.double() ** 2).sum()) for p in model.parameters())))
        losses.append(float(step_loss))
        opt.step()
    final = {n: p.detach().clone() for n, p in model.named_parameters()}
    return {"logits": logits.detach(), "loss": loss.detach().reshape(1), "grads": grads,
            "step_loss": torch.tensor(losses, dtype=torch.float64),
            "step_grad_norm": torch.tensor(norms, dtype=torch.float64), "final": final}


def write_safetensors(path, tensors, metadata):
    """The format by hand: u64 LE header length, JSON header, raw little-endian data."""
    st_dtype = {torch.float32: "F32", torch.int32: "I32"}
    header, blobs, off = {"__metadata__": metadata}, [], 0
    for name, t in tensors:
        data = t.contiguous().numpy().tobytes()  # x86 and ARM are little-endian
        header[name] = {"dtype": st_dtype[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    h += b" " * ((8 - len(h) % 8) % 8)  # keep the data 8-byte aligned, as the spec suggests
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def max_rel(a, b):
    """Error relative to the tensor's largest magnitude (what reduction order perturbs)."""
    return float((a.double() - b.double()).abs().max() / b.double().abs().max().clamp_min(1e-30))


def main():
    torch.set_num_threads(1)
    init, g = initial_weights()
    # One token stream of STEPS*B rows of T+1 tokens: x the first T, y the last T of each row.
    stream = torch.randint(0, VOCAB, (STEPS * B, T + 1), generator=g, dtype=torch.int32)
    x, y = stream[:, :T].contiguous(), stream[:, 1:].contiguous()

    ref = run(init, x, y, torch.float64)
    f32 = run(init, x, y, torch.float32)

    tensors = [(n, t) for n, t in init.items()]
    tensors += [("x", x), ("y", y), ("logits", ref["logits"]), ("loss", ref["loss"])]
    tensors += [("grad." + n, gr) for n, gr in ref["grads"].items()]
    tensors += [("step_loss", ref["step_loss"]), ("step_grad_norm", ref["step_grad_norm"])]
    tensors += [("final." + n, p) for n, p in ref["final"].items()]
    tensors = [(n, t.float() if t.is_floating_point() else t) for n, t in tensors]
    metadata = {"generator": "tests/oracle/gen_gpt_oracle.py", "torch": torch.__version__.split("+")[0],
                "seed": str(SEED), "vocab_size": str(VOCAB), "block_size": str(BLOCK), "n_layer": str(N_LAYER),
                "n_head": str(N_HEAD), "n_embd": str(N_EMBD), "ln_eps": repr(LN_EPS), "batch": str(B), "seq": str(T),
                "steps": str(STEPS), "optimizer": "AdamW", "lr": repr(LR), "weight_decay": repr(WEIGHT_DECAY),
                "beta1": repr(BETAS[0]), "beta2": repr(BETAS[1]), "eps": repr(EPS), "compute": "float64"}
    write_safetensors(OUT, tensors, metadata)

    print("wrote %s (%d bytes), %d parameters" % (os.path.relpath(OUT), os.path.getsize(OUT),
                                                  sum(t.numel() for t in init.values())))
    print("step losses:", ["%.5f" % v for v in ref["step_loss"].tolist()])
    print("grad norms:", ["%.4f" % v for v in ref["step_grad_norm"].tolist()])
    print("torch float32 vs float64 oracle (max error relative to each tensor's max magnitude):")
    print("  logits %.2e  loss %.2e" % (max_rel(f32["logits"], ref["logits"]), max_rel(f32["loss"], ref["loss"])))
    print("  grads %.2e" % max(max_rel(f32["grads"][n], gr) for n, gr in ref["grads"].items()))
    print("  step_loss %.2e  step_grad_norm %.2e" % (max_rel(f32["step_loss"], ref["step_loss"]),
                                                     max_rel(f32["step_grad_norm"], ref["step_grad_norm"])))
    print("  final params %.2e" % max(max_rel(f32["final"][n], p) for n, p in ref["final"].items()))
    # Note [oracle init]: what a plausible bug does to the logits (must be far above the tolerance).
    print("sensitivity (logits' max error relative to their max magnitude, if zerotrain had this bug):")
    for bug in ["no_causal", "scale_1_over_d", "exact_gelu", "interleaved_heads"]:
        with torch.no_grad():
            wrong = make_model(init, torch.float64, {bug: True})(x[:B].long())
        print("  %-18s %.2e" % (bug, max_rel(wrong, ref["logits"])))


if __name__ == "__main__":
    main()
