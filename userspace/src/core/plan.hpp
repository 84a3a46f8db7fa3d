// Region geometry (pages, rxe metadata arithmetic) and transfer planning.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace rxv {

inline constexpr std::uint64_t kPageSize = 4096;
inline constexpr std::uint64_t kRxePageInfoBytes = 16;       // sizeof(struct rxe_mr_page)
inline constexpr int kMaxPageOrder = 10;                     // MAX_PAGE_ORDER on x86-64
inline constexpr std::uint64_t kMaxMsgSize = 0x80000000ull;  // rxe max_msg_sz (2 GiB)

// Pages spanned by [offset, offset+size) when the buffer starts `offset` bytes into a page.
std::uint64_t span_pages(std::uint64_t offset, std::uint64_t size);
// Kernel get_order(): smallest k with (4096 << k) >= bytes (0 for bytes <= 4096).
int alloc_order(std::uint64_t bytes);

struct MetadataInfo {
  std::uint64_t pages = 0;
  std::uint64_t bytes = 0;  // pages * 16
  int order = 0;            // buddy order of the kzalloc_objs() allocation
  bool never_on_stock() const { return order > kMaxPageOrder; }
};
MetadataInfo rxe_metadata(std::uint64_t offset, std::uint64_t size);
// Largest page-aligned MR whose stock metadata fits one free block of `order`.
std::uint64_t stock_mr_limit_for_order(int order);

enum class Mode { Sampled, Full };
std::string to_string(Mode m);

struct Transfer {
  std::uint64_t offset = 0;  // region offset
  std::uint64_t length = 0;
  std::string kind;  // first, last, straddle, spread, random, chunk
};

struct PlanParams {
  std::uint64_t size = 0;      // region bytes
  std::uint64_t misalign = 0;  // region start offset inside its first page (0..4095)
  Mode mode = Mode::Sampled;
  std::uint64_t msg_size = 64ull << 20;     // full mode chunk (capped at 2 GiB)
  std::uint64_t max_transfer = 1ull << 20;  // staging capacity for sampled transfers
  std::uint64_t seed = 1;
  std::uint32_t pass = 0;
  unsigned spread = 64;
  unsigned random = 64;
  unsigned straddles = 32;
};

std::vector<Transfer> make_plan(const PlanParams& p);

// Merged, sorted union of the transfers' byte ranges (for coverage checks and reports).
std::vector<std::pair<std::uint64_t, std::uint64_t>> coverage(const std::vector<Transfer>& t);
std::uint64_t covered_bytes(const std::vector<Transfer>& t);

// Pieces of [off, off+len) cut at MR boundaries when the region is split in `n` MRs.
struct SplitLayout {
  std::vector<std::uint64_t> starts;  // region offsets where each MR starts; plus end
  static SplitLayout make(std::uint64_t size, std::uint64_t misalign, unsigned n);
  unsigned count() const { return starts.empty() ? 0 : static_cast<unsigned>(starts.size() - 1); }
  unsigned mr_of(std::uint64_t off) const;
};

}  // namespace rxv
