// `rxe-verify doctor`: is this host ready? Module, devices, memlock, memory,
// fragmentation and firewall; problems make it not ready (exit 3), warnings do not.
#include <sstream>

#include "app/common.hpp"
#include "engine.hpp"
#include "plan.hpp"
#include "procfs.hpp"
#include "size.hpp"

namespace rxv {
using nlohmann::json;

Outcome doctor_command(const DoctorCommandConfig& o, HostEnv& host) {
  std::uint64_t want = need_size("--size", o.size, false);
  json j = json_envelope("doctor");
  j["kernel"] = host.kernel();
  HostSnapshot h = snapshot(host);
  j["module"] = to_json(h.module);
  std::vector<std::string> problems, warnings;
  // what the rxe-kvfix DKMS build recorded for this kernel, if it ran here
  const std::string kvfix_file = kKvfixStatusDir + j["kernel"].get<std::string>();
  std::optional<KvfixBuildStatus> kvfix;
  if (auto text = host.read(kvfix_file)) kvfix = parse_kvfix_status(*text);
  j["rxe_kvfix_build"] = kvfix ? json{{"state", kvfix->state},
                                      {"time", kvfix->time},
                                      {"version", kvfix->version},
                                      {"message", kvfix->message},
                                      {"file", kvfix_file}}
                               : json(nullptr);
  // not built: failed, or deferred (its source comes once the package transaction ends)
  const bool kvfix_deferred = kvfix && kvfix->state == "deferred";
  const bool kvfix_failed = kvfix && (kvfix->state == "failed" || kvfix_deferred);
  const bool kvfix_not_needed = kvfix && kvfix->state == "not-needed";
  if (h.module.flavor == ModuleFlavor::Absent)
    problems.push_back("rdma_rxe is not loaded (`modprobe rdma_rxe`)");
  if (h.module.flavor == ModuleFlavor::Stock && kvfix_failed)
    warnings.push_back(std::string("the loaded rdma_rxe is stock because rxe-kvfix ") +
                       (kvfix_deferred ? "is not built yet" : "could not be built") + " for this kernel (" +
                       kvfix->time + "): " + kvfix->message + " [" + kvfix_file + "]");
  else if (h.module.flavor == ModuleFlavor::Stock && !kvfix_not_needed)
    warnings.push_back(
        "the loaded rdma_rxe is stock: MRs above 1 GiB never register, and "
        "512 MiB-1 GiB depend on fragmentation");
  if (h.module.flavor == ModuleFlavor::RxeKvfixUnpatched)
    warnings.push_back(
        "the loaded rdma_rxe is an rxe-kvfix test build WITHOUT the fix "
        "(RXE_KVFIX_UNPATCHED): it behaves like stock; reinstall rxe-kvfix");
  if (h.module.flavor == ModuleFlavor::Stock && !h.module.installed.empty())
    warnings.push_back("an rxe-kvfix rdma_rxe is installed (" + h.module.installed +
                       ") but the loaded module is stock: reload it (remove rxe links, "
                       "`modprobe -r rdma_rxe && modprobe rdma_rxe`)");
  auto devs = host.ib_devices();
  json jd = json::array();
  bool any_rxe = false, any_active = false;
  for (const auto& d : devs) {
    json g = json::array();
    for (const auto& e : d.gids)
      g.push_back({{"index", e.index},
                   {"gid", e.gid},
                   {"type", e.type},
                   {"ndev", e.ndev},
                   {"ipv4", e.ipv4().empty() ? json(nullptr) : json(e.ipv4())}});
    jd.push_back({{"name", d.name},
                  {"rxe", d.rxe},
                  {"netdev", d.netdev},
                  {"port_state", d.port_state},
                  {"port_active", d.port_active},
                  {"selected_gid_index", select_gid_index(d.gids)},
                  {"gids", g}});
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
  // what `rxe-verify run -s WANT` pins with its defaults (sampled mode's staging slots)
  std::uint64_t need = run_pinned_bytes(0, want, 1, staging_bytes_for(RunConfig{}));
  bool ml_ok = memlock_allows(h.limits, h.cap_eff, need);
  j["memlock"] = {{"soft", ml ? (ml->soft_unlimited ? json("unlimited") : json(ml->soft)) : json(nullptr)},
                  {"hard", ml ? (ml->hard_unlimited ? json("unlimited") : json(ml->hard)) : json(nullptr)},
                  {"cap_ipc_lock", cap},
                  {"needed_for", want},
                  {"sufficient", ml_ok}};
  std::vector<std::string> causes;  // a cause token per problem that has one
  if (!ml_ok) {
    problems.push_back(
        "RLIMIT_MEMLOCK is " + (ml ? std::to_string(ml->soft / 1024) + " KiB" : std::string("?")) +
        ", below the " + std::to_string((need + 1023) / 1024) + " KiB a " + format_size(want) +
        " run pins (the region and its staging buffer) without CAP_IPC_LOCK: " + memlock_remedy(need));
    causes.push_back(cause::kMemlock);
  }
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
  auto fw = host.firewall();
  auto fwj = [](const std::optional<FwResult>& r) -> json {
    if (!r) return nullptr;
    return {{"verdict", to_string(r->verdict)}, {"detail", r->detail}};
  };
  j["firewall"] = {{"roce_v2_input", to_string(fw.combined.verdict)},
                   {"detail", fw.combined.detail},
                   {"nftables", fwj(fw.nft)},
                   {"iptables", fwj(fw.iptables)},
                   {"note", fw.note}};
  if (fw.combined.verdict == FwVerdict::Drop)
    warnings.push_back("incoming RoCEv2 (UDP 4791) is dropped by " + fw.combined.source + " (" +
                       fw.combined.detail +
                       "): two-host runs will time out; allow it, e.g. "
                       "`nft insert rule inet filter input udp dport 4791 accept`");
  else if (fw.combined.verdict == FwVerdict::Unknown)
    warnings.push_back("cannot tell whether the firewall accepts RoCEv2 (UDP 4791): " + fw.combined.detail);
  bool ready = problems.empty();
  j["problems"] = problems;
  j["causes"] = causes;
  j["warnings"] = warnings;
  j["ready"] = ready;
  const Verdict verdict = ready ? Verdict::Ready : Verdict::NotReady;
  j["verdict"] = verdict;
  std::ostringstream txt;
  {
    txt << "kernel      " << j["kernel"].get<std::string>() << "\n";
    txt << "rdma_rxe    " << to_string(h.module.flavor);
    if (!h.module.version.empty()) txt << " (version " << h.module.version << ")";
    if (!h.module.installed.empty()) txt << "; modinfo rxe_kvfix=" << h.module.installed;
    txt << "\n";
    if (kvfix)
      txt << "rxe-kvfix   " << kvfix->state << " for this kernel (" << kvfix->time << "): " << kvfix->message
          << "\n";
    if (devs.empty()) txt << "devices     none\n";
    for (const auto& d : devs) {
      txt << "device      " << d.name << (d.rxe ? " (rxe)" : "") << "  netdev "
          << (d.netdev.empty() ? "?" : d.netdev) << "  port " << d.port_state << "\n";
      int sel = select_gid_index(d.gids);
      for (const auto& e : d.gids)
        txt << "  gid " << e.index << (e.index == sel ? "*" : " ") << " " << e.gid << "  " << e.type
            << (e.ipv4().empty() ? "" : "  " + e.ipv4()) << "\n";
    }
    txt << "memlock     soft " << (ml ? (ml->soft_unlimited ? "unlimited" : format_size(ml->soft)) : "?")
        << ", hard " << (ml ? (ml->hard_unlimited ? "unlimited" : format_size(ml->hard)) : "?")
        << (cap ? ", CAP_IPC_LOCK" : "") << (ml_ok ? "  ok for " : "  TOO SMALL for ") << format_size(want)
        << "\n";
    if (mi)
      txt << "memory      total " << format_size(mi->total) << ", available " << format_size(mi->available)
          << "\n";
    if (lo >= 0)
      txt << "buddyinfo   largest free block order " << lo << " (" << format_size(kPageSize << lo)
          << "): a stock rxe could register at most " << format_size(stock_now) << " per MR now\n";
    txt << "firewall    incoming RoCEv2 (UDP 4791): " << to_string(fw.combined.verdict);
    if (!fw.combined.detail.empty()) txt << " - " << fw.combined.detail;
    txt << "\n";
    for (const auto& p : problems) txt << "PROBLEM     " << p << "\n";
    for (const auto& w : warnings) txt << "warning     " << w << "\n";
    txt << "verdict     " << (ready ? "ready" : "NOT READY") << "\n";
  }
  return reported(exit_code(verdict), std::move(j), txt.str());
}

}  // namespace rxv
