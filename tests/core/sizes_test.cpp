// Sizes from outside (a model's dimensions, a file's shape) can overflow 64 bits: element
// counts, strides and byte sizes are checked, and end in an error, never a wrapped size.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>

#include "common/error_of.h"
#include "zt/core/allocator.h"
#include "zt/core/tensor.h"

// What these tests check is the system refusing a huge allocation; under ASan that must return
// null, as malloc does, rather than abort the binary.
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }

namespace zt {
namespace {

using ::testing::HasSubstr;
using testing_util::error_kind_of;
using testing_util::error_of;

constexpr int64_t k2to32 = int64_t(1) << 32;

TEST(Sizes, AnElementCountPastInt64IsAnErrorNamingTheShape) {
  EXPECT_THAT(error_of([] {
                shape_numel({k2to32, k2to32});
              }),
              HasSubstr("[tensor] shape [4294967296, 4294967296] has more elements than int64 can count"));
  EXPECT_EQ(error_kind_of([] { shape_numel({4611686018427387904, 784}); }), ErrorKind::invalid_argument);
  EXPECT_EQ(shape_numel({k2to32, k2to32 / 2 - 1}), k2to32 * (k2to32 / 2 - 1));  // just below: exact
  EXPECT_EQ(shape_numel({k2to32, 0, k2to32, k2to32}), 0);                       // a zero anywhere, in order, is fine
}

TEST(Sizes, StridesOfAShapeThatOverflowsAreAnError) {
  EXPECT_THAT(error_of([] { contiguous_strides({2, k2to32, k2to32}); }), HasSubstr("more elements than int64"));
  // The outermost extent never enters a stride.
  EXPECT_EQ(contiguous_strides({INT64_MAX, 1}), (Shape{1, 1}));
}

TEST(Sizes, ATensorWhoseBytesOverflowIsOutOfMemoryNotAWrappedSize) {
  const int64_t n = int64_t(1) << 62;  // counts fine, but 2^64 bytes as f32
  EXPECT_THAT(error_of([&] { Tensor::empty({n}, DType::f32); }),
              HasSubstr("[tensor] a f32 tensor of shape [4611686018427387904] would need more bytes than size_t"));
  EXPECT_EQ(error_kind_of([&] { Tensor::empty({n / 2}, DType::f32); }), ErrorKind::out_of_memory);  // 2^63 bytes
}

TEST(Sizes, AnAllocationNearSizeMaxIsRefusedNotRoundedToNothing) {
  const MemStats before = Allocator::global().stats();
  EXPECT_EQ(error_kind_of([] { Allocator::global().allocate(SIZE_MAX, MemTag::activation); }),
            ErrorKind::out_of_memory);
  EXPECT_EQ(error_kind_of([] { Allocator::global().allocate(SIZE_MAX - 100, MemTag::activation); }),
            ErrorKind::out_of_memory);
  EXPECT_EQ(Allocator::global().stats().total_current, before.total_current);
}

}  // namespace
}  // namespace zt
