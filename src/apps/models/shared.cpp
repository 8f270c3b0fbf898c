#include "shared.h"

#include <algorithm>

#include "../tasks.h"
#include "zt/ops/ops.h"

namespace zt::apps {

namespace {
// Bytes as int64, saturated: estimate plans models far larger than any machine.
int64_t clamp_bytes(double v) { return v >= 1e18 ? int64_t(1e18) : int64_t(std::max(0.0, v)); }
}  // namespace

// Note [activation formula]: what the autograd tape keeps, per model family, in the dtype the
// model computes in (b bytes; Note [f32 compute]), calibrated against the allocator's activation
// peak (memory_peak.activation of a run at two micro-batches: the slope is the per-sample term,
// the rest the fixed term):
// - MLP: each hidden layer's Linear and activation outputs, the logits and cross-entropy's f32
//   probabilities; 16-bit runs hold the cast input twice (forward and backward); plus one
//   weight-gradient temporary of the largest layer where gradients are not written in place
//   (Note [gradients written in place] in zt/ops/ops.h; a convolution's always is a temporary).
// - CNN: per stage convolution and ReLU outputs, the pooled output and its i32 argmax; then
//   the fully connected layers as the MLP. 16-bit runs add the cast input and one tensor per
//   stage's output in blocks of their own in the caching allocator (resident, though not at
//   once); f32 runs' OS peak is the tape's alone (within 4% at 32 and 64 samples), since an
//   activation's first gradient is taken, not copied (Note [first gradient taken] in
//   autograd/engine.cpp).
// - GPT/BERT: per token and block 14C working values plus 2 attention rows (H x T); a
//   checkpointed block keeps its input only, and one block is recomputed at a time; the LM
//   head keeps the logits and, from the loss's backward, their gradient (taken as the logits'
//   gradient, not copied); BERT's MLM decoder adds its bias into one more logits-sized tensor.
//   Where gradients are not written in place, backward through the head then holds one block of
//   the head's weight gradient's rows beside the logits' gradient: the peak when C is large
//   against T (the larger moment).
// Evaluating images (batches of up to 1000) can hold more than a training micro-batch.
int64_t image_activations(const ImageNet& net, int64_t micro, int64_t eval_batch, double b, bool grad_temporary) {
  const double n = double(micro), cast = b != 4 ? 1 : 0;  // inputs are cast to the working dtype
  double kept = 0, grads = 0, widest = 0, argmax = 0, weight = 0, linear = 0, prev = double(net.input);
  const double input = prev;
  double ch = double(net.in_channels), side = double(net.image_size);
  for (int64_t out : net.conv) {
    const double conv = double(out) * side * side, pooled = conv / 4;
    kept += 2 * conv + pooled;
    grads += conv;
    argmax += pooled;
    widest = std::max(widest, conv);
    weight = std::max(weight, double(out) * ch * 9 + double(out));
    ch = double(out);
    side /= 2;
  }
  if (!net.conv.empty()) prev = ch * side * side;
  for (int64_t h : net.fc) {
    kept += 2 * double(h);
    widest = std::max(widest, double(h));
    linear = std::max(linear, prev * double(h));
    prev = double(h);
  }
  const double classes = double(net.classes);
  kept += classes;
  linear = std::max(linear, prev * classes);
  if (grad_temporary) weight = std::max(weight, linear);
  double per = b * kept + 4 * argmax + 4 * classes;
  per += !net.conv.empty() ? cast * b * (input + grads) : 2 * cast * b * input;
  const double train = n * per + b * weight;
  // Evaluation, without a tape: the f32 batch, its cast, and two layers' outputs at a time.
  const double eval = double(eval_batch) * (4 * input + cast * b * input + 2 * b * widest);
  return clamp_bytes(std::max(train, eval));
}

int64_t image_eval_batch(const config::Config& c, int64_t) {
  return std::min<int64_t>(1000, c.data.test_limit > 0 ? c.data.test_limit : 1000);  // ImageTask::eval_batch
}

ModelKind image_model(const char* type, decltype(ModelKind::build) build,
                      decltype(ModelKind::activations) activations, decltype(ModelKind::input_features) features,
                      const char* input_keys) {
  return {.type = type,
          .build = build,
          .activations = activations,
          .task = make_image_task,
          .rows_per_sample = [](const config::Config&) { return int64_t(1); },
          .eval_batch = image_eval_batch,
          .input_features = features,
          .input_keys = input_keys};
}

int64_t transformer_activations(const config::Config& c, int64_t micro, double b, double head_bytes,
                                bool grad_temporary) {
  const config::ModelConfig& m = c.model;
  const double n = double(micro), T = double(sequence_length(c)), C = double(m.n_embd), H = double(m.n_head);
  const double L = double(m.n_layer), V = double(m.vocab_size);
  const double block = b * (14 * C + 2 * H * T);
  double ckpt = 0;
  if (c.activation_checkpointing.enabled)
    ckpt = c.activation_checkpointing.number_checkpoints > 0
               ? std::min(L, double(c.activation_checkpointing.number_checkpoints))
               : L;
  const double head = V * head_bytes;
  const double kept = (L - ckpt) * block + ckpt * b * C + 4 * b * C;
  const double start = n * T * (kept + (ckpt > 0 ? block : 0) + head);
  // Then the logits' gradient, and the head's weight gradient where it is not written in place:
  // one block of its rows (Note [weight gradients in row blocks]).
  const double rows = grad_temporary ? double(ops::weight_grad_block_rows(m.vocab_size)) : 0;
  const double tied = head_bytes > 0 ? b * rows * C + n * T * (kept + b * V) : 0;
  return clamp_bytes(std::max(start, tied));
}

int64_t sequence_length(const config::Config& c) {
  return c.data.seq_len > 0 ? std::min(c.data.seq_len, c.model.block_size) : c.model.block_size;
}

}  // namespace zt::apps
