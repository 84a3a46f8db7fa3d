#include "app/device.hpp"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>

#include "base/cause.hpp"
#include "core/diagnosis.hpp"
#include "sys/procfs.hpp"

namespace rxv {

Result<std::string> choose_device(const std::vector<IbDevice>& sys, const std::vector<std::string>& verbs,
                                  const std::string& wanted) {
  auto in_verbs = [&](const std::string& n) {
    return verbs.empty() || std::find(verbs.begin(), verbs.end(), n) != verbs.end();
  };
  if (!wanted.empty()) {
    bool known = std::find(verbs.begin(), verbs.end(), wanted) != verbs.end() ||
                 std::any_of(sys.begin(), sys.end(), [&](const IbDevice& d) { return d.name == wanted; });
    if (!known) {
      std::string avail;
      for (const auto& v : verbs) avail += (avail.empty() ? "" : ", ") + v;
      return usage_error("unknown device '" + wanted + "' (available: " + (avail.empty() ? "none" : avail) +
                         "); name one listed by `rxe-verify doctor`, or leave --device out");
    }
    return wanted;
  }
  for (const auto& d : sys)
    if (d.rxe && in_verbs(d.name)) return d.name;
  for (const auto& v : verbs)
    if (v.rfind("rxe", 0) == 0) return v;
  return Error(
      "no rxe device found (load rdma_rxe and run `rdma link add rxe0 type rxe netdev <netdev>`, or name one "
      "with --device)",
      "", kExitNotReady, cause::kNoDevice);
}

Result<void> check_gid_index(const IbDevice& dev, int index) {
  if (dev.gids.empty()) return {};  // GID table not readable: let the device decide
  std::string have;
  for (const auto& g : dev.gids) {
    if (g.index == index) return {};
    have += (have.empty() ? "" : ", ") + std::to_string(g.index);
  }
  return usage_error("--gid-index " + std::to_string(index) + ": device " + dev.name + " has no GID " +
                     std::to_string(index) + " (valid: " + have +
                     "); pick one listed by `rxe-verify doctor`");
}

Result<DeviceChoice> resolve_device(Provider& prov, HostEnv& host, const std::string& wanted, int gid_opt) {
  DeviceChoice c;
  auto sys = host.ib_devices();
  auto name = choose_device(sys, prov.list_devices(), wanted);
  if (!name) return std::move(name).error();
  c.name = std::move(*name);
  for (const auto& d : sys)
    if (d.name == c.name) c.info = d;
  if (gid_opt >= 0) {
    c.gid_index = gid_opt;
    if (auto in_table = check_gid_index(c.info, gid_opt); !in_table) return std::move(in_table).error();
    return c;
  }
  c.gid_index = select_gid_index(c.info.gids);
  if (c.gid_index < 0)
    return Error("device " + c.name +
                     " has no RoCE v2 GID (is its netdev up with an IP address?); pick one with "
                     "--gid-index",
                 "", kExitNotReady, cause::kNoDevice);
  return c;
}

std::function<std::optional<bool>()> port_reader(Device& dev) {
  return [&dev]() -> std::optional<bool> { return dev.port().active; };
}

Result<void> check_port_active(const DeviceChoice& dc, const PortInfo& pi) {
  if (pi.active) return {};
  return Error("port 1 of " + dc.name + " is " + (pi.state_str.empty() ? "down" : pi.state_str),
               "bring its netdev up: `ip link set " +
                   (dc.info.netdev.empty() ? std::string("<netdev>") : dc.info.netdev) + " up`",
               kExitNotReady, cause::kDeviceDown);
}

std::string uverbs_node_denied(const std::string& device) {
  DIR* d = opendir("/sys/class/infiniband_verbs");
  if (!d) return "";
  std::string found;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n.rfind("uverbs", 0) != 0) continue;
    std::ifstream f("/sys/class/infiniband_verbs/" + n + "/ibdev");
    std::string ib;
    if (f >> ib && ib == device) found = "/dev/infiniband/" + n;
  }
  closedir(d);
  if (found.empty() || ::access(found.c_str(), R_OK | W_OK) == 0) return "";
  return errno == EACCES || errno == EPERM ? found : "";
}

Error open_failure(const std::string& device, const Error& open_error, const std::string& denied_node) {
  const std::string& why = open_error.summary;
  const int err = open_error.err;
  const std::string c = denied_node.empty() ? errno_cause(SetupCall::OpenDevice, err) : cause::kDeviceAccess;
  if (c == cause::kDeviceAccess)
    return Error(why + ": this user may not open " +
                     (denied_node.empty() ? device + "'s /dev/infiniband/uverbs* node"
                                          : denied_node + " (" + device + ")") +
                     " for reading and writing (not a memlock or memory problem)",
                 "give the user read and write access to /dev/infiniband/uverbs* (rdma-core's "
                 "udev rule makes them mode 0666: check `ls -l /dev/infiniband` and local udev "
                 "rules or groups), or run as a user that has it",
                 kExitNotReady, c, err);
  if (c == cause::kOutOfMemory)
    return Error(why, "free memory (stop other workloads) and retry", kExitNotReady, c, err);
  return Error(why, "load ib_uverbs and rdma_rxe and check that `rdma link show` lists " + device,
               kExitNotReady, c, err);
}

}  // namespace rxv
