#include "core/run_config.hpp"

#include <algorithm>

namespace rxv {

std::uint64_t staging_slot_bytes(const RunConfig& c) {
  if (c.mode == Mode::Full) return std::min<std::uint64_t>(c.msg_size, kMaxMsgSize) + 2 * kGuardBytes;
  return std::min<std::uint64_t>(c.sample_max, kMaxMsgSize) + 64 + 2 * kGuardBytes;
}

unsigned staging_slots(const RunConfig& c) {
  std::uint64_t by_budget = std::max<std::uint64_t>(2, kStagingBudget / staging_slot_bytes(c));
  return static_cast<unsigned>(std::min<std::uint64_t>(std::max(1u, c.tx_depth), by_budget));
}

std::uint64_t staging_bytes_for(const RunConfig& c) { return staging_slot_bytes(c) * staging_slots(c); }

std::chrono::milliseconds op_deadline(const RunConfig& c, std::uint64_t len) {
  if (c.op_timeout > 0) return std::chrono::milliseconds(static_cast<long long>(c.op_timeout * 1000));
  double s = 30.0 + static_cast<double>(len) / (4.0 * 1024 * 1024);
  return std::chrono::milliseconds(static_cast<long long>(s * 1000));
}

}  // namespace rxv
