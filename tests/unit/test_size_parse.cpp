#include <gtest/gtest.h>

#include "size.hpp"

using namespace rxv;

TEST(SizeParse, PlainAndSuffixes) {
  EXPECT_EQ(*parse_size("4096").value, 4096u);
  EXPECT_EQ(*parse_size("512M").value, 512ull << 20);
  EXPECT_EQ(*parse_size("1G").value, 1ull << 30);
  EXPECT_EQ(*parse_size("1g").value, 1ull << 30);
  EXPECT_EQ(*parse_size("2GiB").value, 2ull << 30);
  EXPECT_EQ(*parse_size("4GB").value, 4ull << 30);
  EXPECT_EQ(*parse_size("64K").value, 64ull << 10);
  EXPECT_EQ(*parse_size("1T").value, 1ull << 40);
  EXPECT_EQ(*parse_size("16B").value, 16u);
  EXPECT_EQ(*parse_size(" 1G ").value, 1ull << 30);
}

TEST(SizeParse, Sums) {
  EXPECT_EQ(*parse_size("1G+16").value, (1ull << 30) + 16);
  EXPECT_EQ(*parse_size("1G+4K+1").value, (1ull << 30) + 4097);
}

TEST(SizeParse, ZeroIsParsedCallerDecides) { EXPECT_EQ(*parse_size("0").value, 0u); }

TEST(SizeParse, Rejects) {
  for (const char* bad : {"", "  ", "-1", "-1G", "1X", "G", "1GG", "1Gb2", "1.5G", "1G+", "+1", "abc",
                          "1 G x", "0x10", "99999999999999999999", "20000000T"}) {
    auto r = parse_size(bad);
    EXPECT_FALSE(r.value.has_value()) << bad;
    EXPECT_FALSE(r.error.empty()) << bad;
    EXPECT_EQ(r.error.find('\n'), std::string::npos) << bad;
  }
  EXPECT_NE(parse_size("-5").error.find("negative"), std::string::npos);
  EXPECT_NE(parse_size("5Q").error.find("suffix"), std::string::npos);
}

TEST(SizeParse, Lists) {
  auto l = parse_size_list("512M,1G,1G+16");
  ASSERT_TRUE(l.ok());
  ASSERT_EQ(l.values.size(), 3u);
  EXPECT_EQ(l.values[2], (1ull << 30) + 16);
  EXPECT_FALSE(parse_size_list("1G,,2G").ok());
  EXPECT_FALSE(parse_size_list("1G,x").ok());
}

TEST(SizeFormat, Readable) {
  EXPECT_EQ(format_size(1ull << 30), "1 GiB");
  EXPECT_EQ(format_size((1ull << 30) + 16), "1 GiB + 16 B");
  EXPECT_EQ(format_size(640ull << 20), "640 MiB");
  EXPECT_EQ(format_size(100), "100 B");
  EXPECT_EQ(format_size(4ull << 20), "4 MiB");
  EXPECT_EQ(format_size_compact((1ull << 30) + 16), "1G+16");
  EXPECT_EQ(*parse_size(format_size_compact((3ull << 30) + (5ull << 20) + 7)).value,
            (3ull << 30) + (5ull << 20) + 7);
}
