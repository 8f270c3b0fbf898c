// The language-model jobs through the binary, small: prepare token shards from Moby-Dick, train a
// one-layer GPT at ZeRO stage 3 on 2 ranks (activation checkpointing and sparse gradients on)
// with periodic validation, then eval, plot and generate; and BERT masked-LM pretraining
// followed by fine-tuning on State of the Union passages from its weights.
#include <gtest/gtest.h>

#include "e2e_util.h"

namespace {

using namespace zt::e2e;

const std::string kBin = zt::testing::shell_word(ZT_BIN);  // a shell word wherever the clone lives
const std::string kMpi = std::string(ZT_MPIRUN) + " -np ";

bool have(const std::string& rel) { return fs::exists(fs::path(ZT_SOURCE_DIR) / rel); }

TEST(ModelsE2e, SmallGptTrainsAtStage3WithValidationThenEvalPlotAndGenerate) {
  if (!have("data/gpt2/encoder.json") || !have("data/moby-dick/data.txt"))
    GTEST_SKIP() << "no GPT-2 tokenizer or Moby-Dick in data/ (scripts/setup.sh fetches them)";
  const std::string dir = tmpdir("models_gpt");
  Result p = run(kBin + " prepare --tokenizer gpt2 --sources moby-dick --out " + dir + "/tok", 300);
  ASSERT_EQ(p.code, 0) << p.out;
  const std::string overrides =
      " --config configs/gpt_sotu.json model.n_layer=1 model.n_embd=32 model.n_head=2 model.block_size=32"
      " train_batch_size=4 train_micro_batch_size_per_gpu=2 steps_per_print=2 data.eval_every=2"
      " data.eval_batches=2 sparse_gradients=true activation_checkpointing={} data.dir=" +
      dir + "/tok run.dir=" + dir + "/run";
  Result t = run(kMpi + "2 " + kBin + " train" + overrides + " run.max_steps=4", 600);
  ASSERT_EQ(t.code, 0) << t.out;
  EXPECT_NE(t.out.find("stage 3, 2 ranks"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("interpolated bigram"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("step 2: validation loss:"), std::string::npos) << t.out;
  int val_points = 0;
  for (const auto& j : read_jsonl(dir + "/run/metrics.jsonl")) val_points += j.contains("val_loss");
  EXPECT_EQ(val_points, 2);  // step 2, and the whole split at step 4
  EXPECT_TRUE(read_json(dir + "/run/summary.json").contains("val_loss"));

  Result e = run(kBin + " eval" + overrides, 300);
  ASSERT_EQ(e.code, 0) << e.out;
  EXPECT_NE(e.out.find("validation loss:"), std::string::npos) << e.out;
  Result pl = run(kBin + " plot " + dir + "/run", 120);
  ASSERT_EQ(pl.code, 0) << pl.out;
  EXPECT_TRUE(fs::exists(dir + "/run/loss.png"));
  Result g = run(kBin + " generate" + overrides + " --weights " + dir +
                     "/run/model.safetensors --prompt \"Call me\" --tokens 4 --seed 1",
                 120);
  ASSERT_EQ(g.code, 0) << g.out;
  EXPECT_NE(g.out.find("Call me"), std::string::npos) << g.out;
}

TEST(ModelsE2e, BertPretrainsThenFineTunesFromItsWeights) {
  if (!have("data/bert/vocab.json") || !have("data/moby-dick/data.txt") || !have("data/sotu"))
    GTEST_SKIP() << "no BERT vocabulary or text in data/ (scripts/setup.sh fetches them)";
  const std::string dir = tmpdir("models_bert");
  Result p = run(kBin + " prepare --tokenizer bert --sources moby-dick --out " + dir + "/tok", 300);
  ASSERT_EQ(p.code, 0) << p.out;
  const std::string small = " model.n_layer=1 model.n_embd=32 model.n_head=2 model.block_size=32";
  Result t = run(kMpi + "2 " + kBin + " train --config configs/bert_pretrain.json" + small +
                     " data.seq_len=32 train_batch_size=8 train_micro_batch_size_per_gpu=4 run.max_steps=3"
                     " data.eval_batches=1 data.dir=" +
                     dir + "/tok run.dir=" + dir + "/pre",
                 600);
  ASSERT_EQ(t.code, 0) << t.out;
  EXPECT_NE(t.out.find("validation masked-LM loss:"), std::string::npos) << t.out;

  Result c = run(kBin + " prepare --task sotu-party --tokenizer bert --max-len 32 --out " + dir + "/cls", 300);
  ASSERT_EQ(c.code, 0) << c.out;
  Result f = run(kMpi + "2 " + kBin + " train --config configs/bert_finetune.json" + small +
                     " train_batch_size=8 train_micro_batch_size_per_gpu=4 run.max_steps=3 data.test_limit=64"
                     " data.dir=" +
                     dir + "/cls model.init_from=" + dir + "/pre/model.safetensors run.dir=" + dir + "/ft",
                 600);
  ASSERT_EQ(f.code, 0) << f.out;
  EXPECT_NE(f.out.find("initialised fresh: classifier.weight, classifier.bias"), std::string::npos) << f.out;
  EXPECT_NE(f.out.find("majority class:"), std::string::npos) << f.out;
}

// Note [model registry]: a model added as one entry (models/resmlp.cpp, a residual MLP) and one
// line of registry.cpp trains at stage 3 on 2 ranks along the one-process trajectory, checkpoints,
// resumes at 3 ranks and stage 1, exports, evaluates and estimates, with no other edit.
TEST(ModelsE2e, ARegisteredModelTrainsCheckpointsResumesExportsAndEstimates) {
  const std::string dir = tmpdir("models_resmlp");
  write_random_idx(dir + "/img", 384, 64);
  const std::string cfg = " --config configs/mnist_mlp.json model.type=resmlp model.hidden=[64,64,64]"
                          " train_batch_size=12 steps_per_print=1 data.dir=" +
                          dir + "/img checkpoint.dir=" + dir + "/ckpt";
  Result one = run(kBin + " train" + cfg + " zero_optimization.stage=0 run.max_steps=4 run.dir=" + dir + "/one", 300);
  ASSERT_EQ(one.code, 0) << one.out;
  Result two = run(kMpi + "2 " + kBin + " train" + cfg +
                       " zero_optimization.stage=3 run.max_steps=4 checkpoint.every_steps=4 run.dir=" + dir + "/two",
                   300);
  ASSERT_EQ(two.code, 0) << two.out;
  const auto a = logged_losses(dir + "/one"), b = logged_losses(dir + "/two");
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 4u);
  for (const auto& [step, loss] : a) EXPECT_NEAR(b.at(step), loss, 1e-5 * std::abs(loss)) << "step " << step;
  // Resumed at another world size and stage from the stage-3 checkpoint.
  Result res = run(kMpi + "3 " + kBin + " train" + cfg +
                       " zero_optimization.stage=1 run.max_steps=6 run.resume=latest run.dir=" + dir + "/three",
                   300);
  ASSERT_EQ(res.code, 0) << res.out;
  EXPECT_NE(res.out.find("at step 4"), std::string::npos) << res.out;
  EXPECT_EQ(logged_losses(dir + "/three").size(), 2u);

  Result ex = run(kBin + " export " + dir + "/ckpt --out " + dir + "/w.safetensors", 60);
  ASSERT_EQ(ex.code, 0) << ex.out;
  Result ev = run(kBin + " eval" + cfg + " --weights " + dir + "/w.safetensors", 60);
  ASSERT_EQ(ev.code, 0) << ev.out;
  EXPECT_NE(ev.out.find("test accuracy:"), std::string::npos) << ev.out;
  Result est = run(kBin + " estimate" + cfg + " --world 2 --json", 60);
  ASSERT_EQ(est.code, 0) << est.out;
  // in 784x64 + 3 blocks of 64x64 + out 64x10, with biases
  EXPECT_EQ(nlohmann::json::parse(est.out)["parameters"].get<int64_t>(), 784 * 64 + 64 + 3 * (64 * 64 + 64) + 650);
  EXPECT_EQ(read_json(dir + "/two/summary.json")["parameters"].get<int64_t>(), 63370);
  // Its own checks, one line each.
  Result bad = run(kBin + " train" + cfg + " model.hidden=[64,32] run.dir=" + dir + "/bad", 60);
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("model.hidden of a resmlp is one width per residual block, all equal; got [64,32]"),
            std::string::npos)
      << bad.out;
}

}  // namespace

// The Llama family through the binary (issue 54): GQA with an untied head and sparse embedding
// rows at stage 3 on 2 ranks along the one-process trajectory, a checkpoint resumed at 3 ranks and
// stage 1, activation checkpointing, eval, generate and estimate; its bad settings are one line each,
// naming the key and the nearest valid value, before step 1.
TEST(ModelsE2e, LlamaTrainsCheckpointsResumesGeneratesAndRefusesBadSettings) {
  if (!have("data/gpt2/encoder.json")) GTEST_SKIP() << "no GPT-2 tokenizer in data/ (scripts/setup.sh fetches it)";
  const std::string dir = tmpdir("models_llama");
  write_random_tokens(dir + "/tok", 20000, 2000);
  const std::string cfg =
      " --config configs/llama_sotu.json model.n_layer=2 model.n_embd=64 model.n_head=4 model.n_kv_head=2"
      " model.intermediate_size=96 model.block_size=32 model.tie_word_embeddings=false train_batch_size=12"
      " train_micro_batch_size_per_gpu=2 steps_per_print=1 data.eval_every=0 bf16.enabled=false"
      " scheduler.params.warmup_num_steps=2 data.dir=" +
      dir + "/tok checkpoint.dir=" + dir + "/ckpt";
  Result one = run(kMpi + "1 " + kBin + " train" + cfg + " zero_optimization.stage=0 run.max_steps=4 run.dir=" + dir +
                       "/one",
                   300);
  ASSERT_EQ(one.code, 0) << one.out;
  Result two = run(kMpi + "2 " + kBin + " train" + cfg +
                       " zero_optimization.stage=3 sparse_gradients=true activation_checkpointing={} run.max_steps=4"
                       " checkpoint.every_steps=4 run.dir=" +
                       dir + "/two",
                   300);
  ASSERT_EQ(two.code, 0) << two.out;
  const auto a = logged_losses(dir + "/one"), b = logged_losses(dir + "/two");
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 4u);
  for (const auto& [step, loss] : a) EXPECT_NEAR(b.at(step), loss, 1e-5 * std::abs(loss)) << "step " << step;
  Result res = run(kMpi + "3 " + kBin + " train" + cfg +
                       " zero_optimization.stage=1 run.max_steps=6 run.resume=latest run.dir=" + dir + "/three",
                   300);
  ASSERT_EQ(res.code, 0) << res.out;
  EXPECT_NE(res.out.find("at step 4"), std::string::npos) << res.out;
  Result ev = run(kBin + " eval" + cfg + " --weights " + dir + "/two/model.safetensors", 120);
  ASSERT_EQ(ev.code, 0) << ev.out;
  EXPECT_NE(ev.out.find("validation loss:"), std::string::npos) << ev.out;
  Result g = run(kBin + " generate" + cfg + " --weights " + dir +
                     "/two/model.safetensors --prompt \"Call me\" --tokens 4 --seed 1",
                 120);
  ASSERT_EQ(g.code, 0) << g.out;
  EXPECT_NE(g.out.find("Call me"), std::string::npos) << g.out;
  Result est = run(kBin + " estimate" + cfg + " --world 2 --json", 60);
  ASSERT_EQ(est.code, 0) << est.out;
  // embed 256x64 + lm_head 64x256 + 2 blocks of (qkv 128x64, o 64x64, gate_up 192x64, down 64x96, 2 norms) + norm
  const int64_t block = 128 * 64 + 64 * 64 + 192 * 64 + 64 * 96 + 2 * 64;
  EXPECT_EQ(nlohmann::json::parse(est.out)["parameters"].get<int64_t>(), 2 * 50257 * 64 + 2 * block + 64);

  const std::vector<std::pair<std::string, std::string>> bad = {
      {" model.n_kv_head=3", "model.n_head 4 is not a multiple of model.n_kv_head 3 (nearest valid n_kv_head: 2)"},
      {" model.n_embd=72 model.n_head=8 model.n_kv_head=2", "must be an even head size for rotary embeddings"},
      {" model.intermediate_size=0", "model.intermediate_size"},
      {" model.rope_theta=0", "model.rope_theta"},
      {" model.rms_norm_eps=-1", "model.rms_norm_eps"},
      {" model.dropout=0.1", "model.dropout 0.1 is not used by model.type llama"},
      {" model.vocab_size=1000", "outside the vocabulary of 1000"}};
  for (const auto& [args, want] : bad) {
    Result r = run(kBin + " train" + cfg + args + " run.max_steps=1 run.dir=" + dir + "/bad", 60);
    EXPECT_NE(r.code, 0) << args;
    EXPECT_NE(r.out.find(want), std::string::npos) << args << ": " << r.out;
    EXPECT_EQ(r.out.find("step 1/"), std::string::npos) << args << ": " << r.out;
  }
}

// Llama 3's 128,256-token vocabulary end to end: prepare writes uint32 (version 2) shards with its
// tokenizer.json, a Llama trains on them at N = 2, stage 3, eval gives the run's final loss, and
// the n-gram baselines take the vocabulary too.
TEST(ModelsE2e, LlamaThreesVocabularyTrainsOnUint32Shards) {
  if (!have("data/llama3/tokenizer.json") || !have("data/moby-dick/data.txt"))
    GTEST_SKIP() << "no Llama 3 tokenizer or Moby-Dick in data/ (scripts/setup.sh fetches them)";
  const std::string dir = tmpdir("models_llama3_vocab");
  Result p = run(kBin + " prepare --tokenizer llama3 --sources moby-dick --out " + dir + "/tok", 120);
  ASSERT_EQ(p.code, 0) << p.out;
  EXPECT_NE(p.out.find("version 2 (uint32 tokens)"), std::string::npos) << p.out;
  const std::string cfg =
      " --config configs/llama_sotu.json model.vocab_size=128256 model.n_layer=1 model.n_embd=32 model.n_head=2"
      " model.n_kv_head=1 model.intermediate_size=64 model.block_size=64 train_batch_size=8"
      " train_micro_batch_size_per_gpu=4 data.eval_batches=4 data.dir=" +
      dir + "/tok run.dir=" + dir + "/run";
  Result t = run(kMpi + "2 " + kBin + " train" + cfg + " zero_optimization.stage=3 run.max_steps=6", 300);
  ASSERT_EQ(t.code, 0) << t.out;
  EXPECT_NE(t.out.find("interpolated bigram"), std::string::npos) << t.out;  // the baselines past 65,536 ids
  const auto line = [](const std::string& out) { return out.substr(out.find("validation loss:"), 40); };
  Result ev = run(kBin + " eval" + cfg, 120);
  ASSERT_EQ(ev.code, 0) << ev.out;
  EXPECT_EQ(line(ev.out), line(t.out));
  Result b = run(kBin + " baseline --vocab 128256 --data " + dir + "/tok", 120);
  ASSERT_EQ(b.code, 0) << b.out;
  EXPECT_EQ(read_json(dir + "/tok/baseline.json")["vocab_size"].get<int64_t>(), 128256);
  fs::remove_all(dir);
}
