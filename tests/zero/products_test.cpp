// Note [16-bit products]: the two product paths of a 16-bit run train alike (up to summation
// order), a pinned setting is taken as it is, auto picks one of the two and says why, and every
// rank takes rank 0's choice. No timing is asserted.
#include "zt/zero/products.h"
#include "zero_harness.h"
#include "zt/autograd/autograd.h"
#include "zt/nn/transformer.h"
#include "../common/tiny_gpt.h"

using namespace zt;
using namespace zt::testing;

namespace zt::testing {
comm::GroupPtr g_world;  // unused here; the harness declares it for the mpirun tests
}

namespace {

constexpr int64_t kVocab = 37, kT = 12, kMicro = 2;

// Restores the process-wide path after each test.
struct ProductsTest : ::testing::Test {
  void TearDown() override { ops::set_lowp_products(ops::Products::native); }
};

// A tiny GPT's bf16 losses over a few steps on one batch, with the path `setting` chooses.
std::vector<double> gpt_losses(const std::string& setting, int64_t* fallbacks) {
  const nn::TransformerConfig c = testing_util::tiny_gpt(kVocab, 32);
  auto group = comm::make_group("local");
  const zero::ProductsChoice choice = zero::choose_products(*group, DType::bf16, setting, {kMicro * kT, 32, 128});
  if (ops::matmul_native(DType::bf16)) {  // else native is the f32 path too
    EXPECT_EQ(ops::products_name(choice.products), setting);
  }
  auto model = nn::make_gpt(c);
  RunSpec rs;
  rs.dtype = DType::bf16;
  rs.gas = 1;
  zero::Engine e(*model, group, options(rs));
  Generator g(17);
  std::vector<double> losses;
  const int64_t before = ops::matmul_fallback_count();
  std::vector<int32_t> v(size_t(kMicro * (kT + 1)));
  for (auto& t : v) t = int32_t(g.below(kVocab));
  const Tensor rows = Tensor::from_ints(v, {kMicro, kT + 1});  // one batch, fitted step after step
  const Tensor x = rows.slice(1, 0, kT).contiguous(), y = rows.slice(1, 1, kT + 1).contiguous().reshape({kMicro * kT});
  for (int step = 0; step < 4; ++step) {
    Tensor loss = ag::cross_entropy(ag::reshape(e.forward(std::vector<Tensor>{x}), {kMicro * kT, kVocab}), y);
    losses.push_back(loss.item());
    e.backward(loss);
    e.step(1e-2);
  }
  *fallbacks = ops::matmul_fallback_count() - before;
  return losses;
}

TEST_F(ProductsTest, PinnedPathsTrainAGptAlikeUpToSummationOrder) {
  int64_t native_fallbacks = 0, f32_fallbacks = 0;
  const std::vector<double> native = gpt_losses("native", &native_fallbacks);
  const std::vector<double> f32 = gpt_losses("f32", &f32_fallbacks);
  // Both sides ran: f32 widened every product; native widened none where oneDNN has a bf16 kernel.
  EXPECT_GT(f32_fallbacks, 0);
  if (ops::matmul_native(DType::bf16)) {
    EXPECT_EQ(native_fallbacks, 0);
  }
  ASSERT_EQ(native.size(), f32.size());
  for (size_t i = 0; i < native.size(); ++i) {
    ASSERT_TRUE(std::isfinite(native[i]));
    EXPECT_NEAR(native[i], f32[i], 0.02 * std::abs(f32[i])) << "step " << i + 1;
  }
  EXPECT_LT(f32.back(), f32.front());  // it trains
}

TEST_F(ProductsTest, AutoPicksOneOfTheTwoAndSaysWhy) {
  auto group = comm::make_group("local");
  const zero::ProductsChoice c = zero::choose_products(*group, DType::bf16, "auto", {64, 64, 256});
  EXPECT_EQ(c.setting, "auto");
  EXPECT_TRUE(c.products == ops::Products::native || c.products == ops::Products::f32);
  EXPECT_EQ(ops::lowp_products(), c.products);  // and it is in force
  EXPECT_FALSE(c.reason.empty());
  const std::string line = c.line(DType::bf16);
  EXPECT_EQ(line.rfind("bf16 products: ", 0), 0u) << line;
  EXPECT_NE(line.find(ops::products_name(c.products)), std::string::npos) << line;
  if (!c.amx && ops::matmul_native(DType::bf16)) {  // measured: both timings, the faster taken
    EXPECT_GT(c.native_ms, 0);
    EXPECT_GT(c.f32_ms, 0);
    EXPECT_EQ(c.products == ops::Products::f32, c.f32_ms < zero::kF32Margin * c.native_ms);
    EXPECT_NE(c.reason.find("measured"), std::string::npos) << c.reason;
  }
}

// Each side of auto's rule, from given facts (no timing).
TEST(DecideProducts, EachSideOfAutosRule) {
  const zero::ProductShape shape{256, 768, 3072};
  const auto slower_native =
      zero::decide_products(DType::bf16, {false, true, ops::ProductTimes{2.4e-3, 1.8e-3}}, shape);
  EXPECT_EQ(slower_native.products, ops::Products::f32);
  EXPECT_EQ(slower_native.reason, "measured 1.80 ms vs native 2.40 ms on 256x768x3072; no AMX");
  EXPECT_EQ(slower_native.line(DType::bf16),
            "bf16 products: f32 kernels (measured 1.80 ms vs native 2.40 ms on 256x768x3072; no AMX)");
  const auto faster_native =
      zero::decide_products(DType::bf16, {false, true, ops::ProductTimes{0.9e-3, 1.8e-3}}, shape);
  EXPECT_EQ(faster_native.products, ops::Products::native);
  EXPECT_EQ(faster_native.reason, "measured 0.90 ms vs f32 1.80 ms on 256x768x3072; no AMX");
  const auto tie =  // f32 a little faster, not by the margin: native, for its memory
      zero::decide_products(DType::bf16, {false, true, ops::ProductTimes{2.0e-3, 1.9e-3}}, shape);
  EXPECT_EQ(tie.products, ops::Products::native);
  EXPECT_EQ(tie.reason, "measured 2.00 ms vs f32 1.90 ms on 256x768x3072; no AMX; f32 is not 10% faster");
  const auto amx = zero::decide_products(DType::bf16, {true, true, std::nullopt}, shape);
  EXPECT_EQ(amx.products, ops::Products::native);
  EXPECT_EQ(amx.reason, "AMX");
  const auto no_kernel = zero::decide_products(DType::f16, {false, false, std::nullopt}, shape);
  EXPECT_EQ(no_kernel.products, ops::Products::f32);
  EXPECT_EQ(no_kernel.reason, "oneDNN has no f16 kernel here; no AMX");
  EXPECT_EQ(ops::lowp_products(), ops::Products::native);  // deciding sets nothing
}

TEST_F(ProductsTest, AutoOnAnotherRankTakesRankZerosChoiceWithoutMeasuring) {
  // The fake group's peers contribute what this rank does: rank 1 of 2 sees only non-lead votes.
  auto group = comm::make_fake_group(1, 2);
  const zero::ProductsChoice c = zero::choose_products(*group, DType::bf16, "auto", {64, 64, 256});
  EXPECT_EQ(c.native_ms, 0);
  EXPECT_EQ(c.reason, "rank 0's choice");
  EXPECT_EQ(ops::lowp_products(), c.products);
}

TEST_F(ProductsTest, PinnedSettingsAreTakenAsTheyAre) {
  auto group = comm::make_group("local");
  EXPECT_EQ(zero::choose_products(*group, DType::bf16, "f32", {}).products, ops::Products::f32);
  EXPECT_EQ(ops::lowp_products(), ops::Products::f32);
  // Native is native where oneDNN has the 16-bit kernel; without one (no AVX512-BF16, or
  // ONEDNN_MAX_CPU_ISA below it; oneDNN 2.7 has no CPU f16 matmul) it is the f32 path, and says so.
  for (DType dt : {DType::bf16, DType::f16}) {
    const zero::ProductsChoice c = zero::choose_products(*group, dt, "native", {});
    const ops::Products want = ops::matmul_native(dt) ? ops::Products::native : ops::Products::f32;
    EXPECT_EQ(c.products, want) << dtype_name(dt);
    EXPECT_EQ(ops::lowp_products(), want) << dtype_name(dt);
    EXPECT_EQ(c.reason.find("no " + std::string(dtype_name(dt)) + " kernel") != std::string::npos,
              want == ops::Products::f32)
        << c.reason;
  }
}

TEST_F(ProductsTest, AnUnknownSettingIsAConfigErrorNamingTheKeyAndTheChoices) {
  auto group = comm::make_group("local");
  try {
    zero::choose_products(*group, DType::bf16, "fast", {});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::config);
    const std::string m = e.what();
    EXPECT_NE(m.find("run.bf16_products"), std::string::npos) << m;
    EXPECT_NE(m.find("auto, native, f32"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

}  // namespace
