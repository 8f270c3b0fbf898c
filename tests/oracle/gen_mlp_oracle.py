#!/usr/bin/python3
"""Writes tests/oracle/mlp_oracle.safetensors, the PyTorch oracle for tests/oracle/mlp_oracle_test.cpp.

Run: /usr/bin/python3 tests/oracle/gen_mlp_oracle.py   (Debian's python3-torch 1.13, CPU)
The output is byte-for-byte reproducible: fixed seed, one thread, and every result computed in
float64 (Note [float64 oracle]) and only then rounded to float32, so BLAS kernels cannot differ.

The model is zerotrain's nn::make_mlp(13, {19, 7}, 5, "relu"): Sequential(Linear(13, 19), ReLU,
Linear(19, 7), ReLU, Linear(7, 5)), parameters "0.weight", "0.bias", "2.weight", ... (446 in all,
divisible by neither 3 nor 4). Initial weights are torch's default init in float32.

Tensors (float32 unless noted):
  <name>             initial parameter, e.g. "0.weight" [19, 13]
  x [STEPS*B, 13]    inputs; step k uses rows [k*B, (k+1)*B), successive slices of one stream
  y [STEPS*B] i32    class targets in [0, 5)
  logits [B, 5]      forward of the initial model on the first batch (rows [0, B))
  loss [1]           mean cross-entropy of those logits
  grad.<name>        gradient of that loss
  step_loss [STEPS]  loss of step k's batch before update k (step_loss[0] == loss)
  step_grad_norm [STEPS]  global L2 norm before clipping (clip_grad_norm_'s return value)
  final.<name>       parameters after STEPS AdamW updates
Each step: zero_grad, forward, cross_entropy, backward, clip_grad_norm_(MAX_NORM), AdamW.step
(single-tensor AdamW: foreach=False). The hyper-parameters are in the header's __metadata__ too.

Note [float64 oracle]: a float32 torch run is just another reduction order; the float64 run is
the value both implementations approximate, so the tolerance measures one side's fp32 error.
The script prints how far torch's own float32 run lands from it: the fp32 noise floor.
"""
import json
import os
import struct

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "mlp_oracle.safetensors")

SEED = 20240607
SIZES = [13, 19, 7, 5]  # input, hidden..., classes
B = 12                  # divisible by 1, 2, 3 and 4 ranks
STEPS = 10
LR, WEIGHT_DECAY, BETAS, EPS = 1e-2, 0.01, (0.9, 0.999), 1e-8
MAX_NORM = 1.0
X_SCALE = 3.5  # pre-clip norms of steps 1, 2, 5 exceed MAX_NORM, the others do not: both sides of the clip run


def make_model():
    layers = []
    for i in range(len(SIZES) - 1):
        layers.append(torch.nn.Linear(SIZES[i], SIZES[i + 1]))
        if i + 2 < len(SIZES):
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def first_pass(model, x, y):
    """Logits, loss and gradients of the first batch."""
    model.zero_grad()
    logits = model(x[:B])
    loss = F.cross_entropy(logits, y[:B].long())
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    return logits.detach(), loss.detach(), grads


def train(model, x, y):
    """STEPS AdamW steps with clipping; per-step losses, pre-clip norms and final weights."""
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY,
                            foreach=False)
    losses, norms = [], []
    for k in range(STEPS):
        opt.zero_grad()
        loss = F.cross_entropy(model(x[k * B:(k + 1) * B]), y[k * B:(k + 1) * B].long())
        loss.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)))
        losses.append(float(loss))
        opt.step()
    final = {n: p.detach().clone() for n, p in model.named_parameters()}
    return losses, norms, final


def run(init, x, y, dtype):
    model = make_model().to(dtype)
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(init[n])
    logits, loss, grads = first_pass(model, x.to(dtype), y)
    losses, norms, final = train(model, x.to(dtype), y)
    return {"logits": logits, "loss": loss.reshape(1), "grads": grads, "step_loss": torch.tensor(losses, dtype=torch.float64),
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
    torch.manual_seed(SEED)
    init = {n: p.detach().clone() for n, p in make_model().named_parameters()}
    x = torch.randn(STEPS * B, SIZES[0]) * X_SCALE
    y = torch.randint(0, SIZES[-1], (STEPS * B,), dtype=torch.int32)

    ref = run(init, x, y, torch.float64)
    f32 = run(init, x, y, torch.float32)

    tensors = [(n, t) for n, t in init.items()]
    tensors += [("x", x), ("y", y), ("logits", ref["logits"]), ("loss", ref["loss"])]
    tensors += [("grad." + n, g) for n, g in ref["grads"].items()]
    tensors += [("step_loss", ref["step_loss"]), ("step_grad_norm", ref["step_grad_norm"])]
    tensors += [("final." + n, p) for n, p in ref["final"].items()]
    tensors = [(n, t.float() if t.is_floating_point() else t) for n, t in tensors]
    metadata = {"generator": "tests/oracle/gen_mlp_oracle.py", "torch": torch.__version__.split("+")[0],
                "seed": str(SEED), "sizes": ",".join(map(str, SIZES)), "batch": str(B), "steps": str(STEPS),
                "optimizer": "AdamW", "lr": repr(LR), "weight_decay": repr(WEIGHT_DECAY), "beta1": repr(BETAS[0]),
                "beta2": repr(BETAS[1]), "eps": repr(EPS), "max_norm": repr(MAX_NORM), "compute": "float64"}
    write_safetensors(OUT, tensors, metadata)

    print("wrote %s (%d bytes)" % (os.path.relpath(OUT), os.path.getsize(OUT)))
    print("step losses:", ["%.5f" % v for v in ref["step_loss"].tolist()])
    print("pre-clip norms:", ["%.4f" % v for v in ref["step_grad_norm"].tolist()])
    print("torch float32 vs float64 oracle (max error relative to each tensor's max magnitude):")
    print("  logits %.2e  loss %.2e" % (max_rel(f32["logits"], ref["logits"]), max_rel(f32["loss"], ref["loss"])))
    print("  grads %.2e" % max(max_rel(f32["grads"][n], g) for n, g in ref["grads"].items()))
    print("  step_loss %.2e  step_grad_norm %.2e" % (max_rel(f32["step_loss"], ref["step_loss"]),
                                                     max_rel(f32["step_grad_norm"], ref["step_grad_norm"])))
    print("  final params %.2e" % max(max_rel(f32["final"][n], p) for n, p in ref["final"].items()))


if __name__ == "__main__":
    main()
