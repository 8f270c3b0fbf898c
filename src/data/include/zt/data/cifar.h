#pragma once
// CIFAR-10, binary version: each record is 1 label byte (0..9) and 3072 pixel bytes, the 32x32
// red, green and blue planes in turn (CHW, rows top to bottom). data_batch_1.bin ..
// data_batch_5.bin hold the training split (10,000 records each), test_batch.bin the test split.
#include <cstddef>
#include <cstdint>
#include <string>

#include "zt/data/mnist.h"

namespace zt::data {

inline constexpr int64_t kCifarChannels = 3, kCifarSize = 32;
inline constexpr int64_t kCifarImageBytes = kCifarChannels * kCifarSize * kCifarSize;  // 3072
inline constexpr int64_t kCifarRecordBytes = 1 + kCifarImageBytes;                     // 3073
// Per-channel statistics of CIFAR-10's training images: pixels become (x/255 - mean[c]) / std[c].
inline constexpr float kCifarMean[3] = {0.4914f, 0.4822f, 0.4465f};
inline constexpr float kCifarStd[3] = {0.2470f, 0.2435f, 0.2616f};

// split "train" or "test" from `dir`: images [n, 3072] f32 (CHW, normalised per channel), labels
// [n] i32. limit > 0 keeps the first `limit` records (files past them are not read). Every file's
// size is checked (a positive multiple of 3073 bytes) before any is read, and the split's memory
// against the budget; a bad file is ErrorKind::data naming it and the byte offset.
Dataset load_cifar10(const std::string& dir, const std::string& split, int64_t limit = 0);
// The records of one file's bytes in memory; `name` stands for the file in errors.
Dataset parse_cifar10(const void* data, size_t size, const std::string& name = "<memory>");

}  // namespace zt::data
