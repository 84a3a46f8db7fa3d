#include <gtest/gtest.h>

#include "base/size.hpp"

using namespace rxv;

TEST(SizeParse, PlainAndSuffixes) {
  EXPECT_EQ(parse_size("4096").value(), 4096u);
  EXPECT_EQ(parse_size("512M").value(), 512ull << 20);
  EXPECT_EQ(parse_size("1G").value(), 1ull << 30);
  EXPECT_EQ(parse_size("1g").value(), 1ull << 30);
  EXPECT_EQ(parse_size("2GiB").value(), 2ull << 30);
  EXPECT_EQ(parse_size("4GB").value(), 4ull << 30);
  EXPECT_EQ(parse_size("64K").value(), 64ull << 10);
  EXPECT_EQ(parse_size("1T").value(), 1ull << 40);
  EXPECT_EQ(parse_size("16B").value(), 16u);
  EXPECT_EQ(parse_size(" 1G ").value(), 1ull << 30);
}

TEST(SizeParse, Sums) {
  EXPECT_EQ(parse_size("1G+16").value(), (1ull << 30) + 16);
  EXPECT_EQ(parse_size("1G+4K+1").value(), (1ull << 30) + 4097);
}

TEST(SizeParse, ZeroIsParsedCallerDecides) { EXPECT_EQ(parse_size("0").value(), 0u); }

TEST(SizeParse, Rejects) {
  for (const char* bad : {"", "  ", "-1", "-1G", "1X", "G", "1GG", "1Gb2", "1.5G", "1G+", "+1", "abc",
                          "1 G x", "0x10", "99999999999999999999", "20000000T"}) {
    auto r = parse_size(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_FALSE(r.error().summary.empty()) << bad;
    EXPECT_EQ(r.error().summary.find('\n'), std::string::npos) << bad;
    EXPECT_EQ(r.error().exit, kExitUsage) << bad;
  }
  EXPECT_NE(parse_size("-5").error().summary.find("negative"), std::string::npos);
  EXPECT_NE(parse_size("5Q").error().summary.find("suffix"), std::string::npos);
  // the texts of the bad-input table (rv-size-*, rv-offset-*)
  EXPECT_EQ(parse_size("1X").error().summary,
            "size '1X' has an unknown suffix 'X' (use K, M, G or T, optionally followed by iB)");
  EXPECT_EQ(parse_size("one").error().summary, "size 'one' does not start with a number");
  EXPECT_EQ(parse_size("18446744073709551616").error().summary, "size '18446744073709551616' is too large");
  EXPECT_EQ(parse_size("20000000T").error().summary, "size '20000000T' is too large");
  EXPECT_EQ(parse_size("16E+16").error().summary,
            "size '16E' has an unknown suffix 'E' (use K, M, G or T, optionally followed by iB)");
  EXPECT_EQ(parse_size("16000000T+16000000T").error().summary, "size '16000000T+16000000T' is too large");
  EXPECT_EQ(parse_size("").error().summary, "empty size");
}

TEST(SizeParse, Lists) {
  auto l = parse_size_list("512M,1G,1G+16");
  ASSERT_TRUE(l);
  ASSERT_EQ(l->size(), 3u);
  EXPECT_EQ((*l)[2], (1ull << 30) + 16);
  auto empty = parse_size_list("1G,,2G");
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().summary, "empty size");
  EXPECT_FALSE(parse_size_list("1G,x"));
}

TEST(SizeFormat, Readable) {
  EXPECT_EQ(format_size(1ull << 30), "1 GiB");
  EXPECT_EQ(format_size((1ull << 30) + 16), "1 GiB + 16 B");
  EXPECT_EQ(format_size(640ull << 20), "640 MiB");
  EXPECT_EQ(format_size(100), "100 B");
  EXPECT_EQ(format_size(4ull << 20), "4 MiB");
  EXPECT_EQ(format_size_compact((1ull << 30) + 16), "1G+16");
  EXPECT_EQ(parse_size(format_size_compact((3ull << 30) + (5ull << 20) + 7)).value(),
            (3ull << 30) + (5ull << 20) + 7);
}
