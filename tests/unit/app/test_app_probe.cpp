// app/probe.cpp through the fakes: the bisection finds the boundary of a reg_mr that
// fails above N pages, and stops when the budget runs out.
#include <gtest/gtest.h>

#include <cerrno>

#include "app/app.hpp"
#include "app_fixtures.hpp"
#include "fake_host.hpp"
#include "fake_verbs.hpp"

using namespace rxv;
using rxv::testing::FakeControl;
using rxv::testing::FakeHost;
using rxv::testing::FakeProvider;
using rxv::testing::small_probe;

namespace {
constexpr std::size_t kPages = 100;  // the fake registers at most 100 pages

FakeControl limited() {
  FakeControl c;
  c.reg_errno = [](std::size_t len) { return len > kPages * 4096 ? ENOMEM : 0; };
  return c;
}

}  // namespace

TEST(AppProbe, FindsTheBoundaryToTheGranularity) {
  FakeControl c = limited();
  FakeProvider prov(c);
  FakeHost host;
  Outcome out = probe_command(small_probe(), prov, host);
  EXPECT_EQ(out.exit, kExitPass);
  ASSERT_TRUE(out.has_report);
  const auto& p = out.report["probe"];
  EXPECT_EQ(out.report["verdict"], "complete");
  EXPECT_EQ(p["largest_ok"]["size"], kPages * 4096);
  EXPECT_EQ(p["largest_ok"]["pages"], kPages);
  EXPECT_EQ(p["smallest_fail"]["size"], (kPages + 1) * 4096);
  EXPECT_TRUE(p["complete"].get<bool>());
  EXPECT_FALSE(p["diagnosis"].is_null());
  EXPECT_NE(out.text.find("boundary: 400 KiB registers"), std::string::npos) << out.text;
}

TEST(AppProbe, EverySizeRegistersUpToMax) {
  FakeControl c;
  FakeProvider prov(c);
  FakeHost host;
  Outcome out = probe_command(small_probe(), prov, host);
  EXPECT_EQ(out.exit, kExitPass);
  EXPECT_EQ(out.report["probe"]["largest_ok"]["size"], 1u << 20);
  EXPECT_TRUE(out.report["probe"]["smallest_fail"].is_null());
  EXPECT_EQ(c.regs, 1);
}

TEST(AppProbe, StopsWhenTheBudgetRunsOut) {
  FakeControl c = limited();
  FakeProvider prov(c);
  FakeHost host;
  ProbeCommandConfig o = small_probe();
  o.budget = 1e-9;  // gone after the first two attempts (max fails, min registers)
  Outcome out = probe_command(o, prov, host);
  EXPECT_EQ(out.exit, kExitPass);
  EXPECT_EQ(out.report["verdict"], "budget_exhausted");
  const auto& p = out.report["probe"];
  EXPECT_FALSE(p["complete"].get<bool>());
  EXPECT_EQ(p["attempts"].size(), 2u);
  EXPECT_EQ(p["largest_ok"]["size"], 4096u);
  EXPECT_EQ(p["smallest_fail"]["size"], 1u << 20);
  EXPECT_NE(out.text.find("[budget exhausted"), std::string::npos) << out.text;
}

TEST(AppProbe, MemlockStopsTheBisectionAsNotReady) {
  FakeControl c = limited();
  FakeProvider prov(c);
  FakeHost host;
  host.files["/proc/self/limits"] =
      "Max locked memory         65536                65536                bytes     \n";
  c.reg_errno = [](std::size_t) { return ENOMEM; };
  Outcome out = probe_command(small_probe(), prov, host);
  EXPECT_EQ(out.exit, kExitNotReady);
  EXPECT_EQ(out.report["verdict"], "not_ready");
  EXPECT_EQ(out.report["probe"]["attempts"].size(), 1u);
}

TEST(AppProbe, MinAboveMaxIsAUsageError) {
  FakeControl c;
  FakeProvider prov(c);
  FakeHost host;
  ProbeCommandConfig o = small_probe();
  o.min = "2M";
  EXPECT_THROW(probe_command(o, prov, host), UsageError);
}

TEST(AppProbe, OpenFailureIsNotReadyWithTheRemedy) {
  FakeControl c;
  c.open_error = "cannot open rxe0: No such device";
  FakeProvider prov(c);
  FakeHost host;
  ::testing::internal::CaptureStderr();
  Outcome out = probe_command(small_probe(), prov, host);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(out.exit, kExitNotReady);
  EXPECT_EQ(err,
            "rxe-verify probe: error: [no_device] cannot open rxe0: No such device; load ib_uverbs and "
            "rdma_rxe and check "
            "that `rdma link show` lists rxe0\n");
  EXPECT_FALSE(out.has_report);
}

TEST(AppProbe, UnknownDeviceIsAUsageError) {
  FakeControl c;
  FakeProvider prov(c);
  FakeHost host;
  auto o = small_probe();
  o.device = "rxe9";
  EXPECT_THROW((void)probe_command(o, prov, host), UsageError);
}
