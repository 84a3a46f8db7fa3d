// app/device.cpp's error paths: each returns or throws the message and exit code a user
// saw before the one error channel (result.hpp); the texts here are those of the
// bad-input table (tests/badinput/cases.tsv) and of the code before it.
#include "app/device.hpp"

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

// Device choice: the bad-input table's rv-device-unknown (exit 2) and rv-device-none
// (exit 3, no_device in the report).
TEST(AppDevice, ChooseDeviceErrors) {
  auto unknown = choose_device({}, {}, "nosuchdev");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().summary,
            "unknown device 'nosuchdev' (available: none); name one listed by `rxe-verify doctor`, or leave "
            "--device out");
  EXPECT_EQ(unknown.error().exit, kExitUsage);
  auto listed = choose_device({}, {"mlx5_0", "mlx5_1"}, "rxe9");
  ASSERT_FALSE(listed);
  EXPECT_EQ(listed.error().summary.rfind("unknown device 'rxe9' (available: mlx5_0, mlx5_1); ", 0), 0u);
  auto none = choose_device({}, {"mlx5_0"}, "");
  ASSERT_FALSE(none);
  EXPECT_EQ(
      none.error().summary,
      "no rxe device found (load rdma_rxe and run `rdma link add rxe0 type rxe netdev <netdev>`, or name "
      "one with --device)");
  EXPECT_EQ(none.error().remedy, "");
  EXPECT_EQ(none.error().exit, kExitNotReady);
  EXPECT_EQ(none.error().cause, cause::kNoDevice);
}
// -g against the table (rv-gid-range: exit 2) and a device with no RoCE v2 GID (exit 3).
TEST(AppDevice, ResolveDeviceGidErrors) {
  FakeControl c;
  FakeProvider prov(c);
  FakeHost host;
  auto bad_gid = resolve_device(prov, host, "", 9);
  ASSERT_FALSE(bad_gid);
  EXPECT_EQ(bad_gid.error().summary,
            "--gid-index 9: device rxe0 has no GID 9 (valid: 0, 1); pick one listed by `rxe-verify doctor`");
  EXPECT_EQ(bad_gid.error().exit, kExitUsage);
  EXPECT_THROW(throw_if_usage(bad_gid.error()), UsageError);
  auto good = resolve_device(prov, host, "", -1);
  ASSERT_TRUE(good);
  EXPECT_EQ(good->name, "rxe0");
  EXPECT_EQ(good->gid_index, 1);
  host.devices[0].gids.resize(1);  // only the RoCE v1 link-local GID left
  auto no_v2 = resolve_device(prov, host, "", -1);
  ASSERT_FALSE(no_v2);
  EXPECT_EQ(
      no_v2.error().summary,
      "device rxe0 has no RoCE v2 GID (is its netdev up with an IP address?); pick one with --gid-index");
  EXPECT_EQ(no_v2.error().exit, kExitNotReady);
  EXPECT_EQ(no_v2.error().cause, cause::kNoDevice);
  EXPECT_NO_THROW(throw_if_usage(no_v2.error()));
}
TEST(AppDevice, PortDownSaysHowToBringItUp) {
  DeviceChoice dc;
  dc.name = "rxe0";
  dc.info.netdev = "eth0";
  PortInfo pi;
  pi.state_str = "PORT_DOWN";
  auto r = check_port_active(dc, pi);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().line(), "port 1 of rxe0 is PORT_DOWN; bring its netdev up: `ip link set eth0 up`");
  EXPECT_EQ(r.error().exit, kExitNotReady);
  EXPECT_EQ(r.error().cause, cause::kDeviceDown);
  dc.info.netdev.clear();
  pi.state_str.clear();
  EXPECT_EQ(check_port_active(dc, pi).error().line(),
            "port 1 of rxe0 is down; bring its netdev up: `ip link set <netdev> up`");
  pi.active = true;
  EXPECT_TRUE(check_port_active(dc, pi));
}
TEST(AppDevice, OpenFailureKeepsTheVerbsTextAndAddsTheRemedy) {
  Error e = open_failure("rxe0", Error("ibv_get_device_list: Function not implemented"));
  EXPECT_EQ(e.line(),
            "ibv_get_device_list: Function not implemented; load ib_uverbs and rdma_rxe and check that `rdma "
            "link show` lists rxe0");
  EXPECT_EQ(e.exit, kExitNotReady);
  EXPECT_EQ(e.cause, cause::kNoDevice);
}

TEST(AppDevice, GidIndexMustBeInTheDeviceTable) {
  rxv::IbDevice d;
  d.name = "rxe0";
  EXPECT_TRUE(rxv::check_gid_index(d, 7)) << "empty table: the device decides";
  for (int i : {0, 1}) {
    rxv::GidEntry g;
    g.index = i;
    d.gids.push_back(g);
  }
  EXPECT_TRUE(rxv::check_gid_index(d, 1));
  auto r = rxv::check_gid_index(d, 5);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().summary,
            "--gid-index 5: device rxe0 has no GID 5 (valid: 0, 1); pick one listed by "
            "`rxe-verify doctor`");
  EXPECT_EQ(r.error().exit, rxv::kExitUsage);
}
