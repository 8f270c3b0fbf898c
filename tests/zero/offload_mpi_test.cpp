// Optimizer offload to disk (Note [optimizer swap]): the trajectory is the in-memory one bit for
// bit at stages 1-3, fp32 and bf16, through every pipeline depth; memory holds only the tile
// buffers; checkpoints stream the swapped states and load into either placement; a damaged
// swap file is an error naming the file, the tile and its offset.
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

#include "swap_file.h"
#include "zero_harness.h"
#include "zt/ckpt/checkpoint.h"
#include "zt/core/allocator.h"

using namespace zt;
using namespace zt::testing;
namespace fs = std::filesystem;

namespace {

// 13-120-70-5: 10,505 parameters, so shards span several 1024-element tiles.
std::shared_ptr<nn::Module> wide_model() { return nn::make_mlp(13, {120, 70}, 5, "relu", 4321); }
// The same values computed only when the engine asks (Note [deferred init]), as `train` builds.
std::shared_ptr<nn::Module> deferred_wide_model() {
  nn::DeferredInit defer;
  return wide_model();
}

// A folder every rank shares (rank 0 picks its name), removed by rank 0 at the end.
struct SharedDir {
  explicit SharedDir(const std::string& what) {
    Tensor id = Tensor::zeros({1}, DType::i64);
    if (g_world->rank() == 0) id.data<int64_t>()[0] = int64_t(std::random_device{}() & 0x7fffffff);
    g_world->broadcast(id, 0);
    path = (fs::temp_directory_path() / ("zt_offload_" + what + "_" + std::to_string(id.data<int64_t>()[0]))).string();
  }
  ~SharedDir() {
    g_world->barrier();
    if (g_world->rank() == 0) fs::remove_all(path);
  }
  std::string path;
};

struct OffloadCase {
  int stage;
  DType dtype;
  int buffers;          // tile buffers: 1 (no read-ahead), 2, 4
  bool overlap = true;  // aio.overlap_events
};
void PrintTo(const OffloadCase& c, std::ostream* os) {
  *os << "stage " << c.stage << " " << dtype_name(c.dtype) << " buffers " << c.buffers << (c.overlap ? "" : " serial");
}

RunSpec spec(const OffloadCase& c) {
  RunSpec s;
  s.stage = c.stage;
  s.dtype = c.dtype;
  s.steps = 6;
  s.bucket = 6000;  // buckets of several tiles per rank
  return s;
}

zero::EngineOptions offloaded(const RunSpec& s, const OffloadCase& c, const std::string& dir) {
  zero::EngineOptions o = options(s);
  o.zero.offload_optimizer.device = "nvme";
  o.zero.offload_optimizer.nvme_path = dir;
  o.zero.offload_optimizer.buffer_count = c.buffers;
  o.zero.sub_group_size = 1024;
  o.aio.block_size = 8192;  // several pieces per record
  o.aio.queue_depth = 3;    // fewer entries than pieces: the ring fills and drains
  o.aio.overlap_events = c.overlap;
  return o;
}

RunResult run(zero::Engine& e, const RunSpec& s, const Data& d, int64_t from = 0) {
  RunResult out;
  for (int64_t step = from; step < s.steps; ++step) {
    const double loss = train_step(e, s, d, step);
    e.step(1e-2);
    out.losses.push_back(g_world->all_reduce_scalar(loss) / double(g_world->size()));
  }
  e.for_each_full_param([&](const std::string&, const Tensor& p) { out.params.push_back(p.to_vector()); });
  return out;
}

void expect_identical(const RunResult& got, const RunResult& want) {
  ASSERT_EQ(got.losses, want.losses);
  ASSERT_EQ(got.params.size(), want.params.size());
  for (size_t p = 0; p < want.params.size(); ++p) EXPECT_EQ(got.params[p], want.params[p]) << "parameter " << p;
}

class Offload : public ::testing::TestWithParam<OffloadCase> {};

TEST_P(Offload, FollowsTheInMemoryTrajectoryBitForBitHoldingOnlyTheTileBuffers) {
  const OffloadCase c = GetParam();
  const RunSpec s = spec(c);
  const Data d = make_data(s.steps * s.micro * s.gas * g_world->size());
  SharedDir dir("trajectory");
  auto ref_model = wide_model();
  zero::Engine ref(*ref_model, g_world, options(s));
  const RunResult want = run(ref, s, d);

  Allocator::global().release_cached();
  const MemStats before = Allocator::global().stats();
  auto model = wide_model();
  zero::Engine e(*model, g_world, offloaded(s, c, dir.path));
  const MemStats after = Allocator::global().stats();
  const zero::MemoryEstimate m = e.expected_memory();
  EXPECT_EQ(m.master, 0);
  EXPECT_EQ(m.optim, c.buffers * e.plan().swap_slot_bytes());
  EXPECT_EQ(int64_t(after.of(MemTag::optim) - before.of(MemTag::optim)), m.optim);
  EXPECT_EQ(after.of(MemTag::master), before.of(MemTag::master));
  EXPECT_EQ(e.plan().swap_tile_elems(), 1024);  // several tiles per buffer
  expect_identical(run(e, s, d), want);
  const zero::SwapStats st = e.swap_stats();
  EXPECT_GT(st.bytes_read, 0u);
  EXPECT_GT(st.bytes_written, st.bytes_read);  // the first update writes every tile unread (Note [fresh swap files])
}

INSTANTIATE_TEST_SUITE_P(Zero, Offload,
                         ::testing::Values(OffloadCase{1, DType::f32, 4}, OffloadCase{2, DType::f32, 2},
                                           OffloadCase{3, DType::f32, 4}, OffloadCase{1, DType::bf16, 2},
                                           OffloadCase{2, DType::bf16, 4}, OffloadCase{3, DType::bf16, 1},
                                           OffloadCase{3, DType::f32, 3, false}));

// A checkpoint of a run whose states live in swap files (`offload(spec, subfolder)`) streams
// them; loaded into an in-memory engine and into an offloaded one, both continue exactly as a
// run that never stopped.
void expect_checkpoint_loads_into_either_placement(
    int stage, const std::function<zero::EngineOptions(const RunSpec&, const std::string&)>& offload) {
  for (DType dt : {DType::f32, DType::bf16}) {
    const RunSpec s = spec(OffloadCase{stage, dt, 2});
    const Data d = make_data(s.steps * s.micro * s.gas * g_world->size());
    SharedDir dir("ckpt");
    auto ref_model = wide_model();
    zero::Engine ref(*ref_model, g_world, options(s));
    RunResult want = run(ref, s, d);
    want.losses.erase(want.losses.begin(), want.losses.begin() + 3);  // the steps after the checkpoint

    RunSpec first = s;
    first.steps = 3;
    auto m1 = wide_model();
    zero::Engine saved(*m1, g_world, offload(first, dir.path + "/swap_a"));
    run(saved, first, d);
    ckpt::save_checkpoint(saved, {dir.path + "/ckpt", "step_3", 0, {{"step", 3}}});

    auto m2 = wide_model();
    zero::Engine in_memory(*m2, g_world, options(s));
    ckpt::load_checkpoint(in_memory, dir.path + "/ckpt/step_3");
    expect_identical(run(in_memory, s, d, 3), want);

    auto m3 = wide_model();
    zero::Engine swapped(*m3, g_world, offload(s, dir.path + "/swap_b"));
    ckpt::load_checkpoint(swapped, dir.path + "/ckpt/step_3");
    expect_identical(run(swapped, s, d, 3), want);
  }
}

TEST(OffloadCheckpoint, SavesStreamedStatesThatLoadIntoEitherPlacement) {
  expect_checkpoint_loads_into_either_placement(2, [](const RunSpec& s, const std::string& dir) {
    return offloaded(s, OffloadCase{2, s.dtype, 2}, dir);
  });
}

// Note [fresh swap files]: saved before any update (nothing written to the swap files yet), the
// checkpoint holds the initial master and zero states, and with the parameters swapped too (their
// values an initialiser's) the initial parameters: loaded in memory, training from step 0 is the
// in-memory run's.
TEST(OffloadCheckpoint, AFreshSwapFileSavesTheInitialStates) {
  for (DType dt : {DType::f32, DType::bf16})
    for (bool params_too : {false, true}) {
      const RunSpec s = spec(OffloadCase{3, dt, 2});
      const Data d = make_data(s.steps * s.micro * s.gas * g_world->size());
      SharedDir dir("fresh");
      auto ref_model = wide_model();
      zero::Engine ref(*ref_model, g_world, options(s));
      const RunResult want = run(ref, s, d);
      auto m1 = params_too ? deferred_wide_model() : wide_model();
      zero::EngineOptions o = offloaded(s, OffloadCase{3, dt, 2}, dir.path + "/swap");
      if (params_too) {
        o.zero.offload_param.device = "nvme";
        o.zero.offload_param.nvme_path = dir.path + "/param";
        o.zero.sub_group_size = 1024;  // several records per unit
      }
      zero::Engine fresh(*m1, g_world, o);
      EXPECT_EQ(fresh.swap_stats().bytes_written, 0u) << "start-up wrote records";
      ckpt::save_checkpoint(fresh, {dir.path + "/ckpt", "step_0", 0, {{"step", 0}}});
      auto m2 = nn::make_mlp(13, {120, 70}, 5, "relu", 99);  // other initial values: the checkpoint's count
      zero::Engine in_memory(*m2, g_world, options(s));
      ckpt::load_checkpoint(in_memory, dir.path + "/ckpt/step_0");
      expect_identical(run(in_memory, s, d), want);
    }
}

// Note [parameter swap]: stage-3 parameter shards in swap files follow the in-memory trajectory
// bit for bit, with and without read-ahead (prefetch), persistent units and the optimizer swapped
// too; memory holds only the persistent units at rest, and nothing is left read in after a step.
struct ParamCase {
  DType dtype;
  bool optimizer_too;   // offload_optimizer nvme as well
  int64_t prefetch;     // stage3_prefetch_bucket_size: 200 gathers on demand, 1e6 reads ahead
  int64_t persistence;  // 2000: the first and last layers (1,680 and 355 elements) stay in memory
  bool deferred = true;  // the model's values are initialisers' (as `train` builds), not held
};
void PrintTo(const ParamCase& c, std::ostream* os) {
  *os << dtype_name(c.dtype) << (c.optimizer_too ? " +optimizer" : "") << " prefetch " << c.prefetch << " persistence "
      << c.persistence << (c.deferred ? "" : " eager");
}

class ParamOffload : public ::testing::TestWithParam<ParamCase> {};

TEST_P(ParamOffload, FollowsTheInMemoryTrajectoryBitForBitHoldingOnlyPersistentUnits) {
  const ParamCase c = GetParam();
  RunSpec s = spec(OffloadCase{3, c.dtype, 2});
  s.persistence = c.persistence;
  const Data d = make_data(s.steps * s.micro * s.gas * g_world->size());
  SharedDir dir("params");
  zero::EngineOptions mem = options(s);
  mem.zero.stage3_prefetch_bucket_size = c.prefetch;
  auto ref_model = wide_model();
  zero::Engine ref(*ref_model, g_world, mem);
  const RunResult want = run(ref, s, d);

  zero::EngineOptions o = c.optimizer_too ? offloaded(s, OffloadCase{3, c.dtype, 2}, dir.path + "/opt") : mem;
  o.zero.stage3_prefetch_bucket_size = c.prefetch;
  o.zero.offload_param.device = "nvme";
  o.zero.offload_param.nvme_path = dir.path + "/param";
  o.zero.sub_group_size = 1024;  // several records per unit
  Allocator::global().release_cached();
  const size_t before = Allocator::global().stats().of(MemTag::param);
  auto model = c.deferred ? deferred_wide_model() : wide_model();
  zero::Engine e(*model, g_world, o);
  // Note [fresh swap files]: values from initialisers are computed when first read, not written now.
  EXPECT_EQ(e.swap_stats().bytes_written == 0, c.deferred);
  const zero::MemoryEstimate m = e.expected_memory();
  EXPECT_LT(m.param, ref.expected_memory().param);
  EXPECT_EQ(m.param == 0, c.persistence == 0);
  EXPECT_EQ(int64_t(Allocator::global().stats().of(MemTag::param) - before), m.param);
  expect_identical(run(e, s, d), want);
  EXPECT_EQ(int64_t(Allocator::global().stats().of(MemTag::param) - before), m.param) << "a shard stayed read in";
  const zero::SwapStats st = e.swap_stats();
  EXPECT_GT(st.bytes_read, 0u);
  EXPECT_GT(st.bytes_written, 0u);
  int64_t files = 0;
  for (auto& f : fs::directory_iterator(dir.path + "/param/rank" + std::to_string(g_world->rank())))
    files += f.path().filename().string()[0] == 'p';
  EXPECT_EQ(files, c.persistence == 0 ? 3 : 1);  // one per unit not kept in memory
}

INSTANTIATE_TEST_SUITE_P(Zero, ParamOffload,
                         ::testing::Values(ParamCase{DType::f32, false, 200, 0},
                                           ParamCase{DType::f32, false, 1000000, 0},
                                           ParamCase{DType::bf16, false, 1000000, 2000},
                                           ParamCase{DType::f32, true, 1000000, 2000},
                                           ParamCase{DType::bf16, true, 200, 0},
                                           ParamCase{DType::f32, false, 1000000, 0, false}));

// The same with the parameters swapped (stage 3).
TEST(ParamOffloadCheckpoint, SavesStreamedParametersThatLoadIntoEitherPlacement) {
  expect_checkpoint_loads_into_either_placement(3, [](const RunSpec& s, const std::string& dir) {
    zero::EngineOptions o = options(s);
    o.zero.offload_param.device = "nvme";
    o.zero.offload_param.nvme_path = dir;
    o.zero.sub_group_size = 1024;
    return o;
  });
}

// Note [gradient buckets]: with DeepSpeed's default reduce_bucket_size (5e8, one bucket for the
// whole model) the peak still falls from stage 0 to 2: at stage 2 each layer's gradient is
// reduced and freed as its backward ends, not held whole beside the gradient shard.
TEST(PeakMemory, FallsFromStageZeroToTwoWithTheDefaultBucketSize) {
  if (g_world->size() < 2) GTEST_SKIP() << "stages differ only with several ranks";
  RunSpec s;
  s.steps = 2;
  s.micro = 4;
  s.gas = 1;
  s.bucket = 500'000'000;
  const Data d = make_data(s.steps * s.micro * s.gas * g_world->size());
  std::vector<int64_t> peaks;
  for (int stage = 0; stage <= 2; ++stage) {
    s.stage = stage;
    Allocator::global().release_cached();
    Allocator::global().reset_peaks();
    const size_t before = Allocator::global().stats().total_current;
    {
      auto model = nn::make_mlp(13, {1024, 1024, 1024, 1024, 1024}, 5, "relu", 7);  // 4.2M parameters
      zero::Engine e(*model, g_world, options(s));
      for (int64_t step = 0; step < s.steps; ++step) {
        train_step(e, s, d, step);
        e.step(1e-2);
      }
    }
    peaks.push_back(int64_t(Allocator::global().stats().total_peak - before));
  }
  EXPECT_GT(peaks[0], peaks[1]);
  EXPECT_GT(peaks[1], peaks[2]) << "stage 2 holds more than stage 1 at its peak";
}

// The swap file itself: damaged bytes and a cut file are errors naming the file, tile and offset.
class SwapFileFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!zero::SwapFile::available()) GTEST_SKIP() << "built without liburing";
    dir_ =
        fs::temp_directory_path() / ("zt_swap_" + std::to_string(::getpid()) + "_" + std::to_string(g_world->rank()));
    fs::create_directories(dir_);
    for (int i = 0; i < 2; ++i) {
      void* p = nullptr;
      ASSERT_EQ(posix_memalign(&p, 4096, kRecord), 0);
      buf_[i] = static_cast<char*>(p);
    }
  }
  void TearDown() override {
    for (char* b : buf_) std::free(b);
    fs::remove_all(dir_);
  }
  // Writes 3 records of distinct bytes; returns the file.
  std::unique_ptr<zero::SwapFile> three_records() {
    auto f = std::make_unique<zero::SwapFile>((dir_ / "t.swap").string(), 3, kRecord, 2, zero::SwapOptions{});
    for (int t = 0; t < 3; ++t) {
      std::memset(buf_[0], 'a' + t, kRecord);
      f->write(t, buf_[0], 0);
      f->wait(0);
    }
    return f;
  }
  std::string read_error(zero::SwapFile& f, int64_t t) {
    try {
      f.read(t, buf_[1], 1);
      f.wait(1);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::checkpoint);
      return e.what();
    }
    return "";
  }
  static constexpr size_t kRecord = 8192;
  fs::path dir_;
  char* buf_[2] = {nullptr, nullptr};
};

TEST_F(SwapFileFaults, ARecordReadsBackAsWritten) {
  auto f = three_records();
  EXPECT_EQ(read_error(*f, 1), "");
  EXPECT_EQ(buf_[1][0], 'b');
  EXPECT_EQ(buf_[1][kRecord - 1], 'b');
}

TEST_F(SwapFileFaults, AFlippedByteNamesTheFileTileAndOffset) {
  auto f = three_records();
  const int fd = ::open(f->path().c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, "X", 1, off_t(kRecord + 100)), 1);
  ::close(fd);
  const std::string e = read_error(*f, 1);
  EXPECT_NE(e.find(f->path() + " is corrupt: tile 1 at byte offset 8192 (8192 bytes) has xxh64 "), std::string::npos)
      << e;
  EXPECT_EQ(read_error(*f, 0), "");  // the others are intact
}

TEST_F(SwapFileFaults, ATruncatedFileNamesTheTileThatIsCut) {
  auto f = three_records();
  ASSERT_EQ(::truncate(f->path().c_str(), off_t(2 * kRecord + 4096)), 0);
  const std::string e = read_error(*f, 2);
  EXPECT_NE(e.find(f->path() + " is truncated: tile 2 at byte offset 16384 read "), std::string::npos) << e;
}

TEST_F(SwapFileFaults, AnUnwritableFolderIsAnErrorNamingIt) {
  const std::string file = (dir_ / "a_file").string();
  { std::ofstream(file) << "x"; }
  try {
    zero::SwapFile f(file + "/t.swap", 1, kRecord, 1, zero::SwapOptions{});
    ADD_FAILURE() << "a swap file under a regular file was created";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[offload] cannot create the swap file " + file + "/t.swap: Not a directory"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
