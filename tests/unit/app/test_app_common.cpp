// app/common.cpp's command boundary: each returns or throws the message and exit code a user
// saw before the one error channel (result.hpp); the texts here are those of the
// bad-input table (tests/badinput/cases.tsv) and of the code before it.
#include "app/common.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <stdexcept>
#include <string>

#include "app/options.hpp"
#include "app_fixtures.hpp"
#include "fake_host.hpp"
#include "fake_verbs.hpp"

using namespace rxv;
using rxv::testing::FakeControl;
using rxv::testing::FakeHost;
using rxv::testing::FakeProvider;

namespace {
struct Guarded {
  int exit;
  std::string err;  // stderr
};
Guarded guarded(const std::string& cmd, const std::function<int()>& f) {
  ::testing::internal::CaptureStderr();
  int rc = run_guarded(cmd, f);
  return {rc, ::testing::internal::GetCapturedStderr()};
}
}  // namespace

// The command boundary: what cli.cpp's catch blocks printed and returned.
TEST(AppCommon, BoundaryMapsUsageErrorToExit2) {
  auto g = guarded("run", [] { return usage("--split: must be at least 1"), 0; });
  EXPECT_EQ(g.exit, kExitUsage);
  EXPECT_EQ(g.err, "rxe-verify run: error: --split: must be at least 1\n");
}
TEST(AppCommon, BoundaryMapsNotReadyErrorToExit3) {
  auto g = guarded("probe", []() -> int { throw NotReadyError("--max 8 GiB exceeds the available memory"); });
  EXPECT_EQ(g.exit, kExitNotReady);
  EXPECT_EQ(g.err, "rxe-verify probe: error: --max 8 GiB exceeds the available memory\n");
}
TEST(AppCommon, BoundaryMapsAnyOtherExceptionToExit1) {
  auto g = guarded("churn", []() -> int { throw std::runtime_error("mmap: out of luck"); });
  EXPECT_EQ(g.exit, kExitFail);
  EXPECT_EQ(g.err, "rxe-verify churn: error: mmap: out of luck\n");
}
TEST(AppCommon, BoundaryPassesAnExitCodeThrough) {
  auto g = guarded("doctor", [] { return kExitNotReady; });
  EXPECT_EQ(g.exit, kExitNotReady);
  EXPECT_EQ(g.err, "");
}
// A command's usage error, through the boundary: the line and exit of the bad-input
// table's rv-split-zero.
TEST(AppCommon, BoundaryRunsACommandsUsageError) {
  FakeControl c;
  FakeProvider prov(c);
  FakeHost host;
  auto o = rxv::testing::small_run({"2G"});
  o.split = 0;
  auto g = guarded("run", [&] { return run_command(o, prov, host).exit; });
  EXPECT_EQ(g.exit, kExitUsage);
  EXPECT_EQ(g.err, "rxe-verify run: error: --split: must be at least 1\n");
  EXPECT_EQ(c.regs, 0);
}
