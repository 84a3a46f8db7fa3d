// app/common.cpp's error paths: each returns or throws the message and exit code a user
// saw before the one error channel (result.hpp); the texts here are those of the
// bad-input table (tests/badinput/cases.tsv) and of the code before it.
#include "app/common.hpp"

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

// Device choice: the bad-input table's rv-device-unknown (exit 2) and rv-device-none
// (exit 3, no_device in the report).
TEST(AppCommon, ChooseDeviceErrors) {
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
TEST(AppCommon, ResolveDeviceGidErrors) {
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

TEST(AppCommon, PeerHostErrorIsAUsageError) {
  auto r = check_peer_host("bad host");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().summary,
            "bad peer address 'bad host': use a host name or IP address, with an optional :PORT (IPv6: "
            "[ADDR]:PORT)");
  EXPECT_EQ(r.error().exit, kExitUsage);
}

TEST(AppCommon, PortDownSaysHowToBringItUp) {
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

TEST(AppCommon, MemlockPreflightNamesTheLimitAndTheNeed) {
  FakeHost host;
  host.files["/proc/self/limits"] =
      "Max locked memory         65536                65536                bytes     \n";
  auto r = memlock_preflight(host, 8ull << 20, "the 8 MiB region and the staging buffer");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().summary,
            "RLIMIT_MEMLOCK is 64 KiB, below the 8192 KiB this run pins (the 8 MiB region and the staging "
            "buffer) and the process lacks CAP_IPC_LOCK");
  EXPECT_EQ(r.error().remedy, memlock_remedy(8ull << 20));
  EXPECT_EQ(r.error().exit, kExitNotReady);
  EXPECT_EQ(r.error().cause, cause::kMemlock);
}

TEST(AppCommon, OpenFailureKeepsTheVerbsTextAndAddsTheRemedy) {
  Error e = open_failure("rxe0", Error("ibv_get_device_list: Function not implemented"));
  EXPECT_EQ(e.line(),
            "ibv_get_device_list: Function not implemented; load ib_uverbs and rdma_rxe and check that `rdma "
            "link show` lists rxe0");
  EXPECT_EQ(e.exit, kExitNotReady);
  EXPECT_EQ(e.cause, cause::kNoDevice);
}

// A QP the device will not create: the verbs text, exit 3; a staging buffer that does
// not register: the diagnosis, exit 1 unless it is memlock.
TEST(AppCommon, LoopbackSetupErrors) {
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
