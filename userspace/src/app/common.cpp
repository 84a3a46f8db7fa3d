#include "app/common.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "memfit.hpp"
#include "plan.hpp"
#include "procfs.hpp"
#include "size.hpp"

namespace rxv {
using nlohmann::json;

void usage(const std::string& m) { throw UsageError(m); }

void size_usage(const std::string& what, const std::string& why) {
  usage(what + ": " + why +
        (why.find("(use") == std::string::npos ? "; write sizes like 16, 512M, 1G or 1G+16" : ""));
}

void throw_if_usage(const Error& e) {
  if (e.exit == kExitUsage) throw UsageError(e);
}

std::uint64_t need_size(const std::string& what, const std::string& text, bool allow_zero) {
  auto p = parse_size(text);
  if (!p) size_usage(what, p.error().summary);
  if (!allow_zero && *p == 0) usage(what + ": size must be greater than 0");
  return *p;
}

std::uint64_t mem_total(HostEnv& host) {
  auto mi = parse_meminfo(host.read("/proc/meminfo").value_or(""));
  return mi ? mi->total : 0;
}

std::uint64_t need_offset(const std::string& text) {
  std::uint64_t off = need_size("--offset", text, true);
  if (off >= kPageSize)
    usage("--offset: " + std::to_string(off) + " is not inside a page; use 0-" +
          std::to_string(kPageSize - 1) + " (bytes into the first page, e.g. 16)");
  return off;
}

void check_gid_option(bool given, int gid_index) {
  if (given && gid_index < 0)
    usage("--gid-index: " + std::to_string(gid_index) +
          " is negative; use an index listed by `rxe-verify doctor` (or leave it out)");
}

void check_ram(HostEnv& host, const std::string& what, std::uint64_t requested, std::uint64_t bytes,
               bool force) {
  auto fits =
      check_memory_fit(what, requested, bytes, parse_meminfo(host.read("/proc/meminfo").value_or("")), force);
  if (fits) return;
  throw_if_usage(fits.error());
  throw NotReadyError(fits.error().summary);
}

std::uint64_t seed_or_random(std::uint64_t seed) {
  return seed ? seed
              : static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) | 1;
}

void print_error(const std::string& cmd, const std::string& msg) {
  std::fprintf(stderr, "rxe-verify %s: error: %s\n", cmd.c_str(), msg.c_str());
}

int run_guarded(const std::string& cmd, const std::function<int()>& command) {
  try {
    return command();
  } catch (const CommandError& e) {
    print_error(cmd, e.error().line());
    return e.exit();
  } catch (const std::exception& e) {
    print_error(cmd, e.what());
    return kExitFail;
  }
}

Result<DeviceChoice> resolve_device(Provider& prov, HostEnv& host, const std::string& wanted, int gid_opt) {
  DeviceChoice c;
  auto sys = host.ib_devices();
  auto name = choose_device(sys, prov.list_devices(), wanted);
  if (!name) return std::move(name).error();
  c.name = std::move(*name);
  for (const auto& d : sys)
    if (d.name == c.name) c.info = d;
  if (gid_opt >= 0) {
    c.gid_index = gid_opt;
    if (auto in_table = check_gid_index(c.info, gid_opt); !in_table) return std::move(in_table).error();
    return c;
  }
  c.gid_index = select_gid_index(c.info.gids);
  if (c.gid_index < 0)
    return Error("device " + c.name +
                     " has no RoCE v2 GID (is its netdev up with an IP address?); pick one with "
                     "--gid-index",
                 "", kExitNotReady, cause::kNoDevice);
  return c;
}

DiagContext make_diag_context(HostEnv& host, std::optional<bool> port_active, bool two_host,
                              const ModuleIdentity& module) {
  return [&host, port_active, two_host, module]() {
    HostSnapshot h = snapshot(host);
    DiagInput in;
    in.buddyinfo = h.buddyinfo;
    in.limits = h.limits;
    in.meminfo = h.meminfo;
    in.cap_eff = h.cap_eff;
    in.module = module;
    in.port_active = port_active;
    in.two_host = two_host;
    if (two_host) in.firewall = host.firewall().combined;
    return in;
  };
}

Result<void> check_port_active(const DeviceChoice& dc, const PortInfo& pi) {
  if (pi.active) return {};
  return Error("port 1 of " + dc.name + " is " + (pi.state_str.empty() ? "down" : pi.state_str),
               "bring its netdev up: `ip link set " +
                   (dc.info.netdev.empty() ? std::string("<netdev>") : dc.info.netdev) + " up`",
               kExitNotReady, cause::kDeviceDown);
}

Result<QpPair> connect_qp_pair(Device& dev, const QpParams& p) {
  QpPair pair;
  for (auto* q : {&pair.qa, &pair.qb}) {
    auto created = dev.create_qp(p);
    if (!created) return std::move(created).error();
    *q = std::move(*created);
  }
  if (auto e = pair.qa->connect(pair.qb->local_addr()); !e) return std::move(e).error();
  if (auto e = pair.qb->connect(pair.qa->local_addr()); !e) return std::move(e).error();
  return pair;
}

Result<Loopback> setup_loopback(Device& dev, const QpParams& p, std::uint64_t staging,
                                const DiagContext& dctx) {
  auto pair = connect_qp_pair(dev, p);
  if (!pair) return Error(pair.error().summary, "", kExitNotReady, cause::kUnknown);
  Loopback lb;
  lb.qa = std::move(pair->qa);
  lb.qb = std::move(pair->qb);
  lb.peer = std::make_unique<LocalPeer>(dev, staging);
  if (lb.peer->ok()) return lb;
  DiagInput in = dctx();
  in.stage = Stage::Register;
  in.err = lb.peer->reg_errno();
  in.size = staging;
  auto d = diagnose(in);
  return Error("cannot register the " + format_size(staging) + " staging buffer: " + d.summary, d.remedy,
               d.cause == cause::kMemlock ? kExitNotReady : kExitFail, d.cause);
}

Result<void> check_gid_index(const IbDevice& dev, int index) {
  if (dev.gids.empty()) return {};  // GID table not readable: let the device decide
  std::string have;
  for (const auto& g : dev.gids) {
    if (g.index == index) return {};
    have += (have.empty() ? "" : ", ") + std::to_string(g.index);
  }
  return usage_error("--gid-index " + std::to_string(index) + ": device " + dev.name + " has no GID " +
                     std::to_string(index) + " (valid: " + have +
                     "); pick one listed by `rxe-verify doctor`");
}

Result<void> check_peer_host(const std::string& host) {
  bool ok = !host.empty() && host.size() <= 253;
  for (char ch : host)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' || ch == '_' || ch == ':' ||
          ch == '%'))
      ok = false;
  // a ':' in the host part means an IPv6 address (written without brackets and port)
  if (ok && host.find(':') != std::string::npos) {
    in6_addr a6{};
    std::string addr = host.substr(0, host.find('%'));
    ok = inet_pton(AF_INET6, addr.c_str(), &a6) == 1;
  }
  if (!ok)
    return usage_error("bad peer address '" + host +
                       "': use a host name or IP address, with an optional :PORT (IPv6: [ADDR]:PORT)");
  return {};
}

Result<std::string> choose_device(const std::vector<IbDevice>& sys, const std::vector<std::string>& verbs,
                                  const std::string& wanted) {
  auto in_verbs = [&](const std::string& n) {
    return verbs.empty() || std::find(verbs.begin(), verbs.end(), n) != verbs.end();
  };
  if (!wanted.empty()) {
    bool known = std::find(verbs.begin(), verbs.end(), wanted) != verbs.end() ||
                 std::any_of(sys.begin(), sys.end(), [&](const IbDevice& d) { return d.name == wanted; });
    if (!known) {
      std::string avail;
      for (const auto& v : verbs) avail += (avail.empty() ? "" : ", ") + v;
      return usage_error("unknown device '" + wanted + "' (available: " + (avail.empty() ? "none" : avail) +
                         "); name one listed by `rxe-verify doctor`, or leave --device out");
    }
    return wanted;
  }
  for (const auto& d : sys)
    if (d.rxe && in_verbs(d.name)) return d.name;
  for (const auto& v : verbs)
    if (v.rfind("rxe", 0) == 0) return v;
  return Error(
      "no rxe device found (load rdma_rxe and run `rdma link add rxe0 type rxe netdev <netdev>`, or name one "
      "with --device)",
      "", kExitNotReady, cause::kNoDevice);
}

}  // namespace rxv

namespace rxv {

std::uint64_t run_pinned_bytes(std::uint64_t offset, std::uint64_t largest, unsigned split,
                               std::uint64_t staging) {
  // the largest region (each of its --split MRs may start mid-page: one more page each),
  // plus the staging buffer, counted as at least the 2 MiB doctor allows
  const std::uint64_t region = (span_pages(offset, largest) + (split > 1 ? split - 1 : 0)) * kPageSize;
  return region + std::max<std::uint64_t>(2ull << 20, span_pages(0, staging) * kPageSize);
}

Result<void> memlock_preflight(HostEnv& host, std::uint64_t need, const std::string& what) {
  HostSnapshot h = snapshot(host);
  if (memlock_allows(h.limits, h.cap_eff, need)) return {};
  auto ml = parse_memlock(h.limits);
  const std::string now = ml ? std::to_string(ml->soft / 1024) + " KiB" : std::string("?");
  return Error("RLIMIT_MEMLOCK is " + now + ", below the " + std::to_string((need + 1023) / 1024) +
                   " KiB this run pins (" + what + ") and the process lacks CAP_IPC_LOCK",
               memlock_remedy(need), kExitNotReady, cause::kMemlock);
}

}  // namespace rxv

namespace rxv {

std::string uverbs_node_denied(const std::string& device) {
  DIR* d = opendir("/sys/class/infiniband_verbs");
  if (!d) return "";
  std::string found;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n.rfind("uverbs", 0) != 0) continue;
    std::ifstream f("/sys/class/infiniband_verbs/" + n + "/ibdev");
    std::string ib;
    if (f >> ib && ib == device) found = "/dev/infiniband/" + n;
  }
  closedir(d);
  if (found.empty() || ::access(found.c_str(), R_OK | W_OK) == 0) return "";
  return errno == EACCES || errno == EPERM ? found : "";
}

Error open_failure(const std::string& device, const Error& open_error, const std::string& denied_node) {
  const std::string& why = open_error.summary;
  bool denied = !denied_node.empty();
  for (int e : {EACCES, EPERM})
    if (why.find(std::strerror(e)) != std::string::npos) denied = true;
  if (denied)
    return Error(why + ": this user may not open " +
                     (denied_node.empty() ? device + "'s /dev/infiniband/uverbs* node"
                                          : denied_node + " (" + device + ")") +
                     " for reading and writing (not a memlock or memory problem)",
                 "give the user read and write access to /dev/infiniband/uverbs* (rdma-core's "
                 "udev rule makes them mode 0666: check `ls -l /dev/infiniband` and local udev "
                 "rules or groups), or run as a user that has it",
                 kExitNotReady, cause::kDeviceAccess);
  return Error(why, "load ib_uverbs and rdma_rxe and check that `rdma link show` lists " + device,
               kExitNotReady, cause::kNoDevice);
}

}  // namespace rxv
