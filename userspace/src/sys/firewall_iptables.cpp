// The iptables front end: `iptables-save` text into the rule model, then evaluated.
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "base/number.hpp"
#include "sys/firewall.hpp"
#include "sys/firewall_rules.hpp"
#include "sys/procfs.hpp"

namespace rxv {

using namespace fw;  // the rule model (firewall_rules.hpp)

// ---- iptables-save --------------------------------------------------------------
namespace {

std::vector<std::string> tokenize(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool q = false, have = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (q) {
      if (c == '\\' && i + 1 < line.size()) cur += line[++i];
      else if (c == '"') q = false;
      else cur += c;
    } else if (c == '"') {
      q = true;
      have = true;
    } else if (c == ' ' || c == '\t') {
      if (have || !cur.empty()) out.push_back(cur);
      cur.clear();
      have = false;
    } else {
      cur += c;
    }
  }
  if (have || !cur.empty()) out.push_back(cur);
  return out;
}

Cond port_match(const std::string& spec, unsigned long port) {
  // "4791", "4000:5000", "4791,5000" (multiport); a part that is not a port (range) is
  // unknown
  std::stringstream ss(spec);
  std::string part;
  while (std::getline(ss, part, ',')) {
    auto colon = part.find(':');
    if (colon == std::string::npos) {
      auto p = parse_uint<unsigned long>(part);
      if (!p) return Cond::Unknown;
      if (*p == port) return Cond::True;
    } else {
      auto a = colon ? parse_uint<unsigned long>(part.substr(0, colon)) : 0ul;
      auto b = colon + 1 < part.size() ? parse_uint<unsigned long>(part.substr(colon + 1)) : 65535ul;
      if (!a || !b) return Cond::Unknown;
      if (port >= *a && port <= *b) return Cond::True;
    }
  }
  return Cond::False;
}

// -m/--match NAME: a module this reader knows (unknown otherwise); tcp and icmp never
// match the UDP probe. nullopt: a known module that decides nothing by itself.
std::optional<Cond> match_module(const std::string& m) {
  static const char* ok[] = {"udp",   "tcp",     "conntrack", "state", "comment",
                             "limit", "pkttype", "multiport", "icmp"};
  bool known = false;
  for (auto* k : ok)
    if (m == k) known = true;
  if (!known) return Cond::Unknown;
  if (m == "tcp" || m == "icmp") return Cond::False;
  return std::nullopt;
}

// --ctstate/--state LIST: the probe is a NEW packet.
Cond new_state(const std::string& list) {
  std::stringstream ss(list);
  std::string st;
  Cond c = Cond::False;
  while (std::getline(ss, st, ','))
    if (st == "NEW") c = Cond::True;
  return c;
}

// -j/--jump or -g/--goto TARGET (`opt` says which).
Verdict jump_target(const std::string& opt, const std::string& tg) {
  if (tg == "ACCEPT") return {VKind::Accept, ""};
  if (tg == "DROP" || tg == "REJECT") return {VKind::Drop, ""};
  if (tg == "RETURN") return {VKind::Return, ""};
  if (tg == "LOG" || tg == "NFLOG" || tg == "CT" || tg == "MARK" || tg == "CONNMARK" || tg == "NOTRACK" ||
      tg == "TRACE")
    return {VKind::None, ""};
  if (tg == "QUEUE" || tg == "NFQUEUE") return {VKind::Unknown, ""};
  return {(opt == "-g" || opt == "--goto") ? VKind::Goto : VKind::Jump, tg};
}

Rule ipt_rule(const std::vector<std::string>& t, std::size_t start, int lineno) {
  Rule r;
  r.label = "rule at line " + std::to_string(lineno);
  bool neg = false;
  for (std::size_t i = start; i < t.size(); ++i) {
    const std::string& a = t[i];
    auto arg = [&]() -> std::string { return i + 1 < t.size() ? t[++i] : std::string(); };
    auto put = [&](Cond c) {
      if (neg) {
        if (c == Cond::True) c = Cond::False;
        else if (c == Cond::False) c = Cond::True;
      }
      neg = false;
      r.cond = cond_and(r.cond, c);
    };
    if (a == "!") {
      neg = true;
    } else if (a == "-p" || a == "--protocol") {
      std::string p = arg();
      put(p == "udp" || p == "17" || p == "all" || p == "0" ? Cond::True : Cond::False);
    } else if (a == "-i" || a == "--in-interface") {
      std::string n = arg();
      put(n == "lo" ? Cond::False : (n == "+" ? Cond::True : Cond::Unknown));
    } else if (a == "-s" || a == "--source" || a == "-d" || a == "--destination") {
      std::string n = arg();
      put(n == "0.0.0.0/0" ? Cond::True : Cond::Unknown);
    } else if (a == "-m" || a == "--match") {
      if (auto c = match_module(arg())) put(*c);
    } else if (a == "--dport" || a == "--destination-port" || a == "--dports" || a == "--destination-ports") {
      put(port_match(arg(), 4791));
    } else if (a == "--ports") {
      put(port_match(arg(), 4791) == Cond::True ? Cond::True : Cond::Unknown);
    } else if (a == "--sport" || a == "--source-port" || a == "--sports") {
      arg();
      put(Cond::Unknown);
    } else if (a == "--ctstate" || a == "--state") {
      put(new_state(arg()));
    } else if (a == "--pkt-type") {
      std::string s = arg();
      put(s == "host" ? Cond::True : Cond::False);
    } else if (a == "--limit" || a == "--limit-burst") {
      arg();
      if (a == "--limit") put(Cond::Limit);
      else neg = false;
    } else if (a == "--comment") {
      r.label += " (\"" + arg() + "\")";
      neg = false;
    } else if (a == "-j" || a == "--jump" || a == "-g" || a == "--goto") {
      r.verdict = jump_target(a, arg());
      break;  // the rest are target options
    } else if (a == "--icmp-type" || a == "--tcp-flags") {
      arg();
      if (a == "--tcp-flags") arg();
      neg = false;
    } else if (a == "--syn") {
      neg = false;
    } else {
      put(Cond::Unknown);  // unsupported option
      if (i + 1 < t.size() && t[i + 1].rfind('-', 0) != 0) ++i;
    }
  }
  return r;
}

}  // namespace

FwResult evaluate_iptables_save(std::string_view text) {
  Ruleset rs;
  rs.source = "iptables";
  std::string table;
  std::istringstream is{std::string(text)};
  std::string line;
  int lineno = 0;
  while (std::getline(is, line)) {
    ++lineno;
    std::string l = trim(line);
    if (l.empty() || l[0] == '#') continue;
    if (l[0] == '*') {
      table = l.substr(1);
      continue;
    }
    if (l == "COMMIT") continue;
    if (l[0] == ':') {
      auto w = split_ws(l.substr(1));
      if (w.empty()) continue;
      Chain c;
      c.name = table + " " + w[0];
      bool builtin = w.size() > 1 && w[1] != "-";
      if (builtin) {
        c.base = true;
        c.policy = w[1] == "DROP" ? VKind::Drop : VKind::Accept;
        bool path = (table == "filter" && w[0] == "INPUT") ||
                    ((table == "raw" || table == "mangle") && (w[0] == "PREROUTING" || w[0] == "INPUT"));
        if (path) rs.base.push_back("ipv4 " + table + " " + w[0]);
      }
      rs.chains["ipv4 " + table + " " + w[0]] = c;
      continue;
    }
    auto t = tokenize(l);
    if (t.size() >= 2 && (t[0] == "-A" || t[0] == "--append")) {
      auto it = rs.chains.find("ipv4 " + table + " " + t[1]);
      if (it == rs.chains.end()) continue;
      it->second.rules.push_back(ipt_rule(t, 2, lineno));
    }
  }
  // Base chains with only an accept policy and no rules do not matter.
  return evaluate(rs);
}

}  // namespace rxv
