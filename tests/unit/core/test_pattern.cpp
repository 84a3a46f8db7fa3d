#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/pattern.hpp"

using namespace rxv;

namespace {
constexpr std::uint64_t kPages = 64;
std::vector<unsigned char> filled(std::uint64_t off, std::size_t len, std::uint64_t key) {
  std::vector<unsigned char> v(len);
  pattern_fill(v.data(), off, len, key);
  return v;
}
}  // namespace

TEST(Pattern, RoundTripAnyAlignment) {
  const std::uint64_t key = pattern_key(42, 0, Phase::Write);
  for (std::uint64_t off : {0ull, 1ull, 7ull, 8ull, 4095ull, 4096ull, 12345ull}) {
    for (std::size_t len : {1ul, 7ul, 8ul, 9ul, 4096ul, 10000ul}) {
      auto v = filled(off, len, key);
      EXPECT_FALSE(pattern_verify(v.data(), off, len, key)) << off << "+" << len;
    }
  }
}

TEST(Pattern, SubrangeOfFillMatchesStandaloneFill) {
  const std::uint64_t key = pattern_key(1, 2, Phase::Read);
  auto whole = filled(0, 3 * 4096, key);
  auto part = filled(4093, 20, key);
  EXPECT_EQ(0, std::memcmp(whole.data() + 4093, part.data(), 20));
}

TEST(Pattern, EveryPageAndWordDistinct) {
  const std::uint64_t key = pattern_key(7, 0, Phase::Write);
  auto v = filled(0, kPages * 4096, key);
  for (std::uint64_t p = 1; p < kPages; ++p)
    EXPECT_NE(0, std::memcmp(v.data(), v.data() + p * 4096, 4096)) << p;
  EXPECT_NE(pattern_word(key, 0), pattern_word(key, 1));
}

TEST(Pattern, CorruptedByteDetectedAtRightOffset) {
  const std::uint64_t key = pattern_key(9, 1, Phase::Write);
  const std::uint64_t base = 16;  // region offset of v[0]
  auto v = filled(base, kPages * 4096, key);
  v[5 * 4096 + 123] ^= 0x40;
  auto m = pattern_verify(v.data(), base, v.size(), key);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->region_offset, base + 5 * 4096 + 123);
  EXPECT_EQ(m->bad_bytes, 1u);
  EXPECT_EQ(m->actual, m->expected ^ 0x40);
}

TEST(Pattern, MisplacedPageDetectedAndExplained) {
  const std::uint64_t key = pattern_key(9, 0, Phase::Write);
  auto v = filled(0, kPages * 4096, key);
  std::memcpy(v.data() + 10 * 4096, v.data() + 3 * 4096, 4096);  // page 3 mapped at 10
  auto m = pattern_verify(v.data(), 0, v.size(), key);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->region_offset / 4096, 10u);
  EXPECT_GT(m->bad_bytes, 4000u);
  auto why = explain_mismatch(v.data(), 0, v.size(), *m, key, {}, v.size());
  EXPECT_NE(why.find("misplaced"), std::string::npos) << why;
  EXPECT_NE(why.find(std::to_string(3 * 4096)), std::string::npos) << why;
}

// region_size is the peer's word on `serve` (a fuzzer timeout: 2^63 bytes
// made the misplaced-page search run for hours): the search covers kExplainMaxPages pages
// around the bad one and says so when it found nothing.
TEST(Pattern, MisplacedPageSearchIsBoundedInAHugeRegion) {
  const std::uint64_t key = pattern_key(9, 0, Phase::Write);
  const std::uint64_t at = std::uint64_t{1} << 40;  // the checked bytes sit 1 TiB in
  std::vector<unsigned char> v(4096);
  pattern_fill(v.data(), at + 5 * 4096, 4096, key);  // a page from 5 pages on: inside
  auto m = pattern_verify(v.data(), at, v.size(), key);
  ASSERT_TRUE(m);
  for (std::uint64_t size : {std::uint64_t{1} << 63, ~std::uint64_t{0}}) {
    auto why = explain_mismatch(v.data(), at, v.size(), *m, key, {}, size);
    EXPECT_NE(why.find("misplaced"), std::string::npos) << why;
    EXPECT_NE(why.find(std::to_string(at + 5 * 4096)), std::string::npos) << why;
  }
  pattern_fill(v.data(), 0, 4096, key);  // region page 0: outside the searched pages
  m = pattern_verify(v.data(), at, v.size(), key);
  ASSERT_TRUE(m);
  auto why = explain_mismatch(v.data(), at, v.size(), *m, key, {}, std::uint64_t{1} << 63);
  const std::uint64_t bad = at / 4096, lo = bad - kExplainMaxPages / 2;
  EXPECT_EQ(why, "unrecognised data (searched pages " + std::to_string(lo) + "-" +
                     std::to_string(lo + kExplainMaxPages - 1) + " of " +
                     std::to_string(std::uint64_t{1} << 51) + " for a misplaced one)");
  // The bad page is the region's last: the searched pages end there.
  why = explain_mismatch(v.data(), at, v.size(), *m, key, {}, at + 4096);
  EXPECT_EQ(why, "unrecognised data (searched pages " + std::to_string(bad + 1 - kExplainMaxPages) + "-" +
                     std::to_string(bad) + " of " + std::to_string(bad + 1) + " for a misplaced one)");
}

TEST(Pattern, StalePageFromPreviousPassDetected) {
  const std::uint64_t k0 = pattern_key(5, 0, Phase::Write);
  const std::uint64_t k1 = pattern_key(5, 1, Phase::Write);
  auto old = filled(0, kPages * 4096, k0);
  auto v = filled(0, kPages * 4096, k1);
  std::memcpy(v.data() + 20 * 4096, old.data() + 20 * 4096, 4096);  // page not rewritten
  auto m = pattern_verify(v.data(), 0, v.size(), k1);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->region_offset, 20u * 4096);
  auto why = explain_mismatch(v.data(), 0, v.size(), *m, k1, {{k0, "pass 1 write"}}, v.size());
  EXPECT_NE(why.find("stale"), std::string::npos) << why;
  EXPECT_NE(why.find("pass 1 write"), std::string::npos) << why;
}

TEST(Pattern, PhasesAndSeedsDiffer) {
  EXPECT_NE(pattern_key(1, 0, Phase::Write), pattern_key(1, 0, Phase::Read));
  EXPECT_NE(pattern_key(1, 0, Phase::Write), pattern_key(1, 1, Phase::Write));
  EXPECT_NE(pattern_key(1, 0, Phase::Write), pattern_key(2, 0, Phase::Write));
}

TEST(Pattern, ShortTransferDetected) {
  const std::uint64_t key = pattern_key(3, 0, Phase::Read);
  std::vector<unsigned char> v(8 * 4096, 0);
  pattern_fill(v.data(), 0, 5 * 4096 + 100, key);  // transfer stopped early
  auto m = pattern_verify(v.data(), 0, v.size(), key);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->region_offset, 5u * 4096 + 100);
  auto why = explain_mismatch(v.data(), 0, v.size(), *m, key, {}, v.size());
  EXPECT_NE(why.find("zero"), std::string::npos) << why;
}

TEST(Pattern, ShiftedTransferDetected) {
  const std::uint64_t key = pattern_key(3, 0, Phase::Read);
  auto src = filled(0, 4 * 4096, key);
  std::vector<unsigned char> v(4 * 4096);
  std::memcpy(v.data() + 64, src.data(), v.size() - 64);  // landed 64 bytes late
  std::memcpy(v.data(), src.data(), 64);
  auto m = pattern_verify(v.data(), 0, v.size(), key);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->region_offset, 64u);
}
