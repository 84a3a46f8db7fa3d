// Failure classification: pure functions over parsed inputs (errno, sizes, /proc texts,
// capabilities, module identity, firewall evaluation). No I/O here.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "firewall.hpp"

namespace rxv {

// Stable machine tokens (documented in userspace/README.md and the man page).
namespace cause {
inline constexpr const char* kMemlock = "memlock";
inline constexpr const char* kRxeMetadataOrder = "rxe_metadata_order";
inline constexpr const char* kFragmentation = "fragmentation";
inline constexpr const char* kOutOfMemory = "out_of_memory";
inline constexpr const char* kDeviceDown = "device_down";
inline constexpr const char* kNoDevice = "no_device";
inline constexpr const char* kDeviceAccess = "device_access";  // uverbs node not openable
inline constexpr const char* kNetwork = "network_path_or_firewall";
inline constexpr const char* kDataCorruption = "data_corruption";
inline constexpr const char* kTransferError = "transfer_error";
inline constexpr const char* kUnknown = "unknown";
}  // namespace cause

enum class Stage { Allocate, Register, Transfer, Timeout, Verify };

// Which rdma_rxe is loaded. JSON/text token is to_string(): "absent", "stock", "rxe-kvfix",
// "rxe-kvfix-unpatched" (test build of rxe-kvfix without the fix: identifies as ours,
// behaves like stock).
enum class ModuleFlavor { Absent, Stock, RxeKvfix, RxeKvfixUnpatched };
std::string to_string(ModuleFlavor f);

struct ModuleIdentity {
  ModuleFlavor flavor = ModuleFlavor::Absent;
  std::string version;    // /sys/module/rdma_rxe/version, may be empty
  std::string installed;  // modinfo -F rxe_kvfix rdma_rxe, may be empty
};
// From the loaded module's sysfs presence/version text and `modinfo -F rxe_kvfix` output.
ModuleIdentity classify_module(bool loaded, const std::optional<std::string>& sysfs_version,
                               const std::string& modinfo_rxe_kvfix);

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

// memlock check used by run/doctor: true when pinning `bytes` is allowed.
bool memlock_allows(const std::string& limits_text, std::optional<std::uint64_t> cap_eff,
                    std::uint64_t bytes);
std::string memlock_remedy(std::uint64_t bytes);

}  // namespace rxv
