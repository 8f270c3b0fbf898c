#pragma once
// `zerotrain prepare`: text corpora -> token shards for language models (task "lm"), or
// labelled passages for sequence classification (task "sotu-party").
//
// Note [held-out documents]: a document is never split across train and validation except
// Moby-Dick, which is one book. Documents come in a fixed order (the SOTU addresses sorted by file
// name, then Moby-Dick); with k = round(1 / val_fraction), SOTU address i (from 0) is held out when
// i % k == k - 1, and Moby-Dick's last val_fraction of bytes, from the first paragraph that starts
// at or after that point, is a held-out document of its own (the part before it trains).
// Your own text (--input, Note [your own text] in user_text.h): the documents in the order read;
// document i is held out when i % k == k - 1; with fewer than k documents the last one is, and a
// lone document is split as Moby-Dick is (its last val_fraction of bytes, from a paragraph start).
// Every document is preceded by the separator, as llm.c does: <|endoftext|> for GPT-2, [SEP] for
// BERT, <|begin_of_text|> for Llama 3, <s> for SentencePiece. An empty validation set is an error.
//
// Note [sotu-party split]: passages (corpus.h split_passages, at most (max_len - 2) * 2 / 3
// words, at least 20) of the Democratic (label 0) and Republican (label 1) addresses; other
// parties are dropped. Whole addresses go to test when their year is a multiple of 5, so no
// address has passages on both sides. A record is [CLS] passage [SEP], the passage cut to
// max_len - 2 tokens.
//
// The output folder is written under a temporary name beside it and swapped in whole at the end,
// so a failing run leaves an earlier complete output as it was. An existing output is replaced
// only if it is empty or was written by prepare (its manifest.json says so).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "zt/data/tokenizer.h"

namespace zt::data {

using Progress = std::function<void(const std::string&)>;  // one line, no newline

struct FileDigest {
  std::string path;  // as read
  std::string sha256;
};

struct PrepareLmOptions {
  std::string data_dir = "data";  // holds sotu/*.txt and moby-dick/data.txt
  std::string out;                // the output folder
  std::vector<std::string> sources = {"sotu", "moby-dick"};
  std::vector<std::string> inputs;  // your own text instead of sources (files, folders, *.jsonl)
  std::string text_key = "text";    // the field of a JSON line that holds the text
  double val_fraction = 0.05;       // in (0, 0.5]
  std::vector<FileDigest> tokenizer_files;  // recorded in the manifest
};

struct PrepareLmReport {
  int64_t train_documents = 0, val_documents = 0;
  int64_t train_tokens = 0, val_tokens = 0;
  int32_t shard_version = 1;           // 2 (uint32 tokens) for a vocabulary past 65,536 ids
  std::vector<std::string> val_names;  // the held-out documents
};

// Writes <out>/train_000000.bin, <out>/val_000000.bin (token_shard.h; version 1, or 2 when the
// tokenizer's ids do not fit uint16) and <out>/manifest.json.
PrepareLmReport prepare_lm(const PrepareLmOptions& opt, const Tokenizer& tok, const Progress& progress = {});

struct PrepareClsOptions {
  std::string data_dir = "data";  // holds sotu/*.txt
  std::string out;
  int max_len = 128;  // tokens per record, [CLS] and [SEP] included; 8..512
  int test_year_multiple = 5;
  std::vector<FileDigest> tokenizer_files;
};

struct PrepareClsReport {
  std::vector<std::string> class_names;            // "Democratic", "Republican"
  std::vector<int64_t> train_counts, test_counts;  // records per class
  int64_t train_addresses = 0, test_addresses = 0, dropped_addresses = 0;
  int64_t truncated = 0;              // records cut to max_len
  int32_t majority_class = 0;         // the larger class of the training split
  double majority_test_accuracy = 0;  // of always answering it on the test split
};

// Writes <out>/train.bin, <out>/test.bin (seq_cls.h) and <out>/manifest.json.
PrepareClsReport prepare_sotu_party(const PrepareClsOptions& opt, const Tokenizer& tok, const Progress& progress = {});

}  // namespace zt::data
