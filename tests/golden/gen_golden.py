#!/usr/bin/python3
"""Writes the golden fixtures for tests/ops from PyTorch (Debian's python3-torch 1.13).

Run: /usr/bin/python3 tests/golden/gen_golden.py   (fixed seeds: the output is reproducible)
Each case: op, dtype, inputs (stored shape, "t" = use the transposed view of the last two
dims, data), params, out, upstream gradient and the gradient of every float input.
bf16 cases compute in torch's bfloat16 (cross_entropy: f32 log-probs of bf16 logits).
f16 cases state our contract for f16 (torch 1.13 has few f16 CPU kernels): inputs and the
upstream gradient are f16 values, the op runs in f32, outputs and gradients round once to f16.
"""
import json
import os

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
DT = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def flat(t):
    return [float("%.8g" % v) for v in t.detach().float().reshape(-1).tolist()]


def rand(shape, dtype, scale=1.0):
    x = torch.randn(shape) * scale
    if dtype == "f32":
        return torch.round(x * 1e4) / 1e4  # short decimals parse to the same float in C++
    return x.to(DT[dtype])


class Builder:
    def __init__(self):
        self.cases = []

    def case(self, name, op, dtype, specs, fn, params=None, targets=None, grad=True, scale=1.0):
        """specs: list of (shape, transposed). fn(inputs) -> output tensor."""
        ins, records = [], []
        f16 = dtype == "f16"  # computed in f32 from f16 values, rounded once (see above)
        for shape, t in specs:
            stored = rand(shape, dtype, scale)
            x = stored.transpose(-1, -2) if t else stored
            x = (x.float() if f16 else x).detach().requires_grad_(grad)
            ins.append(x)
            records.append({"shape": list(shape), "t": t, "data": flat(stored)})
        out = fn(*ins)
        out_rec = out.half() if f16 and op != "cross_entropy" else out
        c = {"name": name, "op": op, "dtype": dtype, "inputs": records, "params": params or {},
             "out": {"shape": list(out.shape), "data": flat(out_rec)}}
        if targets is not None:
            c["targets"] = targets
        if grad:
            lowp = out.dtype == torch.bfloat16 or (f16 and op != "cross_entropy")
            up = rand(tuple(out.shape), dtype if lowp else "f32")
            out.backward(up.to(out.dtype))
            c["upstream"] = {"shape": list(out.shape), "data": flat(up)}
            c["grads"] = [{"shape": list(x.shape), "data": flat(x.grad.half() if f16 else x.grad)} for x in ins]
        self.cases.append(c)

    def write(self, fname):
        with open(os.path.join(HERE, fname), "w") as f:
            json.dump({"generator": "tests/golden/gen_golden.py", "torch": torch.__version__,
                       "cases": self.cases}, f, separators=(",", ":"))
        self.cases = []


def main():
    torch.manual_seed(1234)
    b = Builder()

    mm = lambda x, y: x @ y
    for dt in ("f32", "bf16", "f16"):
        b.case("mm_3x5x4", "matmul", dt, [((3, 5), False), ((5, 4), False)], mm)
        b.case("mm_odd_17x33x9", "matmul", dt, [((17, 33), False), ((33, 9), False)], mm)
        b.case("mm_batched", "matmul", dt, [((2, 3, 4), False), ((2, 4, 5), False)], mm)
    b.case("mm_one_row", "matmul", "f32", [((1, 7), False), ((7, 3), False)], mm)
    b.case("mm_at", "matmul", "f32", [((5, 3), True), ((5, 4), False)], mm)
    b.case("mm_bt", "matmul", "f32", [((3, 5), False), ((4, 5), True)], mm)
    b.case("mm_both_t", "matmul", "f32", [((6, 3), True), ((4, 6), True)], mm)
    b.case("mm_batched_bt", "matmul", "f32", [((2, 3, 4), False), ((2, 5, 4), True)], mm)
    b.write("matmul.json")

    lin = lambda x, w, bias=None: F.linear(x, w, bias)
    for dt in ("f32", "bf16", "f16"):
        b.case("linear_bias", "linear", dt, [((4, 6), False), ((3, 6), False), ((3,), False)], lin)
    b.case("linear_3d", "linear", "f32", [((2, 3, 6), False), ((5, 6), False), ((5,), False)], lin)
    b.case("linear_nobias", "linear", "f32", [((5, 6), False), ((3, 6), False)], lin)
    b.case("linear_one_row", "linear", "f32", [((1, 6), False), ((4, 6), False), ((4,), False)], lin)
    b.case("linear_xt", "linear", "f32", [((6, 4), True), ((3, 6), False), ((3,), False)], lin)
    b.case("linear_odd", "linear", "f32", [((9, 37), False), ((11, 37), False), ((11,), False)], lin)
    b.write("linear.json")

    add, sub, mul = (lambda x, y: x + y), (lambda x, y: x - y), (lambda x, y: x * y)
    b.case("add_same", "add", "f32", [((4, 5), False), ((4, 5), False)], add)
    b.case("add_row_bcast", "add", "f32", [((4, 5), False), ((5,), False)], add)
    b.case("add_outer_bcast", "add", "f32", [((4, 1), False), ((1, 5), False)], add)
    b.case("add_3d_bcast", "add", "f32", [((2, 3, 4), False), ((3, 1), False)], add)
    b.case("add_scalar_tensor", "add", "f32", [((), False), ((3, 4), False)], add)
    b.case("add_t", "add", "f32", [((5, 4), True), ((4, 5), False)], add)
    b.case("sub_col_bcast", "sub", "f32", [((4, 5), False), ((4, 1), False)], sub)
    b.case("sub_t", "sub", "f32", [((3, 4), True), ((3,), False)], sub)
    b.case("mul_37", "mul", "f32", [((37,), False), ((37,), False)], mul)
    b.case("mul_3d_row", "mul", "f32", [((2, 3, 4), False), ((4,), False)], mul)
    b.case("mul_both_bcast", "mul", "f32", [((3, 1, 5), False), ((4, 1), False)], mul)
    b.case("add_bf16_bcast", "add", "bf16", [((4, 9), False), ((9,), False)], add)
    b.case("mul_bf16", "mul", "bf16", [((37,), False), ((37,), False)], mul)
    b.case("sub_bf16", "sub", "bf16", [((3, 5), False), ((3, 1), False)], sub)
    b.case("add_f16_bcast", "add", "f16", [((4, 9), False), ((9,), False)], add)
    b.case("mul_f16_bcast", "mul", "f16", [((3, 1, 5), False), ((4, 1), False)], mul)
    b.case("sub_f16", "sub", "f16", [((3, 5), False), ((3, 1), False)], sub)
    b.case("scale_f16", "scale", "f16", [((37,), False)], lambda x: x * 0.5, {"s": 0.5})
    b.case("scale", "scale", "f32", [((4, 9), False)], lambda x: x * -2.5, {"s": -2.5})
    b.case("scale_bf16", "scale", "bf16", [((37,), False)], lambda x: x * 0.5, {"s": 0.5})
    b.case("add_scalar", "add_scalar", "f32", [((37,), False)], lambda x: x + 1.5, {"s": 1.5}, grad=False)
    for dt in ("f32", "bf16", "f16"):
        b.case("relu_37", "relu", dt, [((37,), False)], F.relu)
        b.case("gelu_37", "gelu", dt, [((37,), False)], lambda x: F.gelu(x, approximate="tanh"), scale=3.0)
    b.case("relu_t", "relu", "f32", [((9, 4), True)], F.relu)
    b.case("gelu_t", "gelu", "f32", [((9, 4), True)], lambda x: F.gelu(x, approximate="tanh"), scale=2.0)
    b.write("elementwise.json")

    for dt in ("f32", "bf16", "f16"):
        b.case("sum_all_37", "sum", dt, [((37,), False)], lambda x: x.sum())
        b.case("mean_dim1_3d", "mean_dim", dt, [((2, 3, 5), False)], lambda x: x.mean(1), {"dim": 1, "keepdim": False})
    b.case("sum_all_t", "sum", "f32", [((9, 4), True)], lambda x: x.sum())
    b.case("sum_dim0", "sum_dim", "f32", [((4, 9), False)], lambda x: x.sum(0), {"dim": 0, "keepdim": False})
    b.case("sum_dim1_keep", "sum_dim", "f32", [((4, 9), False)], lambda x: x.sum(1, keepdim=True),
           {"dim": 1, "keepdim": True})
    b.case("sum_dim_last_3d", "sum_dim", "f32", [((2, 3, 5), False)], lambda x: x.sum(-1), {"dim": -1, "keepdim": False})
    b.case("sum_dim1_3d_t", "sum_dim", "f32", [((2, 5, 3), True)], lambda x: x.sum(1), {"dim": 1, "keepdim": False})
    b.case("mean_all", "mean", "f32", [((4, 9), False)], lambda x: x.mean())
    b.case("mean_dim0_keep", "mean_dim", "f32", [((4, 9), False)], lambda x: x.mean(0, keepdim=True),
           {"dim": 0, "keepdim": True})
    b.write("reduce.json")

    for name, fn in (("softmax", lambda x: F.softmax(x, -1)), ("log_softmax", lambda x: F.log_softmax(x, -1))):
        for dt in ("f32", "bf16", "f16"):
            b.case(name + "_4x10", name, dt, [((4, 10), False)], fn)
            # bf16 with huge logits only measures rounding noise of near-one-hot rows.
            b.case(name + "_large", name, dt, [((3, 8), False)], fn, scale=30.0 if dt == "f32" else 4.0)
        b.case(name + "_1x37", name, "f32", [((1, 37), False)], fn)
        b.case(name + "_3d", name, "f32", [((2, 3, 5), False)], fn)
        b.case(name + "_t", name, "f32", [((5, 4), True)], fn)
    b.write("softmax.json")

    def ce(targets, ignore=-100):
        tt = torch.tensor(targets, dtype=torch.long)
        return lambda x: F.cross_entropy(x.float(), tt, ignore_index=ignore)

    for dt in ("f32", "bf16", "f16"):
        t = [3, -100, 0, 6, 2]
        b.case("ce_5x7_ignore", "cross_entropy", dt, [((5, 7), False)], ce(t), {"ignore_index": -100}, targets=t)
    t = [4]
    b.case("ce_one_row", "cross_entropy", "f32", [((1, 10), False)], ce(t), {"ignore_index": -100}, targets=t)
    t = [int(v) for v in torch.randint(0, 37, (6,))] + [2, 2]
    b.case("ce_custom_ignore", "cross_entropy", "f32", [((8, 37), False)], ce(t, 2), {"ignore_index": 2}, targets=t,
           scale=4.0)
    t = [1, 0, 6, 3]
    b.case("ce_t", "cross_entropy", "f32", [((7, 4), True)], ce(t), {"ignore_index": -100}, targets=t)
    t = [1, 5, 0, 2, 6]
    b.case("argmax", "argmax", "f32", [((5, 7), False)], lambda x: x.argmax(-1).float(), targets=t, grad=False)
    b.write("loss.json")

    # Linear + GELU (tanh) with the fused backward; its own seed, so the files above stay as they were.
    # Rows below and above one bias-sum block (64 rows, with a remainder), columns not a multiple of 16.
    torch.manual_seed(4321)
    lg = lambda x, w, bias=None: F.gelu(F.linear(x, w, bias), approximate="tanh")
    for dt in ("f32", "bf16", "f16"):
        b.case("linear_gelu_bias", "linear_gelu", dt, [((5, 6), False), ((7, 6), False), ((7,), False)], lg)
    b.case("linear_gelu_3d", "linear_gelu", "f32", [((2, 3, 6), False), ((5, 6), False), ((5,), False)], lg)
    b.case("linear_gelu_nobias", "linear_gelu", "f32", [((4, 6), False), ((3, 6), False)], lg)
    for dt in ("f32", "bf16"):
        b.case("linear_gelu_66_rows", "linear_gelu", dt, [((66, 4), False), ((11, 4), False), ((11,), False)], lg)
    # GELU's erf form (BERT's "gelu") and tanh (BERT's pooler), after the cases above so they regenerate as they were.
    le = lambda x, w, bias=None: F.gelu(F.linear(x, w, bias))
    for dt in ("f32", "bf16", "f16"):
        b.case("gelu_erf_37", "gelu_erf", dt, [((37,), False)], F.gelu, scale=3.0)
        b.case("tanh_37", "tanh", dt, [((37,), False)], torch.tanh, scale=2.0)
        b.case("linear_gelu_erf_bias", "linear_gelu_erf", dt, [((5, 6), False), ((7, 6), False), ((7,), False)], le)
    b.case("gelu_erf_tails", "gelu_erf", "f32", [((64,), False)], F.gelu, scale=6.0)
    b.case("linear_gelu_erf_66_rows", "linear_gelu_erf", "f32", [((66, 4), False), ((11, 4), False), ((11,), False)],
           le)
    b.write("linear_gelu.json")


if __name__ == "__main__":
    main()
