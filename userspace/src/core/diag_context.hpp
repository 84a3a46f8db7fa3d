// The diagnosis context of a command: what diagnose() needs to know about the host at
// the moment something fails (its /proc texts, capabilities, the module, the port and,
// between two hosts, the firewall), read through the HostEnv when it is called.
#pragma once
#include <optional>

#include "core/engine.hpp"
#include "sys/host_env.hpp"
#include "sys/module.hpp"

namespace rxv {

DiagContext make_diag_context(HostEnv& host, std::optional<bool> port_active, bool two_host,
                              const ModuleIdentity& module);

}  // namespace rxv
