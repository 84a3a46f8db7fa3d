// Host probes: files under /proc and /sys, external commands (modinfo, nft, iptables-save).
// Thin I/O layer; the interpretation lives in procfs/diagnosis/firewall (pure functions).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "sys/firewall.hpp"
#include "sys/module.hpp"
#include "sys/procfs.hpp"

namespace rxv {

std::optional<std::string> read_file(const std::string& path);

struct CmdResult {
  bool ran = false;  // false: not found / could not start
  int status = -1;   // exit status
  std::string out;   // stdout
};
// Runs argv[0] from PATH (plus /usr/sbin:/sbin) with stdin/stderr on /dev/null; kills it
// after timeout_s seconds.
CmdResult run_command(const std::vector<std::string>& argv, int timeout_s = 10);

std::string kernel_release();
ModuleIdentity probe_module(const std::string& sys = "/sys");

struct IbDevice {
  std::string name;
  bool rxe = false;
  std::string netdev;      // parent netdev
  std::string port_state;  // "4: ACTIVE"
  bool port_active = false;
  std::vector<GidEntry> gids;
};
// Devices under <sys>/class/infiniband, rxe flagged (driver link, "parent" attribute or
// "rxe" name prefix).
std::vector<IbDevice> list_ib_devices(const std::string& sys = "/sys");
std::vector<GidEntry> read_gids(const std::string& sys, const std::string& dev, int port = 1);

struct HostSnapshot {
  std::string buddyinfo, limits, meminfo, status;
  std::optional<std::uint64_t> cap_eff;
  ModuleIdentity module;
};
HostSnapshot snapshot_host();

// nft -j list ruleset and iptables-save, evaluated for incoming RoCEv2.
struct FirewallReport {
  FwResult combined;
  std::optional<FwResult> nft, iptables;
  std::string note;  // e.g. "nft not installed"
};
FirewallReport probe_firewall();

}  // namespace rxv
