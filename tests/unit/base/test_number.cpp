// number.hpp: parse_uint reads a whole string of digits with std::from_chars and nothing
// else (the sign, space and prefix strtoul took are refused).
#include "base/number.hpp"

#include <gtest/gtest.h>

#include <cstdint>

using rxv::parse_uint;

TEST(Number, ReadsWholeUnsignedNumbers) {
  EXPECT_EQ(parse_uint("0"), 0u);
  EXPECT_EQ(parse_uint("0042"), 42u);
  EXPECT_EQ(parse_uint("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(parse_uint<unsigned>("ff", 16), 255u);
  EXPECT_EQ(parse_uint<std::uint8_t>("A0", 16), 0xa0);
  EXPECT_EQ(parse_uint("00000000a0003000", 16), 0xa0003000u);  // /proc/self/status CapEff
}

TEST(Number, RefusesWhatIsNotOnlyDigits) {
  for (const char* bad : {"", "-1", "+1", " 1", "1 ", "1x", "0x10", "1.5"})
    EXPECT_FALSE(parse_uint(bad)) << bad;
  EXPECT_FALSE(parse_uint("18446744073709551616")) << "out of range";
  EXPECT_FALSE(parse_uint<std::uint8_t>("100", 16)) << "out of range for a byte";
  EXPECT_FALSE(parse_uint<std::uint8_t>("-1", 16));
  EXPECT_FALSE(parse_uint<std::uint8_t>("g0", 16));
}
