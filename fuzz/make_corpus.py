#!/usr/bin/env python3
"""Writes the committed seed corpus under fuzz/corpus/<target>/: a few small valid inputs per
target, and one or two near misses. Rerun after changing it; the files are committed."""
import ctypes
import gzip
import json
import os
import struct

here = os.path.dirname(os.path.abspath(__file__))


def put(target, name, data):
    d = os.path.join(here, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


# --- fuzz_config: file text, then NUL-separated overrides -------------------------------
for name in ("mnist_mlp.json", "cnn_fashion.json"):
    with open(os.path.join(here, "..", "configs", name), "rb") as f:
        put("fuzz_config", name, f.read())
put("fuzz_config", "empty_object", "{}")
put("fuzz_config", "deepspeed_fp16_stage3", json.dumps({
    "train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 2, "gradient_clipping": 1.0,
    "fp16": {"enabled": True, "loss_scale": 0, "initial_scale_power": 12, "hysteresis": 2},
    "optimizer": {"type": "Adam", "params": {"lr": 3e-4, "betas": [0.9, 0.95], "adam_w_mode": False}},
    "scheduler": {"type": "OneCycle", "params": {"cycle_min_lr": 1e-5, "cycle_max_lr": 1e-3}},
    "zero_optimization": {"stage": 3, "reduce_bucket_size": 5e8, "offload_param": {"device": "none"},
                          "stage3_param_persistence_threshold": 1e4},
    "communication_data_type": "fp32", "data_types": {"grad_accum_dtype": "fp32"},
    "model": {"hidden": [64, 32], "activation": "gelu"},
    "run": {"epochs": 0.5, "threads": 2, "memory_budget_mb": 512, "comm_backend": "local"}}))
put("fuzz_config", "with_overrides",
    '{"train_batch_size": 32, "optimizer": {"type": "SGD", "params": {"momentum": 0.9}}}'
    "\0zero_optimization.stage=2\0optimizer.params.lr=3e-4\0model.hidden=[128,64]\0run.dir=runs/x"
    "\0bf16.enabled=true")
put("fuzz_config", "bad_key", '{"zero_optimization": {"stagee": 1}, "train_batch_size": "x"}')
# The offload, aio and ZeRO++ sections, the parameter server, and a path with a control character.
put("fuzz_config", "zero_infinity", json.dumps({
    "train_batch_size": 16, "bf16": {"enabled": True},
    "zero_optimization": {"stage": 3, "sub_group_size": 65536,
                          "offload_optimizer": {"device": "nvme", "nvme_path": "/tmp/zt_nvme", "buffer_count": 4,
                                                "pin_memory": True},
                          "offload_param": {"device": "auto", "nvme_path": "/tmp/zt_nvme", "buffer_size": 1e8},
                          "stage3_max_reuse_distance": 1e9},
    "aio": {"block_size": 1048576, "queue_depth": 8, "single_submit": False, "overlap_events": True},
    "run": {"memory_budget_mb": 256}}))
put("fuzz_config", "zero_plusplus", json.dumps({
    "train_batch_size": 32, "zero_optimization": {"stage": 3, "zero_quantized_weights": True,
                                                  "zero_quantized_gradients": True, "zero_hpz_partition_size": 2}}))
put("fuzz_config", "parameter_server",
    '{"train_batch_size": 30, "run": {"strategy": "parameter_server", "parameter_servers": 1}}'
    "\0zero_optimization.zero_hpz_partition_size=1099511627776\0run.comm_timeout_s=1e-3")
put("fuzz_config", "control_in_path", '{"train_batch_size": 8, "run": {"dir": "runs/a\\u0000b"}}')

# --- fuzz_idx: raw IDX ----------------------------------------------------------------------
labels = struct.pack(">II", 0x801, 6) + bytes([3, 1, 4, 1, 5, 9])
images = struct.pack(">IIII", 0x803, 2, 3, 3) + bytes(range(18))
put("fuzz_idx", "labels", labels)
put("fuzz_idx", "images", images)
put("fuzz_idx", "truncated_images", images[:20])
put("fuzz_idx", "huge_count", struct.pack(">IIII", 0x803, 0xFFFFFFFF, 28, 28) + bytes(8))

# --- fuzz_idx_gzip: first byte even = gzip the rest, odd = the rest is the .gz file -------------
put("fuzz_idx_gzip", "labels_plain", b"\0" + labels)
put("fuzz_idx_gzip", "images_plain", b"\0" + images)
put("fuzz_idx_gzip", "labels_gz", b"\1" + gzip.compress(labels, mtime=0))
put("fuzz_idx_gzip", "images_gz_cut", b"\1" + gzip.compress(images, mtime=0)[:-6])


# --- fuzz_token_shard: llm.c .bin ------------------------------------------------------------
def token_shard(tokens, magic=20240520, version=1, count=None, width="H"):
    header = struct.pack("<3i", magic, version, len(tokens) if count is None else count) + bytes(4 * 253)
    return header + struct.pack("<%d%s" % (len(tokens), width), *tokens)


put("fuzz_token_shard", "gpt2_tokens", token_shard([50256, 464, 2068, 7586, 21831, 50256, 0, 65535]))
put("fuzz_token_shard", "empty", token_shard([]))
put("fuzz_token_shard", "count_too_large", token_shard([1, 2, 3], count=4))
put("fuzz_token_shard", "version_2", token_shard([1, 2], version=2))
put("fuzz_token_shard", "version_2_uint32", token_shard([128000, 0, 65536, 4294967295], version=2, width="I"))
put("fuzz_token_shard", "version_2_truncated", token_shard([70000, 1], version=2, width="I")[:-3])
put("fuzz_token_shard", "version_3", token_shard([1, 2], version=3, width="I"))


# --- fuzz_seq_cls: zerotrain seq-cls records ----------------------------------------------------
def seq_cls(records, classes=2, max_len=8, vocab=30522, count=None):
    n = len(records) if count is None else count
    b = b"ZTSEQCLS" + struct.pack("<4IQ", 1, classes, max_len, vocab, n)
    for label, toks in records:
        b += struct.pack("<2H", label, len(toks)) + struct.pack("<%dH" % len(toks), *toks)
    return b


put("fuzz_seq_cls", "two_records", seq_cls([(1, [101, 7592, 2088, 102]), (0, [101, 102])]))
put("fuzz_seq_cls", "empty", seq_cls([]))
put("fuzz_seq_cls", "label_out_of_range", seq_cls([(2, [101, 102])]))
put("fuzz_seq_cls", "count_too_large", seq_cls([(0, [101, 102])], count=3))


# --- fuzz_cifar: CIFAR-10 binary records (1 label byte + 3072 pixel bytes) ---------------------
record = lambda label, seed: bytes([label]) + bytes((seed + 7 * p) % 256 for p in range(3072))  # noqa: E731
put("fuzz_cifar", "two_records", record(3, 0) + record(9, 1))
put("fuzz_cifar", "bad_label", record(10, 2))
put("fuzz_cifar", "cut_record", record(1, 3)[:100])


# --- fuzz_safetensors ---------------------------------------------------------------------
def safetensors(tensors, metadata=None):
    header, data = {}, b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if metadata is not None:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


f32 = struct.pack("<6f", 0.5, -1, 2, 3.25, 0, 1e-3)
put("fuzz_safetensors", "one_f32", safetensors({"0.weight": ("F32", [2, 3], f32)}))
put("fuzz_safetensors", "mixed_with_metadata", safetensors({
    "0.weight": ("F32", [2, 3], f32), "0.bias": ("BF16", [2], b"\x80\x3f\x00\x40"),
    "2.weight": ("F16", [1, 2], b"\x00\x3c\x00\xc0")}, {"format": "zerotrain"}))
put("fuzz_safetensors", "empty", safetensors({}))
put("fuzz_safetensors", "offsets_past_end",
    safetensors({"w": ("F32", [2, 3], f32)})[:-8])


# --- fuzz_tokenizer: text for GPT-2's BPE and BERT's WordPiece ------------------------------
put("fuzz_tokenizer", "english", "Hello world! I'm sure they'll see we've done what's right.\n")
put("fuzz_tokenizer", "scripts", "Café naïve 日本語のテキスト 한국어 Привет 😀👍🏽 \u00a0\ufeff\u3000 ΟΔΟΣ İ\t\r\n")
put("fuzz_tokenizer", "runs", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" + " " * 40 + "!!!???")
put("fuzz_tokenizer", "invalid_utf8", b"ok \xc3 \xed\xa0\x80 \xf4\x90\x80\x80 \xff")
put("fuzz_tokenizer", "contractions", "'s't're've'm'll'd 'S'T <|endoftext|> [CLS] ##x")


# --- fuzz_ckpt_metadata: sealed as a save seals them (Note [metadata checksum]), then one seed per
# hostile case the reader must refuse: each edit keeps the rest of the file valid ------------------
xxh64 = ctypes.CDLL("libxxhash.so.0").XXH64
xxh64.restype = ctypes.c_uint64
xxh64.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint64]


def sealed(m):
    """m with metadata_xxh64: xxh64 of its compact dump without that key, keys sorted (nlohmann's order)."""
    body = {k: v for k, v in m.items() if k != "metadata_xxh64"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return dict(body, metadata_xxh64="%016x" % xxh64(text, len(text), 0))


def ckpt_seed(name, m):
    put("fuzz_ckpt_metadata", name, json.dumps(m, indent=1) + "\n")


small = {
    "format": 2, "tag": "step_3", "world_size": 2, "stage": 2, "dtype": "f32", "optimizer": "AdamW",
    "params": [{"name": "w", "shape": [2, 3]}, {"name": "b", "shape": [4]}],
    "buffers": [{"numel": 10, "padded": 16, "params": [[0, 0, 6], [1, 6, 4]]}],
    "entries": {"b0.param": {"dtype": "f32", "offset": 0, "numel": 8},
                "b0.exp_avg": {"dtype": "f32", "offset": 32, "numel": 8}},
    "shards": [{"file": "rank_00000.bin", "xxh64": "0123456789abcdef", "bytes": 64},
               {"file": "rank_00001.bin", "xxh64": "fedcba9876543210", "bytes": 64}],
    "counters": {"optimizer_steps": 3, "loss_scaler": {"scale": 65536.0, "cur_hysteresis": 2,
                                                       "last_overflow_iter": -1, "cur_iter": 3, "skipped_steps": 0}},
    "extra": {"step": 3, "train_batch_size": 64, "skipped_steps": 0}, "step": 3}
ckpt_seed("small.json", sealed(small))
with open(os.path.join(here, "corpus", "fuzz_ckpt_metadata", "mlp_stage2.json")) as f:
    real = json.load(f)  # a real run's, kept; resealed when the format changes
ckpt_seed("mlp_stage2.json", sealed(dict(real, format=2)))


def edited(**changes):
    m = json.loads(json.dumps(small))
    for k, v in changes.items():
        if v is None:
            m.pop(k, None)
        else:
            m[k] = v
    return sealed(m)


ckpt_seed("no_extra", edited(extra=None))                                    # case 3
ckpt_seed("step_negative", edited(extra={"step": -3}))                        # case 4
ckpt_seed("step_fraction", edited(extra={"step": 2.5}))
ckpt_seed("step_huge", edited(extra={"step": 10**30}))
ckpt_seed("tag_not_a_string", edited(tag=7))                                 # case 5
ckpt_seed("tag_line_break", edited(tag="a\nb"))                              # case 8
ckpt_seed("tag_nul", edited(tag="a\u0000b"))                                # case 6
ckpt_seed("format_1", edited(format=1))
stale = sealed(small)
stale["counters"] = {"optimizer_steps": 2}                                   # case 2: consistent, not what was saved
ckpt_seed("consistent_edit", stale)
dup = json.dumps(sealed(small))
put("fuzz_ckpt_metadata", "duplicate_step", dup[:-1] + ', "step": 9}')

# --- fuzz_tokenizer_json: whole tokenizer.json files ------------------------------------------
def byte_char(b):  # bytes_to_unicode
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    extra = [x for x in range(256) if x not in printable]
    return chr(b) if b in printable else chr(256 + extra.index(b))


bpe_vocab = {byte_char(b): b for b in range(256)}
bpe_vocab.update({"ab": 256, "aba": 257, "xy": 258})
tiny_bpe = {"added_tokens": [{"id": 259, "content": "<|x|>", "special": True}], "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
            "decoder": {"type": "ByteLevel"},
            "model": {"type": "BPE", "vocab": bpe_vocab, "merges": ["ab a", "a b"]}}
put("fuzz_tokenizer_json", "byte_level_bpe", json.dumps(tiny_bpe))
split = json.loads(json.dumps(tiny_bpe))
split["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "(?i:'s|'t)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|\\s+(?!\\S)|\\s+"},
     "behavior": "Isolated", "invert": False},
    {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]}
split["normalizer"] = {"type": "NFC"}
split["model"]["ignore_merges"] = True
split["model"]["merges"] = [["ab", "a"], ["a", "b"]]
put("fuzz_tokenizer_json", "llama3_like", json.dumps(split))
wp = {"added_tokens": [{"id": 3, "content": "[SEP]"}, {"id": 10, "content": "<extra>", "lstrip": True}],
      "normalizer": {"type": "BertNormalizer", "lowercase": True, "strip_accents": None},
      "pre_tokenizer": {"type": "BertPreTokenizer"}, "decoder": {"type": "WordPiece"},
      "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                "max_input_chars_per_word": 100,
                "vocab": {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "##aff", "##able",
                                                      "a", "##a", ","])}}}
put("fuzz_tokenizer_json", "wordpiece", json.dumps(wp))
bad = json.loads(json.dumps(tiny_bpe))
bad["model"]["merges"] = ["ab a", "a zz"]
put("fuzz_tokenizer_json", "unknown_merge", json.dumps(bad))
put("fuzz_tokenizer_json", "cut", json.dumps(wp)[:200])
