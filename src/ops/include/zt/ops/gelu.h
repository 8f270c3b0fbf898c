#pragma once
// GELU's two forms, a header of its own so layers above ops (autograd, nn's configs) can name one.

namespace zt::ops {

enum class Gelu { tanh, erf };  // torch's gelu(approximate='tanh') (GPT-2's gelu_new) and gelu() (BERT's "gelu")

}  // namespace zt::ops
