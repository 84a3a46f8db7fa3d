#include "sys/procfs.hpp"

#include <cctype>
#include <sstream>

#include "base/number.hpp"

namespace rxv {

std::string trim(std::string_view s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::vector<std::string> split_ws(std::string_view s) {
  std::vector<std::string> out;
  std::istringstream is{std::string(s)};
  std::string w;
  while (is >> w) out.push_back(w);
  return out;
}

std::vector<std::string_view> text_lines(std::string_view t) {
  std::vector<std::string_view> out;
  std::size_t s = 0;
  while (s < t.size()) {
    std::size_t e = t.find('\n', s);
    if (e == std::string_view::npos) e = t.size();
    out.push_back(t.substr(s, e - s));
    s = e + 1;
  }
  return out;
}

std::vector<MeminfoField> parse_meminfo_fields(std::string_view text) {
  std::vector<MeminfoField> out;
  for (auto line : text_lines(text)) {
    auto w = split_ws(line);
    if (w.size() < 2 || w[0].size() < 2 || w[0].back() != ':') continue;
    auto n = parse_uint(w[1]);
    if (!n) continue;
    const std::uint64_t mul = (w.size() >= 3 && w[2] == "kB") ? 1024 : 1;
    out.push_back({w[0].substr(0, w[0].size() - 1), *n * mul});
  }
  return out;
}

std::vector<BuddyZone> parse_buddyinfo(std::string_view text) {
  std::vector<BuddyZone> zones;
  for (auto line : text_lines(text)) {
    // "Node 0, zone   Normal   1413   1324 ..."
    auto w = split_ws(line);
    if (w.size() < 5 || w[0] != "Node" || w[2] != "zone") continue;
    BuddyZone z;
    std::string n = w[1];
    if (!n.empty() && n.back() == ',') n.pop_back();
    auto node = parse_uint(n);
    if (!node) continue;
    z.node = static_cast<int>(*node);
    z.zone = w[3];
    bool ok = true;
    for (std::size_t i = 4; i < w.size(); ++i) {
      auto v = parse_uint(w[i]);
      if (!v) {
        ok = false;
        break;
      }
      z.free.push_back(*v);
    }
    if (ok) zones.push_back(std::move(z));
  }
  return zones;
}

bool zone_usable_for_kernel(const BuddyZone& z) { return z.zone != "DMA"; }

int largest_free_order(const std::vector<BuddyZone>& zones) {
  int best = -1;
  for (const auto& z : zones) {
    if (!zone_usable_for_kernel(z)) continue;
    for (int k = static_cast<int>(z.free.size()) - 1; k >= 0; --k)
      if (z.free[static_cast<std::size_t>(k)] > 0) {
        if (k > best) best = k;
        break;
      }
  }
  return best;
}

std::uint64_t free_blocks_at_least(const std::vector<BuddyZone>& zones, int order) {
  std::uint64_t n = 0;
  if (order < 0) order = 0;
  for (const auto& z : zones) {
    if (!zone_usable_for_kernel(z)) continue;
    for (auto k = static_cast<std::size_t>(order); k < z.free.size(); ++k) n += z.free[k];
  }
  return n;
}

std::optional<MemlockLimit> parse_memlock(std::string_view text) {
  for (auto line : text_lines(text)) {
    if (line.rfind("Max locked memory", 0) != 0) continue;
    auto w = split_ws(line.substr(17));
    if (w.size() < 2) return std::nullopt;
    MemlockLimit m;
    auto one = [](const std::string& s, bool& unl, std::uint64_t& v) {
      if (s == "unlimited") {
        unl = true;
        return true;
      }
      auto n = parse_uint(s);
      if (n) v = *n;
      return n.has_value();
    };
    if (!one(w[0], m.soft_unlimited, m.soft) || !one(w[1], m.hard_unlimited, m.hard)) return std::nullopt;
    return m;
  }
  return std::nullopt;
}

std::optional<MemInfo> parse_meminfo(std::string_view text) {
  MemInfo m;
  bool total = false;
  for (const auto& f : parse_meminfo_fields(text)) {
    if (f.name == "MemTotal") {
      m.total = f.bytes;
      total = true;
    } else if (f.name == "MemFree") {
      m.free = f.bytes;
    } else if (f.name == "MemAvailable") {
      m.available = f.bytes;
      m.has_available = true;
    }
  }
  if (!total) return std::nullopt;
  if (!m.has_available) m.available = m.free;
  return m;
}

std::optional<std::uint64_t> parse_cap_eff(std::string_view text) {
  for (auto line : text_lines(text)) {
    if (line.rfind("CapEff:", 0) != 0) continue;
    return parse_uint(trim(line.substr(7)), 16);
  }
  return std::nullopt;
}

namespace {
std::string hexdigits(const std::string& gid) {
  std::string h;
  for (char c : gid)
    if (std::isxdigit(static_cast<unsigned char>(c))) h += static_cast<char>(std::tolower(c));
  return h;
}
}  // namespace

bool GidEntry::is_zero() const {
  std::string h = hexdigits(gid);
  return h.empty() || h.find_first_not_of('0') == std::string::npos;
}
bool GidEntry::is_ipv4_mapped() const {
  std::string h = hexdigits(gid);
  return h.size() == 32 && h.compare(0, 20, "00000000000000000000") == 0 && h.compare(20, 4, "ffff") == 0;
}
bool GidEntry::is_link_local() const {
  std::string h = hexdigits(gid);
  return h.size() == 32 && h.compare(0, 4, "fe80") == 0;
}
std::string GidEntry::ipv4() const {
  if (!is_ipv4_mapped()) return "";
  std::string h = hexdigits(gid);
  std::string out;
  for (int i = 0; i < 4; ++i) {
    unsigned v = parse_uint<unsigned>(std::string_view(h).substr(24 + 2 * i, 2), 16).value_or(0);
    if (i) out += '.';
    out += std::to_string(v);
  }
  return out;
}

int select_gid_index(const std::vector<GidEntry>& gids) {
  auto v2 = [](const GidEntry& g) { return g.type.find("v2") != std::string::npos && !g.is_zero(); };
  for (const auto& g : gids)
    if (v2(g) && g.is_ipv4_mapped()) return g.index;
  for (const auto& g : gids)
    if (v2(g) && !g.is_link_local()) return g.index;
  for (const auto& g : gids)
    if (v2(g)) return g.index;
  return -1;
}

std::optional<KvfixBuildStatus> parse_kvfix_status(std::string_view text) {
  KvfixBuildStatus st;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    std::string_view line =
        text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    std::size_t eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    std::string_view key = line.substr(0, eq), value = line.substr(eq + 1);
    if (key == "state") st.state = trim(value);
    else if (key == "time") st.time = trim(value);
    else if (key == "version") st.version = trim(value);
    else if (key == "message") st.message = trim(value);
  }
  if (st.state.empty()) return std::nullopt;
  return st;
}

}  // namespace rxv
