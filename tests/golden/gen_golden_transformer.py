#!/usr/bin/python3
"""Writes tests/golden/transformer.json from PyTorch (Debian's python3-torch 1.13): embedding,
layer norm and select, forward and backward, in f32, bf16 and f16.

Run: /usr/bin/python3 tests/golden/gen_golden_transformer.py   (fixed seed: reproducible)
Cases have gen_golden.py's format (its Builder makes them, with its dtype rules); embedding
cases add "ids": {"shape", "data"} (int32 ids, not an input with a gradient). Dropout has no
golden: torch's mask comes from its own generator (tests check its statistics instead).
"""
import json
import os

import torch
import torch.nn.functional as F

from gen_golden import HERE, Builder


def embedding(b, name, dtype, v, c, ids):
    t = torch.tensor(ids, dtype=torch.long)
    b.case(name, "embedding", dtype, [((v, c), False)], lambda w: F.embedding(t, w))
    b.cases[-1]["ids"] = {"shape": list(t.shape), "data": t.reshape(-1).tolist()}


def layer_norm(b, name, dtype, shape, eps=1e-5, t=False, scale=1.0):
    c = shape[-1]
    x_spec = (tuple(shape[:-2]) + (shape[-1], shape[-2]), True) if t else (tuple(shape), False)
    b.case(name, "layer_norm", dtype, [x_spec, ((c,), False), ((c,), False)],
           lambda x, g, bb: F.layer_norm(x, (c,), g, bb, eps), {"eps": eps}, scale=scale)


def add_layer_norm(b, name, dtype, shape, eps=1e-5):
    """A pre-norm block's two uses of the residual sum s = x + r: s + layer_norm(s)."""
    c = shape[-1]

    def f(x, r, g, bb):
        s = x + r
        return s + F.layer_norm(s, (c,), g, bb, eps)
    b.case(name, "add_layer_norm", dtype, [(tuple(shape), False), (tuple(shape), False), ((c,), False), ((c,), False)],
           f, {"eps": eps})


def select(b, name, dtype, shape, dim, index):
    b.case(name, "select", dtype, [(tuple(shape), False)], lambda x: x.select(dim, index),
           {"dim": dim, "index": index})


def main():
    torch.manual_seed(4321)
    b = Builder()
    for dt in ("f32", "bf16", "f16"):
        # Repeated ids: their rows' gradients add up; rows 2 and 5 are never touched.
        embedding(b, "embedding_repeats", dt, 7, 5, [[1, 3, 1, 0], [6, 3, 1, 4]])
        layer_norm(b, "layer_norm_4x37", dt, [4, 37])
        select(b, "select_cls", dt, [2, 3, 4], 1, 0)
    embedding(b, "embedding_1d", "f32", 4, 9, [3, 0, 3])
    embedding(b, "embedding_one_id", "f32", 3, 2, [[2]])
    layer_norm(b, "layer_norm_3d", "f32", [2, 3, 16], eps=1e-5, scale=3.0)
    layer_norm(b, "layer_norm_narrow", "f32", [5, 3], eps=1e-3)  # fewer values than one 8-lane block
    layer_norm(b, "layer_norm_one_row", "f32", [1, 24])
    layer_norm(b, "layer_norm_t", "f32", [6, 9], t=True)  # a strided (transposed) input
    select(b, "select_last_dim", "f32", [3, 4, 5], -1, 2)
    select(b, "select_neg_index", "f32", [3, 4], 0, -1)
    add_layer_norm(b, "add_layer_norm_2x3x20", "f32", [2, 3, 20])  # Note [fused residual norms]
    with open(os.path.join(HERE, "transformer.json"), "w") as f:
        json.dump({"generator": "tests/golden/gen_golden_transformer.py", "torch": torch.__version__,
                   "cases": b.cases}, f, separators=(",", ":"))


if __name__ == "__main__":
    main()
