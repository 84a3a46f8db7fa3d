// The firewall evaluator: the verdict logic over the rule model (firewall_rules.hpp).
#include "sys/firewall.hpp"

#include <map>
#include <string>

#include "sys/firewall_rules.hpp"

namespace rxv {

std::string to_string(FwVerdict v) {
  switch (v) {
    case FwVerdict::Accept:
      return "accept";
    case FwVerdict::Drop:
      return "drop";
    case FwVerdict::Unknown:
      return "unknown";
    case FwVerdict::NoRules:
      return "no-rules";
  }
  return "unknown";
}

namespace fw {

Cond cond_and(Cond a, Cond b) {
  if (a == Cond::False || b == Cond::False) return Cond::False;
  if (a == Cond::Unknown || b == Cond::Unknown) return Cond::Unknown;
  if (a == Cond::Limit || b == Cond::Limit) return Cond::Limit;
  return Cond::True;
}

namespace {

enum class Out { Accept, Drop, Return, Unknown };

struct Res {
  Out out;
  std::string why;
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
    return {Out::Unknown, "chain " + c.name + ": " + r.label + " may or may not match RoCEv2 (cannot tell)"};
  }

  Res apply(const Chain& c, const Rule& r, std::size_t, int depth, const std::string& key) {
    switch (r.verdict.kind) {
      case VKind::Accept:
        return {Out::Accept, "chain " + c.name + ": " + r.label + " accepts"};
      case VKind::Drop:
        return {Out::Drop, "chain " + c.name + ": " + r.label + " drops/rejects"};
      case VKind::Return:
        return {Out::Return, ""};
      case VKind::Jump:
      case VKind::Goto: {
        std::string tk = key.substr(0, key.rfind(' ') + 1) + r.verdict.target;
        Res s = chain(tk, depth + 1);
        if (r.verdict.kind == VKind::Goto) return s;  // return from target = return here
        return s;
      }
      case VKind::Unknown:
        return {Out::Unknown, "chain " + c.name + ": " + r.label + " has an unsupported verdict"};
      case VKind::None:
        break;
    }
    return {Out::Return, ""};
  }

  const Ruleset& rs_;
};

}  // namespace

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

}  // namespace fw

FwResult combine(const FwResult& a, const FwResult& b) {
  auto rank = [](FwVerdict v) {
    switch (v) {
      case FwVerdict::Drop:
        return 3;
      case FwVerdict::Unknown:
        return 2;
      case FwVerdict::Accept:
        return 1;
      case FwVerdict::NoRules:
        return 0;
    }
    return 0;
  };
  return rank(a.verdict) >= rank(b.verdict) ? a : b;
}

}  // namespace rxv
