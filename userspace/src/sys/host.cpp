#include "sys/host.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

extern char** environ;

namespace rxv {
namespace fs = std::filesystem;

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::nullopt;
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return std::nullopt;
  return ss.str();
}

CmdResult run_command(const std::vector<std::string>& argv, int timeout_s) {
  CmdResult r;
  if (argv.empty()) return r;
  std::string exe;
  if (argv[0].find('/') != std::string::npos) {
    exe = argv[0];
  } else {
    std::string path = getenv("PATH") ? getenv("PATH") : "";
    path += ":/usr/local/sbin:/usr/sbin:/sbin:/usr/bin:/bin";
    std::stringstream ss(path);
    std::string dir;
    while (std::getline(ss, dir, ':')) {
      if (dir.empty()) continue;
      std::string c = dir + "/" + argv[0];
      if (access(c.c_str(), X_OK) == 0) {
        exe = c;
        break;
      }
    }
  }
  if (exe.empty()) return r;
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return r;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, exe.c_str(), &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(pipefd[1]);
  if (rc != 0) {
    close(pipefd[0]);
    return r;
  }
  r.ran = true;
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  char buf[65536];
  bool killed = false;
  while (true) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      kill(pid, SIGKILL);
      killed = true;
      break;
    }
    pollfd p{pipefd[0], POLLIN, 0};
    int pr = poll(&p, 1, static_cast<int>(left));
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) continue;
    ssize_t n = read(pipefd[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    r.out.append(buf, static_cast<std::size_t>(n));
    if (r.out.size() > (64u << 20)) {
      kill(pid, SIGKILL);
      killed = true;
      break;
    }
  }
  close(pipefd[0]);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  r.status = killed ? -1 : (WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  return r;
}

std::string kernel_release() {
  utsname u{};
  if (uname(&u) != 0) return "unknown";
  return u.release;
}

ModuleIdentity probe_module(const std::string& sys) {
  bool loaded = fs::exists(sys + "/module/rdma_rxe");
  auto ver = read_file(sys + "/module/rdma_rxe/version");
  std::string mi;
  auto c = run_command({"modinfo", "-F", "rxe_kvfix", "rdma_rxe"}, 5);
  if (c.ran && c.status == 0) mi = c.out;
  return classify_module(loaded, ver, mi);
}

std::vector<GidEntry> read_gids(const std::string& sys, const std::string& dev, int port) {
  std::vector<GidEntry> out;
  std::string base = sys + "/class/infiniband/" + dev + "/ports/" + std::to_string(port);
  std::error_code ec;
  for (int i = 0; i < 256; ++i) {
    auto gid = read_file(base + "/gids/" + std::to_string(i));
    if (!gid) {
      if (!fs::exists(base + "/gids", ec) || i > 0) break;
      continue;
    }
    GidEntry e;
    e.index = i;
    e.gid = trim(*gid);
    if (auto t = read_file(base + "/gid_attrs/types/" + std::to_string(i))) e.type = trim(*t);
    if (auto n = read_file(base + "/gid_attrs/ndevs/" + std::to_string(i))) e.ndev = trim(*n);
    if (!e.is_zero()) out.push_back(e);
  }
  return out;
}

std::vector<IbDevice> list_ib_devices(const std::string& sys) {
  std::vector<IbDevice> out;
  std::error_code ec;
  fs::path root = sys + "/class/infiniband";
  if (!fs::exists(root, ec)) return out;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(root, ec)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    IbDevice d;
    d.name = n;
    fs::path dir = root / n;
    auto parent = read_file((dir / "parent").string());
    std::string drv;
    if (fs::is_symlink(dir / "device" / "driver", ec))
      drv = fs::read_symlink(dir / "device" / "driver", ec).filename().string();
    auto drvname = read_file((dir / "driver" / "name").string());
    d.rxe = n.rfind("rxe", 0) == 0 || drv.find("rxe") != std::string::npos ||
            (drvname && drvname->find("rxe") != std::string::npos) || parent.has_value();
    if (parent) d.netdev = trim(*parent);
    if (auto st = read_file((dir / "ports/1/state").string())) {
      d.port_state = trim(*st);
      d.port_active = d.port_state.find("ACTIVE") != std::string::npos;
    }
    d.gids = read_gids(sys, n, 1);
    if (d.netdev.empty())
      for (const auto& g : d.gids)
        if (!g.ndev.empty()) {
          d.netdev = g.ndev;
          break;
        }
    out.push_back(std::move(d));
  }
  return out;
}

HostSnapshot snapshot_host() {
  HostSnapshot s;
  s.buddyinfo = read_file("/proc/buddyinfo").value_or("");
  s.limits = read_file("/proc/self/limits").value_or("");
  s.meminfo = read_file("/proc/meminfo").value_or("");
  s.status = read_file("/proc/self/status").value_or("");
  s.cap_eff = parse_cap_eff(s.status);
  s.module = probe_module();
  return s;
}

FirewallReport probe_firewall() {
  FirewallReport r;
  auto n = run_command({"nft", "-j", "list", "ruleset"}, 10);
  if (n.ran && n.status == 0) {
    r.nft = evaluate_nft_json(n.out);
  } else if (n.ran) {
    r.note += "`nft -j list ruleset` failed (need root?); ";
  }
  auto i = run_command({"iptables-save"}, 10);
  if (i.ran && i.status == 0) {
    r.iptables = evaluate_iptables_save(i.out);
  } else if (i.ran) {
    r.note += "`iptables-save` failed (need root?); ";
  }
  if (!n.ran && !i.ran) r.note += "neither nft nor iptables-save is installed; ";
  FwResult none;
  none.verdict = FwVerdict::NoRules;
  none.detail = "no firewall rules found";
  r.combined = none;
  if (r.nft) r.combined = combine(r.combined, *r.nft);
  if (r.iptables) r.combined = combine(r.combined, *r.iptables);
  if ((n.ran && n.status != 0 && !r.iptables) || (!r.nft && !r.iptables && (n.ran || i.ran))) {
    r.combined.verdict = FwVerdict::Unknown;
    r.combined.detail = "cannot read the firewall rules";
  }
  return r;
}

}  // namespace rxv
