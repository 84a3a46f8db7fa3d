// `rxe-verify serve`: the responder side of a two-host run: its option checks, device
// choice and firewall warning, then the server loop of app/serve_loop.cpp.
#include <cstdio>

#include "app/common.hpp"
#include "app/device.hpp"
#include "app/options.hpp"
#include "app/preflight.hpp"
#include "app/serve_loop.hpp"
#include "base/size.hpp"
#include "core/plan.hpp"

namespace rxv {

Outcome serve_command(const ServeCommandConfig& o, Provider& prov, HostEnv& host) {
  if (o.port == 0 || o.port > 65535) usage("--port: must be 1-65535");
  if (o.timeout < 0) usage("--timeout: must not be negative");
  check_gid_option(o.gid_given, o.gid_index);
  Outcome out;
  auto resolved = resolve_device(prov, host, o.device, o.gid_index);
  if (!resolved) {
    throw_if_usage(resolved.error());
    print_error("serve", resolved.error().line());
    out.exit = resolved.error().exit;
    return out;
  }
  const DeviceChoice& dc = *resolved;
  ServeOptions so;
  so.device = dc.name;
  so.gid_index = dc.gid_index;
  so.bind = o.bind;
  so.port = static_cast<std::uint16_t>(o.port);
  so.timeout = o.timeout;
  so.forever = o.forever;
  so.module_flavor = to_string(host.module().flavor);
  so.memlock = [&host](std::uint64_t staging) {
    return memlock_preflight(host, span_pages(0, staging) * kPageSize,
                             "the " + format_size(staging) + " staging buffer a client asked for");
  };
  auto fw = host.firewall();
  if (fw.combined.verdict == FwVerdict::Drop)
    std::fprintf(stderr,
                 "rxe-verify serve: warning: this host's %s input rules drop RoCEv2 (UDP 4791): "
                 "%s; transfers from the client will time out\n",
                 fw.combined.source.c_str(), fw.combined.detail.c_str());
  out.exit = run_server(prov, so);
  return out;
}

}  // namespace rxv
