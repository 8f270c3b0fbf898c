// Hugging Face folders in and out (issue 55), through the binary: folders that
// gen_hf_folders.py writes as transformers lays them out (GPT-2 with and without `transformer.`,
// Llama with GQA, MQA, tied and untied heads, sharded, bf16, Qwen2's q/k/v biases, a 70,000-token
// vocabulary, BERT for masked LM and for classification with its pooler and erf GELU) evaluate to
// the loss of the PyTorch model written there after Hugging Face's modeling code; imports at
// N = 2, stage 3 export back bit for bit; models fine-tuned from them export folders PyTorch
// evaluates to the loss zerotrain logged.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>

#include "../e2e/e2e_util.h"

namespace {

using namespace zt::e2e;

const std::string kBin = zt::testing::shell_word(ZT_BIN);
const std::string kMpi = std::string(ZT_MPIRUN) + " -np ";
const std::string kGen = "/usr/bin/python3 tests/hf/gen_hf_folders.py";

// The folders, token shards and PyTorch losses, written once for the suite.
class HfFolders : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ =
        tmpdir("hf_folders_" + std::to_string(getpid()));  // ctest runs each case in a process of its own, in parallel
    const Result r = run(kGen + " " + dir_, 120);
    ASSERT_EQ(r.code, 0) << r.out;
    refs_ = read_json(dir_ + "/refs.json");
    write_file(dir_ + "/cfg.json",
               R"({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 4,
                   "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
                   "data": {"dataset": "tokens", "seq_len": 16}})");
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  // The config without a model section: the folder's config.json gives it.
  static std::string args(const std::string& name, const std::string& run = "run") {
    const std::string classify = name.rfind("bert_cls", 0) == 0 ? " data.dataset=classify" : "";
    return " --config " + dir_ + "/cfg.json data.dir=" + dir_ + "/tokens_" + tokens(name) + " run.dir=" + dir_ + "/" +
           run + classify;
  }
  // The loss an evaluation reports: val_loss, or test_loss for a classifier.
  static double loss_in(const nlohmann::json& j) { return j.contains("test_loss") ? j["test_loss"] : j["val_loss"]; }
  static std::string tokens(const std::string& name) { return name.substr(0, name.find('@')); }
  static double eval_loss(const std::string& folder, const std::string& name) {
    const Result r = run(kBin + " eval" + args(name) + " --json --weights " + folder, 120);
    EXPECT_EQ(r.code, 0) << r.out;
    const std::string last = r.out.substr(r.out.rfind('{'));
    return loss_in(nlohmann::json::parse(last));
  }
  static double pytorch_loss(const std::string& folder, const std::string& name) {
    const Result r = run(kGen + " --eval " + folder + " " + dir_ + "/tokens_" + tokens(name) + " 16", 120);
    EXPECT_EQ(r.code, 0) << r.out;
    return nlohmann::json::parse(r.out)["loss"].get<double>();
  }
  static std::string dir_;
  static nlohmann::json refs_;
};
std::string HfFolders::dir_;
nlohmann::json HfFolders::refs_;

void expect_close(double got, double want, const std::string& what) {
  EXPECT_LE(std::abs(got - want), 1e-5 * std::abs(want)) << what << ": " << got << " vs PyTorch " << want;
}

TEST_F(HfFolders, EachFolderEvaluatesToThePyTorchModelsLoss) {
  for (const auto& [name, want] : refs_.items()) expect_close(eval_loss(dir_ + "/" + name, name), want, name);
}

// import at N = 2, stage 3; export --format hf of that checkpoint holds the same tensors bit for
// bit (bf16 exported as bf16; the sharded folder sharded again), and PyTorch and eval read it back.
TEST_F(HfFolders, ImportAtTwoRanksStageThreeExportsTheSameFolderBitForBit) {
  for (const std::string name : {"llama_gqa", "llama_mqa_tied", "qwen2_bias", "gpt2", "gpt2_noprefix", "llama_sharded",
                                 "llama_bf16", "bert_mlm", "bert_cls"}) {
    SCOPED_TRACE(name);
    const std::string ck = dir_ + "/ck_" + name, out = dir_ + "/out_" + name;
    Result im = run(kMpi + "2 " + kBin + " import " + dir_ + "/" + name + " --out " + ck + args(name) +
                        " zero_optimization.stage=3",
                    120);
    ASSERT_EQ(im.code, 0) << im.out;
    const std::string dtype = name == "llama_bf16" ? " --dtype bf16" : "";
    const std::string shards = name == "llama_sharded" ? " --max-shard-size 20KB" : "";
    Result ex = run(kBin + " export " + ck + " --format hf --out " + out + dtype + shards, 60);
    ASSERT_EQ(ex.code, 0) << ex.out;
    EXPECT_TRUE(fs::exists(out + "/generation_config.json"));
    EXPECT_EQ(fs::exists(out + "/model.safetensors.index.json"), name == "llama_sharded");
    Result same = run(kGen + " --same " + dir_ + "/" + name + " " + out, 60);
    ASSERT_EQ(same.code, 0) << same.out;
    // GPT-2 folders come back with `transformer.`, the name transformers writes.
    const nlohmann::json differ = nlohmann::json::parse(same.out)["differ"];
    if (name != "gpt2_noprefix") {
      EXPECT_TRUE(differ.empty()) << differ.dump();
    }
    const double want = refs_[name].get<double>();
    if (name != "llama_bf16") expect_close(pytorch_loss(out, name), want, name + " exported, in PyTorch");
    expect_close(eval_loss(out, name), want, name + " exported, in zerotrain");
  }
}

TEST_F(HfFolders, AFolderThatDoesNotFitIsOneErrorNamingEveryTensorUnlessNotStrict) {
  Result r = run(kBin + " eval" + args("llama_gqa") + " --weights " + dir_ + "/llama_broken", 60);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(count_lines(r.out), 1) << r.out;
  EXPECT_NE(r.out.find("missing: model.layers.1.mlp.up_proj.weight; unused: model.layers.0.self_attn.extra.weight"),
            std::string::npos)
      << r.out;
  Result im = run(kMpi + "2 " + kBin + " import " + dir_ + "/llama_broken --out " + dir_ + "/ck_broken" +
                      args("llama_gqa") + " zero_optimization.stage=3",
                  60);
  EXPECT_EQ(im.code, 1) << im.out;
  EXPECT_NE(im.out.find("missing: model.layers.1.mlp.up_proj.weight"), std::string::npos) << im.out;
  Result loose =
      run(kBin + " eval" + args("llama_gqa") + " model.init_strict=false --weights " + dir_ + "/llama_broken", 60);
  EXPECT_EQ(loose.code, 0) << loose.out;
  EXPECT_NE(loose.out.find("parameter model.layers.1.mlp.gate_up_proj.weight left as initialised"), std::string::npos)
      << loose.out;
  EXPECT_NE(loose.out.find("tensor model.layers.0.self_attn.extra.weight of"), std::string::npos) << loose.out;
}

// model.init_from an HF folder (no model.type: its config.json gives it), a few steps at N = 2,
// stage 3, export --format hf: the PyTorch model gives that folder the loss zerotrain logged.
TEST_F(HfFolders, ModelsFineTunedFromFoldersExportWhatPyTorchEvaluatesToTheLoggedLoss) {
  for (const std::string name : {"gpt2", "gpt2_noprefix", "llama_gqa", "llama_mqa_tied", "qwen2_bias", "llama_vocab70k",
                                 "bert_mlm", "bert_cls"}) {
    SCOPED_TRACE(name);
    const std::string run_dir = dir_ + "/ft_" + name, out = dir_ + "/out_ft_" + name;
    Result t = run(kMpi + "2 " + kBin + " train" + args(name, "ft_" + name) + " model.init_from=" + dir_ + "/" + name +
                       " zero_optimization.stage=3 run.max_steps=3 checkpoint.every_steps=3 data.eval_every=3",
                   120);
    ASSERT_EQ(t.code, 0) << t.out;
    double logged = NAN;
    for (const auto& j : read_jsonl(run_dir + "/metrics.jsonl"))
      if (j.contains("val_loss") || j.contains("test_loss")) logged = loss_in(j);
    ASSERT_FALSE(std::isnan(logged)) << t.out;
    EXPECT_GT(std::abs(logged - refs_[name].get<double>()), 1e-4);  // it trained
    Result ex = run(kBin + " export " + run_dir + "/checkpoints --format hf --out " + out, 60);
    ASSERT_EQ(ex.code, 0) << ex.out;
    expect_close(pytorch_loss(out, name), logged, name + " fine-tuned, in PyTorch");
  }
}

TEST_F(HfFolders, AConfigWithoutAModelSectionNamesTheTypesAndTheFolderWay) {
  Result r = run(kBin + " eval --config " + dir_ + "/cfg.json --weights " + dir_ + "/nothing.safetensors", 60);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("llama"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Hugging Face model folder"), std::string::npos) << r.out;
}

}  // namespace
