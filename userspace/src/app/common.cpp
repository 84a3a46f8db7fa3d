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

void size_usage(const std::string& what, const std::string& err) {
  usage(what + ": " + err +
        (err.find("(use") == std::string::npos ? "; write sizes like 16, 512M, 1G or 1G+16" : ""));
}

std::uint64_t need_size(const std::string& what, const std::string& text, bool allow_zero) {
  auto p = parse_size(text);
  if (!p.value) size_usage(what, p.error);
  if (!allow_zero && *p.value == 0) usage(what + ": size must be greater than 0");
  return *p.value;
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
  MemFit f =
      check_memory_fit(what, requested, bytes, parse_meminfo(host.read("/proc/meminfo").value_or("")), force);
  if (f.code == kExitUsage) usage(f.error);
  if (f.code) throw NotReadyError(f.error);
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

DeviceChoice resolve_device(Provider& prov, HostEnv& host, const std::string& wanted, int gid_opt,
                            std::string& err, int& code) {
  DeviceChoice c;
  auto sys = host.ib_devices();
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

std::optional<SetupFailure> port_down(const DeviceChoice& dc, const PortInfo& pi) {
  if (pi.active) return std::nullopt;
  return SetupFailure{cause::kDeviceDown,
                      "port 1 of " + dc.name + " is " + (pi.state_str.empty() ? "down" : pi.state_str),
                      "bring its netdev up: `ip link set " +
                          (dc.info.netdev.empty() ? std::string("<netdev>") : dc.info.netdev) + " up`",
                      kExitNotReady};
}

std::string connect_qp_pair(Device& dev, const QpParams& p, std::unique_ptr<QueuePair>& qa,
                            std::unique_ptr<QueuePair>& qb) {
  auto a = dev.create_qp(p);
  if (!a) return a.error().summary;
  qa = std::move(*a);
  auto b = dev.create_qp(p);
  if (!b) return b.error().summary;
  qb = std::move(*b);
  if (auto e = qa->connect(qb->local_addr()); !e) return e.error().summary;
  if (auto e = qb->connect(qa->local_addr()); !e) return e.error().summary;
  return "";
}

std::optional<SetupFailure> setup_loopback(Device& dev, const QpParams& p, std::uint64_t staging,
                                           const DiagContext& dctx, Loopback& lb) {
  if (auto e = connect_qp_pair(dev, p, lb.qa, lb.qb); !e.empty())
    return SetupFailure{cause::kUnknown, e, "", kExitNotReady};
  lb.peer = std::make_unique<LocalPeer>(dev, staging);
  if (lb.peer->ok()) return std::nullopt;
  DiagInput in = dctx();
  in.stage = Stage::Register;
  in.err = lb.peer->reg_errno();
  in.size = staging;
  auto d = diagnose(in);
  return SetupFailure{d.cause,
                      "cannot register the " + format_size(staging) + " staging buffer: " + d.summary,
                      d.remedy, d.cause == cause::kMemlock ? kExitNotReady : kExitFail};
}

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
  err =
      "no rxe device found (load rdma_rxe and run `rdma link add rxe0 type rxe netdev <netdev>`, or name one "
      "with --device)";
  code = kExitNotReady;
  return "";
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

std::optional<SetupFailure> memlock_preflight(HostEnv& host, std::uint64_t need, const std::string& what) {
  HostSnapshot h = snapshot(host);
  if (memlock_allows(h.limits, h.cap_eff, need)) return std::nullopt;
  auto ml = parse_memlock(h.limits);
  const std::string now = ml ? std::to_string(ml->soft / 1024) + " KiB" : std::string("?");
  return SetupFailure{cause::kMemlock,
                      "RLIMIT_MEMLOCK is " + now + ", below the " + std::to_string((need + 1023) / 1024) +
                          " KiB this run pins (" + what + ") and the process lacks CAP_IPC_LOCK",
                      memlock_remedy(need), kExitNotReady};
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

SetupFailure open_failure(const std::string& device, const std::string& err, const std::string& denied_node) {
  bool denied = !denied_node.empty();
  for (int e : {EACCES, EPERM})
    if (err.find(std::strerror(e)) != std::string::npos) denied = true;
  if (denied)
    return {cause::kDeviceAccess,
            err + ": this user may not open " +
                (denied_node.empty() ? device + "'s /dev/infiniband/uverbs* node"
                                     : denied_node + " (" + device + ")") +
                " for reading and writing (not a memlock or memory problem)",
            "give the user read and write access to /dev/infiniband/uverbs* (rdma-core's "
            "udev rule makes them mode 0666: check `ls -l /dev/infiniband` and local udev "
            "rules or groups), or run as a user that has it",
            kExitNotReady};
  return {cause::kNoDevice, err,
          "load ib_uverbs and rdma_rxe and check that `rdma link show` lists " + device, kExitNotReady};
}

}  // namespace rxv
