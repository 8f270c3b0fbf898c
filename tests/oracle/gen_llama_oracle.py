#!/usr/bin/python3
"""Writes tests/oracle/llama_oracle.safetensors and llama_qkv_bias_oracle.safetensors, the PyTorch
oracles for tests/oracle/llama_oracle_test.cpp.

Run: /usr/bin/python3 tests/oracle/gen_llama_oracle.py   (Debian's python3-torch 1.13, CPU)
Byte-for-byte reproducible: fixed seed, one thread, float64 compute (Note [float64 oracle] in
gen_mlp_oracle.py), rounded to float32 only when written.

The model is Hugging Face's LlamaForCausalLM (transformers' modeling_llama.py) written out in plain
torch, no transformers package, with its parameter names: model.embed_tokens, model.layers.N.
{input_layernorm, self_attn.{q,k,v,o}_proj, post_attention_layernorm, mlp.{gate,up,down}_proj},
model.norm, lm_head. LlamaRMSNorm, rotary embeddings by rotate_half (inv_freq computed in float32 as
transformers does), grouped-query attention through repeat_kv, causal softmax(q k^T / sqrt(D)) v,
SiLU-gated MLP, no dropout. Two variants:
  llama_oracle             Llama: 4 heads on 2 key/value heads, no biases, untied lm_head
  llama_qkv_bias_oracle    Qwen2: 4 heads on 1 key/value head (multi-query), q/k/v biases, tied head
Sizes: vocab 50, block 16 (positions 12..15 never used), 2 layers, n_embd 32 (head size 8),
intermediate 48; batch 12 x 12 tokens.

Note [oracle init] (gen_gpt_oracle.py) holds here too: larger per-tensor scales and random RMSNorm
gains put every op in its curved regime; the "sensitivity" lines say how far each plausible bug
(interleaved rotary pairs, no rotary, the wrong kv head per query head, GELU for SiLU) would move the
logits.

Tensors (float32 unless noted): <name> the initial parameters (Hugging Face's names), x and y
[STEPS*B, T] i32, logits [B, T, V], loss [1], grad.<name>, step_loss [STEPS], step_grad_norm
[STEPS], final.<name> after STEPS AdamW updates (foreach=False); metadata the sizes and settings.
"""
import math
import os

import torch
import torch.nn.functional as F

from gen_gpt_oracle import max_rel, write_safetensors

HERE = os.path.dirname(os.path.abspath(__file__))

SEED = 20261202
VOCAB, BLOCK, N_LAYER, N_HEAD, N_EMBD, INTERMEDIATE = 50, 16, 2, 4, 32, 48
ROPE_THETA, RMS_EPS = 10000.0, 1e-6
B, T = 12, 12  # B divides over 1, 2, 3 and 4 ranks
STEPS = 10
LR, WEIGHT_DECAY, BETAS, EPS = 1e-3, 0.01, (0.9, 0.999), 1e-8
VARIANTS = {
    "llama_oracle": {"n_kv_head": 2, "qkv_bias": False, "tie": False},
    "llama_qkv_bias_oracle": {"n_kv_head": 1, "qkv_bias": True, "tie": True},
}
INIT_STD = {"embed_tokens.weight": 0.5, "q_proj.weight": 0.3, "k_proj.weight": 0.3, "v_proj.weight": 0.3,
            "o_proj.weight": 0.15, "gate_proj.weight": 0.3, "up_proj.weight": 0.3, "down_proj.weight": 0.1,
            "lm_head.weight": 0.2}
BIAS_STD, NORM_GAIN_STD = 0.3, 0.2


class RMSNorm(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(n))

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + RMS_EPS))


def rotate_half(x, bug):
    if bug.get("interleaved_rope"):  # GPT-J's pairs (2i, 2i+1) instead of (i, i + D/2)
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack((-x2, x1), dim=-1).flatten(-2)
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rope_cos_sin(t, d, dtype):
    inv_freq = 1.0 / (ROPE_THETA ** (torch.arange(0, d, 2).float() / d))  # float32, as transformers
    freqs = torch.outer(torch.arange(t).float(), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


class Attention(torch.nn.Module):
    def __init__(self, v, bug):
        super().__init__()
        self.kv, self.bug, d = v["n_kv_head"], bug, N_EMBD // N_HEAD
        self.q_proj = torch.nn.Linear(N_EMBD, N_HEAD * d, bias=v["qkv_bias"])
        self.k_proj = torch.nn.Linear(N_EMBD, self.kv * d, bias=v["qkv_bias"])
        self.v_proj = torch.nn.Linear(N_EMBD, self.kv * d, bias=v["qkv_bias"])
        self.o_proj = torch.nn.Linear(N_HEAD * d, N_EMBD, bias=False)

    def forward(self, x):
        bn, tn, _ = x.shape
        d = N_EMBD // N_HEAD
        q = self.q_proj(x).view(bn, tn, N_HEAD, d).transpose(1, 2)
        k = self.k_proj(x).view(bn, tn, self.kv, d).transpose(1, 2)
        v = self.v_proj(x).view(bn, tn, self.kv, d).transpose(1, 2)
        if not self.bug.get("no_rope"):
            cos, sin = rope_cos_sin(tn, d, x.dtype)
            q = q * cos + rotate_half(q, self.bug) * sin
            k = k * cos + rotate_half(k, self.bug) * sin
        rep = N_HEAD // self.kv
        if self.bug.get("tiled_kv"):  # head h reads kv head h % K instead of h // (H / K)
            k, v = k.repeat(1, rep, 1, 1), v.repeat(1, rep, 1, 1)
        else:  # repeat_kv
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d)
        mask = torch.ones(tn, tn, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf"))
        out = F.softmax(att, dim=-1) @ v
        return self.o_proj(out.transpose(1, 2).reshape(bn, tn, N_EMBD))


class Mlp(torch.nn.Module):
    def __init__(self, bug):
        super().__init__()
        self.bug = bug
        self.gate_proj = torch.nn.Linear(N_EMBD, INTERMEDIATE, bias=False)
        self.up_proj = torch.nn.Linear(N_EMBD, INTERMEDIATE, bias=False)
        self.down_proj = torch.nn.Linear(INTERMEDIATE, N_EMBD, bias=False)

    def forward(self, x):
        act = F.gelu if self.bug.get("gelu") else F.silu
        return self.down_proj(act(self.gate_proj(x)) * self.up_proj(x))


class Layer(torch.nn.Module):
    def __init__(self, v, bug):
        super().__init__()
        self.input_layernorm = RMSNorm(N_EMBD)
        self.self_attn = Attention(v, bug)
        self.post_attention_layernorm = RMSNorm(N_EMBD)
        self.mlp = Mlp(bug)

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(torch.nn.Module):
    def __init__(self, v, bug=None):
        super().__init__()
        bug = bug or {}
        self.tie = v["tie"]
        self.model = torch.nn.Module()
        self.model.embed_tokens = torch.nn.Embedding(VOCAB, N_EMBD)
        self.model.layers = torch.nn.ModuleList([Layer(v, bug) for _ in range(N_LAYER)])
        self.model.norm = RMSNorm(N_EMBD)
        if not self.tie:
            self.lm_head = torch.nn.Linear(N_EMBD, VOCAB, bias=False)

    def forward(self, idx):
        x = self.model.embed_tokens(idx)
        for layer in self.model.layers:
            x = layer(x)
        x = self.model.norm(x)
        return x @ (self.model.embed_tokens.weight if self.tie else self.lm_head.weight).t()


def initial_weights(v, g):
    init = {}
    for name, p in Llama(v).named_parameters():  # registration order
        suffix = [s for s in INIT_STD if name.endswith(s)]
        if suffix:
            w = torch.randn(p.shape, generator=g) * INIT_STD[suffix[0]]
        elif "norm" in name:
            w = 1.0 + torch.randn(p.shape, generator=g) * NORM_GAIN_STD
        else:
            assert name.endswith("bias"), name
            w = torch.randn(p.shape, generator=g) * BIAS_STD
        init[name] = w.float()
    return init


def make_model(v, init, dtype, bug=None):
    model = Llama(v, bug).to(dtype)
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(init[n])
    return model


def loss_of(model, x, y):
    logits = model(x.long())
    return logits, F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1).long())


def run(v, init, x, y, dtype):
    model = make_model(v, init, dtype)
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


def main():
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(SEED)
    stream = torch.randint(0, VOCAB, (STEPS * B, T + 1), generator=g, dtype=torch.int32)
    x, y = stream[:, :T].contiguous(), stream[:, 1:].contiguous()
    for fname, v in VARIANTS.items():
        init = initial_weights(v, g)
        ref = run(v, init, x, y, torch.float64)
        f32 = run(v, init, x, y, torch.float32)
        tensors = [(n, t) for n, t in init.items()]
        tensors += [("x", x), ("y", y), ("logits", ref["logits"]), ("loss", ref["loss"])]
        tensors += [("grad." + n, gr) for n, gr in ref["grads"].items()]
        tensors += [("step_loss", ref["step_loss"]), ("step_grad_norm", ref["step_grad_norm"])]
        tensors += [("final." + n, p) for n, p in ref["final"].items()]
        tensors = [(n, t.float() if t.is_floating_point() else t) for n, t in tensors]
        metadata = {"generator": "tests/oracle/gen_llama_oracle.py", "torch": torch.__version__.split("+")[0],
                    "seed": str(SEED), "vocab_size": str(VOCAB), "block_size": str(BLOCK), "n_layer": str(N_LAYER),
                    "n_head": str(N_HEAD), "n_kv_head": str(v["n_kv_head"]), "n_embd": str(N_EMBD),
                    "intermediate_size": str(INTERMEDIATE), "rope_theta": repr(ROPE_THETA),
                    "rms_norm_eps": repr(RMS_EPS), "qkv_bias": str(int(v["qkv_bias"])),
                    "tie_word_embeddings": str(int(v["tie"])), "batch": str(B), "seq": str(T), "steps": str(STEPS),
                    "optimizer": "AdamW", "lr": repr(LR), "weight_decay": repr(WEIGHT_DECAY),
                    "beta1": repr(BETAS[0]), "beta2": repr(BETAS[1]), "eps": repr(EPS), "compute": "float64"}
        out = os.path.join(HERE, fname + ".safetensors")
        write_safetensors(out, tensors, metadata)
        print("wrote %s (%d bytes), %d parameters" % (os.path.relpath(out), os.path.getsize(out),
                                                      sum(t.numel() for t in init.values())))
        print("  step losses:", ["%.5f" % s for s in ref["step_loss"].tolist()])
        print("  torch float32 vs float64: logits %.2e, grads %.2e, final params %.2e" % (
            max_rel(f32["logits"], ref["logits"]),
            max(max_rel(f32["grads"][n], gr) for n, gr in ref["grads"].items()),
            max(max_rel(f32["final"][n], p) for n, p in ref["final"].items())))
        with torch.no_grad():
            bf16 = make_model(v, init, torch.bfloat16)(x[:B].long())
        print("  torch bfloat16 vs float64: logits %.2e (the bf16 test's logits bound)" % max_rel(bf16, ref["logits"]))
        print("  sensitivity (logits' max error relative to their max magnitude, if zerotrain had this bug):")
        for bug in ["interleaved_rope", "no_rope", "tiled_kv", "gelu"]:
            if bug == "tiled_kv" and v["n_kv_head"] == 1:
                continue  # one kv head: every query head reads it either way
            with torch.no_grad():
                wrong = make_model(v, init, torch.float64, {bug: True})(x[:B].long())
            print("    %-18s %.2e" % (bug, max_rel(wrong, ref["logits"])))


if __name__ == "__main__":
    main()
