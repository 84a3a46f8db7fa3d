// `rxe-verify churn`: register and deregister one region many times (allocated and
// pre-faulted once), optionally with a short verified WRITE/READ loop between
// registrations, timing every registration and deregistration and reading the kernel's
// memory figures before, while registered and after (to show nothing leaks and what a
// registered GiB costs the kernel).
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/diagnosis.hpp"
#include "core/peer.hpp"
#include "core/report.hpp"
#include "core/run_config.hpp"
#include "sys/kernel_memory.hpp"
#include "sys/procfs.hpp"
#include "sys/verbs.hpp"

namespace rxv {

using KmemReader = std::function<KernelMemory()>;

struct SecondsStats {
  double min = 0, median = 0, max = 0;
  std::size_t n = 0;
};
SecondsStats summarize(std::vector<double> v);

struct ChurnConfig {
  std::uint64_t size = 1ull << 30, offset = 0;
  unsigned count = 1;
  bool traffic = false;
  RunConfig run;  // traffic: sampled mode, one pass; run.seed is varied per iteration
  // Reads /proc/buddyinfo immediately before each registration (after the region is
  // allocated and resident), so a caller can tell whether a free block of the metadata's
  // order existed at that moment. Null: not recorded.
  std::function<std::optional<std::string>()> read_buddyinfo;
};

// The free-block state right before one registration (from /proc/buddyinfo).
struct BuddyBefore {
  int order = 0;                  // the metadata's allocation order
  std::uint64_t free_blocks = 0;  // free blocks of order >= `order`, zones other than DMA
  int largest_free_order = -1;    // in those zones; -1 none
  std::vector<BuddyZone> zones;   // every zone, as read
};

struct ChurnIteration {
  unsigned index = 0;  // 1-based
  bool registered = false;
  int reg_errno = 0;
  double reg_seconds = 0, dereg_seconds = 0;
  std::optional<SizeResult> traffic;        // --traffic: the loop run while registered
  std::optional<BuddyBefore> buddy_before;  // cfg.read_buddyinfo given and readable
};

struct ChurnReport {
  std::string device, kernel;
  ModuleIdentity module;
  std::uint64_t size = 0, offset = 0;
  unsigned count = 0;
  bool traffic = false;
  std::uint64_t pages = 0, metadata_bytes = 0;
  int metadata_order = 0;
  std::vector<ChurnIteration> iterations;
  std::optional<KernelMemory> baseline, registered, after;
  unsigned failed_iteration = 0;  // 0 = none
  std::string failed_stage;       // allocate | register | traffic
  std::optional<Diagnosis> failure;
  std::optional<Diagnosis> error;   // environment failure before the first iteration
  Verdict verdict = Verdict::Skip;  // pass | fail | not_ready
};

// Runs the churn. `qp`/`peer` are needed only with cfg.traffic (may be null otherwise).
ChurnReport run_churn(Device& dev, QueuePair* qp, Peer* peer, const ChurnConfig& cfg, const DiagContext& ctx,
                      const KmemReader& kmem);

// Verdict and exit code (0 pass, 1 fail, 3 not ready: memlock/device/environment).
int finalize(ChurnReport& r);
nlohmann::json to_json(const KernelMemory& m);
nlohmann::json to_json(const BuddyBefore& b);
nlohmann::json to_json(const ChurnReport& r);
std::string to_text(const ChurnReport& r);

}  // namespace rxv
