// The nftables front end: `nft -j list ruleset` JSON into the rule model, then evaluated.
#include <charconv>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sys/firewall.hpp"
#include "sys/firewall_rules.hpp"

namespace rxv {

using namespace fw;  // the rule model (firewall_rules.hpp)

// ---- nftables JSON --------------------------------------------------------------
namespace {

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
    if (proto == "ip6" || proto == "tcp" || proto == "icmp" || proto == "icmpv6" || proto == "sctp" ||
        proto == "dccp" || proto == "udplite" || proto == "esp" || proto == "ah" || proto == "arp")
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
    long v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (!s.empty() && ec == std::errc{} && end == s.data() + s.size())
      return v == f.num ? Cond::True : Cond::False;
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
    } else if (e.contains("counter") || e.contains("log") || e.contains("mangle") || e.contains("notrack") ||
               e.contains("set") || e.contains("ct count") || e.contains("continue")) {
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
      std::string fam = c.value("family", ""), table = c.value("table", ""), name = c.value("name", "");
      Chain ch;
      ch.name.append(fam).append(" ").append(table).append(" ").append(name);
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

}  // namespace rxv
