// The host as the commands see it: /proc files, sysfs devices, the module identity, the
// firewall and the kernel's memory figures. SystemHost reads the real host (sys/host.cpp,
// sys/procfs.cpp, sys/kernel_memory.cpp); unit tests substitute a fake so the commands run
// without RDMA hardware and with chosen meminfo/limits/buddyinfo.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sys/host.hpp"
#include "sys/kernel_memory.hpp"

namespace rxv {

class HostEnv {
 public:
  virtual ~HostEnv() = default;
  // A file under /proc ("/proc/meminfo", "/proc/buddyinfo", "/proc/self/limits",
  // "/proc/self/status"); nullopt when unreadable.
  virtual std::optional<std::string> read(const std::string& path) = 0;
  virtual std::string kernel() = 0;
  virtual ModuleIdentity module() = 0;
  virtual std::vector<IbDevice> ib_devices() = 0;
  virtual FirewallReport firewall() = 0;
  virtual KernelMemory kernel_memory() = 0;
  // `rxe-kvfix status --json RELEASE`'s document (the DKMS package's admin command:
  // kmod/rxe-kvfix-status.sh), whatever its exit status; nullopt when rxe-kvfix is not
  // installed or printed nothing.
  virtual std::optional<std::string> kvfix_status(const std::string& release) = 0;
};

// The real host. ib_devices() honours RXE_VERIFY_SYSFS (another sysfs root; tests: a fake
// rxe0 makes --device/--gid-index checks reachable on hosts without RDMA devices).
std::unique_ptr<HostEnv> make_system_host();

// The HostSnapshot of host.hpp, read through a HostEnv.
HostSnapshot snapshot(HostEnv& h);

}  // namespace rxv
