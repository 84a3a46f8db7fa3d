// The rdma_rxe module as this host has it: loaded or not, stock or rxe-kvfix (from
// /sys/module/rdma_rxe/version and `modinfo -F rxe_kvfix rdma_rxe`; sys/host.cpp reads
// them, classify_module interprets them).
#pragma once
#include <optional>
#include <string>

namespace rxv {

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

}  // namespace rxv
