// The unprivileged user's memlock limit through the fakes: run and
// doctor both stop with exit 3 and one line that names memlock, the current limit, what
// the whole run pins (not just the staging buffer) and the remedies; the JSON carries
// the cause token. And a uverbs node the user may not open is device_access, not memlock.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>

#include "app/app.hpp"
#include "app/common.hpp"
#include "app/device.hpp"
#include "app_fixtures.hpp"
#include "fake_host.hpp"
#include "fake_verbs.hpp"

using namespace rxv;
using rxv::testing::FakeControl;
using rxv::testing::FakeHost;
using rxv::testing::FakeProvider;
using rxv::testing::small_run;

namespace {
void limit_memlock(FakeHost& h, const std::string& bytes) {
  h.files["/proc/self/limits"] =
      "Limit                     Soft Limit           Hard Limit           Units     \n"
      "Max locked memory         " +
      bytes + "                " + bytes + "                bytes     \n";
}
int lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }
}  // namespace

TEST(AppMemlock, RunNamesTheWholeRunsNeedAt64KiBAnd8MiB) {
  for (const char* lim : {"65536", "8388608"}) {
    FakeControl c;
    FakeProvider prov(c);
    FakeHost host;
    limit_memlock(host, lim);
    ::testing::internal::CaptureStderr();
    Outcome out = run_command(small_run({"1G"}), prov, host);
    std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(out.exit, kExitNotReady) << lim;
    EXPECT_EQ(lines(err), 1) << err;
    const std::string now = std::to_string(std::stoull(lim) / 1024) + " KiB";
    EXPECT_NE(err.find("RLIMIT_MEMLOCK is " + now), std::string::npos) << err;
    // 262144 pages of the 1 GiB region + the sampled mode's staging: 15 slots of
    // 1 MiB + 64 B (min(tx-depth 128, 16 MiB / slot)), 3841 pages: 1048576 + 15364 KiB
    EXPECT_NE(err.find("1063940 KiB this run pins"), std::string::npos) << err;
    EXPECT_EQ(err.find("1028 KiB"), std::string::npos) << err;  // not the staging buffer alone
    for (const char* remedy : {"ulimit -l", "/etc/security/limits.d/", "LimitMEMLOCK="})
      EXPECT_NE(err.find(remedy), std::string::npos) << remedy;
    EXPECT_EQ(c.regs, 0);  // nothing registered before the verdict
    ASSERT_TRUE(out.has_report);
    EXPECT_EQ(out.report["verdict"], "not_ready");
    EXPECT_EQ(out.report["error"]["cause"], "memlock");
  }
}

TEST(AppMemlock, RunCountsTheFullModeStagingBuffer) {
  FakeControl c;
  FakeProvider prov(c);
  FakeHost host;
  limit_memlock(host, "65536");
  auto o = small_run({"1G"});
  o.mode = "full";
  ::testing::internal::CaptureStderr();
  Outcome out = run_command(o, prov, host);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(out.exit, kExitNotReady);
  // full mode stages two --msg-size (64 MiB) slots and their guard bytes (2 x 128 B,
  // one more pinned page): 1048576 + 131072 + 4 KiB
  EXPECT_NE(err.find("1179652 KiB this run pins"), std::string::npos) << err;
}

TEST(AppMemlock, EnoughMemlockOrCapIpcLockPasses) {
  for (int variant : {0, 1}) {
    FakeControl c;
    FakeProvider prov(c);
    FakeHost host;
    if (variant == 0) {
      limit_memlock(host, "20971520");  // 20 MiB: enough for 1 MiB + the 15 MiB staging
    } else {
      limit_memlock(host, "65536");
      host.files["/proc/self/status"] = "Name:\tt\nCapEff:\t0000000000004000\n";  // CAP_IPC_LOCK
    }
    Outcome out = run_command(small_run({"1M"}), prov, host);
    EXPECT_EQ(out.exit, kExitPass) << variant << " " << out.report.dump();
  }
}

TEST(AppMemlock, DoctorSaysTheSameNeedWithItsToken) {
  FakeHost host;
  limit_memlock(host, "65536");
  DoctorCommandConfig o;
  o.size = "1G";
  Outcome out = doctor_command(o, host);
  EXPECT_EQ(out.exit, kExitNotReady);
  ASSERT_TRUE(out.has_report);
  EXPECT_EQ(out.report["causes"], nlohmann::json::array({"memlock"}));
  ASSERT_EQ(out.report["problems"].size(), 1u);
  std::string p = out.report["problems"][0];
  EXPECT_NE(p.find("RLIMIT_MEMLOCK is 64 KiB, below the 1063940 KiB"), std::string::npos) << p;
}

TEST(AppMemlock, UverbsAccessDeniedIsDeviceAccessNotMemlock) {
  // the errno decides (Error::err), not the summary's text
  Error f = open_failure("rxe0", Error(std::string("cannot open rxe0: ") + std::strerror(EACCES), "",
                                       kExitNotReady, "unknown", EACCES));
  EXPECT_EQ(f.cause, "device_access");
  EXPECT_EQ(f.exit, kExitNotReady);
  EXPECT_NE(f.summary.find("/dev/infiniband/uverbs"), std::string::npos);
  EXPECT_EQ(f.summary.find("RLIMIT"), std::string::npos);
  Error g = open_failure("rxe0", Error("no RDMA device named 'rxe0'"));
  EXPECT_EQ(g.cause, "no_device");
  Error text_only = open_failure("rxe0", Error(std::string("cannot open rxe0: ") + std::strerror(EACCES)));
  EXPECT_EQ(text_only.cause, "no_device") << "no errno: the text \"Permission denied\" alone decides nothing";
  // what libibverbs really says for a 0600 node (its errno is ENOENT): the node decides
  Error h = open_failure("rxe0", Error(std::string("cannot open rxe0: ") + std::strerror(ENOENT)),
                         "/dev/infiniband/uverbs0");
  EXPECT_EQ(h.cause, "device_access");
  EXPECT_NE(h.summary.find("/dev/infiniband/uverbs0 (rxe0)"), std::string::npos) << h.summary;
}
