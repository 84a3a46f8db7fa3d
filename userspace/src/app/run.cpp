// `rxe-verify run`: register regions and verify RDMA WRITE/READ data integrity, loopback
// or against `rxe-verify serve` on another host.
#include <algorithm>
#include <cstdio>

#include "app/common.hpp"
#include "app/device.hpp"
#include "app/options.hpp"
#include "app/preflight.hpp"
#include "app/run_options.hpp"
#include "base/size.hpp"
#include "core/diag_context.hpp"
#include "core/engine.hpp"
#include "core/loopback.hpp"
#include "core/oob.hpp"

namespace rxv {
using nlohmann::json;

namespace {

// The other end of the run's transfers: the loopback QP pair with its staging buffer, or
// the connection to `rxe-verify serve` and the server's staging buffer. lb.qa is the
// run's QP either way. (The socket is on the heap: RemotePeer keeps a reference to it.)
struct Side {
  Loopback lb;
  std::unique_ptr<LineSocket> sock;
  std::unique_ptr<RemotePeer> remote;
  Peer* peer = nullptr;
};

Result<Side> loopback_side(Device& dev, const QpParams& qpp, std::uint64_t staging, const DiagContext& dctx) {
  auto loopback = setup_loopback(dev, qpp, staging, dctx);
  if (!loopback) return std::move(loopback).error();
  Side side;
  side.lb = std::move(*loopback);
  side.peer = side.lb.peer.get();
  return side;
}

// Our QP, the connection to the server, its hello answer and our QP connected to its QP.
Result<Side> server_side(Device& dev, const QpParams& qpp, const RunOptions& ro, std::uint64_t staging) {
  auto fail = [](const std::string& cause, const std::string& summary) {
    return Error(summary, "", kExitNotReady, cause);
  };
  Side side;
  auto created = dev.create_qp(qpp);
  if (!created) return qp_failure(created.error());
  side.lb.qa = std::move(*created);
  auto connected = tcp_connect(ro.peer_host, ro.port, std::chrono::seconds(15));
  if (!connected) {
    Error e = std::move(connected).error();
    e.remedy = "start `rxe-verify serve` on " + ro.peer_host + " and check that TCP port " +
               std::to_string(ro.port) + " is reachable";
    return e;
  }
  side.sock = std::make_unique<LineSocket>(std::move(*connected));
  // (a failed send shows as the answer's error)
  (void)side.sock->send({{"op", "hello"},
                         {"version", kProtocolVersion},
                         {"qp", qp_to_json(side.lb.qa->local_addr())},
                         {"staging", staging}});
  auto hr = side.sock->recv(std::chrono::seconds(60));
  if (!hr) return fail(cause::kNetwork, "no answer from the server: " + hr.error().summary);
  auto sh = parse_hello_reply(*hr);
  if (!sh) return fail(sh.error().cause, sh.error().summary);
  if (auto e = side.lb.qa->connect(sh->qp); !e) return qp_failure(e.error());
  side.remote = std::make_unique<RemotePeer>(*side.sock, sh->staging_addr, sh->staging_rkey, sh->staging_size,
                                             std::chrono::seconds(120));
  side.peer = side.remote.get();
  return side;
}

// Every size in turn; after a size broke the QP, the loopback pair is rebuilt, while two
// hosts (the server's QP is gone with ours) skip the remaining sizes.
void run_sizes(Device& dev, const QpParams& qpp, Side& side, const RunOptions& ro, const DiagContext& dctx,
               bool json, RunReport& rep) {
  const RunConfig& cfg = ro.cfg;
  bool broken = false;
  for (auto sz : ro.sizes) {
    if (broken) {
      SizeResult s = planned_result(sz, cfg);
      s.result = SizeOutcome::Skip;
      s.diagnosis = Diagnosis{"skipped", "not run: the connection or session failed on an earlier size", ""};
      rep.results.push_back(s);
      continue;
    }
    Engine eng(dev, *side.lb.qa, *side.peer, cfg, dctx);
    if (!json)
      std::fprintf(stderr, "rxe-verify: %s%s ...\n", format_size(sz).c_str(),
                   cfg.offset ? (" at offset " + std::to_string(cfg.offset)).c_str() : "");
    rep.results.push_back(eng.run_size(sz));
    // a failed peer call ended the session: nothing more may go over that socket
    if (side.peer->broken()) broken = true;
    if (!side.lb.qa->broken() && !broken) continue;
    broken = true;
    if (cfg.two_host) continue;
    if (auto rebuilt = connect_qp_pair(dev, qpp)) {
      side.lb.qa = std::move(rebuilt->qa);
      side.lb.qb = std::move(rebuilt->qb);
      broken = false;
    }
  }
}

RunReport new_report(HostEnv& host, const RunOptions& ro) {
  RunReport rep;
  rep.kernel = host.kernel();
  rep.module = host.module();
  rep.seed = ro.cfg.seed;
  rep.completion_wait = ro.wait;
  rep.transport = ro.cfg.two_host ? "tcp " + ro.peer_host + ":" + std::to_string(ro.port) : "loopback";
  return rep;
}

// The whole run's memlock need up front: the staging buffer alone would pass at 8 MiB and
// the region fail next, and the advice must name what the run pins, not one buffer. In a
// two-host run the staging buffer is the server's, pinned (and checked) there.
Result<void> whole_run_memlock(HostEnv& host, const RunOptions& ro) {
  const RunConfig& cfg = ro.cfg;
  const std::uint64_t largest = *std::max_element(ro.sizes.begin(), ro.sizes.end());
  if (cfg.two_host)
    return memlock_preflight(host, region_pinned_bytes(cfg.offset, largest, cfg.split),
                             "the " + format_size(largest) + " region; the staging buffer is the server's");
  return memlock_preflight(host, run_pinned_bytes(cfg.offset, largest, cfg.split, staging_bytes_for(cfg)),
                           "the " + format_size(largest) + " region and the staging buffer");
}

// Each size's largest MR (one --split piece) and the staging buffer within the device's
// max_mr_size, or a usage error naming the limit (before anything is allocated).
void check_max_mr(std::uint64_t max_mr, const std::string& dev, const RunOptions& ro, std::uint64_t staging) {
  if (max_mr == 0) return;
  const std::string limit = dev + "'s max_mr_size (" + format_size(max_mr) + ")";
  for (std::uint64_t s : ro.sizes) {
    const SplitLayout l = SplitLayout::make(s, ro.cfg.offset % kPageSize, ro.cfg.split);
    std::uint64_t piece = 0;
    for (unsigned i = 0; i < l.count(); ++i) piece = std::max(piece, l.starts[i + 1] - l.starts[i]);
    if (piece > max_mr)
      usage("--size: " + format_size(s) +
            (l.count() > 1
                 ? " in " + std::to_string(l.count()) + " MRs needs one of " + format_size(piece) + ", above "
                 : " is above ") +
            limit + "; give a smaller size or more MRs with --split N");
  }
  if (staging > max_mr)
    usage("--msg-size: the " + format_size(staging) + " staging buffer is above " + limit +
          "; give a smaller --msg-size");
}

}  // namespace

Outcome run_command(const RunCommandConfig& o, Provider& prov, HostEnv& host) {
  RunOptions ro = validate_run_options(o, host);
  RunConfig& cfg = ro.cfg;
  if (cfg.two_host && o.connect_short)
    std::fprintf(stderr,
                 "rxe-verify run: note: -c is deprecated (perftest's -c is the "
                 "connection type); use --connect\n");
  RunReport rep = new_report(host, ro);
  auto env_fail = [&](const Error& e) { return setup_failed("run", e, rep); };

  auto resolved = resolve_device(prov, host, o.device, o.gid_index);
  if (!resolved) {
    throw_if_usage(resolved.error());
    return env_fail(resolved.error());
  }
  const DeviceChoice& dc = *resolved;
  rep.device = dc.name;
  rep.gid_index = dc.gid_index;
  auto opened = prov.open(dc.name);
  if (!opened) return env_fail(open_failure(dc.name, opened.error(), uverbs_node_denied(dc.name)));
  std::unique_ptr<Device> dev = std::move(*opened);
  PortInfo pi = dev->port();
  if (auto up = check_port_active(dc, pi); !up) return env_fail(up.error());
  if (pi.max_msg_sz && cfg.msg_size > pi.max_msg_sz) cfg.msg_size = pi.max_msg_sz;
  check_max_mr(dev->caps().max_mr_size, dc.name, ro, staging_bytes_for(cfg));

  QpParams qpp;
  qpp.gid_index = dc.gid_index;
  qpp.tx_depth = cfg.tx_depth;
  qpp.wait = ro.wait;
  DiagContext dctx = make_diag_context(host, port_reader(*dev), cfg.two_host, rep.module);
  if (auto pins = whole_run_memlock(host, ro); !pins) return env_fail(pins.error());
  const std::uint64_t staging = staging_bytes_for(cfg);
  auto side = cfg.two_host ? server_side(*dev, qpp, ro, staging) : loopback_side(*dev, qpp, staging, dctx);
  if (!side) return env_fail(side.error());
  run_sizes(*dev, qpp, *side, ro, dctx, o.json, rep);
  if (side->remote) side->remote->bye();
  int rc = finalize(rep);
  return reported(rc, to_json(rep), to_table(rep, o.report_gbits));
}

}  // namespace rxv
