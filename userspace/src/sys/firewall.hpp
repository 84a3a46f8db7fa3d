// Conservative evaluator: would the host's input path drop an incoming RoCEv2 packet
// (IPv4, UDP dport 4791, conntrack state new, arriving on a non-loopback interface,
// pkttype host)? Works on `nft -j list ruleset` JSON and on `iptables-save` text.
// Anything it does not understand makes the answer "cannot tell", never "accept".
#pragma once
#include <string>
#include <string_view>

namespace rxv {

enum class FwVerdict { Accept, Drop, Unknown, NoRules };
std::string to_string(FwVerdict v);  // "accept", "drop", "unknown", "no-rules"

struct FwResult {
  FwVerdict verdict = FwVerdict::NoRules;
  std::string source;  // "nftables" | "iptables"
  std::string detail;  // which chain/rule decided, or why it cannot tell
  bool parse_error = false;
};

FwResult evaluate_nft_json(std::string_view json_text);
FwResult evaluate_iptables_save(std::string_view text);
// Both sources of one host: drop wins, then unknown, then accept.
FwResult combine(const FwResult& a, const FwResult& b);

}  // namespace rxv
