// Note [processor cap]: one variable, ONEDNN_MAX_CPU_ISA (oneDNN's own, e.g. AVX2), caps both
// oneDNN's kernels and zerotrain's own vector code, so a machine with AVX-512 also runs and tests
// the AVX2 path (scripts/test.sh runs the processor-dependent tests a second time capped). oneDNN
// reads it once; the own code takes oneDNN's effective ISA, so the two never disagree. The own
// explicit vector paths (the f16 conversions) are compiled for every ISA with target attributes
// and chosen here at run time; the rest is compiler-vectorised without reassociation, so its
// results do not depend on the vector width.
#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <oneapi/dnnl/dnnl.hpp>

#include "convert.h"
#include "zt/core/error.h"
#include "zt/ops/ops.h"

namespace zt::ops::cpu {
namespace {

using ops::CpuIsa;
using ops::F16Path;
using ops::cpu_isa;

struct IsaName {
  dnnl::cpu_isa isa;
  const char* name;
};
// oneDNN 2.6's values, highest first (each a bit set containing the ones below it).
constexpr IsaName kIsas[] = {{dnnl::cpu_isa::avx512_core_amx, "avx512_core_amx"},
                             {dnnl::cpu_isa::avx512_core_bf16, "avx512_core_bf16"},
                             {dnnl::cpu_isa::avx512_core_vnni, "avx512_core_vnni"},
                             {dnnl::cpu_isa::avx512_core, "avx512_core"},
                             {dnnl::cpu_isa::avx2_vnni, "avx2_vnni"},
                             {dnnl::cpu_isa::avx2, "avx2"},
                             {dnnl::cpu_isa::avx, "avx"},
                             {dnnl::cpu_isa::sse41, "sse41"}};
// What oneDNN versions accept (it ignores anything else, which would silently test the wrong path).
constexpr const char* kCapNames[] = {"SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_MIC",
                                     "AVX512_MIC_4OPS", "AVX512_CORE", "AVX512_CORE_VNNI", "AVX512_CORE_BF16",
                                     "AVX512_CORE_FP16", "AVX512_CORE_AMX", "AVX512_CORE_AMX_FP16", "AVX10_1_512",
                                     "AVX10_1_512_AMX", "AVX10_1_512_AMX_FP16", "DEFAULT", "ALL"};

bool contains(dnnl::cpu_isa have, dnnl::cpu_isa want) { return (int(have) & int(want)) == int(want); }

bool cpuid_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
}

CpuIsa detect() {
  CpuIsa r;
  if (const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA")) {
    std::string up = cap;
    for (char& ch : up) ch = char(std::toupper(static_cast<unsigned char>(ch)));
    std::string known;
    for (const char* n : kCapNames) known += (known.empty() ? "" : ", ") + std::string(n);
    // Never thrown from here (kernels ask, some inside parallel regions): check_cpu_isa says it.
    if (std::find(std::begin(kCapNames), std::end(kCapNames), up) == std::end(kCapNames))
      r.cap_error = "[cpu] ONEDNN_MAX_CPU_ISA=\"" + std::string(cap) + "\" is not an ISA oneDNN knows (one of " + known + ")";
    r.cap = up;
  }
  const dnnl::cpu_isa eff = dnnl::get_effective_cpu_isa();
  r.name = "unknown";
  for (const IsaName& i : kIsas)
    if (contains(eff, i.isa)) {
      r.name = i.name;
      break;
    }
  r.avx2 = contains(eff, dnnl::cpu_isa::avx2) && __builtin_cpu_supports("avx2");
  r.f16c = r.avx2 && cpuid_f16c();
  r.avx512 = contains(eff, dnnl::cpu_isa::avx512_core) && __builtin_cpu_supports("avx512f");
  return r;
}

std::atomic<int> g_forced_path{-1};  // a test's choice of F16Path, or -1

F16Path path() {
  const int forced = g_forced_path.load(std::memory_order_relaxed);
  if (forced >= 0) return F16Path(forced);
  static const F16Path best = cpu_isa().avx512 ? F16Path::avx512 : cpu_isa().f16c ? F16Path::f16c : F16Path::scalar;
  return best;
}

__attribute__((target("avx512f"))) int64_t to_f32_avx512(const f16* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i, _mm512_maskz_cvtph_ps(0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
  return i;
}
__attribute__((target("avx,f16c"))) int64_t to_f32_f16c(const f16* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  return i;
}
constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
__attribute__((target("avx512f"))) int64_t from_f32_avx512(const float* src, f16* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm512_maskz_cvtps_ph(0xffff, _mm512_loadu_ps(src + i), kRound));
  return i;
}
__attribute__((target("avx,f16c"))) int64_t from_f32_f16c(const float* src, f16* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), kRound));
  return i;
}

}  // namespace

void to_f32(const f16* src, float* dst, int64_t n) {
  const F16Path p = path();
  int64_t i = p == F16Path::avx512 ? to_f32_avx512(src, dst, n) : p == F16Path::f16c ? to_f32_f16c(src, dst, n) : 0;
  for (; i < n; ++i) dst[i] = f16_to_float(src[i]);
}

void from_f32(const float* src, f16* dst, int64_t n) {
  const F16Path p = path();
  int64_t i =
      p == F16Path::avx512 ? from_f32_avx512(src, dst, n) : p == F16Path::f16c ? from_f32_f16c(src, dst, n) : 0;
  for (; i < n; ++i) dst[i] = float_to_f16(src[i]);
}

}  // namespace zt::ops::cpu

namespace zt::ops {

const CpuIsa& cpu_isa() {
  static const CpuIsa isa = cpu::detect();
  return isa;
}

void check_cpu_isa() {
  ZT_CHECK_AS(ErrorKind::config, cpu_isa().cap_error.empty(), cpu_isa().cap_error);
}

std::vector<F16Path> f16_paths() {
  std::vector<F16Path> p{F16Path::scalar};
  if (cpu_isa().f16c) p.push_back(F16Path::f16c);
  if (cpu_isa().avx512) p.push_back(F16Path::avx512);
  return p;
}

void force_f16_path_for_testing(std::optional<F16Path> p) { cpu::g_forced_path.store(p ? int(*p) : -1); }

}  // namespace zt::ops
