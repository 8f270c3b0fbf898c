#include "wire.h"

#include <algorithm>
#include <string>
#include <vector>

#include "zt/ops/compress.h"
#include "zt/ops/ops.h"

namespace zt::zero {

void Transfer::add_to(Tensor dst, CommOverlap& overlap) { ops::axpy_(dst, 1.f, finish(overlap)); }

void check_hpz_partition(int64_t partition, int world) {
  if (partition <= 1 || world % partition == 0) return;
  // The nearest divisors of the world size on each side, found among the divisors (a huge
  // value must not be stepped down one at a time).
  int64_t below = 1, above = 0;
  for (int64_t d = 1; d <= world; ++d) {
    if (world % d != 0) continue;
    if (d < partition) below = d;
    if (d > partition && above == 0) above = d;
  }
  ZT_THROW_AS(ErrorKind::config, "[zero] zero_optimization.zero_hpz_partition_size = ", partition,
              " must divide the world size ", world, " (nearest valid: ", below,
              above > 0 ? " or " + std::to_string(above) : "", ")");
}

namespace {
template <typename Fn>
uint64_t sum_distinct(const CommGroups& c, Fn bytes_of) {
  uint64_t sum = 0;
  std::vector<const comm::Group*> seen;
  for (const comm::GroupPtr& g : {c.all, c.node, c.cross, c.secondary})
    if (g && std::find(seen.begin(), seen.end(), g.get()) == seen.end()) {
      seen.push_back(g.get());
      sum += bytes_of(*g);
    }
  return sum;
}
}  // namespace

uint64_t CommGroups::bytes() const {
  return sum_distinct(*this, [](const comm::Group& g) { return g.stats().total_bytes(); });
}

uint64_t CommGroups::cross_node_bytes() const {
  return sum_distinct(*this, [](const comm::Group& g) { return g.cross_node_bytes(); });
}

WirePlan plan_wire(const config::ZeroConfig& zero, int world, int local_size) {
  WirePlan w;
  w.local_size = std::max(1, local_size);
  w.nodes = std::max(1, world / w.local_size);
  w.gradient_bits = zero.zero_quantized_gradients && w.nodes > 1 ? zero.zero_quantized_gradients_bits : 0;
  w.int8_weights = zero.zero_quantized_weights;
  w.hpz_partition = std::max<int64_t>(1, zero.zero_hpz_partition_size);
  if (w.hpz_partition > 1) check_hpz_partition(w.hpz_partition, world);
  return w;
}

CommGroups make_comm_groups(comm::GroupPtr all, const WirePlan& wire) {
  CommGroups g;
  g.all = all;
  const int n = all->size(), rank = all->rank();
  g.local_size = wire.local_size;
  const int L = g.local_size;
  if (wire.gradient_bits > 0) {
    if (L > 1) {
      g.node = all->split(rank / L, rank);
      g.cross = all->split(rank % L, rank);
    } else {
      g.cross = all;
    }
  }
  const int64_t P = wire.hpz_partition;
  if (P > 1) {
    g.secondary = P == L && g.node ? g.node : P == n ? all : all->split(int(rank / P), rank);
  }
  return g;
}

namespace {

class DenseTransfer : public Transfer {
 public:
  DenseTransfer(comm::WorkPtr w, Tensor in, Tensor out) : work_(std::move(w)), in_(std::move(in)), out_(std::move(out)) {}
  Tensor finish(CommOverlap& overlap) override {
    work_->wait();
    overlap.add(*work_);
    return out_;
  }

 private:
  comm::WorkPtr work_;
  Tensor in_, out_;
};

class DenseEncoder : public WireEncoder {
 public:
  DenseEncoder(comm::Group& g, bool shard) : group_(g), shard_(shard) {}
  std::unique_ptr<Transfer> launch(const Tensor& in, const comm::CollOptions& o) override {
    if (!shard_) {
      Tensor buf = in;
      comm::WorkPtr w = group_.all_reduce_async(buf, o);
      return std::make_unique<DenseTransfer>(std::move(w), in, in);
    }
    Tensor out = Tensor::empty({in.numel() / group_.size()}, in.dtype(), MemTag::comm, in.device());
    comm::WorkPtr w = group_.reduce_scatter_async(in, out, o);
    return std::make_unique<DenseTransfer>(std::move(w), in, out);
  }

 private:
  comm::Group& group_;
  bool shard_;
};

class QuantizedTransfer : public Transfer {
 public:
  // `parts`: how many node averages (or, one rank per node, rank values) got holds.
  QuantizedTransfer(comm::WorkPtr w, Tensor sent, Tensor got, int64_t shard, int bits, int parts, DType out)
      : work_(std::move(w)), sent_(std::move(sent)), got_(std::move(got)), shard_(shard), bits_(bits), parts_(parts),
        out_(out) {}
  Tensor finish(CommOverlap& overlap) override {
    work_->wait();
    overlap.add(*work_);
    TagScope tag(MemTag::comm);
    Tensor acc = Tensor::zeros({shard_}, DType::f32, got_.device());
    const int64_t words = ops::packet_words(shard_, bits_);
    for (int64_t off = 0; off < got_.numel(); off += words)  // node order: the same sum on every rank
      ops::dequantize_add(got_.slice(0, off, off + words), bits_, acc);
    ops::scale_(acc, 1.f / float(parts_));
    return out_ == DType::f32 ? acc : ops::cast(acc, out_);
  }

 private:
  comm::WorkPtr work_;
  Tensor sent_, got_;
  int64_t shard_;
  int bits_, parts_;
  DType out_;
};

class QuantizedEncoder : public WireEncoder {
 public:
  QuantizedEncoder(const CommGroups& g, int bits) : groups_(g), bits_(bits) {}
  std::unique_ptr<Transfer> launch(const Tensor& in, const comm::CollOptions& o) override {
    const int world = groups_.all->size(), L = groups_.local_size, M = world / L;
    const int64_t s = in.numel() / world;
    TagScope tag(MemTag::comm);
    Tensor sums = in;  // chunk m: this node's average of the shard of rank m*L + l
    if (groups_.node) {
      sums = Tensor::empty({M * s}, in.dtype(), in.device());
      std::vector<comm::WorkPtr> parts;
      // avg, as the dense path: fp32 inside, so a 16-bit node sum cannot overflow sooner.
      comm::CollOptions sum(comm::ReduceOp::avg, o.label + ", in node", o.timeout_s);
      for (int64_t m = 0; m < M; ++m) {
        Tensor dst = sums.slice(0, m * s, (m + 1) * s);
        parts.push_back(groups_.node->reduce_scatter_async(in.slice(0, m * L * s, (m + 1) * L * s), dst, sum));
      }
      for (auto& w : parts) w->wait();  // shared memory: waited here, so only the network overlaps
    }
    const int64_t words = ops::packet_words(s, bits_);
    Tensor sent = Tensor::empty({M * words}, DType::i32, in.device());
    Tensor got = Tensor::empty({M * words}, DType::i32, in.device());
    for (int64_t m = 0; m < M; ++m)
      ops::quantize_into(sums.slice(0, m * s, (m + 1) * s), bits_, sent.slice(0, m * words, (m + 1) * words));
    comm::WorkPtr w =
        groups_.cross->all_to_all_async(sent, got, comm::CollOptions(o.op, o.label + ", quantized across nodes", o.timeout_s));
    return std::make_unique<QuantizedTransfer>(std::move(w), sent, got, s, bits_, groups_.node ? M : world, in.dtype());
  }

 private:
  const CommGroups& groups_;
  int bits_;
};

}  // namespace

std::unique_ptr<WireEncoder> make_dense_encoder(comm::Group& group, bool shard) {
  return std::make_unique<DenseEncoder>(group, shard);
}

std::unique_ptr<WireEncoder> make_quantized_encoder(const CommGroups& groups, int bits) {
  ZT_CHECK(groups.cross, "[zero] quantized gradients need the group of ranks across nodes");
  return std::make_unique<QuantizedEncoder>(groups, bits);
}

}  // namespace zt::zero
