#include <gtest/gtest.h>

#include "sys/procfs.hpp"
#include "test_data.hpp"

using namespace rxv;

TEST(Buddyinfo, ParsesRecordedHost) {
  auto z = parse_buddyinfo(data("buddyinfo-host.txt"));
  ASSERT_EQ(z.size(), 3u);
  EXPECT_EQ(z[0].zone, "DMA");
  EXPECT_EQ(z[2].zone, "Normal");
  EXPECT_EQ(z[2].free.size(), 11u);
  EXPECT_EQ(largest_free_order(z), 10);
  EXPECT_GT(free_blocks_at_least(z, 10), 0u);
}

TEST(Buddyinfo, FragmentedHostHasNoOrder9) {
  auto z = parse_buddyinfo(data("buddyinfo-fragmented.txt"));
  EXPECT_EQ(largest_free_order(z), 7);  // the DMA zone's order-10 blocks do not count
  EXPECT_EQ(free_blocks_at_least(z, 8), 0u);
  EXPECT_GT(free_blocks_at_least(z, 7), 0u);
}

TEST(Buddyinfo, GarbageIsIgnored) {
  EXPECT_TRUE(parse_buddyinfo("hello\nNode x, zone\n").empty());
  EXPECT_EQ(largest_free_order({}), -1);
}

TEST(Limits, Memlock) {
  auto a = parse_memlock(data("limits-8M.txt"));
  ASSERT_TRUE(a);
  EXPECT_EQ(a->soft, 8388608u);
  EXPECT_FALSE(a->soft_unlimited);
  auto b = parse_memlock(data("limits-unlimited.txt"));
  ASSERT_TRUE(b);
  EXPECT_TRUE(b->soft_unlimited);
  EXPECT_TRUE(b->hard_unlimited);
  auto c = parse_memlock(data("limits-64K.txt"));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->soft, 65536u);
  EXPECT_FALSE(parse_memlock("nothing here"));
}

TEST(Meminfo, Parses) {
  auto m = parse_meminfo(data("meminfo-24G.txt"));
  ASSERT_TRUE(m);
  EXPECT_GT(m->total, 20ull << 30);
  EXPECT_TRUE(m->has_available);
  auto low = parse_meminfo(data("meminfo-low.txt"));
  ASSERT_TRUE(low);
  EXPECT_EQ(low->available, 307200ull * 1024);
  EXPECT_FALSE(parse_meminfo("garbage"));
}

TEST(Caps, CapEff) {
  auto c = parse_cap_eff("Name:\tx\nCapEff:\t000001ffffffffff\n");
  ASSERT_TRUE(c);
  EXPECT_TRUE(has_cap(*c, kCapIpcLock));
  auto d = parse_cap_eff("CapEff:\t0000000000000000\n");
  ASSERT_TRUE(d);
  EXPECT_FALSE(has_cap(*d, kCapIpcLock));
  EXPECT_FALSE(parse_cap_eff("CapEff:\tzz\n"));
}

TEST(Gid, Selection) {
  std::vector<GidEntry> g = {
      {0, "fe80:0000:0000:0000:5054:00ff:fe12:3456", "IB/RoCE v1", "eth0"},
      {1, "fe80:0000:0000:0000:5054:00ff:fe12:3456", "RoCE v2", "eth0"},
      {2, "0000:0000:0000:0000:0000:ffff:0a00:0002", "IB/RoCE v1", "eth0"},
      {3, "0000:0000:0000:0000:0000:ffff:0a00:0002", "RoCE v2", "eth0"},
  };
  EXPECT_EQ(select_gid_index(g), 3);
  EXPECT_EQ(g[3].ipv4(), "10.0.0.2");
  EXPECT_TRUE(g[1].is_link_local());
  g.pop_back();
  EXPECT_EQ(select_gid_index(g), 1);  // RoCE v2 link-local as a last resort
  g.erase(g.begin() + 1);
  EXPECT_EQ(select_gid_index(g), -1);  // v1 only
}

TEST(Procfs, KvfixBuildStatusIsReadFromItsKeyValueLines) {
  auto st = parse_kvfix_status(
      "kernel=7.3.4+deb13-amd64\nstate=failed\ntime=2026-12-05T18:00:00Z\nversion=1.0.0\n"
      "message=no source of kernel 7.3.4+deb13-amd64 found; install linux-source-7.3 = x\n");
  ASSERT_TRUE(st);
  EXPECT_EQ(st->state, "failed");
  EXPECT_EQ(st->time, "2026-12-05T18:00:00Z");
  EXPECT_EQ(st->version, "1.0.0");
  EXPECT_EQ(st->message, "no source of kernel 7.3.4+deb13-amd64 found; install linux-source-7.3 = x");
  EXPECT_FALSE(parse_kvfix_status("kernel=x\nmessage=y\n"));  // no state: no record
  EXPECT_FALSE(parse_kvfix_status(""));
}

TEST(Meminfo, FieldsAreNameAndBytesInOrder) {
  auto f = parse_meminfo_fields(
      "MemTotal:       24576000 kB\nHugePages_Total:       4\nnot a field\nSlab: x kB\nVmallocUsed:   512 "
      "kB");
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0].name, "MemTotal");
  EXPECT_EQ(f[0].bytes, 24576000ull * 1024);
  EXPECT_EQ(f[1].name, "HugePages_Total");  // no unit: a count, not scaled
  EXPECT_EQ(f[1].bytes, 4u);
  EXPECT_EQ(f[2].name, "VmallocUsed");  // the line with no number is skipped
  EXPECT_EQ(f[2].bytes, 512u * 1024);
  EXPECT_TRUE(parse_meminfo_fields("").empty());
}
