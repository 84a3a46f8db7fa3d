#include "sys/host_env.hpp"

#include <cstdlib>

namespace rxv {
namespace {

class SystemHost final : public HostEnv {
 public:
  std::optional<std::string> read(const std::string& path) override { return read_file(path); }
  std::string kernel() override { return kernel_release(); }
  ModuleIdentity module() override { return probe_module(); }
  std::vector<IbDevice> ib_devices() override {
    const char* sysroot = std::getenv("RXE_VERIFY_SYSFS");
    return list_ib_devices(sysroot && *sysroot ? sysroot : "/sys");
  }
  FirewallReport firewall() override { return probe_firewall(); }
  KernelMemory kernel_memory() override { return read_kernel_memory(); }
  std::optional<std::string> kvfix_status(const std::string& release) override {
    auto c = run_command({"rxe-kvfix", "status", "--json", release}, 30);
    if (!c.ran || c.out.empty()) return std::nullopt;
    return c.out;
  }
};

}  // namespace

std::unique_ptr<HostEnv> make_system_host() { return std::make_unique<SystemHost>(); }

HostSnapshot snapshot(HostEnv& h) {
  HostSnapshot s;
  s.buddyinfo = h.read("/proc/buddyinfo").value_or("");
  s.limits = h.read("/proc/self/limits").value_or("");
  s.meminfo = h.read("/proc/meminfo").value_or("");
  s.status = h.read("/proc/self/status").value_or("");
  s.cap_eff = parse_cap_eff(s.status);
  s.module = h.module();
  return s;
}

}  // namespace rxv
