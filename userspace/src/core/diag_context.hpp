// The diagnosis context of a command: what diagnose() needs to know about the host at
// the moment something fails (its /proc texts, capabilities, the module, the port and,
// between two hosts, the firewall), read through the HostEnv when it is called.
#pragma once
#include <functional>
#include <optional>

#include "core/engine.hpp"
#include "sys/host_env.hpp"
#include "sys/module.hpp"

namespace rxv {

// port_now: the port's state read when called (Device::port()); each diagnosis reads it
// again, so a port that went down during the run is named (device_down).
DiagContext make_diag_context(HostEnv& host, std::function<std::optional<bool>()> port_now, bool two_host,
                              const ModuleIdentity& module);

}  // namespace rxv
