// `zerotrain generate` on a small GPT with random weights this test saves: greedy output equals
// the same loop run here, a seed fixes the sampled text, a prompt longer than block_size is
// cropped. Skipped until build_model can build model.type "gpt" and data/gpt2 holds the tokenizer.
#include <gtest/gtest.h>

#include <algorithm>

#include "e2e_util.h"
#include "models/model_kind.h"
#include "session.h"
#include "zt/autograd/autograd.h"
#include "zt/ckpt/safetensors.h"
#include "zt/core/error.h"
#include "zt/data/tokenizer.h"

namespace {

using namespace zt::e2e;
namespace zc = zt::config;

const std::string kBin = zt::testing::shell_word(ZT_BIN);  // a shell word wherever the clone lives
const std::string kTokenizerDir = std::string(ZT_SOURCE_DIR) + "/data/gpt2";
constexpr int64_t kBlock = 8;

// GPT-2's vocabulary, one small block, a context of kBlock tokens (nanoGPT's key names).
const char* kGptConfig = R"({
  "train_batch_size": 2, "seed": 5,
  "model": {"type": "gpt", "vocab_size": 50257, "block_size": 8, "n_layer": 1, "n_head": 2, "n_embd": 16}
})";

class Generate : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kTokenizerDir + "/encoder.json")) GTEST_SKIP() << "no GPT-2 tokenizer in " << kTokenizerDir;
    // ctest runs the fixture's tests in parallel processes: one folder per test.
    dir_ = tmpdir(std::string("generate_") + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    config_ = write_file(dir_ + "/gpt.json", kGptConfig);
    zt::apps::register_model_types();  // Note [model registry]: the families' keys, as zerotrain's main does
    cfg_ = zc::load(config_);
    model_ = zt::apps::build_model(cfg_);
    weights_ = dir_ + "/gpt.safetensors";
    zt::ckpt::save_safetensors(weights_, model_->named_parameters());
  }

  std::string generate(const std::string& args) {
    const Result r = run(kBin + " generate --config " + config_ + " --weights " + weights_ + " --tokenizer-dir " +
                             zt::testing::shell_word(kTokenizerDir) + " " + args,
                         120);
    EXPECT_EQ(r.code, 0) << args << ": " << r.out;
    const size_t stats = r.out.find("zerotrain: generated ");  // stderr's last line
    EXPECT_NE(stats, std::string::npos) << r.out;
    return r.out.substr(0, stats);
  }

  // The greedy loop, here: the prompt's ids, then argmax of the last position, n times.
  std::string greedy(const std::string& prompt, int n) {
    auto tok = zt::data::load_tokenizer("gpt2", kTokenizerDir);
    model_->train(false);
    zt::autograd::NoGradGuard no_grad;
    std::vector<int32_t> ids = tok->encode(prompt), out;
    for (int i = 0; i < n; ++i) {
      const int64_t T = std::min<int64_t>(kBlock, int64_t(ids.size()));
      const std::vector<int32_t> ctx(ids.end() - T, ids.end());
      const zt::Tensor logits = (*model_)(std::vector<zt::Tensor>{zt::Tensor::from_ints(ctx, {1, T})});
      const std::vector<float> last = logits.select(0, 0).select(0, T - 1).to_vector();
      const auto next = int32_t(std::max_element(last.begin(), last.begin() + tok->vocab_size()) - last.begin());
      if (next == tok->special("<|endoftext|>")) break;
      ids.push_back(next);
      out.push_back(next);
    }
    return prompt + tok->decode(out) + "\n";
  }

  std::string dir_, config_, weights_;
  zc::Config cfg_;
  std::shared_ptr<zt::nn::Module> model_;
};

TEST_F(Generate, GreedyEqualsTheLoopRunHereAndCropsToBlockSize) {
  EXPECT_EQ(generate("--prompt 'The sea' --tokens 6 --temperature 0"), greedy("The sea", 6));
  const std::string long_prompt = "Call me Ishmael. Some years ago, never mind how long precisely, having little money";
  EXPECT_EQ(generate("--prompt '" + long_prompt + "' --tokens 12 --temperature 0"), greedy(long_prompt, 12));
}

TEST_F(Generate, ASeedFixesTheSampledText) {
  const std::string a = generate("--prompt 'It was' --tokens 10 --temperature 1 --top-k 0 --seed 3");
  EXPECT_EQ(a, generate("--prompt 'It was' --tokens 10 --temperature 1 --top-k 0 --seed 3"));
  EXPECT_NE(a, generate("--prompt 'It was' --tokens 10 --temperature 1 --top-k 0 --seed 4"));
  EXPECT_EQ(a.rfind("It was", 0), 0u) << a;
}

TEST_F(Generate, ReportsTheTokensOnStderrAndBadWeightsInOneLine) {
  Result r = run(kBin + " generate --config " + config_ + " --weights " + weights_ + " --tokenizer-dir " +
                     zt::testing::shell_word(kTokenizerDir) + " --prompt 'The sea' --tokens 3 --top-k 1",
                 120);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("zerotrain: generated 3 tokens in"), std::string::npos) << r.out;
  r = run(kBin + " generate --config " + config_ + " --weights " + dir_ + "/absent.safetensors --tokenizer-dir " +
          zt::testing::shell_word(kTokenizerDir) + " --prompt hi");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(count_lines(r.out), 1) << r.out;
  EXPECT_NE(r.out.find("absent.safetensors"), std::string::npos) << r.out;
}

}  // namespace
