#!/usr/bin/env python3
"""Reference ids for the WordPiece tests, written from the rules of Hugging Face's BertTokenizer
for bert-base-uncased (BasicTokenizer with lower-casing, then WordPiece, 100 characters a word at
most) in plain Python, whose str.lower and unicodedata are the rules' own definitions.
Usage: bert_reference.py DIR STRINGS.json -> a JSON array of id arrays (vocab.json in DIR,
converted as shared/DATA.md says)."""
import json
import sys
import unicodedata


def load_vocab(path):
    vocab = {}
    for i, t in enumerate(json.load(open(path, encoding="utf-8"))):
        if t.startswith("\u2581"):
            t = t[1:] or "[unused0]"
        elif not (len(t) > 2 and t[0] == "[" and t[-1] == "]"):
            t = "##" + t
        vocab[t] = i
    return vocab


def is_control(c):
    return c not in "\t\n\r" and unicodedata.category(c).startswith("C")


def is_whitespace(c):
    return c in " \t\n\r" or unicodedata.category(c) == "Zs"


def is_punctuation(c):
    cp = ord(c)
    return 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126 or \
        unicodedata.category(c).startswith("P")


def is_cjk(cp):
    return any(lo <= cp <= hi for lo, hi in [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF),
                                             (0x2A700, 0x2B73F), (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF),
                                             (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)])


def basic_tokens(text):
    clean = []
    for c in text:
        if ord(c) in (0, 0xFFFD) or is_control(c):
            continue
        clean.append(" " if is_whitespace(c) else f" {c} " if is_cjk(ord(c)) else c)
    pieces = []
    for word in "".join(clean).split():
        word = "".join(c for c in unicodedata.normalize("NFD", word.lower()) if unicodedata.category(c) != "Mn")
        current = []
        for c in word:
            if is_punctuation(c):
                pieces += ["".join(current), c]
                current = []
            else:
                current.append(c)
        pieces.append("".join(current))
    return " ".join(pieces).split()


def wordpiece(piece, vocab):
    if len(piece) > 100:
        return [vocab["[UNK]"]]
    ids, start = [], 0
    while start < len(piece):
        for end in range(len(piece), start, -1):
            sub = piece[start:end] if start == 0 else "##" + piece[start:end]
            if sub in vocab:
                ids.append(vocab[sub])
                start = end
                break
        else:
            return [vocab["[UNK]"]]
    return ids


def main():
    vocab = load_vocab(sys.argv[1] + "/vocab.json")
    strings = json.load(open(sys.argv[2], encoding="utf-8"))
    print(json.dumps([[i for p in basic_tokens(s) for i in wordpiece(p, vocab)] for s in strings]))


if __name__ == "__main__":
    main()
