// `rxe-verify run`: register regions and verify RDMA WRITE/READ data integrity, loopback
// or against `rxe-verify serve` on another host.
#include <algorithm>
#include <cstdio>

#include "app/common.hpp"
#include "app/run_options.hpp"
#include "engine.hpp"
#include "oob.hpp"
#include "size.hpp"

namespace rxv {
using nlohmann::json;

Outcome run_command(const RunCommandConfig& o, Provider& prov, HostEnv& host) {
  RunOptions ro = validate_run_options(o, host);
  const std::vector<std::uint64_t>& sizes = ro.sizes;
  RunConfig& cfg = ro.cfg;
  const std::string& peer_host = ro.peer_host;
  const std::uint16_t port = ro.port;
  if (cfg.two_host && o.connect_short)
    std::fprintf(stderr,
                 "rxe-verify run: note: -c is deprecated (perftest's -c is the "
                 "connection type); use --connect\n");

  RunReport rep;
  rep.kernel = host.kernel();
  rep.module = host.module();
  rep.seed = cfg.seed;
  rep.completion_wait = ro.wait;
  rep.transport = cfg.two_host ? "tcp " + peer_host + ":" + std::to_string(port) : "loopback";
  auto env_fail = [&](const Error& e) { return setup_failed("run", e, rep); };
  auto fail = [&](const std::string& cause, const std::string& summary) {
    return env_fail(Error(summary, "", kExitNotReady, cause));
  };

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

  QpParams qpp;
  qpp.gid_index = dc.gid_index;
  qpp.tx_depth = cfg.tx_depth;
  qpp.wait = ro.wait;
  DiagContext dctx = make_diag_context(host, pi.active, cfg.two_host, rep.module);
  // the whole run's memlock need up front: the staging buffer alone would pass at 8 MiB
  // and the region fail next, and the advice must name what the run pins, not one buffer
  const std::uint64_t largest = *std::max_element(sizes.begin(), sizes.end());
  if (auto pins =
          memlock_preflight(host, run_pinned_bytes(cfg.offset, largest, cfg.split, staging_bytes_for(cfg)),
                            "the " + format_size(largest) + " region and the staging buffer");
      !pins)
    return env_fail(pins.error());
  Loopback lb;
  std::unique_ptr<QueuePair>& qa = lb.qa;
  std::optional<LineSocket> sock;
  std::unique_ptr<RemotePeer> rpeer;
  Peer* peer = nullptr;
  const std::uint64_t staging = staging_bytes_for(cfg);
  if (!cfg.two_host) {
    auto loopback = setup_loopback(*dev, qpp, staging, dctx);
    if (!loopback) return env_fail(loopback.error());
    lb = std::move(*loopback);
    peer = lb.peer.get();
  } else {
    auto created = dev->create_qp(qpp);
    if (!created) return fail(cause::kUnknown, created.error().summary);
    qa = std::move(*created);
    auto connected = tcp_connect(peer_host, port, std::chrono::seconds(15));
    if (!connected) {
      Error e = std::move(connected).error();
      e.remedy = "start `rxe-verify serve` on " + peer_host + " and check that TCP port " +
                 std::to_string(port) + " is reachable";
      return env_fail(e);
    }
    sock = std::move(*connected);
    // (a failed send shows as the answer's error)
    (void)sock->send({{"op", "hello"},
                      {"version", kProtocolVersion},
                      {"qp", qp_to_json(qa->local_addr())},
                      {"staging", staging}});
    auto hr = sock->recv(std::chrono::seconds(60));
    if (!hr) return fail(cause::kNetwork, "no answer from the server: " + hr.error().summary);
    auto sh = parse_hello_reply(*hr);
    if (!sh) return fail(cause::kUnknown, sh.error().summary);
    if (auto e = qa->connect(sh->qp); !e) return fail(cause::kUnknown, e.error().summary);
    rpeer = std::make_unique<RemotePeer>(*sock, sh->staging_addr, sh->staging_rkey, sh->staging_size,
                                         std::chrono::seconds(120));
    peer = rpeer.get();
  }

  bool broken = false;
  for (auto sz : sizes) {
    if (broken) {
      SizeResult s = planned_result(sz, cfg);
      s.result = SizeOutcome::Skip;
      s.diagnosis = Diagnosis{"skipped", "not run: the connection failed on an earlier size", ""};
      rep.results.push_back(s);
      continue;
    }
    Engine eng(*dev, *qa, *peer, cfg, dctx);
    if (!o.json)
      std::fprintf(stderr, "rxe-verify: %s%s ...\n", format_size(sz).c_str(),
                   cfg.offset ? (" at offset " + std::to_string(cfg.offset)).c_str() : "");
    rep.results.push_back(eng.run_size(sz));
    if (qa->broken()) {
      // Two hosts: the server's QP is gone with ours. Loopback: rebuild the pair.
      broken = true;
      if (!cfg.two_host) {
        if (auto rebuilt = connect_qp_pair(*dev, qpp)) {
          lb.qa = std::move(rebuilt->qa);
          lb.qb = std::move(rebuilt->qb);
          broken = false;
        }
      }
    }
  }
  if (sock) {
    // the server's answer is awaited, not judged: the sizes' results are in
    (void)sock->send({{"op", "bye"}});
    (void)sock->recv(std::chrono::seconds(5));
  }
  int rc = finalize(rep);
  return reported(rc, to_json(rep), to_table(rep, o.report_gbits));
}

}  // namespace rxv
