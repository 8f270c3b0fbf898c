// Run under mpirun -np N (up to 4): checkpoints resume bit-exactly at the same world size, and
// re-partition to any world size 1..N and any stage (0, 2, 3 saved x loaded, fp32 and bf16):
// loaded parameters equal the saved ones exactly, and training goes on as one process would
// from the same checkpoint. Smaller worlds are sub-groups (Group::split) of the job.
#include <filesystem>
#include <fstream>
#include <random>

#include "ckpt_test_util.h"
#include "zt/ckpt/checkpoint.h"

using namespace zt;
using namespace zt::testing;
namespace fs = std::filesystem;

namespace {

class Resume : public ::testing::TestWithParam<std::tuple<int, DType>> {};

// Stopped after 4 steps, saved, rebuilt from a different initialisation and loaded: the
// losses of steps 5-8 equal the uninterrupted run's bit for bit.
TEST_P(Resume, AtTheSameWorldSizeIsBitExact) {
  RunSpec s;
  s.stage = std::get<0>(GetParam());
  s.dtype = std::get<1>(GetParam());
  const Data d = make_data(8 * s.micro * s.gas * g_world->size());
  const std::string dir = shared_tmpdir("resume");
  std::vector<double> want;
  {
    auto model = make_model();
    zero::Engine e(*model, g_world, options(s));
    want = run_steps(e, s, d, 0, 8);
  }
  {
    auto model = make_model();
    zero::Engine e(*model, g_world, options(s));
    run_steps(e, s, d, 0, 4);
    ckpt::save_checkpoint(e, {dir, "step_4", 0, {{"step", 4}}});
  }
  auto other = nn::make_mlp(13, {19, 7}, 5, "relu", 999);  // different initial values
  zero::Engine e(*other, g_world, options(s));
  const auto extra = ckpt::load_checkpoint(e, ckpt::resolve_checkpoint(dir, "latest"));
  EXPECT_EQ(extra["step"], 4);
  EXPECT_EQ(e.optimizer_steps(), 4);
  const std::vector<double> got = run_steps(e, s, d, 4, 8);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[4 + i]) << "step " << 5 + i;
  g_world->barrier();
  if (g_world->rank() == 0) fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Ckpt, Resume,
                         ::testing::Combine(::testing::Values(0, 1, 2, 3), ::testing::Values(DType::f32, DType::bf16)),
                         [](const auto& info) {
                           return std::string(dtype_name(std::get<1>(info.param))) + "_stage" +
                                  std::to_string(std::get<0>(info.param));
                         });

// The harness's MLP and a trainable Linear that forward never uses: its parameters never get a
// gradient, and their states (fresh moments, untouched master) must round-trip as they are.
class WithUnused : public nn::Module {
 public:
  explicit WithUnused(uint64_t seed) : mlp_(nn::make_mlp(13, {19, 7}, 5, "relu", seed)) {
    Generator gen(seed + 1);
    TagScope tag(MemTag::param);
    unused_ = std::make_shared<nn::Linear>(7, 3, true, gen);
    register_module("mlp", mlp_);
    register_module("unused", unused_);
  }
  const char* type_name() const override { return "WithUnused"; }

 protected:
  Tensor forward(const Tensor& x) override { return (*mlp_)(x); }

 private:
  std::shared_ptr<nn::Module> mlp_;
  std::shared_ptr<nn::Linear> unused_;
};

// Issue 31: every state tensor a rank holds (param, master, exp_avg, exp_avg_sq), of every
// stage, precision and residence (in memory; optimizer states in swap files; at stage 3 the
// parameter shards too), comes back from a checkpoint with its name, dtype, element count and
// bytes, a parameter that never got a gradient included, and so do the counters (optimizer
// steps, fp16's loss scaler).
struct Snapshot {
  std::vector<std::tuple<std::string, DType, int64_t, std::string>> tensors;  // name, dtype, numel, bytes
  zero::Engine::Counters counters;
};

Snapshot snapshot(zero::Engine& e) {
  Snapshot s;
  for (const zero::ShardState& st : e.shard_states())
    for (const zero::ShardTensor& t : st.tensors) {
      std::string bytes(size_t(t.numel) * dtype_size(t.dtype), '\0');
      t.read(0, t.numel, bytes.data());
      s.tensors.emplace_back(std::to_string(st.buffer) + "/" + t.name, t.dtype, t.numel, std::move(bytes));
    }
  s.counters = e.counters();
  return s;
}

TEST(Ckpt, EveryStateTensorAndCounterRoundTripsTyped) {
  const std::string dir = shared_tmpdir("typed");
  for (int stage = 0; stage <= 3; ++stage)
    for (DType dt : {DType::f32, DType::bf16, DType::f16})
      for (bool swapped : {false, true}) {
        const std::string what =
            std::string(dtype_name(dt)) + " stage " + std::to_string(stage) + (swapped ? " offloaded" : "");
        RunSpec s;
        s.stage = stage;
        s.dtype = dt;
        zero::EngineOptions o = options(s);
        if (swapped) {
          o.zero.offload_optimizer.device = "nvme";
          o.zero.offload_optimizer.nvme_path = dir + "/nvme";
          o.zero.sub_group_size = 64;  // several tiles
          if (stage == 3) {
            o.zero.offload_param.device = "nvme";
            o.zero.offload_param.nvme_path = dir + "/nvme";
          }
        }
        const Data d = make_data(3 * s.micro * s.gas * g_world->size());
        Snapshot saved;
        {
          WithUnused model(1234);
          zero::Engine e(model, g_world, o);
          run_steps(e, s, d, 0, 3);
          saved = snapshot(e);
          ckpt::save_checkpoint(e, {dir + "/ckpt", "typed", 0, {{"step", 3}}});
        }
        WithUnused other(4321);  // other values everywhere
        zero::Engine e(other, g_world, o);
        ckpt::load_checkpoint(e, ckpt::resolve_checkpoint(dir + "/ckpt", "latest"));
        const Snapshot got = snapshot(e);
        ASSERT_EQ(got.tensors.size(), saved.tensors.size()) << what;
        for (size_t i = 0; i < got.tensors.size(); ++i) {
          const auto& [name, dtype, numel, bytes] = saved.tensors[i];
          EXPECT_EQ(std::get<0>(got.tensors[i]), name) << what;
          EXPECT_EQ(std::get<1>(got.tensors[i]), dtype) << what << " " << name;
          EXPECT_EQ(std::get<2>(got.tensors[i]), numel) << what << " " << name;
          EXPECT_TRUE(std::get<3>(got.tensors[i]) == bytes) << what << " " << name << ": values differ";
        }
        EXPECT_EQ(got.counters.optimizer_steps, 3) << what;
        ASSERT_EQ(got.counters.loss_scaler.has_value(), dt == DType::f16) << what;
        if (dt == DType::f16) {
          const optim::LossScaler::State &a = *saved.counters.loss_scaler, &b = *got.counters.loss_scaler;
          EXPECT_EQ(b.scale, a.scale) << what;
          EXPECT_EQ(b.cur_hysteresis, a.cur_hysteresis) << what;
          EXPECT_EQ(b.last_overflow_iter, a.last_overflow_iter) << what;
          EXPECT_EQ(b.cur_iter, a.cur_iter) << what;
          EXPECT_EQ(b.skipped_steps, a.skipped_steps) << what;
        }
      }
  g_world->barrier();
  if (g_world->rank() == 0) fs::remove_all(dir);
}

// Saved at every world size 1..N and stage 0, 2, 3; loaded at every world size and stage.
TEST(Reshard, AnyWorldSizeAndStageToAnyOther) {
  const int N = g_world->size();
  for (DType dt : {DType::f32, DType::bf16}) {
    const std::string dir = shared_tmpdir("reshard");
    RunSpec s;
    s.dtype = dt;
    s.gas = 1;
    s.micro = 12;  // global batch 12: splits over 1, 2, 3, 4 ranks
    const Data d = make_data(12 * 8);
    auto batch_spec = [&](int world) {
      RunSpec r = s;
      r.micro = 12 / world;
      return r;
    };
    for (int ns = 1; ns <= N; ++ns)
      for (int ss : {0, 2, 3}) {
        const std::string tag = "w" + std::to_string(ns) + "s" + std::to_string(ss);
        std::vector<std::vector<float>> saved;
        if (comm::GroupPtr g = first_ranks(ns)) {
          RunSpec r = batch_spec(ns);
          r.stage = ss;
          auto model = make_model();
          zero::Engine e(*model, g, options(r));
          run_steps(e, r, d, 0, 3);
          ckpt::save_checkpoint(e, {dir, tag, 0, {{"step", 3}}});
          saved = full_params(e);
        }
        g_world->barrier();
        // What one process does from this checkpoint: the reference for every load.
        RunSpec ref = batch_spec(1);
        auto ref_model = make_model();
        zero::Engine ref_e(*ref_model, comm::make_group("local"), options(ref));
        ckpt::load_checkpoint(ref_e, dir + "/" + tag);
        const std::vector<double> want = run_steps(ref_e, ref, d, 3, 6);
        for (int nl = 1; nl <= N; ++nl)
          for (int sl : {0, 2, 3}) {
            comm::GroupPtr g = first_ranks(nl);
            if (!g) continue;
            RunSpec r = batch_spec(nl);
            r.stage = sl;
            auto model = nn::make_mlp(13, {19, 7}, 5, "relu", 5);
            zero::Engine e(*model, g, options(r));
            ckpt::load_checkpoint(e, dir + "/" + tag);
            const std::string where = std::string(dtype_name(dt)) + " saved at " + tag + ", loaded at world " +
                                      std::to_string(nl) + " stage " + std::to_string(sl);
            if (g->rank() == 0 && !saved.empty())
              EXPECT_EQ(full_params(e), saved) << where;
            else
              full_params(e);
            const std::vector<double> got = run_steps(e, r, d, 3, 6);
            for (size_t i = 0; i < got.size(); ++i) {
              const Tolerance tol = trajectory_tolerance(dt);
              EXPECT_LE(std::abs(got[i] - want[i]), tol.loss * std::max(1.0, std::abs(want[i])))
                  << where << ", step " << 4 + i;
            }
          }
        g_world->barrier();
      }
    if (g_world->rank() == 0) fs::remove_all(dir);
  }
}

TEST(Ckpt, ADifferentModelNamesTheFirstParameterThatDiffers) {
  const std::string dir = shared_tmpdir("model");
  RunSpec s;
  auto model = make_model();
  zero::Engine e(*model, g_world, options(s));
  ckpt::save_checkpoint(e, {dir, "t", 0, {}});
  auto wider = nn::make_mlp(13, {20, 7}, 5, "relu", 1);
  zero::Engine e2(*wider, g_world, options(s));
  try {
    ckpt::load_checkpoint(e2, dir + "/t");
    ADD_FAILURE() << "loaded a checkpoint of another model";
  } catch (const Error& err) {
    EXPECT_EQ(err.kind(), ErrorKind::checkpoint);
    EXPECT_NE(std::string(err.what()).find("'0.weight' has shape [19, 13] in the checkpoint and [20, 13]"),
              std::string::npos)
        << err.what();
  }
  g_world->barrier();
  if (g_world->rank() == 0) fs::remove_all(dir);
}

TEST(Ckpt, AFlippedByteIsCaughtByItsChecksumNamingTheFile) {
  const std::string dir = shared_tmpdir("flip");
  RunSpec s;
  auto model = make_model();
  zero::Engine e(*model, g_world, options(s));
  const std::string path = ckpt::save_checkpoint(e, {dir, "t", 0, {}});
  EXPECT_NO_THROW(ckpt::verify_checkpoint(path));
  g_world->barrier();
  const std::string victim = path + "/rank_00000.bin";
  if (g_world->rank() == 0) {
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(100);
    char c = 0;
    f.read(&c, 1);
    c = char(c ^ 0x10);
    f.seekp(100);
    f.write(&c, 1);
  }
  g_world->barrier();
  try {
    ckpt::verify_checkpoint(path);
    ADD_FAILURE() << "corruption not seen";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find(victim + " is corrupt"), std::string::npos) << err.what();
  }
  EXPECT_THROW(ckpt::load_checkpoint(e, path), Error);  // every rank fails together, none waits
  g_world->barrier();
  if (g_world->rank() == 0) fs::remove_all(dir);
}

TEST(Ckpt, LatestMovesLastAndKeepLastPrunesTheOldest) {
  const std::string dir = shared_tmpdir("keep");
  RunSpec s;
  auto model = make_model();
  zero::Engine e(*model, g_world, options(s));
  for (int k = 1; k <= 4; ++k) ckpt::save_checkpoint(e, {dir, "step_" + std::to_string(k), 2, {{"step", k}}});
  EXPECT_EQ(ckpt::list_checkpoints(dir), (std::vector<std::string>{"step_3", "step_4"}));
  EXPECT_EQ(ckpt::resolve_checkpoint(dir, "latest"), dir + "/step_4");
  EXPECT_FALSE(fs::exists(dir + "/step_4.partial"));
  g_world->barrier();
  if (g_world->rank() == 0) fs::remove_all(dir);
}

std::string file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Note [background save]: the snapshot is the state when save() returned, whatever training does
// while the file is written; the files are the foreground save's byte for byte, the staging is
// exactly Plan::checkpoint_bytes(), and a second save commits the first before it starts.
TEST(BackgroundSave, WritesTheSnapshotTheForegroundWouldAndCommitsInOrder) {
  for (int stage : {0, 2, 3})
    for (DType dt : {DType::f32, DType::bf16}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " stage " + std::to_string(stage));
      RunSpec s;
      s.stage = stage;
      s.dtype = dt;
      const Data d = make_data(8 * s.micro * s.gas * g_world->size());
      const std::string dir = shared_tmpdir("async");
      auto model = make_model();
      zero::Engine e(*model, g_world, options(s));
      run_steps(e, s, d, 0, 2);
      std::vector<std::string> committed;
      ckpt::Saver saver(e, [&](const std::string& f) { committed.push_back(fs::path(f).filename().string()); });
      EXPECT_EQ(saver.save({dir, "sync", 0, {{"step", 2}}}, false), dir + "/sync");
      EXPECT_EQ(saver.save({dir, "async", 0, {{"step", 2}}}, true), "");
      EXPECT_TRUE(saver.pending());
      EXPECT_EQ(int64_t(saver.staging_bytes()), e.plan().checkpoint_bytes());
      for (int64_t step = 2; step < 5; ++step) {  // the state moves on while the file is written
        run_steps(e, s, d, step, step + 1);
        saver.poll();
      }
      saver.wait();
      EXPECT_FALSE(saver.pending());
      const std::string shard = ckpt::shard_file_name(g_world->rank());
      const std::string sync_bytes = file_bytes(dir + "/sync/" + shard);
      EXPECT_EQ(int64_t(sync_bytes.size()), e.plan().checkpoint_bytes());
      EXPECT_TRUE(file_bytes(dir + "/async/" + shard) == sync_bytes) << "the async shard differs from the sync one";
      EXPECT_NO_THROW(ckpt::verify_checkpoint(dir + "/async"));
      // A second save waits for the first: "a" is committed when save("b") returns.
      saver.save({dir, "a", 0, {{"step", 5}}}, true);
      saver.save({dir, "b", 0, {{"step", 5}}}, true);
      EXPECT_TRUE(fs::exists(dir + "/a/metadata.json"));
      EXPECT_EQ(saver.wait(), dir + "/b");
      EXPECT_EQ(committed, (std::vector<std::string>{"sync", "async", "a", "b"}));
      EXPECT_EQ(ckpt::resolve_checkpoint(dir, "latest"), dir + "/b");
      g_world->barrier();
      if (g_world->rank() == 0) fs::remove_all(dir);
    }
}

}  // namespace
