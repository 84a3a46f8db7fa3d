#include <gtest/gtest.h>

#include "sys/memfit.hpp"

using namespace rxv;

namespace {
constexpr std::uint64_t GiB = 1ull << 30;
// The exit code of a check (0: it fits) and its one line.
int code(const Result<void>& r) { return r ? 0 : r.error().exit; }
std::string line(const Result<void>& r) { return r ? "" : r.error().line(); }
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
  EXPECT_TRUE(check_memory_fit("--size", GiB, GiB + 4096, mem(4 * GiB, 3 * GiB), false));
}

TEST(MemFit, BeyondAvailableIsNotReadyAndNamesFigures) {
  auto r = check_memory_fit("--size", 3 * GiB + (512ull << 20), 3 * GiB + (512ull << 20),
                            mem(4 * GiB, 3 * GiB), false);
  const std::string e = line(r);
  EXPECT_EQ(code(r), 3);
  EXPECT_NE(e.find("--size 3.50 GiB"), std::string::npos) << e;
  EXPECT_NE(e.find("MemAvailable"), std::string::npos) << e;
  EXPECT_NE(e.find("3 GiB"), std::string::npos) << e;
  EXPECT_NE(e.find("4 GiB"), std::string::npos) << e;
  EXPECT_NE(e.find("--force"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos);
  EXPECT_EQ(
      e,
      "--size 3.50 GiB exceeds the memory available now: 3 GiB (MemAvailable) of 4 GiB; free memory, use a "
      "smaller size, or --force to try anyway");
}

TEST(MemFit, StagingCountsTowardsTheNeed) {
  // The region alone fits; region + staging does not: the message says what is pinned.
  auto r = check_memory_fit("--size", 3 * GiB, 3 * GiB + (2ull << 20), mem(4 * GiB, 3 * GiB), false);
  const std::string e = line(r);
  EXPECT_EQ(code(r), 3);
  EXPECT_NE(e.find("to pin"), std::string::npos) << e;
}

TEST(MemFit, BeyondTotalIsUsageError) {
  auto r = check_memory_fit("--max", 64 * 1024 * GiB, 64 * 1024 * GiB, mem(4 * GiB, 3 * GiB), false);
  const std::string e = line(r);
  EXPECT_EQ(code(r), 2);
  EXPECT_NE(e.find("MemTotal"), std::string::npos) << e;
  EXPECT_NE(e.find("--max"), std::string::npos) << e;
  EXPECT_NE(e.find("--force"), std::string::npos) << e;
  EXPECT_EQ(e,
            "--max 64 TiB exceeds this host's memory: 4 GiB (MemTotal); use a smaller size, or --force to "
            "try anyway");
}

TEST(MemFit, ForceAndUnknownMemoryPass) {
  EXPECT_EQ(code(check_memory_fit("--size", 8 * GiB, 8 * GiB, mem(4 * GiB, 3 * GiB), true)), 0);
  EXPECT_EQ(code(check_memory_fit("--size", 8 * GiB, 8 * GiB, std::nullopt, false)), 0);
}

TEST(MemFit, RealMeminfoWithoutMemAvailableUsesMemFree) {
  auto mi = parse_meminfo("MemTotal:  4194304 kB\nMemFree:  1048576 kB\n");
  ASSERT_TRUE(mi);
  EXPECT_EQ(code(check_memory_fit("--size", 2 * GiB, 2 * GiB, mi, false)), 3);
  EXPECT_EQ(code(check_memory_fit("--size", GiB / 2, GiB / 2, mi, false)), 0);
}
