#include "core/plan.hpp"

#include <algorithm>
#include <random>

#include "core/pattern.hpp"

namespace rxv {

std::uint64_t span_pages(std::uint64_t offset, std::uint64_t size) {
  if (size == 0) return 0;
  std::uint64_t mis = offset % kPageSize;
  return (mis + size + kPageSize - 1) / kPageSize;
}

int alloc_order(std::uint64_t bytes) {
  int k = 0;
  while ((kPageSize << k) < bytes) ++k;
  return k;
}

MetadataInfo rxe_metadata(std::uint64_t offset, std::uint64_t size) {
  MetadataInfo m;
  m.pages = span_pages(offset, size);
  m.bytes = m.pages * kRxePageInfoBytes;
  m.order = alloc_order(m.bytes);
  return m;
}

std::uint64_t stock_mr_limit_for_order(int order) {
  if (order < 0) return 0;
  if (order > kMaxPageOrder) order = kMaxPageOrder;
  return ((kPageSize << order) / kRxePageInfoBytes) * kPageSize;
}

std::string to_string(Mode m) { return m == Mode::Full ? "full" : "sampled"; }

std::vector<Transfer> make_plan(const PlanParams& p) {
  std::vector<Transfer> out;
  if (p.size == 0) return out;
  const std::uint64_t size = p.size;
  const std::uint64_t mis = p.misalign % kPageSize;
  if (p.mode == Mode::Full) {
    const auto chunk = std::min<std::uint64_t>({p.msg_size ? p.msg_size : kMaxMsgSize, kMaxMsgSize, size});
    for (std::uint64_t o = 0; o < size; o += chunk) out.push_back({o, std::min(chunk, size - o), "chunk"});
    return out;
  }
  const std::uint64_t cap =
      std::max<std::uint64_t>(1, std::min<std::uint64_t>({p.max_transfer, kMaxMsgSize, size}));
  auto add = [&](std::uint64_t off, std::uint64_t len, const char* kind) {
    if (off >= size) return;
    len = std::min({len, size - off, cap});
    if (len == 0) return;
    out.push_back({off, len, kind});
  };
  // First and last physical page of the region.
  add(0, kPageSize - mis, "first");
  std::uint64_t last_page_start_phys = ((mis + size - 1) / kPageSize) * kPageSize;
  std::uint64_t last_start = last_page_start_phys > mis ? last_page_start_phys - mis : 0;
  add(last_start, size - last_start, "last");
  // Transfers straddling physical page boundaries b = k*4096 - mis, spread over the
  // region, always including the first and the last boundary.
  std::uint64_t nbound = (mis + size - 1) / kPageSize;  // boundaries strictly inside
  if (nbound > 0) {
    std::vector<std::uint64_t> ks;
    unsigned n = std::max(2u, p.straddles);
    for (unsigned i = 0; i < n; ++i) {
      std::uint64_t k = 1 + (nbound - 1) * i / (n - 1);
      if (ks.empty() || ks.back() != k) ks.push_back(k);
    }
    unsigned variant = 0;
    for (std::uint64_t k : ks) {
      std::uint64_t b = k * kPageSize - mis;
      switch (variant++ % 3) {
        case 0:  // tiny straddle, unaligned
          add(b >= 7 ? b - 7 : 0, 16, "straddle");
          break;
        case 1:  // half a page each side
          add(b >= 2048 ? b - 2048 : 0, 4096, "straddle");
          break;
        default:  // several pages, odd length
          add(b >= 4096 + 100 ? b - 4096 - 100 : 0, 3 * kPageSize + 333, "straddle");
          break;
      }
    }
  }
  // Evenly spread transfers across the whole region.
  const auto slen = std::min<std::uint64_t>({std::uint64_t{64} * 1024, size, cap});
  if (p.spread > 0) {
    for (unsigned i = 0; i < p.spread; ++i) {
      std::uint64_t off = p.spread > 1 ? (size - slen) / (p.spread - 1) * i : 0;
      add(off, slen, "spread");
    }
  }
  // Random offsets and lengths (seed and pass mixed in, reproducible).
  std::mt19937_64 rng(mix64(p.seed ^ (0xA5A5ull << 32) ^ p.pass));
  const auto rmax = std::min<std::uint64_t>({std::uint64_t{256} * 1024, cap, size});
  for (unsigned i = 0; i < p.random; ++i) {
    std::uint64_t len = 1 + rng() % rmax;
    std::uint64_t off = rng() % (size - len + 1);
    add(off, len, "random");
  }
  return out;
}

std::vector<std::pair<std::uint64_t, std::uint64_t>> coverage(const std::vector<Transfer>& t) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> r;
  r.reserve(t.size());
  for (const auto& x : t) r.emplace_back(x.offset, x.offset + x.length);
  std::sort(r.begin(), r.end());
  std::vector<std::pair<std::uint64_t, std::uint64_t>> m;
  for (const auto& iv : r) {
    if (!m.empty() && iv.first <= m.back().second) m.back().second = std::max(m.back().second, iv.second);
    else m.push_back(iv);
  }
  return m;
}

std::uint64_t covered_bytes(const std::vector<Transfer>& t) {
  std::uint64_t s = 0;
  for (const auto& iv : coverage(t)) s += iv.second - iv.first;
  return s;
}

SplitLayout SplitLayout::make(std::uint64_t size, std::uint64_t misalign, unsigned n) {
  SplitLayout l;
  if (n == 0) n = 1;
  const std::uint64_t mis = misalign % kPageSize;
  const std::uint64_t pages = span_pages(mis, size);
  if (n > pages) n = static_cast<unsigned>(std::max<std::uint64_t>(pages, 1));
  l.starts.push_back(0);
  for (unsigned i = 1; i < n; ++i) {
    // Cut at physical page boundaries so each MR covers whole pages of its own.
    std::uint64_t pg = pages * i / n;
    std::uint64_t off = pg * kPageSize - mis;
    if (off > l.starts.back() && off < size) l.starts.push_back(off);
  }
  l.starts.push_back(size);
  return l;
}

unsigned SplitLayout::mr_of(std::uint64_t off) const {
  auto it = std::upper_bound(starts.begin(), starts.end(), off);
  return static_cast<unsigned>(std::distance(starts.begin(), it) - 1);
}

}  // namespace rxv
