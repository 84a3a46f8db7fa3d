// Data pattern unique to every 64-bit word, 4 KiB page, seed, pass and phase.
//
// The region is viewed as little-endian 64-bit words at region offsets 8*w. Word w holds
//   page_key(key, w / 512) ^ (w * kWordMul)
// where key = pattern_key(seed, pass, phase) and page_key() is a full 64-bit mix. So a
// page copied to the wrong place, a stale page from an earlier pass/phase, a zero page
// left by a short transfer or a shifted transfer all disagree with the expected words.
// Fill and verify work on any byte range (unaligned head/tail handled bytewise) and
// cost one xor + one add per word in the inner loop.
//
// A run uses one key per transfer, transfer_key(loop key, sequence number in its loop),
// so the bytes a transfer must deliver exist nowhere else before it: an earlier
// transfer's bytes at the same offsets (sampled transfers overlap) are stale data, not
// a pass. The per-transfer key costs one mix64 per transfer, nothing per byte (a
// poisoned destination would cost a fill of every transfer's length: issue 62).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rxv {

inline constexpr std::uint64_t kWordMul = 0x9E3779B97F4A7C15ull;  // odd: w*K is a bijection

enum class Phase : std::uint32_t { Write = 1, Read = 2, Probe = 3 };

std::uint64_t mix64(std::uint64_t x);
std::uint64_t pattern_key(std::uint64_t seed, std::uint32_t pass, Phase phase);
// The key of transfer `seq` (0, 1, ...) of the loop whose key is `loop_key`.
std::uint64_t transfer_key(std::uint64_t loop_key, std::uint64_t seq);
std::uint64_t page_key(std::uint64_t key, std::uint64_t page);
std::uint64_t pattern_word(std::uint64_t key, std::uint64_t word_index);
std::uint8_t pattern_byte(std::uint64_t key, std::uint64_t region_offset);

// Write the pattern for region bytes [region_off, region_off+len) to dst.
void pattern_fill(void* dst, std::uint64_t region_off, std::size_t len, std::uint64_t key);

struct Mismatch {
  std::uint64_t region_offset = 0;  // first differing byte, region coordinates
  std::uint8_t expected = 0;
  std::uint8_t actual = 0;
  std::uint64_t bad_bytes = 0;       // differing bytes in the verified range (exact)
  std::uint64_t first_bad_page = 0;  // region_offset / 4096
  std::uint64_t last_bad_offset = 0;
};

// Compare src (holding region bytes [region_off, region_off+len)) with the pattern.
std::optional<Mismatch> pattern_verify(const void* src, std::uint64_t region_off, std::size_t len,
                                       std::uint64_t key);

// Best-effort explanation of what is found at a mismatching offset: "zero bytes (short or
// missing transfer)", "data of region offset X (misplaced page)", "data of pass N (stale)".
// `candidates` are other keys that may legitimately have been there (earlier passes/phases).
// explain_mismatch looks for a misplaced page among at most this many pages of the region
// (16 GiB of 4 KiB pages: ~10 ms, ~60 ms under the fuzzer's sanitizers): region_size is a
// peer's word on `serve`.
inline constexpr std::uint64_t kExplainMaxPages = std::uint64_t{1} << 22;
// ... and for an earlier transfer's bytes among at most this many transfer keys (sequence
// numbers 0, 1, ... of each candidate loop, nearest first; ~10 ms).
inline constexpr std::uint64_t kExplainMaxTransferKeys = std::uint64_t{1} << 20;

// A transfer's guard bytes (the bytes each side of its destination, checked after it)
// that changed: `before` of them before its start, `after` past its end.
std::string guard_explanation(std::uint64_t before, std::uint64_t after, std::uint64_t region_off,
                              std::uint64_t len);

// A loop that may have left its bytes: `key` is its loop key (its transfers' keys are
// transfer_key(key, seq)).
struct KeyCandidate {
  std::uint64_t key;
  std::string label;  // e.g. "pass 1 write"
};
std::string explain_mismatch(const void* src, std::uint64_t region_off, std::size_t len, const Mismatch& m,
                             std::uint64_t key, const std::vector<KeyCandidate>& candidates,
                             std::uint64_t region_size);

}  // namespace rxv
