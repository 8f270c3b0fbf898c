#pragma once
// Multi-rank test mains: rank 0 prints gtest's report; every other rank only its failures, named
// with its rank, so a failure one rank sees alone (rank 0 passed) still says what and where.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace zt::testing {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  // The name is kept here: UnitTest::current_test_info() takes the lock gtest holds while it reports.
  void OnTestStart(const ::testing::TestInfo& t) override { test_ = std::string(t.test_suite_name()) + "." + t.name(); }
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s failed at %s:%d\n%s\n", rank_, test_.c_str(),
                 r.file_name() ? r.file_name() : "?", r.line_number(), r.message());
  }

 private:
  int rank_;
  std::string test_ = "(outside a test)";
};

inline void report_by_rank(int rank) {
  if (rank == 0) return;
  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  delete listeners.Release(listeners.default_result_printer());
  listeners.Append(new RankFailurePrinter(rank));
}

}  // namespace zt::testing
