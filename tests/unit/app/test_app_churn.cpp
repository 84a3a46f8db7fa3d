// app/churn.cpp through the fakes: churn stops at the first failure and names its stage.
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
using rxv::testing::small_churn;

TEST(AppChurn, EveryIterationPasses) {
  FakeControl c;
  FakeProvider prov(c);
  FakeHost host;
  Outcome out = churn_command(small_churn(3, true), prov, host);
  EXPECT_EQ(out.exit, kExitPass);
  EXPECT_EQ(out.report["verdict"], "pass");
  EXPECT_EQ(out.report["iterations"].size(), 3u);
}

TEST(AppChurn, StopsAtTheFirstFailedRegistration) {
  FakeControl c;
  int calls = 0;
  c.reg_errno = [&](std::size_t) { return ++calls == 2 ? ENOMEM : 0; };  // no staging: 1st, 2nd
  FakeProvider prov(c);
  FakeHost host;
  Outcome out = churn_command(small_churn(5, false), prov, host);
  EXPECT_EQ(out.exit, kExitFail);
  EXPECT_EQ(out.report["verdict"], "fail");
  EXPECT_EQ(out.report["iterations"].size(), 2u);  // nothing after the failure
  EXPECT_EQ(out.report["failure"]["iteration"], 2);
  EXPECT_EQ(out.report["failure"]["stage"], "register");
  EXPECT_EQ(calls, 2);
}

TEST(AppChurn, StopsAtTheFirstFailedTrafficLoop) {
  FakeControl c;
  c.corrupt_op_at = 0;  // the first WRITE of iteration 1 lands corrupted
  FakeProvider prov(c);
  FakeHost host;
  Outcome out = churn_command(small_churn(4, true), prov, host);
  EXPECT_EQ(out.exit, kExitFail);
  EXPECT_EQ(out.report["iterations"].size(), 1u);
  EXPECT_EQ(out.report["failure"]["iteration"], 1);
  EXPECT_EQ(out.report["failure"]["stage"], "traffic");
}

TEST(AppChurn, TrafficWithThePortDownIsNotReady) {
  FakeControl c;
  c.port_active = false;
  FakeProvider prov(c);
  FakeHost host;
  Outcome out = churn_command(small_churn(2, true), prov, host);
  EXPECT_EQ(out.exit, kExitNotReady);
  EXPECT_EQ(out.report["verdict"], "not_ready");
}

TEST(AppChurn, OpenFailureIsNotReadyWithTheVerbsText) {
  FakeControl c;
  c.open_error = "ibv_get_device_list: Function not implemented";
  FakeProvider prov(c);
  FakeHost host;
  ::testing::internal::CaptureStderr();
  Outcome out = churn_command(small_churn(1, false), prov, host);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(out.exit, kExitNotReady);
  EXPECT_EQ(
      err,
      "rxe-verify churn: error: ibv_get_device_list: Function not implemented; load ib_uverbs and rdma_rxe "
      "and check that `rdma link show` lists rxe0\n");
  EXPECT_EQ(out.report["error"]["cause"], "no_device");
}

// With --traffic, any failure to set up the loopback means this host cannot run it (3).
TEST(AppChurn, TrafficSetupFailureIsNotReady) {
  FakeControl c;
  c.connect_error = "ibv_modify_qp(RTR): Invalid argument";
  FakeProvider prov(c);
  FakeHost host;
  ::testing::internal::CaptureStderr();
  Outcome out = churn_command(small_churn(1, true), prov, host);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(out.exit, kExitNotReady);
  EXPECT_EQ(err, "rxe-verify churn: error: ibv_modify_qp(RTR): Invalid argument\n");
}

TEST(AppChurn, GidOutsideTheTableIsAUsageError) {
  FakeControl c;
  FakeProvider prov(c);
  FakeHost host;
  auto o = small_churn(1, true);
  o.gid_index = 5;
  EXPECT_THROW((void)churn_command(o, prov, host), UsageError);
}
