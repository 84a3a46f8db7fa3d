// RunConfig: how one size is exercised (mode, message size, passes, depth, deadlines), and
// the staging memory and per-operation deadline that follow from it.
#pragma once
#include <chrono>
#include <cstdint>

#include "core/plan.hpp"

namespace rxv {

struct RunConfig {
  std::uint64_t offset = 0;
  Mode mode = Mode::Sampled;
  std::uint64_t msg_size = 64ull << 20;
  std::uint64_t sample_max = 1ull << 20;  // largest sampled transfer
  unsigned passes = 2;
  std::uint64_t seed = 1;
  unsigned split = 1;
  double op_timeout = 0;  // seconds per operation; 0 = automatic
  bool two_host = false;
  bool progress = false;
  unsigned tx_depth = 128;  // WRs in flight per QP (READs also capped by max_rd_atomic)
  bool overlap = true;      // verify on a checker thread while later transfers run
  // Timed/counted runs (perftest's -D and -n): after `passes`, more whole passes while
  // fewer than min_transfers transfers per direction ran, or less than `duration`
  // seconds went by since the first transfer of the size. 0 = off.
  double duration = 0;
  std::uint64_t min_transfers = 0;
};

// Guard bytes each side of a transfer's destination, checked after it: an overrun (or
// underrun) of its range changes them.
inline constexpr std::uint64_t kGuardBytes = 64;

// Staging memory (the peer's pinned buffer) is `slots` slots of one transfer each:
//   slot  = msg-size (full mode) or sample-max + 64 (sampled mode), at most 2 GiB,
//           plus 2 x kGuardBytes (the guards around the transfer placed in it)
//   slots = min(tx-depth, max(2, 16 MiB / slot))
// so staging = slots x slot: about 16 MiB or less for transfers up to 8 MiB, two
// transfers above that (128 MiB + 256 B at the default 64 MiB msg-size in full mode).
inline constexpr std::uint64_t kStagingBudget = 16ull << 20;
std::uint64_t staging_slot_bytes(const RunConfig& c);
unsigned staging_slots(const RunConfig& c);
// Staging bytes the peer needs for a config (slots x slot).
std::uint64_t staging_bytes_for(const RunConfig& c);
// Per-operation deadline: explicit, or 30 s + length at 4 MiB/s (slow emulated hosts).
std::chrono::milliseconds op_deadline(const RunConfig& c, std::uint64_t len);

}  // namespace rxv
