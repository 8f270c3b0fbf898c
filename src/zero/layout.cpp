#include "zt/zero/layout.h"

#include <algorithm>

#include "zt/core/error.h"

namespace zt::zero {

int64_t padded_size(int64_t numel, int world, int64_t align) {
  ZT_CHECK(world >= 1, "[zero] world size must be >= 1, got ", world);
  ZT_CHECK(numel >= 0 && align >= 1, "[zero] bad buffer size ", numel, " or alignment ", align);
  const int64_t m = int64_t(world) * align;
  return (numel + m - 1) / m * m;
}

Range shard_range(int64_t padded, int world, int rank) {
  ZT_CHECK(world >= 1 && rank >= 0 && rank < world, "[zero] rank ", rank, " out of range for world ", world);
  ZT_CHECK(padded % world == 0, "[zero] buffer of ", padded, " elements is not divisible by world ", world);
  const int64_t s = padded / world;
  return {rank * s, (rank + 1) * s};
}

Range intersect(Range a, Range b) {
  Range r{std::max(a.begin, b.begin), std::min(a.end, b.end)};
  if (r.end < r.begin) r.end = r.begin;
  return r;
}

namespace {
BufferPlan make_buffer(const std::vector<int64_t>& numels, std::vector<size_t> idx, int world) {
  std::sort(idx.begin(), idx.end());
  BufferPlan b;
  for (size_t i : idx) {
    b.params.push_back({i, b.numel, numels[i]});
    b.numel += numels[i];
  }
  b.padded = padded_size(b.numel, world);
  return b;
}
}  // namespace

std::vector<BufferPlan> plan_buckets(const std::vector<int64_t>& numels, int64_t bucket_elems, int world,
                                     const std::vector<bool>& solo) {
  ZT_CHECK(bucket_elems > 0, "[zero] reduce_bucket_size must be positive, got ", bucket_elems);
  ZT_CHECK(solo.empty() || solo.size() == numels.size(), "[zero] ", solo.size(), " solo flags for ", numels.size(),
           " parameters");
  std::vector<BufferPlan> out;
  std::vector<size_t> cur;
  int64_t cur_n = 0;
  for (size_t k = numels.size(); k-- > 0;) {
    if (k < solo.size() && solo[k]) {
      if (!cur.empty()) out.push_back(make_buffer(numels, cur, world));
      out.push_back(make_buffer(numels, {k}, world));
      cur.clear();
      cur_n = 0;
      continue;
    }
    if (!cur.empty() && cur_n + numels[k] > bucket_elems) {
      out.push_back(make_buffer(numels, cur, world));
      cur.clear();
      cur_n = 0;
    }
    cur.push_back(k);
    cur_n += numels[k];
  }
  if (!cur.empty()) out.push_back(make_buffer(numels, cur, world));
  return out;
}

std::vector<BufferPlan> plan_units(const std::vector<int64_t>& numels, const std::vector<std::vector<size_t>>& units,
                                   int world) {
  std::vector<BufferPlan> out;
  for (auto& u : units) out.push_back(make_buffer(numels, u, world));
  return out;
}

}  // namespace zt::zero
