// Seq-cls record files (BERT fine-tuning data, Note [seq-cls format]) as training reads them.
// Every rejection must be a data error; an accepted file obeys every limit of its header, and
// writing it back gives the same bytes.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "fuzz_util.h"
#include "zt/core/error.h"
#include "zt/data/seq_cls.h"

using namespace zt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_scratch("records.bin", data, size);
  data::SeqClsSet s;
  try {
    s = data::read_seq_cls(path);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::data) std::abort();
    return 0;
  }
  if (s.offsets.size() != s.labels.size() + 1 || size_t(s.offsets.back()) != s.tokens.size()) std::abort();
  for (int64_t i = 0; i < s.size(); ++i)
    if (s.labels[size_t(i)] < 0 || s.labels[size_t(i)] >= s.num_classes || s.length(i) < 1 || s.length(i) > s.max_len)
      std::abort();
  for (uint16_t t : s.tokens)
    if (t >= s.vocab_size) std::abort();
  const std::string again = fuzz::scratch_dir() + "/again.bin";
  data::write_seq_cls(again, s);
  std::ifstream f(again, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), {});
  if (bytes.size() != size || std::memcmp(bytes.data(), data, size) != 0) std::abort();
  if (s.size() > 0) data::gather_seq_cls(s, {0, s.size() - 1});
  return 0;
}
