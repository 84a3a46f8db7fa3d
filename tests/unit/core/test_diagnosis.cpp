#include <gtest/gtest.h>

#include <cerrno>

#include "core/diagnosis.hpp"
#include "sys/procfs.hpp"
#include "test_data.hpp"

using namespace rxv;

namespace {
DiagInput reg(std::uint64_t size, std::uint64_t offset = 0) {
  DiagInput in;
  in.stage = Stage::Register;
  in.err = ENOMEM;
  in.size = size;
  in.offset = offset;
  in.buddyinfo = data("buddyinfo-host.txt");
  in.limits = data("limits-unlimited.txt");
  in.meminfo = data("meminfo-24G.txt");
  in.cap_eff = 0;
  in.module.flavor = ModuleFlavor::Stock;
  in.port_active = true;
  return in;
}
}  // namespace

TEST(Diagnosis, OrderAboveMaxNeverSucceedsOnStock) {
  auto d = diagnose(reg(1ull << 30, 16));  // 262,145 pages
  EXPECT_EQ(d.cause, "rxe_metadata_order");
  EXPECT_NE(d.summary.find("262145 pages"), std::string::npos) << d.summary;
  EXPECT_NE(d.summary.find("order 11"), std::string::npos) << d.summary;
  EXPECT_NE(d.remedy.find("rxe-kvfix"), std::string::npos);
  EXPECT_EQ(diagnose(reg(2ull << 30)).cause, "rxe_metadata_order");
  EXPECT_EQ(diagnose(reg(4ull << 30)).cause, "rxe_metadata_order");
}

TEST(Diagnosis, FragmentationWhenNoBlockOfThatOrder) {
  auto in = reg(640ull << 20);  // order 10
  in.buddyinfo = data("buddyinfo-fragmented.txt");
  auto d = diagnose(in);
  EXPECT_EQ(d.cause, "fragmentation");
  EXPECT_NE(d.summary.find("order 10"), std::string::npos) << d.summary;
  EXPECT_NE(d.remedy.find("compact_memory"), std::string::npos);
  in.size = 512ull << 20;  // order 9: also no block
  EXPECT_EQ(diagnose(in).cause, "fragmentation");
}

TEST(Diagnosis, OrderTenWithFreeBlocksIsNotCalledFragmentation) {
  auto d = diagnose(reg(1ull << 30));  // host sample has order-10 blocks
  EXPECT_EQ(d.cause, "unknown");
  EXPECT_NE(d.summary.find("order 10"), std::string::npos) << d.summary;
}

TEST(Diagnosis, KvfixModuleIsNotMetadata) {
  auto in = reg(4ull << 30);
  in.module.flavor = ModuleFlavor::RxeKvfix;
  in.module.version = "9.9.9-rxe-kvfix";
  auto d = diagnose(in);
  EXPECT_EQ(d.cause, "unknown");
  EXPECT_NE(d.summary.find("not the cause"), std::string::npos) << d.summary;
}

TEST(Diagnosis, MemlockBeforeEverythingElse) {
  auto in = reg(1ull << 30, 16);
  in.limits = data("limits-64K.txt");
  auto d = diagnose(in);
  EXPECT_EQ(d.cause, "memlock");
  EXPECT_NE(d.remedy.find("limits.conf"), std::string::npos);
  EXPECT_NE(d.remedy.find("ulimit -l"), std::string::npos);
  EXPECT_NE(d.remedy.find("LimitMEMLOCK="), std::string::npos);
  in.cap_eff = 1ull << kCapIpcLock;  // CAP_IPC_LOCK bypasses the limit
  EXPECT_EQ(diagnose(in).cause, "rxe_metadata_order");
  in.cap_eff = 0;
  in.limits = data("limits-8M.txt");
  EXPECT_EQ(diagnose(in).cause, "memlock");
}

TEST(Diagnosis, OutOfMemory) {
  // 64 GiB registered on rxe-kvfix: 16 Mi pages need 768 MiB of metadata and
  // scatter table, more than the sample's 300 MiB MemAvailable
  auto in = reg(64ull << 30);
  in.module.flavor = ModuleFlavor::RxeKvfix;
  in.module.version = "9.9.9-rxe-kvfix";
  in.meminfo = data("meminfo-low.txt");
  EXPECT_EQ(diagnose(in).cause, "out_of_memory");
  DiagInput a;
  a.stage = Stage::Allocate;
  a.err = ENOMEM;
  a.size = 1ull << 30;
  EXPECT_EQ(diagnose(a).cause, "out_of_memory");
}

// Seen in a VM: 4 GiB already resident left MemAvailable below the region's
// size; the stock module's order-12 metadata is still the cause.
TEST(Diagnosis, ResidentRegionIsNotOutOfMemory) {
  auto in = reg(4ull << 30);
  in.meminfo = data("meminfo-low.txt");
  EXPECT_EQ(diagnose(in).cause, "rxe_metadata_order");
}

TEST(Diagnosis, UnpatchedTestBuildIsTreatedLikeStock) {
  auto m = classify_module(true, std::string("9.9.9-rxe-kvfix\n"),
                           "9.9.9 fix=kvcalloc series=unpatched shape=kzalloc_objs source=debian");
  EXPECT_EQ(m.flavor, ModuleFlavor::RxeKvfixUnpatched);
  auto in = reg(2ull << 30);
  in.module = m;
  EXPECT_EQ(diagnose(in).cause, "rxe_metadata_order");
  auto fixed = classify_module(true, std::string("9.9.9-rxe-kvfix"),
                               "9.9.9 fix=kvcalloc series=mainline shape=kzalloc_objs source=debian");
  EXPECT_EQ(fixed.flavor, ModuleFlavor::RxeKvfix);
}

TEST(Diagnosis, DeviceDown) {
  auto in = reg(1ull << 30);
  in.port_active = false;
  EXPECT_EQ(diagnose(in).cause, "device_down");
}

TEST(Diagnosis, RetryExceededTwoHostPointsAtFirewall) {
  DiagInput in;
  in.stage = Stage::Transfer;
  in.wc_status = 12;
  in.wc_status_str = "transport retry counter exceeded";
  in.two_host = true;
  in.port_active = true;
  auto d = diagnose(in);
  EXPECT_EQ(d.cause, "network_path_or_firewall");
  EXPECT_NE(d.remedy.find("4791"), std::string::npos);
  FwResult fw;
  fw.verdict = FwVerdict::Drop;
  fw.source = "nftables";
  fw.detail = "policy drop";
  in.firewall = fw;
  EXPECT_NE(diagnose(in).summary.find("nftables"), std::string::npos);
  in.two_host = false;
  EXPECT_EQ(diagnose(in).cause, "transfer_error");
  in.stage = Stage::Timeout;
  in.two_host = true;
  EXPECT_EQ(diagnose(in).cause, "network_path_or_firewall");
}

TEST(Diagnosis, Corruption) {
  DiagInput in;
  in.stage = Stage::Verify;
  in.mismatch_text = "first bad byte at region offset 4096";
  auto d = diagnose(in);
  EXPECT_EQ(d.cause, "data_corruption");
  EXPECT_NE(d.summary.find("4096"), std::string::npos);
}

TEST(Module, Classification) {
  EXPECT_EQ(classify_module(false, std::nullopt, "").flavor, ModuleFlavor::Absent);
  EXPECT_EQ(classify_module(true, std::nullopt, "").flavor, ModuleFlavor::Stock);
  auto k = classify_module(true, std::string("9.9.9-rxe-kvfix\n"), "1\n");
  EXPECT_EQ(k.flavor, ModuleFlavor::RxeKvfix);
  EXPECT_EQ(k.version, "9.9.9-rxe-kvfix");
  EXPECT_EQ(k.installed, "1");
  auto s = classify_module(true, std::nullopt, "yes");  // installed but stock loaded
  EXPECT_EQ(s.flavor, ModuleFlavor::Stock);
  EXPECT_EQ(s.installed, "yes");
}

TEST(Memlock, Allows) {
  EXPECT_TRUE(memlock_allows(data("limits-unlimited.txt"), 0, 1ull << 40));
  EXPECT_FALSE(memlock_allows(data("limits-8M.txt"), 0, 1ull << 30));
  EXPECT_TRUE(memlock_allows(data("limits-8M.txt"), 1ull << kCapIpcLock, 1ull << 30));
  EXPECT_TRUE(memlock_allows(data("limits-8M.txt"), 0, 4ull << 20));
}
