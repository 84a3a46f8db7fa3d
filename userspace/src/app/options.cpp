#include "app/options.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cctype>
#include <chrono>

#include "base/size.hpp"
#include "core/plan.hpp"

namespace rxv {

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

std::uint64_t seed_or_random(std::uint64_t seed) {
  return seed ? seed
              : static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) | 1;
}

}  // namespace rxv
