// Run under mpirun -np N (up to 4): consolidated export of a checkpoint equals the trained
// parameters (model order, names, shapes; f32 and bf16; any chunking), streams within one
// buffer's memory, and import of it into a fresh engine at any world size 1..N and stage gives
// those parameters exactly, with fresh optimizer state; malformed imports name the parameter.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "ckpt_test_util.h"
#include "zt/ckpt/checkpoint.h"
#include "zt/ckpt/export.h"
#include "zt/ckpt/safetensors.h"
#include "zt/core/allocator.h"

using namespace zt;
using namespace zt::testing;
namespace fs = std::filesystem;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

bool has_temp_files(const std::string& dir) {
  for (const auto& d : fs::directory_iterator(dir))
    if (d.path().filename().string().find(".tmp-") != std::string::npos) return true;
  return false;
}

// Trains 3 steps at world N and saves; returns the checkpoint folder and the parameters.
std::string trained_checkpoint(const std::string& dir, const RunSpec& s, std::vector<std::vector<float>>& params,
                               std::vector<std::string>* names = nullptr) {
  const Data d = make_data(4 * s.micro * s.gas * g_world->size());
  auto model = make_model();
  zero::Engine e(*model, g_world, options(s));
  run_steps(e, s, d, 0, 3);
  const std::string path = ckpt::save_checkpoint(e, {dir, "step_3", 0, {{"step", 3}}});
  params = full_params(e);
  if (names) *names = e.param_names();
  return path;
}

void expect_tensors(const ckpt::LoadedTensors& got, const std::vector<std::string>& names,
                    const std::vector<std::vector<float>>& want, DType dt, const std::string& where) {
  ASSERT_EQ(got.tensors.size(), names.size()) << where;
  for (size_t i = 0; i < names.size(); ++i) {
    const Tensor* t = got.find(names[i]);
    ASSERT_TRUE(t) << where << ": no " << names[i];
    EXPECT_EQ(t->dtype(), dt) << where << ", " << names[i];
    EXPECT_EQ(t->to_vector(), want[i]) << where << ", " << names[i];
  }
}

TEST(Export, ConsolidatedWeightsAreTheTrainedParametersInModelOrder) {
  for (DType dt : {DType::f32, DType::bf16})
    for (int stage : {0, 3}) {
      const std::string dir = shared_tmpdir("export"),
                        where = std::string(dtype_name(dt)) + " stage " + std::to_string(stage);
      RunSpec s;
      s.stage = stage;
      s.dtype = dt;
      std::vector<std::vector<float>> want;
      std::vector<std::string> names;
      const std::string path = trained_checkpoint(dir, s, want, &names);
      if (g_world->rank() == 0) {
        auto model = make_model();
        const std::string out = dir + "/model.safetensors";
        const ckpt::ExportStats st = ckpt::export_safetensors(path, out);
        EXPECT_EQ(st.tensors, int64_t(names.size())) << where;
        EXPECT_EQ(st.file_bytes, fs::file_size(out)) << where;
        const ckpt::LoadedTensors got = ckpt::load_safetensors(out);
        expect_tensors(got, names, want, DType::f32, where);
        for (auto& [name, p] : model->named_parameters())
          EXPECT_EQ(got.find(name)->shape(), p.shape()) << where << ", " << name;
        // 16-bit kept as it was trained; a chunk smaller than every parameter gives the same file.
        if (dt == DType::bf16) {
          ckpt::export_safetensors(path, dir + "/bf16.safetensors", {DType::bf16});
          expect_tensors(ckpt::load_safetensors(dir + "/bf16.safetensors"), names, want, DType::bf16, where);
        }
        ckpt::ExportOptions small;
        small.chunk_elems = 7;
        if (dt == DType::f32)  // narrowing, in place, across chunk boundaries
          for (DType to : {DType::bf16, DType::f16}) {
            small.dtype = to;
            ckpt::export_safetensors(path, dir + "/narrow.safetensors", small);
            std::vector<std::vector<float>> rounded;
            for (auto& v : want) rounded.push_back(Tensor::from_vector(v, {int64_t(v.size())}).to(to).to_vector());
            expect_tensors(ckpt::load_safetensors(dir + "/narrow.safetensors"), names, rounded, to, where);
          }
        small.dtype = DType::f32;
        ckpt::export_safetensors(path, dir + "/chunked.safetensors", small);
        EXPECT_EQ(slurp(dir + "/chunked.safetensors"), slurp(out)) << where;
        ckpt::export_safetensors(path, out);  // replaces the file, leaves no temporary behind
        EXPECT_FALSE(has_temp_files(dir)) << where;
      }
      g_world->barrier();
      if (g_world->rank() == 0) fs::remove_all(dir);
    }
}

// Note [export memory]: a model of 11 buckets whose weights are >= 8x its largest buffer; the
// allocator's peak during export is bounded by one buffer plus one shard (+10%), which a
// consolidation holding the model would exceed 8 times over.
TEST(Export, PeakMemoryStaysWithinTheLargestBufferPlusOneShard) {
  for (DType dt : {DType::f32, DType::bf16}) {
    const std::string dir = shared_tmpdir("export_mem");
    RunSpec s;
    s.stage = 2;
    s.dtype = dt;
    s.bucket = 64 * 64 + 64;  // one layer per buffer
    auto model = nn::make_mlp(64, std::vector<int64_t>(10, 64), 64, "relu", 7);
    zero::Engine e(*model, g_world, options(s));
    const std::string path = ckpt::save_checkpoint(e, {dir, "t", 0, {}});
    if (g_world->rank() == 0) {
      int64_t largest = 0;
      for (auto& b : e.plan().buffers) largest = std::max(largest, b.padded);
      const double buffer = double(largest) * 4, shard = double(largest / e.plan().world) * dtype_size(dt);
      const double model_bytes = double(e.num_params()) * 4;
      ASSERT_GE(model_bytes, 8 * buffer) << "the model must be >= 8x its largest buffer for this test to mean anything";
      Allocator& a = Allocator::global();
      a.reset_peaks();
      const size_t before = a.stats().total_current;
      const ckpt::ExportStats st = ckpt::export_safetensors(path, dir + "/model.safetensors");
      const double peak = double(a.stats().total_peak - before);
      EXPECT_GT(peak, 0) << dtype_name(dt);
      EXPECT_LE(peak, 1.1 * (buffer + shard)) << dtype_name(dt) << ": buffer " << buffer << ", shard " << shard;
      EXPECT_GE(double(st.file_bytes), model_bytes);
      EXPECT_LE(double(st.largest_buffer_bytes), buffer);
    }
    g_world->barrier();
    if (g_world->rank() == 0) fs::remove_all(dir);
  }
}

bool all_zero(const Tensor& t) {
  for (float v : t.to_vector())
    if (v != 0.f) return false;
  return true;
}

// Train at world N stage 2, save, export (f32, and bf16 for bf16 runs); import into engines of
// every world size and stage, initialised differently: the parameters are the exported ones.
TEST(Import, IntoAFreshEngineAtAnyWorldSizeAndStageGivesTheExportedValuesExactly) {
  const int N = g_world->size();
  for (DType dt : {DType::f32, DType::bf16}) {
    const std::string dir = shared_tmpdir("import");
    RunSpec s;
    s.stage = 2;
    s.dtype = dt;
    std::vector<std::vector<float>> want;
    const std::string path = trained_checkpoint(dir, s, want);
    const std::string file = dir + "/model.safetensors", file16 = dir + "/model16.safetensors";
    if (g_world->rank() == 0) {
      ckpt::export_safetensors(path, file);
      if (dt == DType::bf16) ckpt::export_safetensors(path, file16, {DType::bf16});
    }
    g_world->barrier();
    for (int nl = 1; nl <= N; ++nl)
      for (int sl : {0, 2, 3})
        for (const std::string& from : dt == DType::bf16 ? std::vector{file, file16} : std::vector{file}) {
          comm::GroupPtr g = first_ranks(nl);
          if (!g) continue;
          RunSpec r = s;
          r.stage = sl;
          auto model = nn::make_mlp(13, {19, 7}, 5, "relu", 5);
          zero::Engine e(*model, g, options(r));
          const std::string where = std::string(dtype_name(dt)) + " from " + fs::path(from).filename().string() +
                                    " into world " + std::to_string(nl) + " stage " + std::to_string(sl);
          const ckpt::ImportReport rep = ckpt::import_safetensors(e, from);
          EXPECT_EQ(rep.tensors, int64_t(e.params().size())) << where;
          EXPECT_TRUE(rep.unused.empty()) << where;
          EXPECT_EQ(e.optimizer_steps(), 0) << where;
          const auto got = full_params(e);
          if (g->rank() == 0) {
            EXPECT_EQ(got, want) << where;
          }
          bool saw_state = false;
          for (auto& st : e.shard_states())
            for (auto& s : st.tensors) {
              const std::string& name = s.name;
              const Tensor& t = s.tensor;
              if (name == "master") {
                EXPECT_EQ(t.to_vector(), st.tensors[0].tensor.to_vector()) << where;
              }
              if (name == "param" || name == "master") continue;
              saw_state = true;
              EXPECT_TRUE(all_zero(t)) << where << ": " << name << " is not fresh";
            }
          EXPECT_TRUE(saw_state) << where;
          const Data d = make_data(4 * r.micro * r.gas * nl);
          for (double l : run_steps(e, r, d, 0, 1)) EXPECT_TRUE(std::isfinite(l)) << where;
        }
    g_world->barrier();
    if (g_world->rank() == 0) fs::remove_all(dir);
  }
}

// Files rank 0 writes from the model's parameters, with one change each.
std::string write_variant(const std::string& dir, const std::string& name, const std::string& drop,
                          const std::string& reshape, bool extra) {
  const std::string path = dir + "/" + name + ".safetensors";
  if (g_world->rank() == 0) {
    auto model = make_model();
    std::vector<std::pair<std::string, Tensor>> ts;
    for (auto& [n, p] : model->named_parameters()) {
      if (n == drop) continue;
      ts.emplace_back(n, n == reshape ? Tensor::zeros({20, 13}) : p);
    }
    if (extra) ts.emplace_back("head.weight", Tensor::zeros({2, 2}));
    fs::create_directories(dir);
    ckpt::save_safetensors(path, ts);
  }
  g_world->barrier();
  return path;
}

void expect_import_error(const std::string& path, const std::string& needle) {
  RunSpec s;
  s.stage = 3;
  auto model = make_model();
  zero::Engine e(*model, g_world, options(s));
  try {
    ckpt::import_safetensors(e, path);
    ADD_FAILURE() << "imported " << path;
  } catch (const Error& err) {  // every rank reads the header and fails by itself
    EXPECT_EQ(err.kind(), ErrorKind::checkpoint);
    EXPECT_NE(std::string(err.what()).find(needle), std::string::npos) << err.what();
  }
}

TEST(Import, AShapeMismatchOrAMissingTensorNamesTheParameterOnEveryRank) {
  const std::string dir = shared_tmpdir("import_bad");
  expect_import_error(write_variant(dir, "wide", "", "0.weight", false),
                      "parameter '0.weight' has shape [20, 13] in the file and [19, 13] in the model");
  expect_import_error(write_variant(dir, "short", "2.bias", "", false), "has no tensor '2.bias'");
  auto model = make_model();
  zero::Engine e(*model, g_world, options(RunSpec{}));
  const ckpt::ImportReport rep = ckpt::import_safetensors(e, write_variant(dir, "extra", "", "", true));
  EXPECT_EQ(rep.unused, std::vector<std::string>{"head.weight"});
  g_world->barrier();
  if (g_world->rank() == 0) fs::remove_all(dir);
}

// Writes exports for tests/ckpt/read_safetensors.py (into $ZT_PY_FIXTURE_DIR, else a temporary
// folder): f32 and bf16 files of a bf16 run, and expected.json with names, shapes and values.
TEST(PythonReader, ExportsAndTheValuesTheyHold) {
  const char* env = std::getenv("ZT_PY_FIXTURE_DIR");
  const std::string out = env ? env : shared_tmpdir("py");
  const std::string dir = shared_tmpdir("py_ckpt");
  RunSpec s;
  s.dtype = DType::bf16;
  s.stage = 3;
  std::vector<std::vector<float>> want;
  std::vector<std::string> names;
  const std::string path = trained_checkpoint(dir, s, want, &names);
  if (g_world->rank() == 0) {
    fs::create_directories(out);
    ckpt::export_safetensors(path, out + "/model_f32.safetensors");
    ckpt::export_safetensors(path, out + "/model_bf16.safetensors", {DType::bf16});
    auto model = make_model();
    std::map<std::string, Shape> shapes;
    for (auto& [n, p] : model->named_parameters()) shapes[n] = p.shape();
    nlohmann::json tensors = nlohmann::json::array();
    for (size_t i = 0; i < names.size(); ++i)
      tensors.push_back({{"name", names[i]}, {"shape", shapes.at(names[i])}, {"values", want[i]}});
    nlohmann::json j = {{"files",
                         {{{"file", "model_f32.safetensors"}, {"dtype", "F32"}},
                          {{"file", "model_bf16.safetensors"}, {"dtype", "BF16"}}}},
                        {"tensors", tensors}};
    std::ofstream(out + "/expected.json") << j.dump() << "\n";
    expect_tensors(ckpt::load_safetensors(out + "/model_bf16.safetensors"), names, want, DType::bf16, "bf16 file");
    if (!env) fs::remove_all(out);
  }
  g_world->barrier();
  if (g_world->rank() == 0) fs::remove_all(dir);
}

}  // namespace
