// `rxe-verify churn`: the command around run_churn (core/churn.cpp): options, device, the
// optional loopback for --traffic, and the report.
#include <cstdio>

#include "app/common.hpp"
#include "app/device.hpp"
#include "app/options.hpp"
#include "app/preflight.hpp"
#include "base/size.hpp"
#include "core/churn.hpp"
#include "core/diag_context.hpp"
#include "core/engine.hpp"
#include "core/loopback.hpp"

namespace rxv {

Outcome churn_command(const ChurnCommandConfig& o, Provider& prov, HostEnv& host) {
  ChurnConfig cfg;
  cfg.size = need_size("--size", o.size, false);
  cfg.offset = need_offset(o.offset);
  if (o.count == 0) usage("--count: must be at least 1");
  cfg.count = o.count;
  cfg.traffic = o.traffic;
  cfg.run.mode = Mode::Sampled;
  cfg.run.passes = 1;
  cfg.read_buddyinfo = [&host] { return host.read("/proc/buddyinfo"); };
  cfg.run.seed = seed_or_random(o.seed);
  const std::uint64_t staging = cfg.traffic ? staging_bytes_for(cfg.run) : 0;
  check_ram(host, "--size", cfg.size, checked_total("--size", cfg.size, {cfg.offset, staging}), o.force);

  ChurnReport rep;
  rep.kernel = host.kernel();
  rep.module = host.module();
  rep.size = cfg.size;
  rep.offset = cfg.offset;
  rep.count = cfg.count;
  rep.traffic = cfg.traffic;
  auto env_fail = [&](const Error& e) { return setup_failed("churn", e, rep); };
  auto resolved = resolve_device(prov, host, o.device, o.gid_index);
  if (!resolved) {
    throw_if_usage(resolved.error());
    return env_fail(resolved.error());
  }
  const DeviceChoice& dc = *resolved;
  rep.device = dc.name;
  auto opened = prov.open(dc.name);
  if (!opened) return env_fail(open_failure(dc.name, opened.error(), uverbs_node_denied(dc.name)));
  std::unique_ptr<Device> dev = std::move(*opened);
  PortInfo pi = dev->port();
  DiagContext dctx = make_diag_context(host, port_reader(*dev), false, rep.module);
  Loopback lb;
  if (cfg.traffic) {
    if (auto up = check_port_active(dc, pi); !up) return env_fail(up.error());
    QpParams qpp;
    qpp.gid_index = dc.gid_index;
    auto loopback = setup_loopback(*dev, qpp, staging, dctx);
    if (!loopback) {
      Error e = std::move(loopback).error();
      e.exit = kExitNotReady;  // churn: any setup failure means the host cannot run it
      return env_fail(e);
    }
    lb = std::move(*loopback);
  }
  if (!o.json)
    std::fprintf(stderr, "rxe-verify: churn %s x %u%s ...\n", format_size(cfg.size).c_str(), cfg.count,
                 cfg.traffic ? " with traffic" : "");
  ChurnReport r =
      run_churn(*dev, lb.qa.get(), lb.peer.get(), cfg, dctx, [&host] { return host.kernel_memory(); });
  r.kernel = rep.kernel;
  r.module = rep.module;
  r.device = rep.device;
  int rc = finalize(r);
  if (r.failure)
    print_error("churn", (r.failed_iteration ? "iteration " + std::to_string(r.failed_iteration) + " of " +
                                                   std::to_string(r.count) + ": "
                                             : std::string()) +
                             r.failed_stage + " failed [" + r.failure->cause + "]: " + r.failure->summary);
  return reported(rc, to_json(r), to_text(r));
}

}  // namespace rxv
