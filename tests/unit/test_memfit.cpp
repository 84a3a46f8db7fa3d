#include <gtest/gtest.h>

#include "memfit.hpp"

using namespace rxv;

namespace {
constexpr std::uint64_t GiB = 1ull << 30;
MemInfo mem(std::uint64_t total, std::uint64_t avail) {
  MemInfo m;
  m.total = total;
  m.available = avail;
  m.free = avail;
  m.has_available = true;
  return m;
}
}  // namespace

TEST(MemFit, FitsInAvailable) {
  auto f = check_memory_fit("--size", GiB, GiB + 4096, mem(4 * GiB, 3 * GiB), false);
  EXPECT_EQ(f.code, 0);
  EXPECT_TRUE(f.error.empty());
}

TEST(MemFit, BeyondAvailableIsNotReadyAndNamesFigures) {
  auto f = check_memory_fit("--size", 3 * GiB + (512ull << 20), 3 * GiB + (512ull << 20),
                            mem(4 * GiB, 3 * GiB), false);
  EXPECT_EQ(f.code, 3);
  EXPECT_NE(f.error.find("--size 3.50 GiB"), std::string::npos) << f.error;
  EXPECT_NE(f.error.find("MemAvailable"), std::string::npos) << f.error;
  EXPECT_NE(f.error.find("3 GiB"), std::string::npos) << f.error;
  EXPECT_NE(f.error.find("4 GiB"), std::string::npos) << f.error;
  EXPECT_NE(f.error.find("--force"), std::string::npos) << f.error;
  EXPECT_EQ(f.error.find('\n'), std::string::npos);
}

TEST(MemFit, StagingCountsTowardsTheNeed) {
  // The region alone fits; region + staging does not: the message says what is pinned.
  auto f = check_memory_fit("--size", 3 * GiB, 3 * GiB + (2ull << 20), mem(4 * GiB, 3 * GiB), false);
  EXPECT_EQ(f.code, 3);
  EXPECT_NE(f.error.find("to pin"), std::string::npos) << f.error;
}

TEST(MemFit, BeyondTotalIsUsageError) {
  auto f = check_memory_fit("--max", 64 * 1024 * GiB, 64 * 1024 * GiB, mem(4 * GiB, 3 * GiB), false);
  EXPECT_EQ(f.code, 2);
  EXPECT_NE(f.error.find("MemTotal"), std::string::npos) << f.error;
  EXPECT_NE(f.error.find("--max"), std::string::npos) << f.error;
  EXPECT_NE(f.error.find("--force"), std::string::npos) << f.error;
}

TEST(MemFit, ForceAndUnknownMemoryPass) {
  EXPECT_EQ(check_memory_fit("--size", 8 * GiB, 8 * GiB, mem(4 * GiB, 3 * GiB), true).code, 0);
  EXPECT_EQ(check_memory_fit("--size", 8 * GiB, 8 * GiB, std::nullopt, false).code, 0);
}

TEST(MemFit, RealMeminfoWithoutMemAvailableUsesMemFree) {
  auto mi = parse_meminfo("MemTotal:  4194304 kB\nMemFree:  1048576 kB\n");
  ASSERT_TRUE(mi);
  EXPECT_EQ(check_memory_fit("--size", 2 * GiB, 2 * GiB, mi, false).code, 3);
  EXPECT_EQ(check_memory_fit("--size", GiB / 2, GiB / 2, mi, false).code, 0);
}
