// app/options.cpp's error paths: each returns or throws the message and exit code a user
// saw before the one error channel (result.hpp); the texts here are those of the
// bad-input table (tests/badinput/cases.tsv) and of the code before it.
#include "app/options.hpp"

#include <gtest/gtest.h>

#include <string>

using namespace rxv;

TEST(AppOptions, PeerHostErrorIsAUsageError) {
  auto r = check_peer_host("bad host");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().summary,
            "bad peer address 'bad host': use a host name or IP address, with an optional :PORT (IPv6: "
            "[ADDR]:PORT)");
  EXPECT_EQ(r.error().exit, kExitUsage);
}

TEST(AppOptions, PeerHostSyntax) {
  for (const char* ok : {"10.0.0.2", "peer-1.example", "fe80::1", "fe80::1%eth0", "host_a"})
    EXPECT_TRUE(rxv::check_peer_host(ok)) << ok;
  for (const char* bad : {"", "bad host", "a:b:c", "h;x", "10.0.0.1/24", "::g"}) {
    auto r = rxv::check_peer_host(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().summary.find("use a host name or IP address"), std::string::npos)
        << r.error().summary;
  }
}
