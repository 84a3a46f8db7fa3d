// core/loopback.cpp's error paths: each returns or throws the message and exit code a user
// saw before the one error channel (result.hpp); the texts here are those of the
// bad-input table (tests/badinput/cases.tsv) and of the code before it.
#include "core/loopback.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <stdexcept>
#include <string>

#include "app_fixtures.hpp"
#include "fake_host.hpp"
#include "fake_verbs.hpp"

using namespace rxv;
using rxv::testing::FakeControl;
using rxv::testing::FakeDevice;

// A QP the device will not create: the verbs text, exit 3; a staging buffer that does
// not register: the diagnosis, exit 1 unless it is memlock.
TEST(Loopback, LoopbackSetupErrors) {
  FakeControl c;
  FakeDevice dev(c);
  auto dctx = [] { return DiagInput{}; };
  c.create_qp_error = "ibv_create_qp: Cannot allocate memory";
  auto no_qp = setup_loopback(dev, {}, 1 << 20, dctx);
  ASSERT_FALSE(no_qp);
  EXPECT_EQ(no_qp.error().line(), "ibv_create_qp: Cannot allocate memory");
  EXPECT_EQ(no_qp.error().exit, kExitNotReady);
  EXPECT_EQ(no_qp.error().cause, cause::kUnknown);
  c.create_qp_error.clear();
  c.connect_error = "ibv_modify_qp(RTR): Invalid argument";
  auto no_connect = connect_qp_pair(dev, {});
  ASSERT_FALSE(no_connect);
  EXPECT_EQ(no_connect.error().summary, "ibv_modify_qp(RTR): Invalid argument");
  c.connect_error.clear();
  c.reg_errno = [](std::size_t) { return EFAULT; };
  auto no_mr = setup_loopback(dev, {}, 1 << 20, dctx);
  ASSERT_FALSE(no_mr);
  EXPECT_EQ(no_mr.error().summary.rfind("cannot register the 1 MiB staging buffer: ", 0), 0u)
      << no_mr.error().summary;
  EXPECT_EQ(no_mr.error().exit, kExitFail);
  c.reg_errno = nullptr;
  auto ok = setup_loopback(dev, {}, 1 << 20, dctx);
  ASSERT_TRUE(ok);
  EXPECT_TRUE(ok->qa && ok->qb && ok->peer);
}
