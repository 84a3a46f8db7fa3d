// `rxe-verify run`: register regions and verify RDMA WRITE/READ data integrity, loopback
// or against `rxe-verify serve` on another host.
#include <algorithm>
#include <cstdio>

#include "app/common.hpp"
#include "engine.hpp"
#include "oob.hpp"
#include "plan.hpp"
#include "progress.hpp"
#include "size.hpp"

namespace rxv {
using nlohmann::json;

Outcome run_command(const RunCommandConfig& o, Provider& prov, HostEnv& host) {
  std::vector<std::uint64_t> sizes;
  for (const auto& s : o.sizes) {
    auto l = parse_size_list(s);
    if (!l.ok()) size_usage("--size", l.error);
    for (auto v : l.values) {
      if (v == 0) usage("--size: size must be greater than 0");
      sizes.push_back(v);
    }
  }
  if (sizes.empty()) sizes.push_back(1ull << 30);
  check_gid_option(o.gid_given, o.gid_index);
  RunConfig cfg;
  cfg.offset = need_offset(o.offset);
  if (o.mode == "sampled") cfg.mode = Mode::Sampled;
  else if (o.mode == "full") cfg.mode = Mode::Full;
  else usage("--mode: '" + o.mode + "' is not a mode; use sampled or full");
  cfg.msg_size = need_size("--msg-size", o.msg_size, false);
  if (cfg.msg_size > kMaxMsgSize)
    usage("--msg-size: " + format_size(cfg.msg_size) + " exceeds the 2 GiB rxe max_msg_sz; use at most 2G");
  if (o.split == 0) usage("--split: must be at least 1");
  cfg.passes = o.passes ? o.passes : (cfg.mode == Mode::Full ? 1 : 2);
  cfg.seed = seed_or_random(o.seed);
  cfg.split = o.split;
  cfg.op_timeout = o.timeout;
  if (o.tx_depth < 1 || o.tx_depth > 8192) usage("--tx-depth: must be 1 to 8192 work requests");
  cfg.tx_depth = o.tx_depth;
  if (o.iters == 0 || o.iters < -1 || o.iters > (1ll << 40)) usage("--iters: must be at least 1 transfer");
  if (o.iters > 0) cfg.min_transfers = static_cast<std::uint64_t>(o.iters);
  if (!(o.duration >= 0 && o.duration <= 7 * 86400.0)) usage("--duration: must be 0 to 604800 seconds");
  cfg.duration = o.duration;
  if (o.timeout < 0) usage("--timeout: must not be negative");
  cfg.two_host = !o.connect.empty();
  cfg.progress = !o.no_progress && !o.json && stderr_is_tty();
  for (auto s : sizes)
    check_ram(host, "--size", s, s + cfg.offset + staging_bytes_for(cfg), o.force);
  std::string peer_host;
  std::uint16_t port = kDefaultPort;
  if (cfg.two_host) {
    std::string e;
    if (!parse_host_port(o.connect, peer_host, port, e) || !check_peer_host(peer_host, e))
      usage("--connect: " + e);
    if (o.connect_short)
      std::fprintf(stderr, "rxe-verify run: note: -c is deprecated (perftest's -c is the "
                           "connection type); use --connect\n");
  }

  RunReport rep;
  rep.kernel = host.kernel();
  rep.module = host.module();
  rep.seed = cfg.seed;
  rep.transport = cfg.two_host ? "tcp " + peer_host + ":" + std::to_string(port) : "loopback";
  auto env_fail = [&](const SetupFailure& f) { return setup_failed("run", f, rep); };
  auto fail = [&](const std::string& cause, const std::string& summary) {
    return env_fail(SetupFailure{cause, summary, "", kExitNotReady});
  };

  std::string err;
  int code = 0;
  DeviceChoice dc = resolve_device(prov, host, o.device, o.gid_index, err, code);
  if (dc.name.empty()) {
    if (code == kExitUsage) usage(err);
    return fail(cause::kNoDevice, err);
  }
  rep.device = dc.name;
  rep.gid_index = dc.gid_index;
  auto dev = prov.open(dc.name, err);
  if (!dev) return env_fail(open_failure(dc.name, err, uverbs_node_denied(dc.name)));
  PortInfo pi = dev->port();
  if (auto f = port_down(dc, pi)) return env_fail(*f);
  if (pi.max_msg_sz && cfg.msg_size > pi.max_msg_sz) cfg.msg_size = pi.max_msg_sz;

  QpParams qpp;
  qpp.gid_index = dc.gid_index;
  qpp.tx_depth = cfg.tx_depth;
  qpp.busy_poll = o.busy_poll;
  DiagContext dctx = make_diag_context(host, pi.active, cfg.two_host, rep.module);
  // the whole run's memlock need up front: the staging buffer alone would pass at 8 MiB
  // and the region fail next, and the advice must name what the run pins, not one buffer
  const std::uint64_t largest = *std::max_element(sizes.begin(), sizes.end());
  if (auto f = memlock_preflight(host, run_pinned_bytes(cfg.offset, largest, cfg.split, staging_bytes_for(cfg)),
                                 "the " + format_size(largest) + " region and the staging buffer"))
    return env_fail(*f);
  Loopback lb;
  std::unique_ptr<QueuePair>& qa = lb.qa;
  std::optional<LineSocket> sock;
  std::unique_ptr<RemotePeer> rpeer;
  Peer* peer = nullptr;
  const std::uint64_t staging = staging_bytes_for(cfg);
  if (!cfg.two_host) {
    if (auto f = setup_loopback(*dev, qpp, staging, dctx, lb)) return env_fail(*f);
    peer = lb.peer.get();
  } else {
    qa = dev->create_qp(qpp, err);
    if (!qa) return fail(cause::kUnknown, err);
    sock = tcp_connect(peer_host, port, std::chrono::seconds(15), err);
    if (!sock)
      return env_fail({cause::kNetwork, err,
                       "start `rxe-verify serve` on " + peer_host + " and check that TCP port " +
                           std::to_string(port) + " is reachable",
                       kExitNotReady});
    sock->send({{"op", "hello"}, {"version", kProtocolVersion}, {"qp", qp_to_json(qa->local_addr())},
                {"staging", staging}});
    auto hr = sock->recv(std::chrono::seconds(60), err);
    if (!hr) return fail(cause::kNetwork, "no answer from the server: " + err);
    ServerHello sh;
    if (!parse_hello_reply(*hr, sh, err))
      return fail(cause::kUnknown, err);
    if (auto e = qa->connect(sh.qp); !e.empty()) return fail(cause::kUnknown, e);
    rpeer = std::make_unique<RemotePeer>(*sock, sh.staging_addr, sh.staging_rkey, sh.staging_size,
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
      broken = cfg.two_host || !connect_qp_pair(*dev, qpp, lb.qa, lb.qb).empty();
    }
  }
  if (sock) {
    sock->send({{"op", "bye"}});
    std::string e;
    sock->recv(std::chrono::seconds(5), e);
  }
  int rc = finalize(rep);
  return reported(rc, to_json(rep), to_table(rep, o.report_gbits));
}

}  // namespace rxv
