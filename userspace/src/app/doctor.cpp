// `rxe-verify doctor`: is this host ready? Module, devices, memlock, memory,
// fragmentation and firewall; problems make it not ready (exit 3), warnings do not.
#include <sstream>
#include <type_traits>

#include "app/common.hpp"
#include "app/options.hpp"
#include "app/preflight.hpp"
#include "base/size.hpp"
#include "core/diagnosis.hpp"
#include "core/plan.hpp"
#include "core/run_config.hpp"
#include "sys/procfs.hpp"

namespace rxv {
using nlohmann::json;

namespace {

// What doctor found, step by step: the JSON document, the problems (each makes the host
// not ready) and warnings, and the figures the text shows.
// NOLINTNEXTLINE(bugprone-exception-escape): its moves do not throw (static_assert below)
struct Findings {
  json j;
  std::vector<std::string> problems, warnings;
  std::vector<std::string> causes;  // a cause token per problem that has one
  HostSnapshot h;
  std::string kvfix_file;
  std::optional<KvfixBuildStatus> kvfix;
  std::string sb_refusal;  // rxe-kvfix status's line when Secure Boot refuses the module
  std::vector<IbDevice> devs;
  std::uint64_t want = 0;  // --size
  std::optional<MemlockLimit> ml;
  bool cap = false, ml_ok = false;
  std::optional<MemInfo> mi;
  int lo = -1;  // largest free order
  std::uint64_t stock_now = 0;
  SizeVerdict reg;
  FirewallReport fw;
};
static_assert(std::is_nothrow_move_constructible_v<Findings> && std::is_nothrow_move_assignable_v<Findings>);

// The loaded rdma_rxe against what the rxe-kvfix DKMS build recorded for this kernel, if
// it ran here.
void check_module(HostEnv& host, Findings& f) {
  const ModuleIdentity& mod = f.h.module;
  f.kvfix_file = kKvfixStatusDir + f.j["kernel"].get<std::string>();
  if (auto text = host.read(f.kvfix_file)) f.kvfix = parse_kvfix_status(*text);
  const auto& kvfix = f.kvfix;
  f.j["rxe_kvfix_build"] = kvfix ? json{{"state", kvfix->state},
                                        {"time", kvfix->time},
                                        {"version", kvfix->version},
                                        {"message", kvfix->message},
                                        {"file", f.kvfix_file}}
                                 : json(nullptr);
  // not built: failed, or deferred (its source comes once the package transaction ends)
  const bool kvfix_deferred = kvfix && kvfix->state == "deferred";
  const bool kvfix_failed = kvfix && (kvfix->state == "failed" || kvfix_deferred);
  const bool kvfix_not_needed = kvfix && kvfix->state == "not-needed";
  if (mod.flavor == ModuleFlavor::Absent && !f.sb_refusal.empty())
    f.problems.emplace_back("rdma_rxe is not loaded, and `modprobe rdma_rxe` cannot load it: " +
                            f.sb_refusal + " (rxe-kvfix status)");
  else if (mod.flavor == ModuleFlavor::Absent)
    f.problems.emplace_back("rdma_rxe is not loaded (`modprobe rdma_rxe`)");
  else if (!f.sb_refusal.empty())
    f.warnings.emplace_back("the next `modprobe rdma_rxe` loads nothing: " + f.sb_refusal +
                            " (rxe-kvfix status)");
  if (mod.flavor == ModuleFlavor::Stock && kvfix_failed)
    f.warnings.emplace_back(std::string("the loaded rdma_rxe is stock because rxe-kvfix ") +
                            (kvfix_deferred ? "is not built yet" : "could not be built") +
                            " for this kernel (" + kvfix->time + "): " + kvfix->message + " [" +
                            f.kvfix_file + "]");
  else if (mod.flavor == ModuleFlavor::Stock && !kvfix_not_needed)
    f.warnings.emplace_back(
        "the loaded rdma_rxe is stock: MRs above 1 GiB never register, and "
        "512 MiB-1 GiB depend on fragmentation");
  if (mod.flavor == ModuleFlavor::RxeKvfixUnpatched)
    f.warnings.emplace_back(
        "the loaded rdma_rxe is an rxe-kvfix test build WITHOUT the fix "
        "(RXE_KVFIX_UNPATCHED): it behaves like stock; reinstall rxe-kvfix");
  if (mod.flavor == ModuleFlavor::Stock && !mod.installed.empty())
    f.warnings.emplace_back("an rxe-kvfix rdma_rxe is installed (" + mod.installed +
                            ") but the loaded module is stock: reload it (remove rxe links, "
                            "`modprobe -r rdma_rxe && modprobe rdma_rxe`)");
}

// Secure Boot against the key rxe-kvfix's module is signed with, as `rxe-kvfix status
// --json` tells it (kmod/rxe-kvfix-status.sh asks mokutil): null when rxe-kvfix is not
// installed or says nothing of Secure Boot.
void check_secure_boot(HostEnv& host, Findings& f) {
  f.j["secure_boot"] = nullptr;
  auto text = host.kvfix_status(f.j["kernel"].get<std::string>());
  if (!text) return;
  json st = json::parse(*text, nullptr, false);
  if (st.is_discarded() || !st.is_object() || !st.contains("secure_boot") || !st["secure_boot"].is_object())
    return;
  const json& sb = st["secure_boot"];
  f.j["secure_boot"] = sb;
  if (sb.value("refuses_module", false) && sb.contains("message") && sb["message"].is_string())
    f.sb_refusal = sb["message"].get<std::string>();
}

// Every RDMA device with its GIDs; no rxe device, or none with an ACTIVE port, is a problem.
void check_devices(HostEnv& host, Findings& f) {
  f.devs = host.ib_devices();
  json jd = json::array();
  bool any_rxe = false, any_active = false;
  for (const auto& d : f.devs) {
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
  f.j["devices"] = jd;
  if (!any_rxe) f.problems.emplace_back("no rxe device (`rdma link add rxe0 type rxe netdev <netdev>`)");
  else if (!any_active) f.problems.emplace_back("no rxe device has an ACTIVE port (bring its netdev up)");
}

// RLIMIT_MEMLOCK (or CAP_IPC_LOCK) against what `rxe-verify run -s WANT` pins with its
// defaults (sampled mode's staging slots).
void check_memlock(Findings& f) {
  f.ml = parse_memlock(f.h.limits);
  const auto& ml = f.ml;
  f.cap = f.h.cap_eff && has_cap(*f.h.cap_eff, kCapIpcLock);
  std::uint64_t need = run_pinned_bytes(0, f.want, 1, staging_bytes_for(RunConfig{}));
  f.ml_ok = memlock_allows(f.h.limits, f.h.cap_eff, need);
  f.j["memlock"] = {{"soft", ml ? (ml->soft_unlimited ? json("unlimited") : json(ml->soft)) : json(nullptr)},
                    {"hard", ml ? (ml->hard_unlimited ? json("unlimited") : json(ml->hard)) : json(nullptr)},
                    {"cap_ipc_lock", f.cap},
                    {"needed_for", f.want},
                    {"sufficient", f.ml_ok}};
  if (f.ml_ok) return;
  f.problems.emplace_back(
      "RLIMIT_MEMLOCK is " + (ml ? std::to_string(ml->soft / 1024) + " KiB" : std::string("?")) +
      ", below the " + std::to_string((need + 1023) / 1024) + " KiB a " + format_size(f.want) +
      " run pins (the region and its staging buffer) without CAP_IPC_LOCK: " + memlock_remedy(need));
  f.causes.emplace_back(cause::kMemlock);
}

// Memory and the buddy allocator's largest free block (what a stock rxe could register).
void check_memory(Findings& f) {
  f.mi = parse_meminfo(f.h.meminfo);
  const auto& mi = f.mi;
  f.j["memory"] = {{"total", mi ? json(mi->total) : json(nullptr)},
                   {"available", mi ? json(mi->available) : json(nullptr)}};
  auto zones = parse_buddyinfo(f.h.buddyinfo);
  f.lo = largest_free_order(zones);
  const int lo = f.lo;
  f.stock_now = lo >= 0 ? stock_mr_limit_for_order(lo) : 0;
  f.j["buddyinfo"] = {{"largest_free_order", lo},
                      {"largest_free_block", lo >= 0 ? json(kPageSize << lo) : json(nullptr)},
                      {"stock_rxe_max_mr_now", lo >= 0 ? json(f.stock_now) : json(nullptr)},
                      {"free_order9_plus", free_blocks_at_least(zones, 9)},
                      {"free_order10_plus", free_blocks_at_least(zones, 10)}};
}

// Whether the loaded rdma_rxe can register one MR of --size (can_register): "cannot" is
// a problem (a stock module and an order above MAX_PAGE_ORDER), "not_now" a warning.
void check_size(Findings& f) {
  f.reg = can_register(f.h.module, f.want, f.lo, !(f.kvfix && f.kvfix->state == "not-needed"));
  f.j["register"] = {
      {"size", f.want}, {"metadata_order", f.reg.order}, {"verdict", f.reg.verdict}, {"why", f.reg.why}};
  if (f.reg.verdict == "cannot") {
    f.problems.push_back(f.reg.why);
    f.causes.emplace_back(cause::kRxeMetadataOrder);
  } else if (f.reg.verdict == "not_now") {
    f.warnings.push_back(f.reg.why);
  }
}

// Incoming RoCEv2 (UDP 4791) through nftables and iptables: dropped or unknown is a warning.
void check_firewall(HostEnv& host, Findings& f) {
  f.fw = host.firewall();
  const auto& fw = f.fw;
  auto fwj = [](const std::optional<FwResult>& r) -> json {
    if (!r) return nullptr;
    return {{"verdict", to_string(r->verdict)}, {"detail", r->detail}};
  };
  f.j["firewall"] = {{"roce_v2_input", to_string(fw.combined.verdict)},
                     {"detail", fw.combined.detail},
                     {"nftables", fwj(fw.nft)},
                     {"iptables", fwj(fw.iptables)},
                     {"note", fw.note}};
  if (fw.combined.verdict == FwVerdict::Drop)
    f.warnings.emplace_back("incoming RoCEv2 (UDP 4791) is dropped by " + fw.combined.source + " (" +
                            fw.combined.detail +
                            "): two-host runs will time out; allow it, e.g. "
                            "`nft insert rule inet filter input udp dport 4791 accept`");
  else if (fw.combined.verdict == FwVerdict::Unknown)
    f.warnings.emplace_back("cannot tell whether the firewall accepts RoCEv2 (UDP 4791): " +
                            fw.combined.detail);
}

// The text output: one line per finding, the problems and warnings, the verdict.
std::string doctor_text(const Findings& f, bool ready) {
  const ModuleIdentity& mod = f.h.module;
  const auto& ml = f.ml;
  const auto& fw = f.fw;
  std::ostringstream txt;
  txt << "kernel      " << f.j["kernel"].get<std::string>() << "\n";
  txt << "rdma_rxe    " << to_string(mod.flavor);
  if (!mod.version.empty()) txt << " (version " << mod.version << ")";
  if (!mod.installed.empty()) txt << "; modinfo rxe_kvfix=" << mod.installed;
  txt << "\n";
  if (f.kvfix)
    txt << "rxe-kvfix   " << f.kvfix->state << " for this kernel (" << f.kvfix->time
        << "): " << f.kvfix->message << "\n";
  if (f.devs.empty()) txt << "devices     none\n";
  for (const auto& d : f.devs) {
    txt << "device      " << d.name << (d.rxe ? " (rxe)" : "") << "  netdev "
        << (d.netdev.empty() ? "?" : d.netdev) << "  port " << d.port_state << "\n";
    int sel = select_gid_index(d.gids);
    for (const auto& e : d.gids)
      txt << "  gid " << e.index << (e.index == sel ? "*" : " ") << " " << e.gid << "  " << e.type
          << (e.ipv4().empty() ? "" : "  " + e.ipv4()) << "\n";
  }
  txt << "memlock     soft " << (ml ? (ml->soft_unlimited ? "unlimited" : format_size(ml->soft)) : "?")
      << ", hard " << (ml ? (ml->hard_unlimited ? "unlimited" : format_size(ml->hard)) : "?")
      << (f.cap ? ", CAP_IPC_LOCK" : "") << (f.ml_ok ? "  ok for " : "  TOO SMALL for ")
      << format_size(f.want) << "\n";
  if (f.mi)
    txt << "memory      total " << format_size(f.mi->total) << ", available " << format_size(f.mi->available)
        << "\n";
  if (f.lo >= 0)
    txt << "buddyinfo   largest free block order " << f.lo << " (" << format_size(kPageSize << f.lo)
        << "): a stock rxe could register at most " << format_size(f.stock_now) << " per MR now\n";
  txt << "register    " << format_size(f.want) << ": " << f.reg.verdict << " - " << f.reg.why << "\n";
  txt << "firewall    incoming RoCEv2 (UDP 4791): " << to_string(fw.combined.verdict);
  if (!fw.combined.detail.empty()) txt << " - " << fw.combined.detail;
  txt << "\n";
  for (const auto& p : f.problems) txt << "PROBLEM     " << p << "\n";
  for (const auto& w : f.warnings) txt << "warning     " << w << "\n";
  txt << "verdict     " << (ready ? "ready" : "NOT READY") << "\n";
  return txt.str();
}

}  // namespace

Outcome doctor_command(const DoctorCommandConfig& o, HostEnv& host) {
  Findings f;
  f.want = need_size("--size", o.size, false);
  f.j = json_envelope("doctor");
  f.j["kernel"] = host.kernel();
  f.h = snapshot(host);
  f.j["module"] = to_json(f.h.module);
  check_secure_boot(host, f);
  check_module(host, f);
  check_devices(host, f);
  check_memlock(f);
  check_memory(f);
  check_size(f);
  check_firewall(host, f);
  bool ready = f.problems.empty();
  f.j["problems"] = f.problems;
  f.j["causes"] = f.causes;
  f.j["warnings"] = f.warnings;
  f.j["ready"] = ready;
  const Verdict verdict = ready ? Verdict::Ready : Verdict::NotReady;
  f.j["verdict"] = verdict;
  std::string text = doctor_text(f, ready);
  return reported(exit_code(verdict), std::move(f.j), std::move(text));
}

}  // namespace rxv
