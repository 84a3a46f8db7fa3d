// The iptables front end: `iptables-save` text into the rule model, then evaluated.
#include <sstream>
#include <string>
#include <vector>

#include "firewall.hpp"
#include "firewall_rules.hpp"
#include "procfs.hpp"

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

Cond port_match(const std::string& spec, long port) {
  // "4791", "4000:5000", "4791,5000" (multiport)
  std::stringstream ss(spec);
  std::string part;
  while (std::getline(ss, part, ',')) {
    auto colon = part.find(':');
    try {
      if (colon == std::string::npos) {
        if (std::stol(part) == port) return Cond::True;
      } else {
        long a = colon ? std::stol(part.substr(0, colon)) : 0;
        long b = colon + 1 < part.size() ? std::stol(part.substr(colon + 1)) : 65535;
        if (port >= a && port <= b) return Cond::True;
      }
    } catch (...) {
      return Cond::Unknown;
    }
  }
  return Cond::False;
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
      std::string m = arg();
      static const char* ok[] = {"udp",   "tcp",     "conntrack", "state", "comment",
                                 "limit", "pkttype", "multiport", "icmp"};
      bool known = false;
      for (auto* k : ok)
        if (m == k) known = true;
      if (!known) put(Cond::Unknown);
      if (m == "tcp" || m == "icmp") put(Cond::False);
    } else if (a == "--dport" || a == "--destination-port" || a == "--dports" || a == "--destination-ports") {
      put(port_match(arg(), 4791));
    } else if (a == "--ports") {
      put(port_match(arg(), 4791) == Cond::True ? Cond::True : Cond::Unknown);
    } else if (a == "--sport" || a == "--source-port" || a == "--sports") {
      arg();
      put(Cond::Unknown);
    } else if (a == "--ctstate" || a == "--state") {
      std::string s = arg();
      std::stringstream ss(s);
      std::string st;
      Cond c = Cond::False;
      while (std::getline(ss, st, ','))
        if (st == "NEW") c = Cond::True;
      put(c);
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
      std::string tg = arg();
      if (tg == "ACCEPT") r.verdict = {VKind::Accept, ""};
      else if (tg == "DROP" || tg == "REJECT") r.verdict = {VKind::Drop, ""};
      else if (tg == "RETURN") r.verdict = {VKind::Return, ""};
      else if (tg == "LOG" || tg == "NFLOG" || tg == "CT" || tg == "MARK" || tg == "CONNMARK" ||
               tg == "NOTRACK" || tg == "TRACE")
        r.verdict = {VKind::None, ""};
      else if (tg == "QUEUE" || tg == "NFQUEUE") r.verdict = {VKind::Unknown, ""};
      else r.verdict = {(a == "-g" || a == "--goto") ? VKind::Goto : VKind::Jump, tg};
      break;  // the rest are target options
    } else if (a == "--icmp-type" || a == "--tcp-flags") {
      arg();
      if (a == "--tcp-flags") arg();
      neg = false;
    } else if (a == "--syn") {
      neg = false;
    } else {
      put(Cond::Unknown);  // unsupported option
      if (i + 1 < t.size() && t[i + 1].rfind("-", 0) != 0) ++i;
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
