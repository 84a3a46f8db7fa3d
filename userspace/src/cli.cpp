#include "cli.hpp"

#include <CLI/CLI.hpp>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cctype>
#include <iostream>
#include <nlohmann/json.hpp>

#include "churn.hpp"
#include "diagnosis.hpp"
#include "engine.hpp"
#include "memfit.hpp"
#include "oob.hpp"
#include "plan.hpp"
#include "progress.hpp"
#include "report.hpp"
#include "size.hpp"

namespace rxv {
using nlohmann::json;

namespace {

struct UsageError {
  std::string msg;
};

[[noreturn]] void usage(const std::string& m) { throw UsageError{m}; }

// The environment cannot run the request (exit 3), found before anything was pinned.
struct NotReadyError {
  std::string msg;
};

// A size parse error, with what a size looks like unless the parser already said it.
[[noreturn]] void size_usage(const std::string& what, const std::string& err) {
  usage(what + ": " + err +
        (err.find("(use") == std::string::npos ? "; write sizes like 16, 512M, 1G or 1G+16" : ""));
}

std::uint64_t need_size(const std::string& what, const std::string& text, bool allow_zero) {
  auto p = parse_size(text);
  if (!p.value) size_usage(what, p.error);
  if (!allow_zero && *p.value == 0) usage(what + ": size must be greater than 0");
  return *p.value;
}

std::uint64_t mem_total() {
  auto mi = parse_meminfo(read_file("/proc/meminfo").value_or(""));
  return mi ? mi->total : 0;
}

// --offset places the region inside its first page: 0 .. page size - 1.
std::uint64_t need_offset(const std::string& text) {
  std::uint64_t off = need_size("--offset", text, true);
  if (off >= kPageSize)
    usage("--offset: " + std::to_string(off) + " is not inside a page; use 0-" +
          std::to_string(kPageSize - 1) + " (bytes into the first page, e.g. 16)");
  return off;
}

// -g/--gid-index given on the command line must be an index, not the "default" sentinel.
void check_gid_option(bool given, int gid_index) {
  if (given && gid_index < 0)
    usage("--gid-index: " + std::to_string(gid_index) +
          " is negative; use an index listed by `rxe-verify doctor` (or leave it out)");
}

// Beyond MemTotal: usage error (2); beyond MemAvailable: not ready (3). Both unless --force.
void check_ram(const std::string& what, std::uint64_t requested, std::uint64_t bytes, bool force) {
  MemFit f = check_memory_fit(what, requested, bytes,
                              parse_meminfo(read_file("/proc/meminfo").value_or("")), force);
  if (f.code == kExitUsage) usage(f.error);
  if (f.code) throw NotReadyError{f.error};
}

json module_json(const ModuleIdentity& m) {
  return {{"name", "rdma_rxe"},
          {"flavor", m.flavor},
          {"version", m.version.empty() ? json(nullptr) : json(m.version)},
          {"installed_rxe_kvfix", m.installed.empty() ? json(nullptr) : json(m.installed)}};
}

// ---- shared device setup -----------------------------------------------------------
struct DeviceChoice {
  std::string name;
  int gid_index = -1;
  IbDevice info;
};

DeviceChoice resolve_device(Provider& prov, const std::string& wanted, int gid_opt,
                            std::string& err, int& code) {
  DeviceChoice c;
  // RXE_VERIFY_SYSFS: another sysfs root for the device and GID tables (tests: a fake
  // rxe0 makes --device/--gid-index checks reachable on hosts without RDMA devices)
  const char* sysroot = std::getenv("RXE_VERIFY_SYSFS");
  auto sys = list_ib_devices(sysroot && *sysroot ? sysroot : "/sys");
  auto verbs = prov.list_devices();
  c.name = choose_device(sys, verbs, wanted, err, code);
  if (c.name.empty()) return c;
  for (const auto& d : sys)
    if (d.name == c.name) c.info = d;
  if (gid_opt >= 0) {
    c.gid_index = gid_opt;
    if (!check_gid_index(c.info, gid_opt, err)) {
      code = kExitUsage;
      c.name.clear();
    }
  } else {
    c.gid_index = select_gid_index(c.info.gids);
    if (c.gid_index < 0) {
      err = "device " + c.name +
            " has no RoCE v2 GID (is its netdev up with an IP address?); pick one with "
            "--gid-index";
      code = kExitNotReady;
      c.name.clear();
    }
  }
  return c;
}

DiagContext make_diag_context(std::optional<bool> port_active, bool two_host,
                              const ModuleIdentity& module) {
  return [=]() {
    HostSnapshot h;
    h.buddyinfo = read_file("/proc/buddyinfo").value_or("");
    h.limits = read_file("/proc/self/limits").value_or("");
    h.meminfo = read_file("/proc/meminfo").value_or("");
    h.status = read_file("/proc/self/status").value_or("");
    DiagInput in;
    in.buddyinfo = h.buddyinfo;
    in.limits = h.limits;
    in.meminfo = h.meminfo;
    in.cap_eff = parse_cap_eff(h.status);
    in.module = module;
    in.port_active = port_active;
    in.two_host = two_host;
    if (two_host) in.firewall = probe_firewall().combined;
    return in;
  };
}

void print_error(const std::string& cmd, const std::string& msg) {
  std::fprintf(stderr, "rxe-verify %s: error: %s\n", cmd.c_str(), msg.c_str());
}

// ---- run ---------------------------------------------------------------------------
struct RunOpts {
  std::vector<std::string> sizes;
  std::string offset = "0", mode = "sampled", msg_size = "64M", connect, device;
  int gid_index = -1;
  bool gid_given = false;
  unsigned passes = 0, split = 1;
  std::uint64_t seed = 0;
  double timeout = 0;
  bool json = false, no_progress = false, force = false;
};

int cmd_run(const RunOpts& o) {
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
  cfg.seed = o.seed ? o.seed
                    : static_cast<std::uint64_t>(
                          std::chrono::steady_clock::now().time_since_epoch().count()) | 1;
  cfg.split = o.split;
  cfg.op_timeout = o.timeout;
  if (o.timeout < 0) usage("--timeout: must not be negative");
  cfg.two_host = !o.connect.empty();
  cfg.progress = !o.no_progress && !o.json && stderr_is_tty();
  for (auto s : sizes) check_ram("--size", s, s + cfg.offset + staging_bytes_for(cfg), o.force);
  std::string host;
  std::uint16_t port = kDefaultPort;
  if (cfg.two_host) {
    std::string e;
    if (!parse_host_port(o.connect, host, port, e) || !check_peer_host(host, e)) usage("--connect: " + e);
  }

  RunReport rep;
  rep.kernel = kernel_release();
  rep.module = probe_module();
  rep.seed = cfg.seed;
  rep.transport = cfg.two_host ? "tcp " + host + ":" + std::to_string(port) : "loopback";
  auto finish = [&](int) {
    int code = finalize(rep);
    if (o.json) std::cout << to_json(rep).dump(2) << "\n";
    else std::cout << to_table(rep);
    return code;
  };
  auto env_fail = [&](const std::string& cause, const std::string& summary,
                      const std::string& remedy, int code) {
    print_error("run", summary + (remedy.empty() ? "" : "; " + remedy));
    rep.error = Diagnosis{cause, summary, remedy};
    if (o.json) {
      finalize(rep);
      std::cout << to_json(rep).dump(2) << "\n";
    }
    return code;
  };

  auto prov = make_ibv_provider();
  std::string err;
  int code = 0;
  DeviceChoice dc = resolve_device(*prov, o.device, o.gid_index, err, code);
  if (dc.name.empty()) {
    if (code == kExitUsage) usage(err);
    return env_fail(cause::kNoDevice, err, "", kExitNotReady);
  }
  rep.device = dc.name;
  rep.gid_index = dc.gid_index;
  auto dev = prov->open(dc.name, err);
  if (!dev)
    return env_fail(cause::kNoDevice, err,
                    "load ib_uverbs and rdma_rxe and check that `rdma link show` lists " + dc.name,
                    kExitNotReady);
  PortInfo pi = dev->port();
  if (!pi.active)
    return env_fail(cause::kDeviceDown,
                    "port 1 of " + dc.name + " is " + (pi.state_str.empty() ? "down" : pi.state_str),
                    "bring its netdev up: `ip link set " +
                        (dc.info.netdev.empty() ? std::string("<netdev>") : dc.info.netdev) + " up`",
                    kExitNotReady);
  if (pi.max_msg_sz && cfg.msg_size > pi.max_msg_sz) cfg.msg_size = pi.max_msg_sz;

  QpParams qpp;
  qpp.gid_index = dc.gid_index;
  std::unique_ptr<QueuePair> qa = dev->create_qp(qpp, err);
  if (!qa) return env_fail(cause::kUnknown, err, "", kExitNotReady);

  DiagContext dctx = make_diag_context(pi.active, cfg.two_host, rep.module);
  std::unique_ptr<QueuePair> qb;
  std::unique_ptr<LocalPeer> lpeer;
  std::optional<LineSocket> sock;
  std::unique_ptr<RemotePeer> rpeer;
  Peer* peer = nullptr;
  const std::uint64_t staging = staging_bytes_for(cfg);
  if (!cfg.two_host) {
    qb = dev->create_qp(qpp, err);
    if (!qb) return env_fail(cause::kUnknown, err, "", kExitNotReady);
    lpeer = std::make_unique<LocalPeer>(*dev, staging);
    if (!lpeer->ok()) {
      DiagInput in = dctx();
      in.stage = Stage::Register;
      in.err = lpeer->reg_errno();
      in.size = staging;
      auto d = diagnose(in);
      return env_fail(d.cause, "cannot register the " + format_size(staging) + " staging buffer: " + d.summary,
                      d.remedy, d.cause == cause::kMemlock ? kExitNotReady : kExitFail);
    }
    if (auto e = qa->connect(qb->local_addr()); !e.empty()) return env_fail(cause::kUnknown, e, "", kExitNotReady);
    if (auto e = qb->connect(qa->local_addr()); !e.empty()) return env_fail(cause::kUnknown, e, "", kExitNotReady);
    peer = lpeer.get();
  } else {
    sock = tcp_connect(host, port, std::chrono::seconds(15), err);
    if (!sock)
      return env_fail(cause::kNetwork, err,
                      "start `rxe-verify serve` on " + host + " and check that TCP port " +
                          std::to_string(port) + " is reachable",
                      kExitNotReady);
    sock->send({{"op", "hello"}, {"version", kProtocolVersion}, {"qp", qp_to_json(qa->local_addr())},
                {"staging", staging}});
    auto rto = std::chrono::seconds(60);
    auto hr = sock->recv(rto, err);
    if (!hr) return env_fail(cause::kNetwork, "no answer from the server: " + err, "", kExitNotReady);
    if (!hr->value("ok", false))
      return env_fail(cause::kUnknown, "server refused: " + hr->value("error", std::string("?")), "",
                      kExitNotReady);
    auto rq = qp_from_json(hr->value("qp", json()));
    const json st = hr->value("staging", json());
    if (!rq || !st.is_object())
      return env_fail(cause::kUnknown, "malformed server answer", "", kExitNotReady);
    if (auto e = qa->connect(*rq); !e.empty()) return env_fail(cause::kUnknown, e, "", kExitNotReady);
    rpeer = std::make_unique<RemotePeer>(*sock, st.value("addr", std::uint64_t{0}),
                                         st.value("rkey", 0u), st.value("size", std::uint64_t{0}),
                                         std::chrono::seconds(120));
    peer = rpeer.get();
  }

  bool broken = false;
  for (auto sz : sizes) {
    if (broken) {
      SizeResult s = planned_result(sz, cfg);
      s.result = "skip";
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
      if (cfg.two_host) {
        broken = true;
      } else {
        // Loopback: rebuild the QP pair for the next size.
        qa = dev->create_qp(qpp, err);
        qb = qa ? dev->create_qp(qpp, err) : nullptr;
        if (!qa || !qb || !qa->connect(qb->local_addr()).empty() ||
            !qb->connect(qa->local_addr()).empty())
          broken = true;
      }
    }
  }
  if (sock) {
    sock->send({{"op", "bye"}});
    std::string e;
    sock->recv(std::chrono::seconds(5), e);
  }
  return finish(0);
}

// ---- serve -------------------------------------------------------------------------
struct ServeOpts {
  std::string device, bind;
  int gid_index = -1;
  bool gid_given = false;
  unsigned port = kDefaultPort;
  double timeout = 300;
  bool forever = false;
};

int cmd_serve(const ServeOpts& o) {
  if (o.port == 0 || o.port > 65535) usage("--port: must be 1-65535");
  if (o.timeout < 0) usage("--timeout: must not be negative");
  check_gid_option(o.gid_given, o.gid_index);
  auto prov = make_ibv_provider();
  std::string err;
  int code = 0;
  DeviceChoice dc = resolve_device(*prov, o.device, o.gid_index, err, code);
  if (dc.name.empty()) {
    if (code == kExitUsage) usage(err);
    print_error("serve", err);
    return code;
  }
  ServeOptions so;
  so.device = dc.name;
  so.gid_index = dc.gid_index;
  so.bind = o.bind;
  so.port = static_cast<std::uint16_t>(o.port);
  so.timeout = o.timeout;
  so.forever = o.forever;
  so.module_flavor = probe_module().flavor;
  auto fw = probe_firewall();
  if (fw.combined.verdict == FwVerdict::Drop)
    std::fprintf(stderr,
                 "rxe-verify serve: warning: this host's %s input rules drop RoCEv2 (UDP 4791): "
                 "%s; transfers from the client will time out\n",
                 fw.combined.source.c_str(), fw.combined.detail.c_str());
  return run_server(*prov, so);
}

// ---- doctor ------------------------------------------------------------------------
int cmd_doctor(bool as_json, const std::string& size_text) {
  std::uint64_t want = need_size("--size", size_text, false);
  json j;
  j["schema_version"] = kSchemaVersion;
  j["tool"] = {{"name", "rxe-verify"}, {"version", kToolVersion}};
  j["command"] = "doctor";
  j["kernel"] = kernel_release();
  HostSnapshot h = snapshot_host();
  j["module"] = module_json(h.module);
  std::vector<std::string> problems, warnings;
  if (h.module.flavor == "absent") problems.push_back("rdma_rxe is not loaded (`modprobe rdma_rxe`)");
  if (h.module.flavor == "stock")
    warnings.push_back("the loaded rdma_rxe is stock: MRs above 1 GiB never register, and "
                       "512 MiB-1 GiB depend on fragmentation");
  if (h.module.flavor == "rxe-kvfix-unpatched")
    warnings.push_back("the loaded rdma_rxe is an rxe-kvfix test build WITHOUT the fix "
                       "(RXE_KVFIX_UNPATCHED): it behaves like stock; reinstall rxe-kvfix");
  if (h.module.flavor == "stock" && !h.module.installed.empty())
    warnings.push_back("an rxe-kvfix rdma_rxe is installed (" + h.module.installed +
                       ") but the loaded module is stock: reload it (remove rxe links, "
                       "`modprobe -r rdma_rxe && modprobe rdma_rxe`)");
  auto devs = list_ib_devices();
  json jd = json::array();
  bool any_rxe = false, any_active = false;
  for (const auto& d : devs) {
    json g = json::array();
    for (const auto& e : d.gids)
      g.push_back({{"index", e.index}, {"gid", e.gid}, {"type", e.type}, {"ndev", e.ndev},
                   {"ipv4", e.ipv4().empty() ? json(nullptr) : json(e.ipv4())}});
    jd.push_back({{"name", d.name}, {"rxe", d.rxe}, {"netdev", d.netdev},
                  {"port_state", d.port_state}, {"port_active", d.port_active},
                  {"selected_gid_index", select_gid_index(d.gids)}, {"gids", g}});
    if (d.rxe) {
      any_rxe = true;
      if (d.port_active) any_active = true;
    }
  }
  j["devices"] = jd;
  if (!any_rxe) problems.push_back("no rxe device (`rdma link add rxe0 type rxe netdev <netdev>`)");
  else if (!any_active) problems.push_back("no rxe device has an ACTIVE port (bring its netdev up)");
  auto ml = parse_memlock(h.limits);
  bool cap = h.cap_eff && has_cap(*h.cap_eff, kCapIpcLock);
  std::uint64_t need = span_pages(0, want) * kPageSize + (2ull << 20);
  bool ml_ok = memlock_allows(h.limits, h.cap_eff, need);
  j["memlock"] = {{"soft", ml ? (ml->soft_unlimited ? json("unlimited") : json(ml->soft)) : json(nullptr)},
                  {"hard", ml ? (ml->hard_unlimited ? json("unlimited") : json(ml->hard)) : json(nullptr)},
                  {"cap_ipc_lock", cap}, {"needed_for", want}, {"sufficient", ml_ok}};
  if (!ml_ok) problems.push_back("RLIMIT_MEMLOCK is too small for " + format_size(want) + ": " + memlock_remedy(need));
  auto mi = parse_meminfo(h.meminfo);
  j["memory"] = {{"total", mi ? json(mi->total) : json(nullptr)},
                 {"available", mi ? json(mi->available) : json(nullptr)}};
  auto zones = parse_buddyinfo(h.buddyinfo);
  int lo = largest_free_order(zones);
  std::uint64_t stock_now = lo >= 0 ? stock_mr_limit_for_order(lo) : 0;
  j["buddyinfo"] = {{"largest_free_order", lo},
                    {"largest_free_block", lo >= 0 ? json(kPageSize << lo) : json(nullptr)},
                    {"stock_rxe_max_mr_now", lo >= 0 ? json(stock_now) : json(nullptr)},
                    {"free_order9_plus", free_blocks_at_least(zones, 9)},
                    {"free_order10_plus", free_blocks_at_least(zones, 10)}};
  auto fw = probe_firewall();
  auto fwj = [](const std::optional<FwResult>& r) -> json {
    if (!r) return nullptr;
    return {{"verdict", to_string(r->verdict)}, {"detail", r->detail}};
  };
  j["firewall"] = {{"roce_v2_input", to_string(fw.combined.verdict)},
                   {"detail", fw.combined.detail}, {"nftables", fwj(fw.nft)},
                   {"iptables", fwj(fw.iptables)}, {"note", fw.note}};
  if (fw.combined.verdict == FwVerdict::Drop)
    warnings.push_back("incoming RoCEv2 (UDP 4791) is dropped by " + fw.combined.source + " (" +
                       fw.combined.detail + "): two-host runs will time out; allow it, e.g. "
                       "`nft insert rule inet filter input udp dport 4791 accept`");
  else if (fw.combined.verdict == FwVerdict::Unknown)
    warnings.push_back("cannot tell whether the firewall accepts RoCEv2 (UDP 4791): " + fw.combined.detail);
  bool ready = problems.empty();
  j["problems"] = problems;
  j["warnings"] = warnings;
  j["ready"] = ready;
  j["verdict"] = ready ? "ready" : "not_ready";
  if (as_json) {
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "kernel      " << j["kernel"].get<std::string>() << "\n";
    std::cout << "rdma_rxe    " << h.module.flavor;
    if (!h.module.version.empty()) std::cout << " (version " << h.module.version << ")";
    if (!h.module.installed.empty()) std::cout << "; modinfo rxe_kvfix=" << h.module.installed;
    std::cout << "\n";
    if (devs.empty()) std::cout << "devices     none\n";
    for (const auto& d : devs) {
      std::cout << "device      " << d.name << (d.rxe ? " (rxe)" : "") << "  netdev "
                << (d.netdev.empty() ? "?" : d.netdev) << "  port " << d.port_state << "\n";
      int sel = select_gid_index(d.gids);
      for (const auto& e : d.gids)
        std::cout << "  gid " << e.index << (e.index == sel ? "*" : " ") << " " << e.gid << "  "
                  << e.type << (e.ipv4().empty() ? "" : "  " + e.ipv4()) << "\n";
    }
    std::cout << "memlock     soft "
              << (ml ? (ml->soft_unlimited ? "unlimited" : format_size(ml->soft)) : "?") << ", hard "
              << (ml ? (ml->hard_unlimited ? "unlimited" : format_size(ml->hard)) : "?")
              << (cap ? ", CAP_IPC_LOCK" : "") << (ml_ok ? "  ok for " : "  TOO SMALL for ")
              << format_size(want) << "\n";
    if (mi)
      std::cout << "memory      total " << format_size(mi->total) << ", available "
                << format_size(mi->available) << "\n";
    if (lo >= 0)
      std::cout << "buddyinfo   largest free block order " << lo << " (" << format_size(kPageSize << lo)
                << "): a stock rxe could register at most " << format_size(stock_now)
                << " per MR now\n";
    std::cout << "firewall    incoming RoCEv2 (UDP 4791): " << to_string(fw.combined.verdict);
    if (!fw.combined.detail.empty()) std::cout << " - " << fw.combined.detail;
    std::cout << "\n";
    for (const auto& p : problems) std::cout << "PROBLEM     " << p << "\n";
    for (const auto& w : warnings) std::cout << "warning     " << w << "\n";
    std::cout << "verdict     " << (ready ? "ready" : "NOT READY") << "\n";
  }
  return ready ? kExitPass : kExitNotReady;
}

// ---- probe -------------------------------------------------------------------------
struct ProbeOpts {
  std::string max, granularity = "64M", min, offset = "0", device;
  double budget = 60;
  bool json = false, force = false;
};

int cmd_probe(const ProbeOpts& o) {
  std::uint64_t gran = need_size("--granularity", o.granularity, false);
  std::uint64_t total = mem_total();
  std::uint64_t max = o.max.empty() ? std::min<std::uint64_t>(4ull << 30, total / 2 / gran * gran)
                                    : need_size("--max", o.max, false);
  std::uint64_t min = o.min.empty() ? gran : need_size("--min", o.min, false);
  std::uint64_t offset = need_offset(o.offset);
  if (o.budget <= 0) usage("--budget: must be greater than 0 seconds");
  if (min > max)
    usage("--min " + format_size(min) + " is larger than --max " + format_size(max) +
          "; pass a --min no larger than --max");
  check_ram("--max", max, max + offset, o.force);

  json j;
  j["schema_version"] = kSchemaVersion;
  j["tool"] = {{"name", "rxe-verify"}, {"version", kToolVersion}};
  j["command"] = "probe";
  j["kernel"] = kernel_release();
  ModuleIdentity mod = probe_module();
  j["module"] = module_json(mod);
  auto prov = make_ibv_provider();
  std::string err;
  int code = 0;
  DeviceChoice dc = resolve_device(*prov, o.device, 0, err, code);
  if (dc.name.empty()) {
    if (code == kExitUsage) usage(err);
    print_error("probe", err);
    return code;
  }
  j["device"] = dc.name;
  auto dev = prov->open(dc.name, err);
  if (!dev) {
    print_error("probe", err + "; load ib_uverbs and rdma_rxe and check that `rdma link show` lists " +
                             dc.name);
    return kExitNotReady;
  }
  MappedBuffer buf(static_cast<std::size_t>(max + offset));
  if (!buf) {
    print_error("probe", "cannot allocate " + format_size(max + offset) + ": " + std::strerror(buf.error()));
    return kExitNotReady;
  }
  buf.populate();
  unsigned char* base = buf.data() + offset;
  DiagContext dctx = make_diag_context(dev->port().active, false, mod);
  auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  json attempts = json::array();
  std::optional<Diagnosis> fail_diag;
  bool env_stop = false;
  auto attempt = [&](std::uint64_t sz) {
    auto md = rxe_metadata(offset, sz);
    auto a0 = std::chrono::steady_clock::now();
    auto r = dev->reg_mr(base, sz);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - a0).count();
    bool ok = r.mr != nullptr;
    r.mr.reset();
    attempts.push_back({{"size", sz}, {"pages", md.pages}, {"metadata_bytes", md.bytes},
                        {"metadata_order", md.order}, {"registered", ok}, {"reg_errno", r.err},
                        {"reg_seconds", s}});
    if (!o.json)
      std::fprintf(stderr, "  %-12s pages %-8llu metadata %-10s order %-2d  %s\n",
                   format_size(sz).c_str(), static_cast<unsigned long long>(md.pages),
                   format_size(md.bytes).c_str(), md.order,
                   ok ? ("ok " + format_seconds(s)).c_str() : ("FAILED errno " + std::to_string(r.err)).c_str());
    if (!ok) {
      DiagInput in = dctx();
      in.stage = Stage::Register;
      in.err = r.err;
      in.size = sz;
      in.offset = offset;
      auto d = diagnose(in);
      if (d.cause == cause::kMemlock || d.cause == cause::kDeviceDown) env_stop = true;
      fail_diag = d;
    }
    return ok;
  };
  std::optional<std::uint64_t> lo_ok, hi_fail;
  bool complete = false;
  if (attempt(max)) {
    lo_ok = max;
    complete = true;
  } else if (!env_stop) {
    hi_fail = max;
    std::optional<Diagnosis> max_diag = fail_diag;
    if (attempt(min)) {
      lo_ok = min;
      complete = true;
      while (*hi_fail - *lo_ok > gran) {
        if (elapsed() > o.budget) {
          complete = false;
          break;
        }
        std::uint64_t mid = (*lo_ok + (*hi_fail - *lo_ok) / 2) / gran * gran;
        if (mid <= *lo_ok) mid = *lo_ok + gran;
        if (mid >= *hi_fail) break;
        if (attempt(mid)) lo_ok = mid;
        else if (env_stop) break;
        else hi_fail = mid;
      }
    } else {
      hi_fail = min;
      complete = true;
    }
  }
  json pj = {{"max", max}, {"min", min}, {"granularity", gran}, {"offset", offset},
             {"budget_seconds", o.budget}, {"elapsed_seconds", elapsed()},
             {"attempts", attempts}, {"complete", complete && !env_stop}};
  auto md_json = [&](std::optional<std::uint64_t> v) -> json {
    if (!v) return nullptr;
    auto md = rxe_metadata(offset, *v);
    return {{"size", *v}, {"pages", md.pages}, {"metadata_bytes", md.bytes}, {"metadata_order", md.order}};
  };
  pj["largest_ok"] = md_json(lo_ok);
  pj["smallest_fail"] = md_json(hi_fail);
  pj["diagnosis"] = fail_diag && hi_fail ? to_json(*fail_diag) : json(nullptr);
  auto zones = parse_buddyinfo(read_file("/proc/buddyinfo").value_or(""));
  int lf = largest_free_order(zones);
  pj["stock_rxe_max_mr_now"] = lf >= 0 ? json(stock_mr_limit_for_order(lf)) : json(nullptr);
  j["probe"] = pj;
  std::string verdict = env_stop ? "not_ready" : (complete ? "complete" : "budget_exhausted");
  j["verdict"] = verdict;
  if (o.json) {
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "device " << dc.name << ", module rdma_rxe " << mod.flavor << "\n";
    if (lo_ok && !hi_fail) std::cout << "every size up to --max " << format_size(max) << " registered\n";
    if (lo_ok && hi_fail) {
      auto a = rxe_metadata(offset, *lo_ok), b = rxe_metadata(offset, *hi_fail);
      std::cout << "boundary: " << format_size(*lo_ok) << " registers (" << a.pages << " pages x 16 B = "
                << format_size(a.bytes) << ", order " << a.order << "), " << format_size(*hi_fail)
                << " fails (" << b.pages << " pages x 16 B = " << format_size(b.bytes) << ", order "
                << b.order << ")" << (complete ? "" : " [budget exhausted: not narrowed to the granularity]") << "\n";
    }
    if (!lo_ok && hi_fail) std::cout << "even --min " << format_size(*hi_fail) << " fails\n";
    if (fail_diag && hi_fail)
      std::cout << "diagnosis [" << fail_diag->cause << "]: " << fail_diag->summary << "\n  remedy: "
                << fail_diag->remedy << "\n";
    if (lf >= 0)
      std::cout << "largest free block now: order " << lf << " => a stock rxe could register at most "
                << format_size(stock_mr_limit_for_order(lf)) << " per MR\n";
    std::cout << "verdict: " << verdict << "\n";
  }
  if (env_stop) return kExitNotReady;
  return kExitPass;
}

// ---- churn -------------------------------------------------------------------------
struct ChurnOpts {
  std::string size, offset = "0", device;
  unsigned count = 0;
  int gid_index = -1;
  std::uint64_t seed = 0;
  bool traffic = false, json = false, force = false;
};

int cmd_churn(const ChurnOpts& o) {
  ChurnConfig cfg;
  cfg.size = need_size("--size", o.size, false);
  cfg.offset = need_offset(o.offset);
  if (o.count == 0) usage("--count: must be at least 1");
  cfg.count = o.count;
  cfg.traffic = o.traffic;
  cfg.run.mode = Mode::Sampled;
  cfg.run.passes = 1;
  cfg.read_buddyinfo = [] { return read_file("/proc/buddyinfo"); };
  cfg.run.seed = o.seed ? o.seed
                        : static_cast<std::uint64_t>(
                              std::chrono::steady_clock::now().time_since_epoch().count()) | 1;
  const std::uint64_t staging = cfg.traffic ? staging_bytes_for(cfg.run) : 0;
  check_ram("--size", cfg.size, cfg.size + cfg.offset + staging, o.force);

  ChurnReport rep;
  rep.kernel = kernel_release();
  rep.module = probe_module();
  rep.size = cfg.size;
  rep.offset = cfg.offset;
  rep.count = cfg.count;
  rep.traffic = cfg.traffic;
  auto env_fail = [&](const std::string& cause, const std::string& summary,
                      const std::string& remedy, int code) {
    print_error("churn", summary + (remedy.empty() ? "" : "; " + remedy));
    rep.error = Diagnosis{cause, summary, remedy};
    finalize(rep);
    if (o.json) std::cout << to_json(rep).dump(2) << "\n";
    return code;
  };
  auto prov = make_ibv_provider();
  std::string err;
  int code = 0;
  DeviceChoice dc = resolve_device(*prov, o.device, o.gid_index, err, code);
  if (dc.name.empty()) {
    if (code == kExitUsage) usage(err);
    return env_fail(cause::kNoDevice, err, "", kExitNotReady);
  }
  rep.device = dc.name;
  auto dev = prov->open(dc.name, err);
  if (!dev) return env_fail(cause::kNoDevice, err, "", kExitNotReady);
  PortInfo pi = dev->port();
  DiagContext dctx = make_diag_context(pi.active, false, rep.module);
  std::unique_ptr<QueuePair> qa, qb;
  std::unique_ptr<LocalPeer> peer;
  if (cfg.traffic) {
    if (!pi.active)
      return env_fail(cause::kDeviceDown,
                      "port 1 of " + dc.name + " is " + (pi.state_str.empty() ? "down" : pi.state_str),
                      "bring its netdev up: `ip link set " +
                          (dc.info.netdev.empty() ? std::string("<netdev>") : dc.info.netdev) + " up`",
                      kExitNotReady);
    QpParams qpp;
    qpp.gid_index = dc.gid_index;
    qa = dev->create_qp(qpp, err);
    if (qa) qb = dev->create_qp(qpp, err);
    if (!qa || !qb) return env_fail(cause::kUnknown, err, "", kExitNotReady);
    peer = std::make_unique<LocalPeer>(*dev, staging);
    if (!peer->ok()) {
      DiagInput in = dctx();
      in.stage = Stage::Register;
      in.err = peer->reg_errno();
      in.size = staging;
      auto d = diagnose(in);
      return env_fail(d.cause, "cannot register the " + format_size(staging) + " staging buffer: " + d.summary,
                      d.remedy, kExitNotReady);
    }
    if (auto e = qa->connect(qb->local_addr()); !e.empty()) return env_fail(cause::kUnknown, e, "", kExitNotReady);
    if (auto e = qb->connect(qa->local_addr()); !e.empty()) return env_fail(cause::kUnknown, e, "", kExitNotReady);
  }
  if (!o.json)
    std::fprintf(stderr, "rxe-verify: churn %s x %u%s ...\n", format_size(cfg.size).c_str(), cfg.count,
                 cfg.traffic ? " with traffic" : "");
  ChurnReport r = run_churn(*dev, qa.get(), peer.get(), cfg, dctx, read_kernel_memory);
  r.kernel = rep.kernel;
  r.module = rep.module;
  r.device = rep.device;
  int rc = finalize(r);
  if (r.failure)
    print_error("churn", (r.failed_iteration ? "iteration " + std::to_string(r.failed_iteration) + " of " +
                                                   std::to_string(r.count) + ": "
                                             : std::string()) +
                             r.failed_stage + " failed [" + r.failure->cause + "]: " + r.failure->summary);
  if (o.json) std::cout << to_json(r).dump(2) << "\n";
  else std::cout << to_text(r);
  return rc;
}

}  // namespace

bool check_gid_index(const IbDevice& dev, int index, std::string& err) {
  if (dev.gids.empty()) return true;  // GID table not readable: let the device decide
  std::string have;
  for (const auto& g : dev.gids) {
    if (g.index == index) return true;
    have += (have.empty() ? "" : ", ") + std::to_string(g.index);
  }
  err = "--gid-index " + std::to_string(index) + ": device " + dev.name + " has no GID " +
        std::to_string(index) + " (valid: " + have + "); pick one listed by `rxe-verify doctor`";
  return false;
}

bool check_peer_host(const std::string& host, std::string& err) {
  bool ok = !host.empty() && host.size() <= 253;
  for (char ch : host)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' || ch == '_' ||
          ch == ':' || ch == '%'))
      ok = false;
  // a ':' in the host part means an IPv6 address (written without brackets and port)
  if (ok && host.find(':') != std::string::npos) {
    in6_addr a6{};
    std::string addr = host.substr(0, host.find('%'));
    ok = inet_pton(AF_INET6, addr.c_str(), &a6) == 1;
  }
  if (!ok)
    err = "bad peer address '" + host +
          "': use a host name or IP address, with an optional :PORT (IPv6: [ADDR]:PORT)";
  return ok;
}

std::string choose_device(const std::vector<IbDevice>& sys, const std::vector<std::string>& verbs,
                          const std::string& wanted, std::string& err, int& code) {
  auto in_verbs = [&](const std::string& n) {
    return verbs.empty() || std::find(verbs.begin(), verbs.end(), n) != verbs.end();
  };
  if (!wanted.empty()) {
    bool known = std::find(verbs.begin(), verbs.end(), wanted) != verbs.end() ||
                 std::any_of(sys.begin(), sys.end(), [&](const IbDevice& d) { return d.name == wanted; });
    if (!known) {
      std::string avail;
      for (const auto& v : verbs) avail += (avail.empty() ? "" : ", ") + v;
      err = "unknown device '" + wanted + "' (available: " + (avail.empty() ? "none" : avail) +
            "); name one listed by `rxe-verify doctor`, or leave --device out";
      code = kExitUsage;
      return "";
    }
    return wanted;
  }
  for (const auto& d : sys)
    if (d.rxe && in_verbs(d.name)) return d.name;
  for (const auto& v : verbs)
    if (v.rfind("rxe", 0) == 0) return v;
  err = "no rxe device found (load rdma_rxe and run `rdma link add rxe0 type rxe netdev <netdev>`, or name one with --device)";
  code = kExitNotReady;
  return "";
}

int cli_main(int argc, char** argv) {
  CLI::App app{"rxe-verify: verify large memory registrations and RDMA data integrity on "
               "Soft-RoCE (rdma_rxe)",
               "rxe-verify"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("rxe-verify ") + kToolVersion);
  app.footer("Exit status: 0 pass/ready, 1 fail, 2 usage error, 3 environment not ready, 4 skipped.\n"
             "See rxe-verify(1).");

  RunOpts ro;
  auto* run = app.add_subcommand("run", "register regions and verify RDMA WRITE/READ data integrity");
  run->add_option("-s,--size", ro.sizes, "region size(s): 512M, 1G, 2G, 1G+16; repeatable or comma list (default 1G)");
  run->add_option("--offset", ro.offset, "start the region this many bytes into a page (e.g. 16)");
  run->add_option("-m,--mode", ro.mode, "sampled (default: first/last pages, page straddles, spread and random offsets) or full (whole region both ways)");
  run->add_option("--msg-size", ro.msg_size, "full mode message/staging size (default 64M, at most 2G)");
  run->add_option("--passes", ro.passes, "passes per size (default 2 sampled, 1 full)");
  run->add_option("--seed", ro.seed, "pattern seed (default: random)");
  run->add_option("--split", ro.split, "register the region as N MRs (application-level workaround)");
  run->add_option("-d,--device", ro.device, "RDMA device (default: first rxe device)");
  run->add_option("-g,--gid-index", ro.gid_index, "GID index (default: RoCE v2, IPv4-mapped preferred)");
  run->add_option("-c,--connect", ro.connect, "HOST[:PORT] of `rxe-verify serve` (two-host run; default port 47910)");
  run->add_option("--timeout", ro.timeout, "deadline per RDMA operation in seconds (default 30 s + 1 s per 4 MiB)");
  run->add_flag("--json", ro.json, "print the report as JSON");
  run->add_flag("--no-progress", ro.no_progress, "no progress bar");
  run->add_flag("--force", ro.force, "allow sizes beyond available memory");

  ServeOpts so;
  auto* serve = app.add_subcommand("serve", "serve one two-host run (staging buffer + responder QP)");
  serve->add_option("-d,--device", so.device, "RDMA device (default: first rxe device)");
  serve->add_option("-g,--gid-index", so.gid_index, "GID index (default: RoCE v2, IPv4-mapped preferred)");
  serve->add_option("-p,--port", so.port, "TCP port (default 47910)");
  serve->add_option("--bind", so.bind, "address to listen on (default: any)");
  serve->add_option("--timeout", so.timeout, "seconds to wait for a client and between messages; 0 = forever (default 300)");
  serve->add_flag("--forever", so.forever, "keep serving clients instead of exiting after one");

  bool dj = false;
  std::string dsize = "1G";
  auto* doctor = app.add_subcommand("doctor", "check this host: module, devices, memlock, fragmentation, firewall");
  doctor->add_flag("--json", dj, "print JSON");
  doctor->add_option("-s,--size", dsize, "region size the memlock check must allow (default 1G)");

  ProbeOpts po;
  auto* probe = app.add_subcommand("probe", "find the largest MR that registers (bisection)");
  probe->add_option("--max", po.max, "largest size to try (default min(4G, RAM/2))");
  probe->add_option("--min", po.min, "smallest size to try (default: the granularity)");
  probe->add_option("--granularity", po.granularity, "bisection step (default 64M)");
  probe->add_option("--budget", po.budget, "time budget in seconds (default 60)");
  probe->add_option("--offset", po.offset, "start the region this many bytes into a page");
  probe->add_option("-d,--device", po.device, "RDMA device (default: first rxe device)");
  probe->add_flag("--json", po.json, "print JSON");
  probe->add_flag("--force", po.force, "allow --max beyond available memory");

  ChurnOpts co;
  auto* churn = app.add_subcommand("churn", "register and deregister one region many times; time it and watch kernel memory");
  churn->add_option("-s,--size", co.size, "region size: 1G, 2G, 1G+16")->required();
  churn->add_option("--offset", co.offset, "start the region this many bytes into a page");
  churn->add_option("--count", co.count, "registrations (at least 1)")->required();
  churn->add_flag("--traffic", co.traffic, "a short verified sampled WRITE/READ loop while each registration is live");
  churn->add_option("--seed", co.seed, "pattern seed for --traffic (default: random)");
  churn->add_option("-d,--device", co.device, "RDMA device (default: first rxe device)");
  churn->add_option("-g,--gid-index", co.gid_index, "GID index for --traffic (default: RoCE v2, IPv4-mapped preferred)");
  churn->add_flag("--json", co.json, "print JSON (every iteration)");
  churn->add_flag("--force", co.force, "allow sizes beyond available memory");

  std::string which = "";
  try {
    app.parse(argc, argv);
    ro.gid_given = run->count("--gid-index") > 0;
    so.gid_given = serve->count("--gid-index") > 0;
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    std::cout << app.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::CallForVersion&) {
    std::cout << "rxe-verify " << kToolVersion << "\n";
    return 0;
  } catch (const CLI::ParseError& e) {
    // Which subcommand was being parsed (for the message and a help hint)?
    std::string sub;
    for (auto* s : {run, serve, doctor, probe, churn})
      if (s->parsed()) sub = s->get_name();
    if (e.get_name() == "CallForHelp") {
      std::cout << (sub.empty() ? app.help() : app.get_subcommand(sub)->help());
      return 0;
    }
    std::string msg = e.what();
    std::replace(msg.begin(), msg.end(), '\n', ' ');
    if (sub.empty()) {
      // no subcommand recognised: say which word was wrong and what the commands are
      std::string first = argc > 1 ? argv[1] : "";
      msg = first.empty() || first[0] == '-'
                ? (first.empty() ? "a command is required" : msg) + "; use run, serve, doctor, probe or churn"
                : "unknown command '" + first + "'; use run, serve, doctor, probe or churn";
    }
    std::fprintf(stderr, "rxe-verify%s%s: error: %s (see 'rxe-verify %s--help')\n",
                 sub.empty() ? "" : " ", sub.c_str(), msg.c_str(),
                 sub.empty() ? "" : (sub + " ").c_str());
    return kExitUsage;
  }
  try {
    if (run->parsed()) {
      which = "run";
      return cmd_run(ro);
    }
    if (serve->parsed()) {
      which = "serve";
      return cmd_serve(so);
    }
    if (doctor->parsed()) {
      which = "doctor";
      return cmd_doctor(dj, dsize);
    }
    if (probe->parsed()) {
      which = "probe";
      return cmd_probe(po);
    }
    if (churn->parsed()) {
      which = "churn";
      return cmd_churn(co);
    }
  } catch (const UsageError& u) {
    std::fprintf(stderr, "rxe-verify %s: error: %s\n", which.c_str(), u.msg.c_str());
    return kExitUsage;
  } catch (const NotReadyError& n) {
    std::fprintf(stderr, "rxe-verify %s: error: %s\n", which.c_str(), n.msg.c_str());
    return kExitNotReady;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rxe-verify %s: error: %s\n", which.c_str(), e.what());
    return kExitFail;
  }
  return kExitUsage;
}

}  // namespace rxv
