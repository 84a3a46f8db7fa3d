// In-process fake of the HostEnv the commands read (app/host_env.hpp): one rxe device
// with an ACTIVE port and a RoCE v2 IPv4-mapped GID, plenty of memory, memlock unlimited,
// the rxe-kvfix module, no firewall rules. Tests change the fields they care about.
#pragma once
#include <map>
#include <string>

#include "sys/host_env.hpp"

namespace rxv::testing {

class FakeHost final : public HostEnv {
 public:
  FakeHost() {
    files["/proc/meminfo"] =
        "MemTotal:       16384000 kB\nMemFree:         8192000 kB\n"
        "MemAvailable:    8192000 kB\nSlab:              10000 kB\nVmallocUsed:       20000 kB\n";
    files["/proc/self/limits"] =
        "Limit                     Soft Limit           Hard Limit           Units     \n"
        "Max locked memory         unlimited            unlimited            bytes     \n";
    files["/proc/self/status"] = "Name:\tt\nCapEff:\t0000000000000000\n";
    files["/proc/buddyinfo"] =
        "Node 0, zone   Normal    10   10   10   10   10   10   10   10   10    4    8\n";
    mod.flavor = ModuleFlavor::RxeKvfix;
    mod.version = "1.0";
    IbDevice d;
    d.name = "rxe0";
    d.rxe = true;
    d.netdev = "eth0";
    d.port_state = "4: ACTIVE";
    d.port_active = true;
    d.gids.push_back({0, "fe80:0000:0000:0000:0000:0000:0000:0001", "IB/RoCE v1", "eth0"});
    d.gids.push_back({1, "0000:0000:0000:0000:0000:ffff:0a00:0001", "RoCE v2", "eth0"});
    devices.push_back(d);
  }
  std::optional<std::string> read(const std::string& path) override {
    auto it = files.find(path);
    if (it == files.end()) return std::nullopt;
    return it->second;
  }
  std::string kernel() override { return "6.1.0-test"; }
  ModuleIdentity module() override { return mod; }
  std::vector<IbDevice> ib_devices() override { return devices; }
  FirewallReport firewall() override { return fw; }
  KernelMemory kernel_memory() override { return {}; }
  std::optional<std::string> kvfix_status(const std::string& /*release*/) override { return kvfix_json; }

  std::map<std::string, std::string> files;
  ModuleIdentity mod;
  std::vector<IbDevice> devices;
  FirewallReport fw;
  std::optional<std::string> kvfix_json;  // rxe-kvfix status --json; nullopt: not installed
};

}  // namespace rxv::testing
