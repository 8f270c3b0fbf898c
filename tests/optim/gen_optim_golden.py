#!/usr/bin/python3
"""Writes tests/golden/optim.json: PyTorch 1.13 Adam/AdamW/SGD trajectories (foreach=False).

Run with Debian's python (it has torch): /usr/bin/python3 tests/optim/gen_optim_golden.py
Hyper-parameters are rounded to float32 first, because zt::OptimizerSpec stores floats.
"""
import json
import os

import numpy as np
import torch

N, STEPS = 7, 5


def f32(x):
    return float(np.float32(x))


def run(name, make, lrs, seed):
    g = torch.Generator().manual_seed(seed)
    p0 = torch.randn(N, generator=g, dtype=torch.float32)
    grads = [torch.randn(N, generator=g, dtype=torch.float32) for _ in lrs]
    p = torch.nn.Parameter(p0.clone())
    opt = make([p])
    params = []
    for lr, gr in zip(lrs, grads):
        for group in opt.param_groups:
            group["lr"] = lr
        p.grad = gr.clone()
        opt.step()
        params.append(p.detach().clone().tolist())
    state = {k: v.tolist() for k, v in opt.state[p].items() if torch.is_tensor(v) and v.numel() == N}
    return {"name": name, "init": p0.tolist(), "grads": [x.tolist() for x in grads], "lrs": lrs,
            "params": params, "final_state": state}


def main():
    lrs = [f32(x) for x in (1e-2, 2e-2, 5e-3, 1e-2, 3e-2)]
    b1, b2, eps = f32(0.9), f32(0.999), f32(1e-8)
    wd, mom = f32(0.1), f32(0.9)
    cases = []

    def adam(spec, cls, **kw):
        cases.append(dict(spec=spec, **run(spec["label"], lambda ps: cls(
            ps, lr=lrs[0], betas=(b1, b2), eps=eps, foreach=False, **kw), lrs, len(cases) + 1)))

    def sgd(spec, **kw):
        cases.append(dict(spec=spec, **run(spec["label"], lambda ps: torch.optim.SGD(
            ps, lr=lrs[0], foreach=False, **kw), lrs, len(cases) + 1)))

    adam({"label": "adam", "type": "Adam", "weight_decay": 0.0}, torch.optim.Adam, weight_decay=0.0)
    adam({"label": "adam_l2", "type": "Adam", "weight_decay": wd}, torch.optim.Adam, weight_decay=wd)
    adam({"label": "adamw", "type": "AdamW", "weight_decay": wd}, torch.optim.AdamW, weight_decay=wd)
    adam({"label": "adamw_nowd", "type": "AdamW", "weight_decay": 0.0}, torch.optim.AdamW, weight_decay=0.0)
    sgd({"label": "sgd", "type": "SGD", "momentum": 0.0, "weight_decay": 0.0, "nesterov": False})
    sgd({"label": "sgd_wd", "type": "SGD", "momentum": 0.0, "weight_decay": wd, "nesterov": False},
        weight_decay=wd)
    sgd({"label": "sgd_momentum", "type": "SGD", "momentum": mom, "weight_decay": 0.0, "nesterov": False},
        momentum=mom)
    sgd({"label": "sgd_momentum_wd", "type": "SGD", "momentum": mom, "weight_decay": wd, "nesterov": False},
        momentum=mom, weight_decay=wd)
    sgd({"label": "sgd_nesterov_wd", "type": "SGD", "momentum": mom, "weight_decay": wd, "nesterov": True},
        momentum=mom, weight_decay=wd, nesterov=True)

    out = {"torch_version": torch.__version__, "beta1": b1, "beta2": b2, "eps": eps, "cases": cases}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden", "optim.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print("wrote", os.path.normpath(path), len(cases), "cases")


if __name__ == "__main__":
    main()
