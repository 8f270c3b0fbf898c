#pragma once
// Picking the next token from a model's logits: greedy (temperature 0), or a draw from the
// softmax of logits / temperature over the top_k largest (0 = all), from a seeded generator;
// and printing the decoded tokens as they come.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "zt/core/random.h"

namespace zt::apps {

// Index in [0, V) of the chosen token. Ties (argmax, and the top_k cut) go to the lower index,
// so the result depends on the logits and the generator's state alone. temperature 0 and
// top_k 1 take the argmax without drawing; otherwise exactly one uniform draw is consumed.
// NaN or +inf logits, V < 1, a negative or non-finite temperature or a negative top_k throw
// ErrorKind::invalid_argument; -inf logits have probability 0; top_k > V means all.
int32_t sample_token(const float* logits, int64_t V, float temperature, int64_t top_k, Generator& gen);

// How much of streamed bytes can be printed now: all but a trailing UTF-8 character that is not
// complete yet (a byte-level BPE token may end inside one; the next token completes it).
size_t complete_utf8_prefix(std::string_view text);

}  // namespace zt::apps
