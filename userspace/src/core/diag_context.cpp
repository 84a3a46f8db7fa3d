#include "core/diag_context.hpp"

namespace rxv {

DiagContext make_diag_context(HostEnv& host, std::function<std::optional<bool>()> port_now, bool two_host,
                              const ModuleIdentity& module) {
  return [&host, port_now = std::move(port_now), two_host, module]() {
    HostSnapshot h = snapshot(host);
    DiagInput in;
    in.buddyinfo = h.buddyinfo;
    in.limits = h.limits;
    in.meminfo = h.meminfo;
    in.cap_eff = h.cap_eff;
    in.module = module;
    if (port_now) in.port_active = port_now();  // now, not when the run started
    in.two_host = two_host;
    if (two_host) in.firewall = host.firewall().combined;
    return in;
  };
}

}  // namespace rxv
