// app/device.cpp's error paths: each returns or throws the message and exit code a user
// saw before the one error channel (result.hpp); the texts here are those of the
// bad-input table (tests/badinput/cases.tsv) and of the code before it.
#include "app/device.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <functional>
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
using rxv::testing::small_churn;
using rxv::testing::small_probe;
using rxv::testing::small_run;

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

// One cause for one errno everywhere (issue 62, finding 3): the same failure injected
// into run, churn and probe through the fakes; each command must name the same cause.
// Where a command names it: run's and churn's report (its error, or the failed size or
// iteration's diagnosis), probe's report diagnosis or, with no report (it failed before
// the bisection), its error line "error: [CAUSE] ...". "-" = the command named none.
// The three tests take ~2 s together (the RegMr rows: probe's bisection, 6 errnos).
namespace {
std::string cause_in(const nlohmann::json& rep) {
  if (rep.contains("error") && !rep["error"].is_null()) return rep["error"]["cause"];
  if (rep.contains("failure") && !rep["failure"].is_null()) return rep["failure"]["diagnosis"]["cause"];
  if (rep.contains("results"))
    for (const auto& s : rep["results"])
      if (!s["diagnosis"].is_null()) return s["diagnosis"]["cause"];
  if (rep.contains("probe") && !rep["probe"]["diagnosis"].is_null())
    return rep["probe"]["diagnosis"]["cause"];
  return "-";
}
std::string cause_in_line(const std::string& err) {
  const std::string tag = "error: [";
  auto p = err.find(tag);
  if (p == std::string::npos) return "-";
  p += tag.size();
  return err.substr(p, err.find(']', p) - p);
}
std::string named(const std::function<Outcome()>& command) {
  ::testing::internal::CaptureStderr();
  Outcome out = command();
  std::string err = ::testing::internal::GetCapturedStderr();
  return out.has_report ? cause_in(out.report) : cause_in_line(err);
}
struct Named {
  std::string run, churn, probe;
  std::string text() const { return "run " + run + ", churn " + churn + ", probe " + probe; }
};
// `inject` set on a fresh fake for each command; `qp`: the failure is in creating a QP,
// which churn does with --traffic only and probe never does (probe: "n/a").
Named inject(const std::function<void(FakeControl&)>& set, bool qp) {
  Named n;
  auto in_each = [&](const std::function<Outcome(FakeProvider&, FakeHost&)>& command) {
    FakeControl c;
    set(c);
    FakeProvider prov(c);
    FakeHost host;
    return named([&] { return command(prov, host); });
  };
  n.run = in_each([](FakeProvider& p, FakeHost& h) { return run_command(small_run({"64K"}), p, h); });
  n.churn = in_each([qp](FakeProvider& p, FakeHost& h) { return churn_command(small_churn(1, qp), p, h); });
  n.probe =
      qp ? "n/a" : in_each([](FakeProvider& p, FakeHost& h) { return probe_command(small_probe(), p, h); });
  return n;
}
std::string errno_text(int e) { return std::to_string(e) + " (" + std::strerror(e) + ")"; }
struct Row {
  int err;
  const char* cause;
};
}  // namespace

// ibv_open_device and ibv_alloc_pd (Provider::open): access denied is device_access, no
// memory out_of_memory, anything else no_device (libibverbs' ENOENT for a 0600 node is
// decided by the node itself: open_failure's denied_node).
TEST(AppDevice, OneCauseForOneErrnoAtOpenAndAllocPd) {
  for (Row r : {Row{EACCES, cause::kDeviceAccess}, Row{EPERM, cause::kDeviceAccess},
                Row{ENODEV, cause::kNoDevice}, Row{ENOENT, cause::kNoDevice}, Row{ENXIO, cause::kNoDevice},
                Row{ENOSYS, cause::kNoDevice}, Row{ENOMEM, cause::kOutOfMemory}}) {
    Named at_open = inject([&](FakeControl& c) { c.open_errno = r.err; }, false);
    EXPECT_TRUE(at_open.run == r.cause && at_open.churn == r.cause && at_open.probe == r.cause)
        << "ibv_open_device " << errno_text(r.err) << ": want " << r.cause << " from all, got "
        << at_open.text();
    Named at_pd = inject([&](FakeControl& c) { c.alloc_pd_errno = r.err; }, false);
    EXPECT_TRUE(at_pd.run == r.cause && at_pd.churn == r.cause && at_pd.probe == r.cause)
        << "ibv_alloc_pd " << errno_text(r.err) << ": want " << r.cause << " from all, got " << at_pd.text();
  }
}

// ibv_create_qp (run's loopback pair, churn --traffic's): the same table's QP column.
TEST(AppDevice, OneCauseForOneErrnoAtCreateQp) {
  for (Row r :
       {Row{EACCES, cause::kDeviceAccess}, Row{EPERM, cause::kDeviceAccess}, Row{ENODEV, cause::kNoDevice},
        Row{ENOMEM, cause::kOutOfMemory}, Row{EINVAL, cause::kUnknown}}) {
    Named n = inject([&](FakeControl& c) { c.create_qp_errno = r.err; }, true);
    EXPECT_TRUE(n.run == r.cause && n.churn == r.cause) << "ibv_create_qp " << errno_text(r.err) << ": want "
                                                        << r.cause << " from run and churn, got " << n.text();
  }
}

// ibv_reg_mr (run's staging buffer, churn's region, probe's attempts): ENOMEM, EPERM and
// EAGAIN go through the memlock/metadata/fragmentation logic (here: memlock unlimited,
// rxe-kvfix loaded: none applies, unknown); ENODEV is no_device.
TEST(AppDevice, OneCauseForOneErrnoAtRegMr) {
  for (Row r : {Row{ENOMEM, cause::kUnknown}, Row{EPERM, cause::kUnknown}, Row{EAGAIN, cause::kUnknown},
                Row{EACCES, cause::kUnknown}, Row{EFAULT, cause::kUnknown}, Row{ENODEV, cause::kNoDevice}}) {
    Named n = inject([&](FakeControl& c) { c.reg_errno = [e = r.err](std::size_t) { return e; }; }, false);
    EXPECT_TRUE(n.run == r.cause && n.churn == r.cause && n.probe == r.cause)
        << "ibv_reg_mr " << errno_text(r.err) << ": want " << r.cause << " from all, got " << n.text();
  }
}
