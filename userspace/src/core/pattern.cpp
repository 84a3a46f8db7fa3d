#include "core/pattern.hpp"

#include <cstring>

namespace rxv {

std::uint64_t mix64(std::uint64_t x) {
  // splitmix64 finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

std::uint64_t pattern_key(std::uint64_t seed, std::uint32_t pass, Phase phase) {
  return mix64(mix64(seed) ^ (static_cast<std::uint64_t>(pass) << 8) ^ static_cast<std::uint64_t>(phase));
}

std::uint64_t transfer_key(std::uint64_t loop_key, std::uint64_t seq) {
  return mix64(loop_key ^ ((seq + 1) * 0xC2B2AE3D27D4EB4Full));
}

std::uint64_t page_key(std::uint64_t key, std::uint64_t page) {
  return mix64(key ^ (page * 0xD1B54A32D192ED03ull));
}

std::uint64_t pattern_word(std::uint64_t key, std::uint64_t w) {
  return page_key(key, w >> 9) ^ (w * kWordMul);
}

std::uint8_t pattern_byte(std::uint64_t key, std::uint64_t off) {
  return static_cast<std::uint8_t>(pattern_word(key, off >> 3) >> (8 * (off & 7)));
}

namespace {
constexpr std::uint64_t kWordsPerPage = 512;

// The page walk of the two word loops: words [w0, w0+n) a page at a time (a page's
// words share its page_key). run(first, pk, m, cnt) gets the run's first word as an
// index from w0, the page's key, that word's w * kWordMul and the run's length; a run
// that returns false ends the walk, which then returns false.
template <class Run>
[[gnu::always_inline]] inline bool walk_pages(std::uint64_t w0, std::uint64_t n, std::uint64_t key,
                                              Run&& run) {
  std::uint64_t w = w0;
  const std::uint64_t end = w0 + n;
  while (w < end) {
    std::uint64_t page_end = ((w >> 9) + 1) * kWordsPerPage;
    if (page_end > end) page_end = end;
    if (!run(w - w0, page_key(key, w >> 9), w * kWordMul, page_end - w)) return false;
    w = page_end;
  }
  return true;
}

// Fill whole words [w0, w0+n) into dst (dst may be unaligned).
void fill_words(unsigned char* dst, std::uint64_t w0, std::uint64_t n, std::uint64_t key) {
  walk_pages(w0, n, key, [dst](std::uint64_t first, std::uint64_t pk, std::uint64_t m, std::uint64_t cnt) {
    unsigned char* d = dst + 8 * first;
    for (std::uint64_t i = 0; i < cnt; ++i) {
      std::uint64_t v = pk ^ m;
      std::memcpy(d + 8 * i, &v, 8);
      m += kWordMul;
    }
    return true;
  });
}

// Returns true when words [w0, w0+n) in src all match.
bool words_match(const unsigned char* src, std::uint64_t w0, std::uint64_t n, std::uint64_t key) {
  return walk_pages(w0, n, key,
                    [src](std::uint64_t first, std::uint64_t pk, std::uint64_t m, std::uint64_t cnt) {
                      const unsigned char* s = src + 8 * first;
                      std::uint64_t acc = 0;
                      for (std::uint64_t i = 0; i < cnt; ++i) {
                        std::uint64_t v;
                        std::memcpy(&v, s + 8 * i, 8);
                        acc |= v ^ (pk ^ m);
                        m += kWordMul;
                      }
                      return acc == 0;
                    });
}
}  // namespace

void pattern_fill(void* dstv, std::uint64_t off, std::size_t len, std::uint64_t key) {
  auto* dst = static_cast<unsigned char*>(dstv);
  std::uint64_t end = off + len;
  while (off < end && (off & 7)) {
    *dst++ = pattern_byte(key, off++);
  }
  std::uint64_t nwords = (end - off) / 8;
  fill_words(dst, off >> 3, nwords, key);
  dst += 8 * nwords;
  off += 8 * nwords;
  while (off < end) *dst++ = pattern_byte(key, off++);
}

std::optional<Mismatch> pattern_verify(const void* srcv, std::uint64_t off, std::size_t len,
                                       std::uint64_t key) {
  const auto* src = static_cast<const unsigned char*>(srcv);
  const std::uint64_t start = off;
  const std::uint64_t end = off + len;
  // Fast path: aligned words by page; fall back to a byte scan of the whole range only
  // when something differs.
  bool ok = true;
  std::uint64_t o = off;
  const unsigned char* p = src;
  while (ok && o < end && (o & 7)) {
    if (*p != pattern_byte(key, o)) ok = false;
    ++p;
    ++o;
  }
  if (ok) {
    std::uint64_t nwords = (end - o) / 8;
    if (!words_match(p, o >> 3, nwords, key)) ok = false;
    p += 8 * nwords;
    o += 8 * nwords;
    while (ok && o < end) {
      if (*p != pattern_byte(key, o)) ok = false;
      ++p;
      ++o;
    }
  }
  if (ok) return std::nullopt;

  Mismatch m;
  bool first = true;
  // Slow exact scan, word at a time.
  for (std::uint64_t x = start; x < end;) {
    if ((x & 7) == 0 && x + 8 <= end) {
      std::uint64_t v, e = pattern_word(key, x >> 3);
      std::memcpy(&v, src + (x - start), 8);
      if (v == e) {
        x += 8;
        continue;
      }
    }
    std::uint8_t a = src[x - start], e = pattern_byte(key, x);
    if (a != e) {
      if (first) {
        m.region_offset = x;
        m.expected = e;
        m.actual = a;
        m.first_bad_page = x / 4096;
        first = false;
      }
      m.last_bad_offset = x;
      ++m.bad_bytes;
    }
    ++x;
  }
  return m;
}

std::string guard_explanation(std::uint64_t before, std::uint64_t after, std::uint64_t off,
                              std::uint64_t len) {
  std::string r =
      "guard bytes around region [" + std::to_string(off) + ", +" + std::to_string(len) + ") changed: ";
  if (after) r += std::to_string(after) + " past its end (overrun: the transfer wrote beyond its range)";
  if (after && before) r += ", ";
  if (before)
    r += std::to_string(before) + " before its start (underrun: the transfer wrote before its range)";
  return r;
}

std::string explain_mismatch(const void* srcv, std::uint64_t region_off, std::size_t len, const Mismatch& m,
                             std::uint64_t key, const std::vector<KeyCandidate>& candidates,
                             std::uint64_t region_size) {
  const auto* src = static_cast<const unsigned char*>(srcv);
  std::uint64_t wo = (m.region_offset + 7) & ~std::uint64_t{7};  // first whole word
  if (wo + 8 > region_off + len) wo = m.region_offset & ~std::uint64_t{7};
  if (wo < region_off || wo + 8 > region_off + len) return "";
  std::uint64_t actual;
  std::memcpy(&actual, src + (wo - region_off), 8);
  std::uint64_t w = wo >> 3;
  if (actual == 0) return "zero bytes found (short or missing transfer)";
  for (const auto& c : candidates)
    if (pattern_word(c.key, w) == actual) return "data of " + c.label + " found (stale page)";
  // An earlier transfer's bytes (its own key): stale data the transfer did not replace.
  if (!candidates.empty()) {
    const std::uint64_t seqs = kExplainMaxTransferKeys / candidates.size();
    for (std::uint64_t j = 0; j < seqs; ++j)
      for (const auto& c : candidates)
        if (std::uint64_t k = transfer_key(c.key, j); k != key && pattern_word(k, w) == actual)
          return "data of transfer " + std::to_string(j) + " of " + c.label +
                 " found (stale: an earlier transfer's bytes, this one did not arrive there)";
  }
  // Misplaced: same key, other word with the same position inside its page. region_size
  // comes from the peer on `serve`, so the search is bounded: at most kExplainMaxPages
  // pages, centred on the bad one when the region has more.
  std::uint64_t inpage = w & 511;
  std::uint64_t pages = region_size / 4096 + (region_size % 4096 != 0);
  std::uint64_t lo = 0, hi = pages;
  if (pages > kExplainMaxPages) {
    std::uint64_t bad = w / 512;
    lo = bad > kExplainMaxPages / 2 ? bad - kExplainMaxPages / 2 : 0;
    if (lo > pages - kExplainMaxPages) lo = pages - kExplainMaxPages;
    hi = lo + kExplainMaxPages;
  }
  for (std::uint64_t pg = lo; pg < hi; ++pg) {
    std::uint64_t cw = pg * 512 + inpage;
    if (cw != w && pattern_word(key, cw) == actual)
      return "data belonging to region offset " + std::to_string(cw * 8) + " found (misplaced page)";
  }
  // Shifted within the page (wrong page offset / byte shift of a transfer).
  for (std::int64_t d = -512; d <= 512; ++d) {
    std::int64_t cw = static_cast<std::int64_t>(w) + d;
    if (d == 0 || cw < 0) continue;
    if (pattern_word(key, static_cast<std::uint64_t>(cw)) == actual)
      return "data belonging to region offset " + std::to_string(cw * 8) + " found (shifted transfer)";
  }
  if (lo != 0 || hi != pages)
    return "unrecognised data (searched pages " + std::to_string(lo) + "-" + std::to_string(hi - 1) + " of " +
           std::to_string(pages) + " for a misplaced one)";
  return "unrecognised data";
}

}  // namespace rxv
