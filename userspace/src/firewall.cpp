#include "firewall.hpp"

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <vector>

#include "procfs.hpp"

namespace rxv {

std::string to_string(FwVerdict v) {
  switch (v) {
    case FwVerdict::Accept: return "accept";
    case FwVerdict::Drop: return "drop";
    case FwVerdict::Unknown: return "unknown";
    case FwVerdict::NoRules: return "no-rules";
  }
  return "unknown";
}

namespace {

// ---- generic rule IR ------------------------------------------------------------
enum class Cond { True, False, Unknown, Limit };  // Limit: matches some packets (rate)

Cond cond_and(Cond a, Cond b) {
  if (a == Cond::False || b == Cond::False) return Cond::False;
  if (a == Cond::Unknown || b == Cond::Unknown) return Cond::Unknown;
  if (a == Cond::Limit || b == Cond::Limit) return Cond::Limit;
  return Cond::True;
}

enum class VKind { None, Accept, Drop, Return, Jump, Goto, Unknown };
struct Verdict {
  VKind kind = VKind::None;
  std::string target;
};

struct Rule {
  Cond cond = Cond::True;
  Verdict verdict;
  std::string label;
};

struct Chain {
  std::string name;  // display name "inet filter input"
  std::vector<Rule> rules;
  bool base = false;
  VKind policy = VKind::Accept;
};

enum class Out { Accept, Drop, Return, Unknown };

struct Res {
  Out out;
  std::string why;
};

struct Ruleset {
  std::map<std::string, Chain> chains;  // key: "family table name"
  std::vector<std::string> base;        // keys of base chains on the packet's path
  std::string source;
};

class Evaluator {
 public:
  explicit Evaluator(const Ruleset& rs) : rs_(rs) {}

  Res chain(const std::string& key, int depth) {
    auto it = rs_.chains.find(key);
    if (it == rs_.chains.end()) return {Out::Unknown, "jump to unknown chain " + key};
    if (depth > 16) return {Out::Unknown, "jump depth exceeded at " + key};
    return rules(it->second, 0, depth, key);
  }

  Res base_chain(const std::string& key) {
    const Chain& c = rs_.chains.at(key);
    Res r = chain(key, 0);
    if (r.out == Out::Return) {
      if (c.policy == VKind::Drop)
        return {Out::Drop, "chain " + c.name + ": policy drop and no rule accepts UDP 4791"};
      return {Out::Accept, "chain " + c.name + ": policy accept"};
    }
    return r;
  }

 private:
  Res rules(const Chain& c, std::size_t i, int depth, const std::string& key) {
    if (i >= c.rules.size()) {
      if (!c.base) return {Out::Return, ""};
      if (c.policy == VKind::Drop)
        return {Out::Drop, "chain " + c.name + ": policy drop and no rule accepts UDP 4791"};
      return {Out::Accept, "chain " + c.name + ": policy accept"};
    }
    const Rule& r = c.rules[i];
    auto rest = [&]() { return rules(c, i + 1, depth, key); };
    if (r.cond == Cond::False || r.verdict.kind == VKind::None) return rest();
    Res v = apply(c, r, i, depth, key);
    if (v.out == Out::Return && r.verdict.kind == VKind::Jump) return rest();  // jump came back
    if (r.cond == Cond::True) return v;
    Res n = rest();
    if (n.out == v.out) return v.out == Out::Drop ? v : n;
    if (r.cond == Cond::Limit && (v.out == Out::Drop || n.out == Out::Drop)) {
      Res d = v.out == Out::Drop ? v : n;
      d.why += " (rate-limited rule: packets beyond the rate are dropped)";
      return d;
    }
    return {Out::Unknown, "chain " + c.name + ": " + r.label +
                              " may or may not match RoCEv2 (cannot tell)"};
  }

  Res apply(const Chain& c, const Rule& r, std::size_t, int depth, const std::string& key) {
    switch (r.verdict.kind) {
      case VKind::Accept: return {Out::Accept, "chain " + c.name + ": " + r.label + " accepts"};
      case VKind::Drop: return {Out::Drop, "chain " + c.name + ": " + r.label + " drops/rejects"};
      case VKind::Return: return {Out::Return, ""};
      case VKind::Jump:
      case VKind::Goto: {
        std::string tk = key.substr(0, key.rfind(' ') + 1) + r.verdict.target;
        Res s = chain(tk, depth + 1);
        if (r.verdict.kind == VKind::Goto) return s;  // return from target = return here
        return s;
      }
      case VKind::Unknown:
        return {Out::Unknown, "chain " + c.name + ": " + r.label + " has an unsupported verdict"};
      case VKind::None: break;
    }
    return {Out::Return, ""};
  }

  const Ruleset& rs_;
};

FwResult evaluate(const Ruleset& rs) {
  FwResult res;
  res.source = rs.source;
  if (rs.base.empty()) {
    res.verdict = FwVerdict::NoRules;
    res.detail = "no input/prerouting chains";
    return res;
  }
  Evaluator ev(rs);
  bool unknown = false;
  std::string unknown_why, accept_why;
  for (const auto& k : rs.base) {
    Res r = ev.base_chain(k);
    if (r.out == Out::Drop) {
      res.verdict = FwVerdict::Drop;
      res.detail = r.why;
      return res;
    }
    if (r.out == Out::Unknown) {
      if (!unknown) unknown_why = r.why;
      unknown = true;
    } else {
      if (!accept_why.empty()) accept_why += "; ";
      accept_why += r.why;
    }
  }
  res.verdict = unknown ? FwVerdict::Unknown : FwVerdict::Accept;
  res.detail = unknown ? unknown_why : accept_why;
  return res;
}

// ---- nftables JSON --------------------------------------------------------------
using nlohmann::json;

// A field of the probe packet: a known value, absent (header not present: rule cannot
// match), or unknown.
struct Field {
  enum { Known, Absent, Unknown, NotLo } state = Unknown;
  long num = -1;
  std::vector<std::string> names;  // accepted string spellings
};

Field known(long n, std::vector<std::string> names) {
  Field f;
  f.state = Field::Known;
  f.num = n;
  f.names = std::move(names);
  return f;
}
Field absent() {
  Field f;
  f.state = Field::Absent;
  return f;
}
Field unknownf() { return Field{}; }

Field nft_left(const json& l) {
  if (!l.is_object()) return unknownf();
  if (l.contains("meta")) {
    std::string k = l["meta"].value("key", "");
    if (k == "l4proto") return known(17, {"udp"});
    if (k == "nfproto") return known(2, {"ipv4"});
    if (k == "pkttype") return known(0, {"host", "unicast"});
    if (k == "iif" || k == "iifname") {
      Field f;
      f.state = Field::NotLo;
      return f;
    }
    if (k == "protocol") return known(0x0800, {"ip"});
    return unknownf();
  }
  if (l.contains("ct")) {
    std::string k = l["ct"].value("key", "");
    if (k == "state") return known(8, {"new"});
    if (k == "direction") return known(0, {"original"});
    return unknownf();
  }
  if (l.contains("payload")) {
    const json& p = l["payload"];
    std::string proto = p.value("protocol", ""), field = p.value("field", "");
    if (proto == "ip") {
      if (field == "protocol") return known(17, {"udp"});
      if (field == "version") return known(4, {});
      return unknownf();
    }
    if (proto == "udp" || proto == "th") {
      if (field == "dport") return known(4791, {"4791"});
      return unknownf();
    }
    if (proto == "ip6" || proto == "tcp" || proto == "icmp" || proto == "icmpv6" ||
        proto == "sctp" || proto == "dccp" || proto == "udplite" || proto == "esp" ||
        proto == "ah" || proto == "arp")
      return absent();
    return unknownf();
  }
  return unknownf();
}

// Does a single right-hand element equal the field? True/False/Unknown.
Cond element_eq(const Field& f, const json& r) {
  if (f.state == Field::NotLo) {
    if (r.is_string()) {
      std::string s = r.get<std::string>();
      if (s == "lo") return Cond::False;
      return Cond::Unknown;
    }
    return Cond::Unknown;
  }
  if (f.state != Field::Known) return Cond::Unknown;
  if (r.is_number_integer()) return r.get<long>() == f.num ? Cond::True : Cond::False;
  if (r.is_string()) {
    std::string s = r.get<std::string>();
    for (const auto& n : f.names)
      if (n == s) return Cond::True;
    // A numeric string, or a different name: we know all names we handle.
    try {
      std::size_t pos = 0;
      long v = std::stol(s, &pos);
      if (pos == s.size()) return v == f.num ? Cond::True : Cond::False;
    } catch (...) {
    }
    return Cond::False;
  }
  if (r.is_object() && r.contains("range") && r["range"].is_array() && r["range"].size() == 2) {
    const json& a = r["range"][0];
    const json& b = r["range"][1];
    if (a.is_number_integer() && b.is_number_integer())
      return (f.num >= a.get<long>() && f.num <= b.get<long>()) ? Cond::True : Cond::False;
    return Cond::Unknown;
  }
  return Cond::Unknown;
}

Cond set_member(const Field& f, const json& r) {
  const json* items = nullptr;
  if (r.is_array()) items = &r;
  if (r.is_object() && r.contains("set") && r["set"].is_array()) items = &r["set"];
  if (!items) return element_eq(f, r);
  Cond acc = Cond::False;
  for (const auto& e : *items) {
    Cond c = element_eq(f, e);
    if (c == Cond::True) return Cond::True;
    if (c == Cond::Unknown) acc = Cond::Unknown;
  }
  return acc;
}

Cond nft_match(const json& m) {
  Field f = nft_left(m.value("left", json()));
  if (f.state == Field::Absent) return Cond::False;
  std::string op = m.value("op", "==");
  const json& right = m.contains("right") ? m["right"] : json();
  Cond c;
  if (op == "==" || op == "in" || op == "!=") {
    c = set_member(f, right);
    if (op == "!=") {
      if (c == Cond::True) c = Cond::False;
      else if (c == Cond::False) c = Cond::True;
    }
    return c;
  }
  if ((op == "<" || op == ">" || op == "<=" || op == ">=") && f.state == Field::Known &&
      right.is_number_integer()) {
    long v = right.get<long>();
    bool b = op == "<" ? f.num < v : op == ">" ? f.num > v : op == "<=" ? f.num <= v : f.num >= v;
    return b ? Cond::True : Cond::False;
  }
  return Cond::Unknown;
}

std::optional<Verdict> nft_verdict(const json& e) {
  if (e.contains("accept")) return Verdict{VKind::Accept, ""};
  if (e.contains("drop") || e.contains("reject")) return Verdict{VKind::Drop, ""};
  if (e.contains("return")) return Verdict{VKind::Return, ""};
  if (e.contains("jump")) return Verdict{VKind::Jump, e["jump"].value("target", "")};
  if (e.contains("goto")) return Verdict{VKind::Goto, e["goto"].value("target", "")};
  if (e.contains("queue")) return Verdict{VKind::Unknown, ""};
  return std::nullopt;
}

Rule nft_rule(const json& r) {
  Rule out;
  out.label = "rule handle " + std::to_string(r.value("handle", 0));
  if (r.contains("comment") && r["comment"].is_string())
    out.label += " (\"" + r["comment"].get<std::string>() + "\")";
  if (!r.contains("expr") || !r["expr"].is_array()) {
    out.cond = Cond::Unknown;
    out.verdict.kind = VKind::Unknown;
    return out;
  }
  for (const auto& e : r["expr"]) {
    if (!e.is_object() || e.empty()) continue;
    if (e.contains("match")) {
      out.cond = cond_and(out.cond, nft_match(e["match"]));
    } else if (e.contains("limit")) {
      out.cond = cond_and(out.cond, Cond::Limit);
    } else if (e.contains("counter") || e.contains("log") || e.contains("mangle") ||
               e.contains("notrack") || e.contains("set") || e.contains("ct count") ||
               e.contains("continue")) {
      // no effect on the verdict
    } else if (auto v = nft_verdict(e)) {
      out.verdict = *v;
      break;
    } else if (e.contains("vmap")) {
      const json& vm = e["vmap"];
      Field f = nft_left(vm.value("key", json()));
      const json& data = vm.value("data", json());
      const json* items = data.is_object() && data.contains("set") ? &data["set"] : nullptr;
      if (!items || !items->is_array() || f.state == Field::Unknown || f.state == Field::NotLo) {
        out.verdict.kind = VKind::Unknown;
        break;
      }
      if (f.state == Field::Absent) {
        out.cond = Cond::False;
        break;
      }
      bool found = false;
      for (const auto& pair : *items) {
        if (!pair.is_array() || pair.size() != 2) continue;
        Cond c = element_eq(f, pair[0]);
        if (c == Cond::Unknown) {
          out.verdict.kind = VKind::Unknown;
          found = true;
          break;
        }
        if (c == Cond::True) {
          auto v = nft_verdict(pair[1]);
          out.verdict = v ? *v : Verdict{VKind::Unknown, ""};
          found = true;
          break;
        }
      }
      if (!found) out.cond = Cond::False;  // no element: rule continues
      break;
    } else {
      out.cond = cond_and(out.cond, Cond::Unknown);  // xt, fib, unknown statements
    }
  }
  return out;
}

}  // namespace

FwResult evaluate_nft_json(std::string_view text) {
  FwResult bad;
  bad.source = "nftables";
  json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("nftables") || !j["nftables"].is_array()) {
    bad.verdict = FwVerdict::Unknown;
    bad.parse_error = true;
    bad.detail = "cannot parse nft JSON";
    return bad;
  }
  Ruleset rs;
  rs.source = "nftables";
  auto key_of = [](const std::string& fam, const std::string& table, const std::string& name) {
    return fam + " " + table + " " + name;
  };
  for (const auto& o : j["nftables"]) {
    if (!o.is_object()) continue;
    if (o.contains("chain")) {
      const json& c = o["chain"];
      std::string fam = c.value("family", ""), table = c.value("table", ""),
                  name = c.value("name", "");
      Chain ch;
      ch.name = fam + " " + table + " " + name;
      std::string hook = c.value("hook", "");
      if (c.contains("hook")) {
        ch.base = true;
        ch.policy = c.value("policy", "accept") == "drop" ? VKind::Drop : VKind::Accept;
        bool path = ((fam == "ip" || fam == "inet") && (hook == "input" || hook == "prerouting")) ||
                    (fam == "netdev" && hook == "ingress");
        if (path) rs.base.push_back(key_of(fam, table, name));
      }
      rs.chains[key_of(fam, table, name)] = ch;
    }
  }
  for (const auto& o : j["nftables"]) {
    if (!o.is_object() || !o.contains("rule")) continue;
    const json& r = o["rule"];
    std::string k = key_of(r.value("family", ""), r.value("table", ""), r.value("chain", ""));
    auto it = rs.chains.find(k);
    if (it == rs.chains.end()) continue;
    it->second.rules.push_back(nft_rule(r));
  }
  return evaluate(rs);
}

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
      static const char* ok[] = {"udp", "tcp", "conntrack", "state", "comment", "limit",
                                 "pkttype", "multiport", "icmp"};
      bool known = false;
      for (auto* k : ok)
        if (m == k) known = true;
      if (!known) put(Cond::Unknown);
      if (m == "tcp" || m == "icmp") put(Cond::False);
    } else if (a == "--dport" || a == "--destination-port" || a == "--dports" ||
               a == "--destination-ports") {
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
                    ((table == "raw" || table == "mangle") &&
                     (w[0] == "PREROUTING" || w[0] == "INPUT"));
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

FwResult combine(const FwResult& a, const FwResult& b) {
  auto rank = [](FwVerdict v) {
    switch (v) {
      case FwVerdict::Drop: return 3;
      case FwVerdict::Unknown: return 2;
      case FwVerdict::Accept: return 1;
      case FwVerdict::NoRules: return 0;
    }
    return 0;
  };
  return rank(a.verdict) >= rank(b.verdict) ? a : b;
}

}  // namespace rxv
