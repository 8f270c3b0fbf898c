#!/usr/bin/env python3
"""An independent safetensors reader (python3 + numpy only) for the files `zerotrain export`
writes: 8-byte little-endian header length, JSON header, raw little-endian data. Checks the
structure (offsets in range, contiguous, not overlapping, sizes match shapes) and compares names,
shapes and values with expected.json, which the C++ test wrote beside the files.

usage: read_safetensors.py FIXTURE_DIR"""
import json
import os
import struct
import sys

import numpy as np

ITEMSIZE = {"F32": 4, "BF16": 2, "F16": 2}


def fail(msg):
    print("read_safetensors.py: " + msg, file=sys.stderr)
    sys.exit(1)


def decode(raw, dtype):
    if dtype == "F32":
        return np.frombuffer(raw, dtype="<f4")
    if dtype == "F16":
        return np.frombuffer(raw, dtype="<f2").astype(np.float32)
    if dtype == "BF16":  # the top half of a float32
        return (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
    fail("unknown dtype " + dtype)


def read(path):
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        fail(f"{path}: {len(blob)} bytes, too short")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > len(blob) - 8:
        fail(f"{path}: header length {n} exceeds the file")
    header = json.loads(blob[8 : 8 + n].decode("utf-8"))
    data = blob[8 + n :]
    if (8 + n) % 8:
        fail(f"{path}: data starts at byte {8 + n}, not 8-byte aligned")
    meta = header.pop("__metadata__", {})
    spans, out = [], {}
    for name, e in header.items():
        begin, end = e["data_offsets"]
        count = int(np.prod(e["shape"], dtype=np.int64))
        if not 0 <= begin <= end <= len(data):
            fail(f"{path}: {name} offsets {begin}..{end} outside {len(data)} data bytes")
        if end - begin != count * ITEMSIZE[e["dtype"]]:
            fail(f"{path}: {name} has {end - begin} bytes for shape {e['shape']} {e['dtype']}")
        spans.append((begin, end, name))
        out[name] = (e["dtype"], list(e["shape"]), decode(data[begin:end], e["dtype"]).reshape(e["shape"]))
    spans.sort()
    at = 0
    for begin, end, name in spans:  # back to back: no gap, no overlap
        if begin != at:
            fail(f"{path}: {name} starts at {begin}, expected {at}")
        at = end
    if at != len(data):
        fail(f"{path}: {len(data) - at} bytes after the last tensor")
    return meta, out, [name for _, _, name in spans]


def main():
    if len(sys.argv) != 2:
        fail(__doc__)
    folder = sys.argv[1]
    with open(os.path.join(folder, "expected.json")) as f:
        expected = json.load(f)
    names = [t["name"] for t in expected["tensors"]]
    for spec in expected["files"]:
        path = os.path.join(folder, spec["file"])
        meta, tensors, order = read(path)
        if meta.get("format") != "pt":
            fail(f"{path}: __metadata__.format is {meta.get('format')!r}, Hugging Face loaders want 'pt'")
        if order != names:
            fail(f"{path}: tensors in data order {order}, expected model order {names}")
        for t in expected["tensors"]:
            dtype, shape, values = tensors[t["name"]]
            want = np.array(t["values"], dtype=np.float32).reshape(t["shape"])
            if dtype != spec["dtype"] or shape != t["shape"]:
                fail(f"{path}: {t['name']} is {dtype} {shape}, expected {spec['dtype']} {t['shape']}")
            if not np.array_equal(values, want):
                bad = int(np.argmax(values.ravel() != want.ravel()))
                fail(f"{path}: {t['name']}[{bad}] = {values.ravel()[bad]}, expected {want.ravel()[bad]}")
        print(f"{spec['file']}: {len(names)} tensors, names, shapes and values as expected")


if __name__ == "__main__":
    main()
