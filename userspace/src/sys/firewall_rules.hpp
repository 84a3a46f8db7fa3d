// The firewall evaluator's rule model, private to firewall*.cpp: the front ends
// (firewall_nft.cpp, firewall_iptables.cpp) turn a ruleset's text into a Ruleset,
// evaluate() (firewall.cpp) gives the verdict for the RoCEv2 probe packet.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "sys/firewall.hpp"

namespace rxv::fw {

// ---- generic rule IR ------------------------------------------------------------
enum class Cond { True, False, Unknown, Limit };  // Limit: matches some packets (rate)

Cond cond_and(Cond a, Cond b);

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

struct Ruleset {
  std::map<std::string, Chain> chains;  // key: "family table name"
  std::vector<std::string> base;        // keys of base chains on the packet's path
  std::string source;
};

// The probe packet's verdict over the base chains on its path: drop wins, then unknown;
// no such chain: no-rules.
FwResult evaluate(const Ruleset& rs);

}  // namespace rxv::fw
