// app/serve.cpp through the fakes: option checks, device choice, and a server that no
// client reaches giving up with "not ready" after its --timeout.
#include <gtest/gtest.h>
#include <unistd.h>

#include "app/app.hpp"
#include "fake_host.hpp"
#include "fake_verbs.hpp"

using namespace rxv;
using rxv::testing::FakeControl;
using rxv::testing::FakeHost;
using rxv::testing::FakeProvider;

TEST(AppServe, BadPortTimeoutOrGidIsAUsageError) {
  FakeControl c;
  FakeProvider prov(c);
  FakeHost host;
  ServeCommandConfig port0;
  port0.port = 0;
  EXPECT_THROW(serve_command(port0, prov, host), UsageError);
  ServeCommandConfig neg;
  neg.timeout = -1;
  EXPECT_THROW(serve_command(neg, prov, host), UsageError);
  ServeCommandConfig gid;
  gid.gid_index = 9;  // not in rxe0's table (0, 1)
  gid.gid_given = true;
  EXPECT_THROW(serve_command(gid, prov, host), UsageError);
}

TEST(AppServe, UnknownDeviceIsUsageNoRoceV2GidIsNotReady) {
  FakeControl c;
  FakeProvider prov(c);
  FakeHost host;
  ServeCommandConfig o;
  o.device = "nosuch";
  EXPECT_THROW(serve_command(o, prov, host), UsageError);
  o.device.clear();
  host.devices[0].gids.resize(1);  // only the RoCE v1 link-local GID left
  EXPECT_EQ(serve_command(o, prov, host).exit, kExitNotReady);
}

TEST(AppServe, NoClientWithinTheTimeoutIsNotReady) {
  FakeControl c;
  FakeProvider prov(c);
  FakeHost host;
  ServeCommandConfig o;
  o.bind = "127.0.0.1";
  o.port = 20000 + getpid() % 20000;
  o.timeout = 0.2;
  Outcome out = serve_command(o, prov, host);
  EXPECT_EQ(out.exit, kExitNotReady);
  EXPECT_FALSE(out.has_report);
}
