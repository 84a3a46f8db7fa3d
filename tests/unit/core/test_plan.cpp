#include <gtest/gtest.h>

#include "core/plan.hpp"

using namespace rxv;

TEST(Geometry, PagesAndMetadata) {
  EXPECT_EQ(span_pages(0, 1ull << 30), 262144u);
  EXPECT_EQ(span_pages(16, 1ull << 30), 262145u);  // 1G starting 16 bytes into a page
  EXPECT_EQ(span_pages(4095, 2), 2u);
  EXPECT_EQ(span_pages(0, 1), 1u);
  auto g1 = rxe_metadata(0, 1ull << 30);
  EXPECT_EQ(g1.bytes, 4ull << 20);
  EXPECT_EQ(g1.order, 10);
  EXPECT_FALSE(g1.never_on_stock());
  auto g2 = rxe_metadata(16, 1ull << 30);
  EXPECT_EQ(g2.order, 11);
  EXPECT_TRUE(g2.never_on_stock());
  EXPECT_EQ(rxe_metadata(0, 512ull << 20).order, 9);   // registers only while order-9 blocks are free
  EXPECT_EQ(rxe_metadata(0, 640ull << 20).order, 10);  // fails on a fragmented host
  EXPECT_EQ(rxe_metadata(0, 1025ull << 20).order, 11);
  EXPECT_EQ(rxe_metadata(0, 4ull << 30).order, 12);
  EXPECT_EQ(alloc_order(1), 0);
  EXPECT_EQ(alloc_order(4096), 0);
  EXPECT_EQ(alloc_order(4097), 1);
  EXPECT_EQ(stock_mr_limit_for_order(10), 1ull << 30);
  EXPECT_EQ(stock_mr_limit_for_order(9), 512ull << 20);
  EXPECT_EQ(stock_mr_limit_for_order(12), 1ull << 30);  // capped at MAX_PAGE_ORDER
}

namespace {
bool has(const std::vector<Transfer>& p, std::uint64_t off) {
  for (const auto& t : p)
    if (t.offset <= off && off < t.offset + t.length) return true;
  return false;
}
}  // namespace

TEST(Plan, SampledCoversFirstLastAndStraddles) {
  for (std::uint64_t mis : {0ull, 16ull}) {
    PlanParams p;
    p.size = 1ull << 30;
    p.misalign = mis;
    auto plan = make_plan(p);
    EXPECT_TRUE(has(plan, 0));
    EXPECT_TRUE(has(plan, p.size - 1));
    // First physical page and last physical page entirely.
    bool first = false, last = false;
    for (const auto& t : plan) {
      if (t.kind == "first" && t.offset == 0 && t.length == 4096 - mis) first = true;
      if (t.kind == "last" && t.offset + t.length == p.size) last = true;
    }
    EXPECT_TRUE(first);
    EXPECT_TRUE(last);
    // Straddles: some transfer crosses the first and the last physical page boundary.
    auto crosses = [&](std::uint64_t b) {
      for (const auto& t : plan)
        if (t.offset < b && t.offset + t.length > b) return true;
      return false;
    };
    EXPECT_TRUE(crosses(4096 - mis));
    std::uint64_t lastb = ((mis + p.size - 1) / 4096) * 4096 - mis;
    EXPECT_TRUE(crosses(lastb));
    unsigned straddles = 0, spread = 0, random = 0;
    for (const auto& t : plan) {
      EXPECT_LE(t.offset + t.length, p.size);
      EXPECT_GT(t.length, 0u);
      EXPECT_LE(t.length, p.max_transfer);
      if (t.kind == "straddle") ++straddles;
      if (t.kind == "spread") ++spread;
      if (t.kind == "random") ++random;
    }
    EXPECT_GE(straddles, 16u);
    EXPECT_EQ(spread, 64u);
    EXPECT_EQ(random, 64u);
    // Spread across the whole region: every eighth of the region is touched.
    for (int i = 0; i < 8; ++i) {
      bool hit = false;
      for (const auto& t : plan)
        if (t.offset / (p.size / 8) == static_cast<std::uint64_t>(i)) hit = true;
      EXPECT_TRUE(hit) << i;
    }
  }
}

TEST(Plan, RandomDependsOnSeedAndPass) {
  PlanParams a;
  a.size = 1ull << 30;
  PlanParams b = a;
  b.pass = 1;
  auto pa = make_plan(a), pb = make_plan(b), pa2 = make_plan(a);
  ASSERT_EQ(pa.size(), pa2.size());
  for (std::size_t i = 0; i < pa.size(); ++i) EXPECT_EQ(pa[i].offset, pa2[i].offset);
  bool differ = false;
  for (std::size_t i = 0; i < pa.size() && i < pb.size(); ++i)
    if (pa[i].kind == "random" && pa[i].offset != pb[i].offset) differ = true;
  EXPECT_TRUE(differ);
}

TEST(Plan, FullCoversWholeRegionWithCappedMessages) {
  PlanParams p;
  p.mode = Mode::Full;
  p.size = (4ull << 30) + 16;
  p.msg_size = 8ull << 30;  // larger than max_msg_sz: capped at 2 GiB
  auto plan = make_plan(p);
  for (const auto& t : plan) EXPECT_LE(t.length, kMaxMsgSize);
  EXPECT_EQ(plan.size(), 3u);
  EXPECT_EQ(covered_bytes(plan), p.size);
  auto cov = coverage(plan);
  ASSERT_EQ(cov.size(), 1u);
  EXPECT_EQ(cov[0].first, 0u);
  EXPECT_EQ(cov[0].second, p.size);

  p.msg_size = 64ull << 20;
  p.size = 1ull << 30;
  plan = make_plan(p);
  EXPECT_EQ(plan.size(), 16u);
  EXPECT_EQ(covered_bytes(plan), p.size);
}

TEST(Plan, TinyRegions) {
  for (std::uint64_t size : {1ull, 7ull, 4096ull, 4097ull, 10000ull}) {
    PlanParams p;
    p.size = size;
    p.misalign = 100;
    auto plan = make_plan(p);
    EXPECT_FALSE(plan.empty());
    for (const auto& t : plan) EXPECT_LE(t.offset + t.length, size);
    EXPECT_TRUE(has(plan, 0));
    EXPECT_TRUE(has(plan, size - 1));
  }
}

TEST(Split, LayoutCutsAtPhysicalPages) {
  auto l = SplitLayout::make(1ull << 30, 16, 4);
  ASSERT_EQ(l.count(), 4u);
  EXPECT_EQ(l.starts.front(), 0u);
  EXPECT_EQ(l.starts.back(), 1ull << 30);
  for (unsigned i = 1; i < l.count(); ++i) EXPECT_EQ((l.starts[i] + 16) % 4096, 0u);
  EXPECT_EQ(l.mr_of(0), 0u);
  EXPECT_EQ(l.mr_of(l.starts[2]), 2u);
  EXPECT_EQ(l.mr_of(l.starts[2] - 1), 1u);
  // Each piece's metadata fits order 9 (a stock rxe can register it).
  for (unsigned i = 0; i < l.count(); ++i)
    EXPECT_LE(rxe_metadata(16 + l.starts[i], l.starts[i + 1] - l.starts[i]).order, 9);
  EXPECT_EQ(SplitLayout::make(4096, 0, 8).count(), 1u);  // never more MRs than pages
}
