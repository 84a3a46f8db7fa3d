// The device a command uses: its choice among the host's RDMA devices, its GID index and
// port, and why it did not open, each failure with its remedy.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/result.hpp"
#include "sys/host.hpp"
#include "sys/host_env.hpp"
#include "sys/verbs.hpp"

namespace rxv {

// Device choice (pure): the requested name must exist; otherwise the first rxe device.
// Errors: an unknown name (exit 2), no rxe device (exit 3, cause no_device).
Result<std::string> choose_device(const std::vector<IbDevice>& sysfs_devs,
                                  const std::vector<std::string>& verbs_devs, const std::string& wanted);

// -g/--gid-index against the device's GID table (non-zero entries from sysfs): a usage
// error naming the valid indexes. An unreadable (empty) table is accepted.
Result<void> check_gid_index(const IbDevice& dev, int index);

struct DeviceChoice {
  std::string name;
  int gid_index = -1;
  IbDevice info;
};
// The device (choose_device) and its GID index: -g checked against its table (a usage
// error), else the RoCE v2 one (none: exit 3, cause no_device).
Result<DeviceChoice> resolve_device(Provider& prov, HostEnv& host, const std::string& wanted, int gid_opt);

// The port is active, or "port 1 of DEV is DOWN" with the remedy (exit 3, device_down).
Result<void> check_port_active(const DeviceChoice& dc, const PortInfo& pi);
// The port's state as a diagnosis reads it: queried from `dev` at each call (the device
// outlives the diagnosis context).
std::function<std::optional<bool>()> port_reader(Device& dev);

// The device did not open (Provider::open's error, its errno in open_error.err): the
// cause from errno_cause(SetupCall::OpenDevice, err) (core/diagnosis.hpp: EACCES/EPERM
// device_access, ENOMEM out_of_memory, else no_device), or device_access whenever
// `denied_node` names the /dev/infiniband/uverbs* node this user may not open; each with
// its remedy; exit 3. run, churn and probe all call it. libibverbs' errno alone is no
// guide to a denied node: with the node at mode 0600 ibv_open_device fails with ENOENT
// (its fallback to a node of its own), hence the node check.
Error open_failure(const std::string& device, const Error& open_error, const std::string& denied_node = "");
// The uverbs node of `device` (/sys/class/infiniband_verbs/uverbs*/ibdev) when this
// process may not open it for reading and writing, else "".
std::string uverbs_node_denied(const std::string& device);

}  // namespace rxv
