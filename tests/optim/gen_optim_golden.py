#!/usr/bin/python3
"""Writes tests/golden/optim.json: PyTorch 1.13 Adam/AdamW/SGD trajectories (foreach=False).

Run with Debian's python (it has torch): /usr/bin/python3 tests/optim/gen_optim_golden.py
Hyper-parameters are rounded to float32 first, because optim::update takes their float roundings
(Note [float hyper-parameters] in src/optim/hyper.h).
Mixed-precision cases follow the usual recipe: an fp32 master updated by torch.optim, whose
grad is the low-precision gradient cast to fp32 and multiplied by grad_scale (grad.mul_), and
params = master.to(param_dtype) after each step.
"""
import json
import os

import numpy as np
import torch

N, STEPS = 7, 5
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def f32(x):
    return float(np.float32(x))


def dumps(x):
    """JSON with every float in float32's shortest round-trip form (the C++ side reads floats)."""
    if isinstance(x, float):
        return repr(np.float32(x)) if x == x else "NaN"
    if isinstance(x, dict):
        return "{" + ", ".join(json.dumps(k) + ": " + dumps(v) for k, v in x.items()) + "}"
    if isinstance(x, (list, tuple)):
        return "[" + ",".join(dumps(v) for v in x) + "]"
    return json.dumps(x)


def run(make, lrs, seed, param_dtype="f32", master=False, grad_dtype="f32", grad_scale=1.0):
    g = torch.Generator().manual_seed(seed)
    # A master starts from the low-precision params, as an engine initialises it.
    p0 = torch.randn(N, generator=g, dtype=torch.float32).to(DTYPES[param_dtype]).float()
    # Scaled cases get loss-scaled gradients (x1024), as fp16 training produces.
    gmul = 1024.0 if grad_scale != 1.0 else 1.0
    grads = [(torch.randn(N, generator=g, dtype=torch.float32) * gmul).to(DTYPES[grad_dtype]).float() for _ in lrs]
    p = torch.nn.Parameter(p0.clone())
    opt = make([p])
    params, low = [], []
    for lr, gr in zip(lrs, grads):
        for group in opt.param_groups:
            group["lr"] = lr
        p.grad = gr.clone()
        if grad_scale != 1.0:
            p.grad.mul_(grad_scale)
        opt.step()
        params.append(p.detach().clone().tolist())
        low.append(p.detach().to(DTYPES[param_dtype]).float().tolist())
    state = {k: v.tolist() for k, v in opt.state[p].items() if torch.is_tensor(v) and v.numel() == N}
    out = {"init": p0.tolist(), "grads": [x.tolist() for x in grads], "lrs": lrs, "params": params,
           "final_state": state, "param_dtype": param_dtype, "master": master, "grad_dtype": grad_dtype,
           "grad_scale": grad_scale}
    if master:
        out["low_params"] = low
    return out


def main():
    lrs = [f32(x) for x in (1e-2, 2e-2, 5e-3, 1e-2, 3e-2)]
    b1, b2, eps = f32(0.9), f32(0.999), f32(1e-8)
    wd, mom = f32(0.1), f32(0.9)
    scale = f32(0.37 / 1024)  # a clip coefficient times 1/loss_scale: the multiply rounds
    cases = []

    def adam(label, type_, w, **prec):
        cls = torch.optim.AdamW if type_ == "AdamW" else torch.optim.Adam
        make = lambda ps: cls(ps, lr=lrs[0], betas=(b1, b2), eps=eps, foreach=False, weight_decay=w)
        cases.append(dict(name=label, spec={"type": type_, "weight_decay": w}, **run(make, lrs, len(cases) + 1, **prec)))

    def sgd(label, m, w, nesterov, **prec):
        make = lambda ps: torch.optim.SGD(ps, lr=lrs[0], foreach=False, momentum=m, weight_decay=w, nesterov=nesterov)
        spec = {"type": "SGD", "momentum": m, "weight_decay": w, "nesterov": nesterov}
        cases.append(dict(name=label, spec=spec, **run(make, lrs, len(cases) + 1, **prec)))

    adam("adam", "Adam", 0.0)
    adam("adam_l2", "Adam", wd)
    adam("adamw", "AdamW", wd)
    adam("adamw_nowd", "AdamW", 0.0)
    sgd("sgd", 0.0, 0.0, False)
    sgd("sgd_wd", 0.0, wd, False)
    sgd("sgd_momentum", mom, 0.0, False)
    sgd("sgd_momentum_wd", mom, wd, False)
    sgd("sgd_nesterov_wd", mom, wd, True)
    # Mixed precision: every param dtype with a master, every grad dtype, grad_scale != 1.
    bf = dict(param_dtype="bf16", master=True)
    hf = dict(param_dtype="f16", master=True)
    adam("adamw_bf16_master", "AdamW", wd, grad_dtype="bf16", **bf)
    adam("adamw_bf16_master_scaled", "AdamW", wd, grad_dtype="bf16", grad_scale=scale, **bf)
    adam("adam_l2_f16_master_scaled", "Adam", wd, grad_dtype="f16", grad_scale=scale, **hf)
    adam("adam_f16_master_f32_grad", "Adam", 0.0, **hf)
    adam("adam_f32_master", "Adam", wd, master=True)
    adam("adamw_f32_bf16_grad_scaled", "AdamW", wd, grad_dtype="bf16", grad_scale=scale)
    adam("adam_f32_scaled", "Adam", 0.0, grad_scale=scale)
    sgd("sgd_nesterov_wd_bf16_master_f16_grad_scaled", mom, wd, True, grad_dtype="f16", grad_scale=scale, **bf)
    sgd("sgd_momentum_f16_master_scaled", mom, 0.0, False, grad_dtype="f16", grad_scale=scale, **hf)
    sgd("sgd_wd_bf16_master", 0.0, wd, False, grad_dtype="bf16", **bf)
    sgd("sgd_momentum_wd_f32_f16_grad_scaled", mom, wd, False, grad_dtype="f16", grad_scale=scale)

    out = {"torch_version": torch.__version__, "beta1": b1, "beta2": b2, "eps": eps}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden", "optim.json")
    with open(path, "w") as f:  # one case per line keeps the fixture small and diffable
        f.write(dumps(out)[:-1] + ', "cases": [\n')
        f.write(",\n".join(dumps(c) for c in cases))
        f.write("\n]}\n")
    print("wrote", os.path.normpath(path), len(cases), "cases")


if __name__ == "__main__":
    main()
