#!/usr/bin/python3
"""Hugging Face model folders for tests/hf/hf_folders_test.cpp, and the PyTorch losses they give.

  gen_hf_folders.py OUT        writes OUT/<case>/ (config.json, model.safetensors or shards with
                               model.safetensors.index.json), OUT/tokens_<case>/val_000000.bin and
                               train_000000.bin (llm.c shards), and OUT/refs.json {case: loss}
  gen_hf_folders.py --eval FOLDER TOKENS SEQ
                               prints the loss of FOLDER (as the PyTorch model reads it) on the
                               validation windows of TOKENS, as JSON {"loss": ...}

No transformers or safetensors package: the models are plain torch following transformers'
modeling_gpt2.py (Conv1D weights [in, out], gelu_new, tied lm_head), modeling_llama.py /
modeling_qwen2.py (rotate_half rotary, repeat_kv, SwiGLU, RMSNorm) and modeling_bert.py (post-LN,
erf GELU, the tied masked-LM decoder, the classifier's tanh pooler), and safetensors is written and
read by hand. Losses are computed in float64 from the stored weights (bf16 widened exactly), over
every validation window of SEQ tokens at stride SEQ, as zerotrain's eval scores them; BERT's masked
LM over the validation rows zerotrain masks (its mt19937_64 draws, reproduced here), its classifier
over tokens_bert_cls/test.bin (zerotrain's sequence-classification file, padded as zerotrain pads).
"""
import json
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F

SEQ = 16
ST = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16"}
FROM_ST = {v: k for k, v in ST.items()}


def write_safetensors(path, tensors):
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors:
        t = t.contiguous()
        raw = (t.view(torch.int16) if t.dtype in (torch.bfloat16, torch.float16) else t).numpy().tobytes()
        header[name] = {"dtype": ST[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        dt = FROM_ST[e["dtype"]]
        buf = bytearray(data[a:b])
        if dt == torch.float32:
            t = torch.frombuffer(buf, dtype=torch.float32)
        else:
            t = torch.frombuffer(buf, dtype=torch.int16).view(dt)
        out[name] = t.reshape(e["shape"]).clone()
    return out


def read_folder(folder):
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index):
        files = sorted(set(json.load(open(index))["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    w = {}
    for f in files:
        w.update(read_safetensors(os.path.join(folder, f)))
    return json.load(open(os.path.join(folder, "config.json"))), w


def write_folder(folder, config, tensors, shards=1):
    os.makedirs(folder, exist_ok=True)
    json.dump(config, open(os.path.join(folder, "config.json"), "w"), indent=2)
    if shards == 1:
        write_safetensors(os.path.join(folder, "model.safetensors"), tensors)
        return
    per = (len(tensors) + shards - 1) // shards
    weight_map, total = {}, 0
    for k in range(shards):
        name = "model-%05d-of-%05d.safetensors" % (k + 1, shards)
        part = tensors[k * per:(k + 1) * per]
        write_safetensors(os.path.join(folder, name), part)
        for n, t in part:
            weight_map[n] = name
            total += t.numel() * t.element_size()
    json.dump({"metadata": {"total_size": total}, "weight_map": weight_map},
              open(os.path.join(folder, "model.safetensors.index.json"), "w"), indent=2)


# ---- GPT-2 (modeling_gpt2.py) ----

def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def gpt2_logits(cfg, w, idx):
    p = "transformer." if "transformer.wte.weight" in w else ""
    g = lambda n: w[p + n].double()
    C, H = cfg["n_embd"], cfg["n_head"]
    B, T = idx.shape
    x = g("wte.weight")[idx] + g("wpe.weight")[torch.arange(T)]
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    ln = lambda x, n: F.layer_norm(x, (C,), g(n + ".weight"), g(n + ".bias"), cfg.get("layer_norm_epsilon", 1e-5))
    for i in range(cfg["n_layer"]):
        h = "h.%d." % i
        a = ln(x, h + "ln_1") @ g(h + "attn.c_attn.weight") + g(h + "attn.c_attn.bias")  # Conv1D: x @ W[in, out]
        q, k, v = a.split(C, dim=2)
        q, k, v = [t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v)]
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // H)
        att = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ g(h + "attn.c_proj.weight") + g(h + "attn.c_proj.bias")
        m = gelu_new(ln(x, h + "ln_2") @ g(h + "mlp.c_fc.weight") + g(h + "mlp.c_fc.bias"))
        x = x + m @ g(h + "mlp.c_proj.weight") + g(h + "mlp.c_proj.bias")
    return ln(x, "ln_f") @ g("wte.weight").t()  # lm_head tied to wte


def gpt2_folder(vocab, block, layers, heads, embd, gen, prefix=True, dtype=torch.float32):
    cfg = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": vocab, "n_positions": block,
           "n_ctx": block, "n_embd": embd, "n_layer": layers, "n_head": heads, "activation_function": "gelu_new",
           "layer_norm_epsilon": 1e-5, "n_inner": None, "torch_dtype": "float32"}
    r = lambda *s, std=0.2: (torch.randn(*s, generator=gen) * std)
    t = [("wte.weight", r(vocab, embd, std=0.5)), ("wpe.weight", r(block, embd, std=0.3))]
    for i in range(layers):
        h = "h.%d." % i
        t += [(h + "ln_1.weight", 1 + r(embd)), (h + "ln_1.bias", r(embd)),
              (h + "attn.c_attn.weight", r(embd, 3 * embd)), (h + "attn.c_attn.bias", r(3 * embd)),
              (h + "attn.c_proj.weight", r(embd, embd)), (h + "attn.c_proj.bias", r(embd)),
              (h + "ln_2.weight", 1 + r(embd)), (h + "ln_2.bias", r(embd)),
              (h + "mlp.c_fc.weight", r(embd, 4 * embd)), (h + "mlp.c_fc.bias", r(4 * embd)),
              (h + "mlp.c_proj.weight", r(4 * embd, embd, std=0.1)), (h + "mlp.c_proj.bias", r(embd)),
              (h + "attn.bias", torch.ones(1, 1, block, block).tril())]  # the mask buffer old folders hold
    t += [("ln_f.weight", 1 + r(embd)), ("ln_f.bias", r(embd))]
    p = "transformer." if prefix else ""
    return cfg, [(p + n, v.to(dtype)) for n, v in t]


# ---- Llama / Qwen2 (modeling_llama.py, modeling_qwen2.py) ----

def rms(x, wt, eps):
    return wt * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def llama_logits(cfg, w, idx):
    g = lambda n: w[n].double()
    C, H = cfg["hidden_size"], cfg["num_attention_heads"]
    K, D, eps = cfg.get("num_key_value_heads", H), C // H, cfg.get("rms_norm_eps", 1e-6)
    B, T = idx.shape
    inv = 1.0 / (cfg.get("rope_theta", 10000.0) ** (torch.arange(0, D, 2).float() / D))
    freqs = torch.outer(torch.arange(T).float(), inv)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().double(), emb.sin().double()
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    x = g("model.embed_tokens.weight")[idx]

    def lin(x, n, bias=False):
        y = x @ g(n + ".weight").t()
        return y + g(n + ".bias") if bias else y

    qb = "model.layers.0.self_attn.q_proj.bias" in w
    for i in range(cfg["num_hidden_layers"]):
        L = "model.layers.%d." % i
        h = rms(x, g(L + "input_layernorm.weight"), eps)
        q = lin(h, L + "self_attn.q_proj", qb).view(B, T, H, D).transpose(1, 2)
        k = lin(h, L + "self_attn.k_proj", qb).view(B, T, K, D).transpose(1, 2)
        v = lin(h, L + "self_attn.v_proj", qb).view(B, T, K, D).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = k.repeat_interleave(H // K, dim=1), v.repeat_interleave(H // K, dim=1)
        att = F.softmax(((q @ k.transpose(-2, -1)) / math.sqrt(D)).masked_fill(~mask, float("-inf")), dim=-1)
        x = x + lin((att @ v).transpose(1, 2).reshape(B, T, C), L + "self_attn.o_proj")
        h = rms(x, g(L + "post_attention_layernorm.weight"), eps)
        x = x + lin(F.silu(lin(h, L + "mlp.gate_proj")) * lin(h, L + "mlp.up_proj"), L + "mlp.down_proj")
    x = rms(x, g("model.norm.weight"), eps)
    head = g("model.embed_tokens.weight") if cfg.get("tie_word_embeddings", False) else g("lm_head.weight")
    return x @ head.t()


def llama_folder(vocab, layers, heads, kv, embd, inter, gen, tie=False, qwen2=False, dtype=torch.float32):
    arch = "Qwen2ForCausalLM" if qwen2 else "LlamaForCausalLM"
    cfg = {"architectures": [arch], "model_type": "qwen2" if qwen2 else "llama", "vocab_size": vocab,
           "hidden_size": embd, "intermediate_size": inter, "num_hidden_layers": layers, "num_attention_heads": heads,
           "num_key_value_heads": kv, "hidden_act": "silu", "max_position_embeddings": 64, "rms_norm_eps": 1e-6,
           "rope_theta": 10000.0, "rope_scaling": None, "tie_word_embeddings": tie, "torch_dtype": "float32"}
    if qwen2:
        cfg.update({"use_sliding_window": False, "sliding_window": 4096})
    D = embd // heads
    r = lambda *s, std=0.3: (torch.randn(*s, generator=gen) * std)
    t = [("model.embed_tokens.weight", r(vocab, embd, std=0.5))]
    for i in range(layers):
        L = "model.layers.%d." % i
        t += [(L + "input_layernorm.weight", 1 + r(embd, std=0.2)),
              (L + "self_attn.q_proj.weight", r(heads * D, embd)), (L + "self_attn.k_proj.weight", r(kv * D, embd)),
              (L + "self_attn.v_proj.weight", r(kv * D, embd))]
        if qwen2:
            t += [(L + "self_attn.q_proj.bias", r(heads * D)), (L + "self_attn.k_proj.bias", r(kv * D)),
                  (L + "self_attn.v_proj.bias", r(kv * D))]
        t += [(L + "self_attn.o_proj.weight", r(embd, heads * D, std=0.15)),
              (L + "post_attention_layernorm.weight", 1 + r(embd, std=0.2)),
              (L + "mlp.gate_proj.weight", r(inter, embd)), (L + "mlp.up_proj.weight", r(inter, embd)),
              (L + "mlp.down_proj.weight", r(embd, inter, std=0.1))]
    t += [("model.norm.weight", 1 + r(embd, std=0.2))]
    if not tie:
        t += [("lm_head.weight", r(vocab, embd, std=0.2))]
    return cfg, [(n, v.to(dtype)) for n, v in t]


# ---- BERT (modeling_bert.py): BertForMaskedLM, BertForSequenceClassification ----

def bert_hidden(cfg, w, ids, mask):
    g = lambda n: w[n].double()
    C, H = cfg["hidden_size"], cfg["num_attention_heads"]
    D, eps = C // H, cfg.get("layer_norm_eps", 1e-12)
    B, T = ids.shape
    act = (lambda x: F.gelu(x)) if cfg.get("hidden_act", "gelu") == "gelu" else gelu_new
    ln = lambda x, n: F.layer_norm(x, (C,), g(n + ".weight"), g(n + ".bias"), eps)
    lin = lambda x, n: x @ g(n + ".weight").t() + g(n + ".bias")
    E = "bert.embeddings."
    x = g(E + "word_embeddings.weight")[ids] + g(E + "position_embeddings.weight")[torch.arange(T)]
    x = ln(x + g(E + "token_type_embeddings.weight")[0], E + "LayerNorm")
    keep = mask.bool()[:, None, None, :]  # keys that are not padding
    for i in range(cfg["num_hidden_layers"]):
        L = "bert.encoder.layer.%d." % i
        q, k, v = [lin(x, L + "attention.self." + n).view(B, T, H, D).transpose(1, 2) for n in ("query", "key", "value")]
        att = F.softmax(((q @ k.transpose(-2, -1)) / math.sqrt(D)).masked_fill(~keep, float("-inf")), dim=-1)
        a = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = ln(lin(a, L + "attention.output.dense") + x, L + "attention.output.LayerNorm")
        x = ln(lin(act(lin(x, L + "intermediate.dense")), L + "output.dense") + x, L + "output.LayerNorm")
    return x, act, ln, lin


def bert_logits(cfg, w, ids, mask):
    x, act, ln, lin = bert_hidden(cfg, w, ids, mask)
    if cfg["architectures"][0] == "BertForSequenceClassification":
        return lin(torch.tanh(lin(x[:, 0], "bert.pooler.dense")), "classifier")
    P = "cls.predictions."
    h = ln(act(lin(x, P + "transform.dense")), P + "transform.LayerNorm")
    return h @ w["bert.embeddings.word_embeddings.weight"].double().t() + w[P + "bias"].double()  # decoder tied


def bert_folder(vocab, layers, heads, embd, gen, classify=0, hidden_act="gelu"):
    arch = "BertForSequenceClassification" if classify else "BertForMaskedLM"
    cfg = {"architectures": [arch], "model_type": "bert", "vocab_size": vocab, "hidden_size": embd,
           "num_hidden_layers": layers, "num_attention_heads": heads, "intermediate_size": 4 * embd,
           "hidden_act": hidden_act, "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
           "max_position_embeddings": 32, "type_vocab_size": 2, "initializer_range": 0.02, "layer_norm_eps": 1e-12,
           "pad_token_id": 0, "position_embedding_type": "absolute", "torch_dtype": "float32"}
    if classify:
        cfg.update({"num_labels": classify, "problem_type": "single_label_classification"})
    r = lambda *s, std=0.3: (torch.randn(*s, generator=gen) * std)
    E = "bert.embeddings."
    t = [(E + "word_embeddings.weight", r(vocab, embd, std=0.5)), (E + "position_embeddings.weight", r(32, embd)),
         (E + "token_type_embeddings.weight", r(2, embd)), (E + "LayerNorm.weight", 1 + r(embd, std=0.2)),
         (E + "LayerNorm.bias", r(embd, std=0.2))]
    for i in range(layers):
        L = "bert.encoder.layer.%d." % i
        for n in ("query", "key", "value"):
            t += [(L + "attention.self.%s.weight" % n, r(embd, embd)), (L + "attention.self.%s.bias" % n, r(embd))]
        t += [(L + "attention.output.dense.weight", r(embd, embd)), (L + "attention.output.dense.bias", r(embd)),
              (L + "attention.output.LayerNorm.weight", 1 + r(embd, std=0.2)),
              (L + "attention.output.LayerNorm.bias", r(embd, std=0.2)),
              (L + "intermediate.dense.weight", r(4 * embd, embd)), (L + "intermediate.dense.bias", r(4 * embd)),
              (L + "output.dense.weight", r(embd, 4 * embd, std=0.15)), (L + "output.dense.bias", r(embd)),
              (L + "output.LayerNorm.weight", 1 + r(embd, std=0.2)), (L + "output.LayerNorm.bias", r(embd, std=0.2))]
    if classify:
        t += [("bert.pooler.dense.weight", r(embd, embd)), ("bert.pooler.dense.bias", r(embd)),
              ("classifier.weight", r(classify, embd, std=0.5)), ("classifier.bias", r(classify))]
    else:  # as save_pretrained writes it: the decoder, tied to the word embeddings, is not stored
        P = "cls.predictions."
        t += [(P + "bias", r(vocab)), (P + "transform.dense.weight", r(embd, embd)),
              (P + "transform.dense.bias", r(embd)), (P + "transform.LayerNorm.weight", 1 + r(embd, std=0.2)),
              (P + "transform.LayerNorm.bias", r(embd, std=0.2))]
    return cfg, t


class Mt64:
    """std::mt19937_64, the generator behind zerotrain's masked-LM masks (zt::Generator)."""
    M = (1 << 64) - 1

    def __init__(self, seed):
        self.s = [seed & self.M]
        for i in range(1, 312):
            p = self.s[-1]
            self.s.append((6364136223846793005 * (p ^ (p >> 62)) + i) & self.M)
        self.i = 312

    def next(self):
        if self.i == 312:
            for k in range(312):
                x = (self.s[k] & 0xFFFFFFFF80000000) | (self.s[(k + 1) % 312] & 0x7FFFFFFF)
                self.s[k] = self.s[(k + 156) % 312] ^ (x >> 1) ^ (0xB5026F5AA96619E9 if x & 1 else 0)
            self.i = 0
        y = self.s[self.i]
        self.i += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        return (y ^ (y >> 43)) & self.M

    def uniform01(self):
        return (self.next() >> 11) * (1.0 / 9007199254740992.0)


def mlm_rows(toks, seq, vocab, seed=42, mask_prob=0.15):
    """zerotrain's masked-LM validation rows (MlmTask: [CLS] text [SEP], seed ~seed): ids and targets (-100 unscored)."""
    span, M = seq - 2, Mt64.M
    n = (toks.numel() - 1) // span
    ids, ys = [], []
    for i in range(n):
        gen = Mt64((~seed & M) ^ ((i * 0xD1B54A32D192ED03) & M))
        row, y = [101] + toks[i * span:(i + 1) * span].tolist() + [102], [-100] * seq
        for j in range(span):
            if gen.uniform01() >= mask_prob:
                continue
            y[j + 1] = row[j + 1]
            u = gen.uniform01()
            if u < 0.8:
                row[j + 1] = 103
            elif u < 0.9:
                row[j + 1] = gen.next() % vocab
        ids.append(row)
        ys.append(y)
    return torch.tensor(ids), torch.tensor(ys)


def write_seq_cls(path, records, num_classes, max_len, vocab):
    """zerotrain's sequence-classification file (Note [seq-cls format]): (label, tokens) records."""
    with open(path, "wb") as f:
        f.write(b"ZTSEQCLS" + struct.pack("<4IQ", 1, num_classes, max_len, vocab, len(records)))
        for label, toks in records:
            f.write(struct.pack("<2H", label, len(toks)) + struct.pack("<%dH" % len(toks), *toks))


def read_seq_cls(path):
    with open(path, "rb") as f:
        data = f.read()
    _, _, max_len, _, n = struct.unpack_from("<4IQ", data, 8)
    at, ids, masks, labels = 32, [], [], []
    for _ in range(n):
        label, k = struct.unpack_from("<2H", data, at)
        toks = list(struct.unpack_from("<%dH" % k, data, at + 4))
        at += 4 + 2 * k
        ids.append(toks + [0] * (max_len - k))
        masks.append([1] * k + [0] * (max_len - k))
        labels.append(label)
    return torch.tensor(ids), torch.tensor(masks), torch.tensor(labels)


def write_cls_data(d, vocab, classes, n_test, n_train, max_len, gen):
    os.makedirs(d, exist_ok=True)
    for split, n in (("test", n_test), ("train", n_train)):
        recs = []
        for _ in range(n):
            k = int(torch.randint(3, max_len + 1, (1,), generator=gen))
            body = torch.randint(104, vocab, (k - 2,), generator=gen).tolist()
            recs.append((int(torch.randint(0, classes, (1,), generator=gen)), [101] + body + [102]))
        write_seq_cls(os.path.join(d, split + ".bin"), recs, classes, max_len, vocab)


def logits_of(cfg, w, idx):
    arch = cfg["architectures"][0]
    return gpt2_logits(cfg, w, idx) if arch == "GPT2LMHeadModel" else llama_logits(cfg, w, idx)


def val_tokens(tokens_dir):
    with open(os.path.join(tokens_dir, "val_000000.bin"), "rb") as f:
        head = struct.unpack("<256i", f.read(1024))
        data = f.read()
    dt = torch.int16 if head[1] == 1 else torch.int32
    toks = torch.frombuffer(bytearray(data), dtype=dt).long()
    return toks & 0xFFFF if head[1] == 1 else toks


def val_windows(tokens_dir, seq):
    toks = val_tokens(tokens_dir)
    n = (toks.numel() - 1) // seq
    return torch.stack([toks[i * seq:i * seq + seq + 1] for i in range(n)])


def loss_of(folder, tokens_dir, seq):
    cfg, w = read_folder(folder)
    arch = cfg["architectures"][0]
    if arch == "BertForSequenceClassification":  # mean cross-entropy over test.bin, padded as zerotrain pads
        ids, mask, labels = read_seq_cls(os.path.join(tokens_dir, "test.bin"))
        return F.cross_entropy(bert_logits(cfg, w, ids, mask), labels).item()
    if arch == "BertForMaskedLM":  # over the scored positions of every validation row
        ids, y = mlm_rows(val_tokens(tokens_dir), seq, cfg["vocab_size"])
        logits = bert_logits(cfg, w, ids, torch.ones_like(ids))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), ignore_index=-100).item()
    win = val_windows(tokens_dir, seq)
    logits = logits_of(cfg, w, win[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), win[:, 1:].reshape(-1)).item()


def write_tokens(d, vocab, n_val, n_train, gen):
    os.makedirs(d, exist_ok=True)
    version = 1 if vocab <= 65536 else 2
    for split, n in (("val", n_val), ("train", n_train)):
        t = torch.randint(0, vocab, (n,), generator=gen)
        body = (t.to(torch.int32).numpy().astype("<u2") if version == 1 else t.to(torch.int32).numpy()).tobytes()
        with open(os.path.join(d, split + "_000000.bin"), "wb") as f:
            f.write(struct.pack("<256i", 20240520, version, n, *([0] * 253)))
            f.write(body)


def main(out):
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(20261230)
    cases = {
        "gpt2": gpt2_folder(96, 32, 2, 4, 32, gen),
        "gpt2_noprefix": gpt2_folder(96, 32, 2, 4, 32, gen, prefix=False),
        "llama_gqa": llama_folder(80, 2, 4, 2, 32, 48, gen),
        "llama_mqa_tied": llama_folder(80, 2, 4, 1, 32, 48, gen, tie=True),
        "llama_sharded": llama_folder(80, 2, 4, 2, 32, 48, gen),
        "llama_bf16": llama_folder(80, 2, 4, 2, 32, 48, gen, dtype=torch.bfloat16),
        "qwen2_bias": llama_folder(80, 2, 4, 2, 32, 48, gen, tie=True, qwen2=True),
        "llama_vocab70k": llama_folder(70000, 1, 2, 1, 16, 32, gen),
        "bert_mlm": bert_folder(120, 2, 4, 32, gen),
        "bert_cls": bert_folder(120, 2, 4, 32, gen, classify=3),
    }
    refs = {}
    for name, (cfg, tensors) in cases.items():
        folder = os.path.join(out, name)
        write_folder(folder, cfg, tensors, shards=3 if name == "llama_sharded" else 1)
        toks = os.path.join(out, "tokens_" + name)
        if name == "bert_cls":
            write_cls_data(toks, cfg["vocab_size"], 3, 24, 64, 12, gen)
        else:
            write_tokens(toks, cfg["vocab_size"], 24 * SEQ + 1, 64 * SEQ + 1, gen)
        refs[name] = loss_of(folder, toks, SEQ)
    # One tensor missing and one extra: a folder that does not fit.
    cfg, tensors = cases["llama_gqa"]
    broken = [(n, t) for n, t in tensors if n != "model.layers.1.mlp.up_proj.weight"]
    broken.append(("model.layers.0.self_attn.extra.weight", torch.zeros(2, 2)))
    write_folder(os.path.join(out, "llama_broken"), cfg, broken)
    json.dump(refs, open(os.path.join(out, "refs.json"), "w"), indent=1)


def same_weights(a, b):
    """The names of tensors that differ (bit for bit, dtype and shape included) between two folders."""
    wa, wb = read_folder(a)[1], read_folder(b)[1]
    wa = {n: t for n, t in wa.items() if not n.endswith(".attn.bias")}  # buffers are not written back
    names = sorted(set(wa) | set(wb))
    bits = lambda t: t.view(torch.int32) if t.dtype == torch.float32 else t.view(torch.int16)
    return [n for n in names if n not in wa or n not in wb or wa[n].dtype != wb[n].dtype or
            wa[n].shape != wb[n].shape or not torch.equal(bits(wa[n]), bits(wb[n]))]


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--same":
        print(json.dumps({"differ": same_weights(sys.argv[2], sys.argv[3])}))
    elif len(sys.argv) == 5 and sys.argv[1] == "--eval":
        torch.set_num_threads(1)
        print(json.dumps({"loss": loss_of(sys.argv[2], sys.argv[3], int(sys.argv[4]))}))
    else:
        main(sys.argv[1])
