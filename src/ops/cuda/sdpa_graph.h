#pragma once
// cuDNN's fused flash attention as backend operation graphs, forward and backward, and an
// execution plan for each (Note [cudnn attention] in attention_cudnn.cpp). Plain C++.
#include <cudnn.h>

#include <cstdint>
#include <string>

#include "../attention_geometry.h"

namespace zt::ops::cuda::sdpa {

// The variant pack's tensors, one UID per role (the graphs' virtual tensors number from 100).
enum Uid : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,  // f32 [B, H, T, 1]: the forward's lse, the backward's input
  kDO,
  kDQ,
  kDK,
  kDV,
  kScale,   // by value (a host float): the scores' scale
  kNegInf,  // by value: the causal mask's fill, -inf (causal graphs only)
  kOne,     // by value: 1, the backward's dropout-free scale of dO . O
  kDot,     // backward: f32 [B, H, T, 1] scratch for dO . O per query, in the caller's workspace
  kSeqQ,    // with a key mask: i32 [B, 1, 1, 1], each sequence's queries (all T)
  kSeqKV,   // with a key mask: i32 [B, 1, 1, 1], each sequence's keys before its padding
  kPadFill, // by value: the padding mask's fill, -inf (key-masked graphs only)
};

// A finalized execution plan and its workspace bytes (kept for the process), or null and why
// cuDNN refused the graph.
struct Plan {
  cudnnBackendDescriptor_t plan = nullptr;
  int64_t workspace = 0;
  std::string why;
};

// The forward (writes O and Stats) or backward (writes dQ, dK, dV) graph of one call's shape,
// Q, K and V read in place from qkv's rows; `io` is bf16 or f16. Where g.mask is set, the graph
// takes cuDNN's padding mask from kSeqQ and kSeqKV (Note [cudnn padding mask]). The first engine config of
// cuDNN's heuristics (mode A) whose plan finalizes within `max_workspace` bytes; never throws.
Plan build(cudnnHandle_t handle, const kern::AttentionGeometry& g, cudnnDataType_t io, bool backward,
           int64_t max_workspace);

}  // namespace zt::ops::cuda::sdpa
