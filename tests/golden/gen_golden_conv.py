#!/usr/bin/python3
"""Writes tests/golden/conv.json: conv2d and max_pool2d from PyTorch (Debian's python3-torch 1.13).

Run: /usr/bin/python3 tests/golden/gen_golden_conv.py   (fixed seed: the output is reproducible)
Cases as gen_golden.py writes them (its Builder); params: stride, padding (conv2d), kernel, stride
(max_pool2d). bf16 cases run in torch's bfloat16; f16 cases state our contract (computed in f32 from
f16 values, rounded once).
"""
import json
import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gen_golden import Builder  # noqa: E402


class ConvBuilder(Builder):
    def write(self, fname):
        with open(os.path.join(HERE, fname), "w") as f:
            json.dump({"generator": "tests/golden/gen_golden_conv.py", "torch": torch.__version__,
                       "cases": self.cases}, f, separators=(",", ":"))
        self.cases = []


def conv(stride, padding):
    return lambda x, w, b=None: F.conv2d(x, w, b, stride=stride, padding=padding)


def pool(k, s):
    return lambda x: F.max_pool2d(x, k, s)


def main():
    torch.manual_seed(4321)
    b = ConvBuilder()
    c = lambda name, dt, x, w, bias, s, p: b.case(  # noqa: E731
        name, "conv2d", dt, [(x, False), (w, False)] + ([((w[0],), False)] if bias else []), conv(s, p),
        {"stride": s, "padding": p})
    for dt in ("f32", "bf16"):
        c("conv_3x3_pad1", dt, (2, 3, 7, 7), (4, 3, 3, 3), True, 1, 1)
        c("conv_one_channel_in", dt, (2, 1, 8, 8), (6, 1, 3, 3), True, 1, 1)
        c("conv_stride2_odd", dt, (2, 3, 9, 8), (5, 3, 3, 3), True, 2, 0)
    c("conv_3x3_pad1", "f16", (2, 3, 7, 7), (4, 3, 3, 3), True, 1, 1)
    c("conv_1x1_nobias", "f32", (1, 4, 5, 5), (2, 4, 1, 1), False, 1, 0)
    c("conv_rect_kernel_pad2", "f32", (3, 2, 5, 7), (3, 2, 2, 3), True, 2, 2)
    c("conv_kernel_fills_input", "f32", (1, 2, 3, 3), (3, 2, 3, 3), True, 1, 0)
    c("conv_stride3_pad1", "f32", (2, 2, 10, 11), (3, 2, 3, 3), False, 3, 1)
    c("conv_batch1_16_channels", "f32", (1, 16, 5, 5), (16, 16, 3, 3), True, 1, 1)

    p = lambda name, dt, x, k, s: b.case(name, "max_pool2d", dt, [(x, False)], pool(k, s),  # noqa: E731
                                         {"kernel": k, "stride": s})
    for dt in ("f32", "bf16"):
        p("pool_2x2", dt, (2, 3, 8, 8), 2, 2)
        p("pool_3x3_stride2_overlap", dt, (2, 2, 7, 7), 3, 2)
    p("pool_2x2", "f16", (2, 3, 8, 8), 2, 2)
    p("pool_odd_floor", "f32", (1, 2, 7, 5), 2, 2)
    p("pool_3x3_stride1", "f32", (1, 1, 5, 6), 3, 1)
    p("pool_window_is_plane", "f32", (2, 3, 4, 4), 4, 4)
    p("pool_1x1", "f32", (1, 2, 3, 3), 1, 1)
    b.write("conv.json")


if __name__ == "__main__":
    main()
