// app/doctor.cpp through the fake host: what makes a host ready or not.
#include <gtest/gtest.h>

#include "app/app.hpp"
#include "fake_host.hpp"
#include "sys/procfs.hpp"

using namespace rxv;
using rxv::testing::FakeHost;

namespace {
Outcome doctor(FakeHost& h, const std::string& size = "1G") {
  DoctorCommandConfig o;
  o.size = size;
  return doctor_command(o, h);
}
bool has(const nlohmann::json& list, const std::string& word) {
  for (const auto& s : list)
    if (s.get<std::string>().find(word) != std::string::npos) return true;
  return false;
}
}  // namespace

TEST(AppDoctor, ReadyHost) {
  FakeHost h;
  Outcome out = doctor(h);
  EXPECT_EQ(out.exit, kExitPass);
  EXPECT_EQ(out.report["verdict"], "ready");
  EXPECT_TRUE(out.report["ready"].get<bool>());
  EXPECT_TRUE(out.report["problems"].empty());
  EXPECT_EQ(out.report["command"], "doctor");
  EXPECT_EQ(out.report["devices"][0]["selected_gid_index"], 1);
  EXPECT_NE(out.text.find("verdict     ready\n"), std::string::npos) << out.text;
}

TEST(AppDoctor, ModuleNotLoadedIsAProblem) {
  FakeHost h;
  h.mod = ModuleIdentity{};  // absent
  Outcome out = doctor(h);
  EXPECT_EQ(out.exit, kExitNotReady);
  EXPECT_EQ(out.report["verdict"], "not_ready");
  EXPECT_TRUE(has(out.report["problems"], "rdma_rxe is not loaded"));
  EXPECT_NE(out.text.find("verdict     NOT READY\n"), std::string::npos);
}

TEST(AppDoctor, NoRxeDeviceOrNoActivePortIsAProblem) {
  FakeHost h;
  h.devices.clear();
  Outcome none = doctor(h);
  EXPECT_EQ(none.exit, kExitNotReady);
  EXPECT_TRUE(has(none.report["problems"], "no rxe device"));

  FakeHost d;
  d.devices[0].port_active = false;
  d.devices[0].port_state = "1: DOWN";
  Outcome down = doctor(d);
  EXPECT_EQ(down.exit, kExitNotReady);
  EXPECT_TRUE(has(down.report["problems"], "ACTIVE port"));
}

TEST(AppDoctor, MemlockBelowTheSizeIsAProblemUnlessCapIpcLock) {
  FakeHost h;
  h.files["/proc/self/limits"] =
      "Max locked memory         8388608              8388608              bytes     \n";
  Outcome small = doctor(h, "1G");
  EXPECT_EQ(small.exit, kExitNotReady);
  EXPECT_TRUE(has(small.report["problems"], "RLIMIT_MEMLOCK"));
  EXPECT_FALSE(small.report["memlock"]["sufficient"].get<bool>());
  // a 1 MiB run pins 1 MiB + the sampled staging (15 slots of 1 MiB + 64 B): 16388 KiB
  EXPECT_EQ(doctor(h, "1M").exit, kExitNotReady);
  FakeHost h32;
  h32.files["/proc/self/limits"] =
      "Max locked memory         33554432             33554432             bytes     \n";
  EXPECT_EQ(doctor(h32, "1M").exit, kExitPass);  // 32 MiB is enough for 1 MiB

  h.files["/proc/self/status"] = "CapEff:\t0000000000004000\n";  // CAP_IPC_LOCK (bit 14)
  Outcome cap = doctor(h, "1G");
  EXPECT_EQ(cap.exit, kExitPass);
  EXPECT_TRUE(cap.report["memlock"]["cap_ipc_lock"].get<bool>());
}

TEST(AppDoctor, StockModuleAndDroppingFirewallWarnButStayReady) {
  FakeHost h;
  h.mod.flavor = ModuleFlavor::Stock;
  h.fw.combined.verdict = FwVerdict::Drop;
  h.fw.combined.source = "nftables";
  h.fw.combined.detail = "chain input: drop";
  Outcome out = doctor(h);
  EXPECT_EQ(out.exit, kExitPass);
  EXPECT_TRUE(has(out.report["warnings"], "stock"));
  EXPECT_TRUE(has(out.report["warnings"], "UDP 4791"));
  EXPECT_EQ(out.report["firewall"]["roce_v2_input"], "drop");
}

// doctor on a host whose loaded rdma_rxe is stock and whose rxe-kvfix record says
// STATE with MESSAGE (kmod/rxe-kvfix-record.sh's lines)
static Outcome doctor_with_record(const std::string& state, const std::string& message) {
  FakeHost h;
  h.mod.flavor = ModuleFlavor::Stock;
  h.files[std::string(kKvfixStatusDir) + h.kernel()] = "kernel=" + h.kernel() + "\nstate=" + state +
                                                       "\ntime=2026-12-05T18:00:00Z\nversion=1.0.0\n"
                                                       "message=" +
                                                       message + "\n";
  return doctor(h);
}

TEST(AppDoctor, RecordedBuildFailureNamesWhyTheModuleIsStock) {
  Outcome out = doctor_with_record("failed", "no source of kernel X found; install linux-source-7.3");
  EXPECT_EQ(out.exit, kExitPass);  // a stock module is a warning, as without the record
  EXPECT_TRUE(has(out.report["warnings"], "could not be built for this kernel"));
  EXPECT_TRUE(has(out.report["warnings"], "install linux-source-7.3"));
  EXPECT_FALSE(has(out.report["warnings"], "MRs above 1 GiB never register"));
  EXPECT_EQ(out.report["rxe_kvfix_build"]["state"], "failed");
  EXPECT_NE(out.text.find("rxe-kvfix   failed for this kernel (2026-12-05T18:00:00Z): no source"),
            std::string::npos)
      << out.text;
}

TEST(AppDoctor, DeferredBuildSaysNotBuiltYet) {
  Outcome out =
      doctor_with_record("deferred", "its source RPM is downloaded once this package transaction is over");
  EXPECT_EQ(out.exit, kExitPass);
  EXPECT_TRUE(has(out.report["warnings"], "is not built yet for this kernel"));
  EXPECT_TRUE(has(out.report["warnings"], "once this package transaction is over"));
  EXPECT_FALSE(has(out.report["warnings"], "MRs above 1 GiB never register"));
  EXPECT_EQ(out.report["rxe_kvfix_build"]["state"], "deferred");
}

TEST(AppDoctor, KernelThatDoesNotNeedTheFixGetsNoStockWarning) {
  FakeHost h;
  h.mod.flavor = ModuleFlavor::Stock;
  h.files[std::string(kKvfixStatusDir) + h.kernel()] =
      "state=not-needed\ntime=t\nversion=1.0.0\nmessage=kernel keeps rxe MR pages in an xarray\n";
  Outcome out = doctor(h);
  EXPECT_EQ(out.exit, kExitPass);
  EXPECT_FALSE(has(out.report["warnings"], "stock"));
  EXPECT_EQ(out.report["rxe_kvfix_build"]["state"], "not-needed");
}

TEST(AppDoctor, NoRecordIsNull) {
  FakeHost h;
  Outcome out = doctor(h);
  EXPECT_TRUE(out.report["rxe_kvfix_build"].is_null());
  EXPECT_EQ(out.text.find("rxe-kvfix   "), std::string::npos);
}

// doctor -s SIZE: whether the loaded rdma_rxe can register one MR of SIZE. A stock module
// on a kernel that needs the fix cannot register 2 GiB (524,288 pages x 16 B = 8 MiB of
// contiguous page array, order 11 > MAX_PAGE_ORDER 10): not ready, with the cause;
// rxe-kvfix can; a stock module whose order fits but no free block of it is left: a warning.
TEST(AppDoctor, SizeTheLoadedModuleCannotRegisterIsAProblem) {
  FakeHost stock;
  stock.mod.flavor = ModuleFlavor::Stock;
  Outcome out = doctor(stock, "2G");
  EXPECT_EQ(out.exit, kExitNotReady);
  EXPECT_EQ(out.report["register"]["verdict"], "cannot");
  EXPECT_EQ(out.report["register"]["metadata_order"], 11);
  EXPECT_TRUE(has(out.report["causes"], "rxe_metadata_order"));
  EXPECT_TRUE(has(out.report["problems"], "MAX_PAGE_ORDER"));
  EXPECT_NE(out.text.find("register    2 GiB: cannot"), std::string::npos) << out.text;

  FakeHost kvfix;  // rxe-kvfix
  Outcome ok = doctor(kvfix, "2G");
  EXPECT_EQ(ok.exit, kExitPass);
  EXPECT_EQ(ok.report["register"]["verdict"], "can");

  FakeHost fits;  // 1 GiB: order 10, possible on stock
  fits.mod.flavor = ModuleFlavor::Stock;
  EXPECT_EQ(doctor(fits, "1G").report["register"]["verdict"], "can");
  fits.files["/proc/buddyinfo"] =
      "Node 0, zone   Normal    10   10   10   10   10   10   10   10   10    4    0\n";
  Outcome frag = doctor(fits, "1G");
  EXPECT_EQ(frag.exit, kExitPass);
  EXPECT_EQ(frag.report["register"]["verdict"], "not_now");
  EXPECT_TRUE(has(frag.report["warnings"], "fragmentation"));
}

// `rxe-kvfix status --json`'s secure_boot (kmod/rxe-kvfix-status.sh): Secure Boot on and
// the DKMS key not enrolled. With rdma_rxe not loaded, the problem says why modprobe
// cannot load it and how to enrol the key; with the stock module loaded, a warning.
TEST(AppDoctor, SecureBootRefusingTheModuleIsSaid) {
  const std::string line =
      "Secure Boot is on and /var/lib/dkms/mok.pub, the key rxe-kvfix's module is signed with, is not "
      "enrolled: the kernel refuses the module (modprobe rdma_rxe loads nothing). Enrol it: mokutil "
      "--import /var/lib/dkms/mok.pub, then reboot";
  const std::string refused =
      R"({"secure_boot":{"enabled":true,"certificate":"/var/lib/dkms/mok.pub","key":"not-enrolled",)"
      R"("refuses_module":true,"enrol":"mokutil --import /var/lib/dkms/mok.pub","message":")" +
      line + R"("},"kernels":[]})";
  FakeHost absent;
  absent.mod = ModuleIdentity{};
  absent.kvfix_json = refused;
  Outcome out = doctor(absent);
  EXPECT_EQ(out.exit, kExitNotReady);
  EXPECT_TRUE(has(out.report["problems"], "cannot load it: Secure Boot is on")) << out.text;
  EXPECT_TRUE(has(out.report["problems"], "mokutil --import /var/lib/dkms/mok.pub")) << out.text;
  EXPECT_TRUE(out.report["secure_boot"]["refuses_module"].get<bool>());
  EXPECT_EQ(out.report["secure_boot"]["key"], "not-enrolled");

  FakeHost stock;
  stock.mod.flavor = ModuleFlavor::Stock;
  stock.kvfix_json = refused;
  Outcome w = doctor(stock);
  EXPECT_TRUE(has(w.report["warnings"], "the next `modprobe rdma_rxe` loads nothing: Secure Boot is on"))
      << w.text;

  // enrolled, or rxe-kvfix not installed, or a document that does not parse: nothing said
  FakeHost ok;
  ok.kvfix_json = R"({"secure_boot":{"enabled":true,"certificate":"/var/lib/dkms/mok.pub","key":"enrolled",)"
                  R"("refuses_module":false,"enrol":null,"message":null},"kernels":[]})";
  Outcome fine = doctor(ok);
  EXPECT_EQ(fine.exit, kExitPass);
  EXPECT_FALSE(fine.report["secure_boot"]["refuses_module"].get<bool>());
  FakeHost none;
  EXPECT_TRUE(doctor(none).report["secure_boot"].is_null());
  FakeHost garbage;
  garbage.mod = ModuleIdentity{};
  garbage.kvfix_json = "not json";
  Outcome g = doctor(garbage);
  EXPECT_TRUE(g.report["secure_boot"].is_null());
  EXPECT_TRUE(has(g.report["problems"], "rdma_rxe is not loaded (`modprobe rdma_rxe`)"));
}
