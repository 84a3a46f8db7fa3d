// Failure classification: pure functions over parsed inputs (errno, sizes, /proc texts,
// capabilities, module identity, firewall evaluation). No I/O here.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "base/cause.hpp"
#include "sys/firewall.hpp"
#include "sys/module.hpp"

namespace rxv {

enum class Stage { Allocate, Register, Transfer, Timeout, Verify };

struct DiagInput {
  Stage stage = Stage::Register;
  int err = 0;  // errno of the failing call
  std::uint64_t size = 0, offset = 0;
  unsigned split = 1;                      // number of MRs the region was registered as
  std::uint64_t already_pinned = 0;        // bytes pinned before this registration (staging)
  std::string buddyinfo, limits, meminfo;  // raw /proc texts ("" = unknown)
  std::optional<std::uint64_t> cap_eff;
  ModuleIdentity module;
  std::optional<bool> port_active;
  int wc_status = -1;  // ibv_wc_status when stage == Transfer
  std::string wc_status_str;
  bool two_host = false;
  std::optional<FwResult> firewall;  // this host's input path for RoCEv2
  std::string mismatch_text;         // stage == Verify: where and what
};

struct Diagnosis {
  std::string cause;
  std::string summary;
  std::string remedy;
};

Diagnosis diagnose(const DiagInput& in);

// The setup call a failure's errno came from: opening the device (ibv_get_device_list,
// ibv_open_device, ibv_alloc_pd: Provider::open), creating or connecting a queue pair
// (Device::create_qp, QueuePair::connect), registering memory (Device::reg_mr).
enum class SetupCall { OpenDevice, QueuePair, RegisterMr };

// The one errno table (issue 62 finding 3): the cause of a failed setup call from its
// errno (Error::err, RegResult::err), the same in run, churn, probe and serve. EACCES or
// EPERM opening the device or creating a QP: device_access; ENOMEM there: out_of_memory;
// ENODEV/ENXIO anywhere, and ENOENT/ENOSYS (no uverbs, no provider) opening: no_device;
// anything else opening the device: no_device (it cannot be used), elsewhere unknown.
// ENOMEM, EPERM and EAGAIN at registration are decided before this table by diagnose()'s
// memlock/metadata/fragmentation logic (its fallback is this table's RegisterMr column).
const char* errno_cause(SetupCall call, int err);

// Supplies the diagnosis inputs that come from the host (captured when a failure occurs).
using DiagContext = std::function<DiagInput()>;

// Whether the loaded rdma_rxe can register one MR of `size` bytes (doctor -s): "cannot"
// when it is not rxe-kvfix and the MR's page array (16 B a page) needs a buddy order above
// MAX_PAGE_ORDER (a stock module allocates it physically contiguous: never succeeds);
// "not_now" when the order is possible but no free block of it is left (largest_free_order,
// -1 = unknown, is below it): fragmentation; "unknown" when rdma_rxe is not loaded; else
// "can". `contiguous`: false when this kernel's stock rdma_rxe needs no contiguous page
// array (rxe-kvfix recorded "not-needed"): no order limit then.
// `why` is one line that says which and with what figures.
struct SizeVerdict {
  std::string verdict;  // "can", "cannot", "not_now", "unknown"
  std::string why;
  int order = 0;  // of the page array
};
SizeVerdict can_register(const ModuleIdentity& module, std::uint64_t size, int largest_free_order,
                         bool contiguous = true);

// memlock check used by run/doctor: true when pinning `bytes` is allowed.
bool memlock_allows(const std::string& limits_text, std::optional<std::uint64_t> cap_eff,
                    std::uint64_t bytes);
std::string memlock_remedy(std::uint64_t bytes);

}  // namespace rxv
