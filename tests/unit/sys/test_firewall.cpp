#include <gtest/gtest.h>

#include "sys/firewall.hpp"
#include "test_data.hpp"

using namespace rxv;

TEST(Nft, SeedRulesetDropsRoce) {
  auto r = evaluate_nft_json(data("nft-seed.json"));
  EXPECT_EQ(r.verdict, FwVerdict::Drop) << r.detail;
  EXPECT_NE(r.detail.find("input"), std::string::npos) << r.detail;
}

TEST(Nft, SeedWithUdp4791AcceptIsOk) {
  auto r = evaluate_nft_json(data("nft-seed-roce-ok.json"));
  EXPECT_EQ(r.verdict, FwVerdict::Accept) << r.detail;
  EXPECT_NE(r.detail.find("RoCEv2"), std::string::npos) << r.detail;
}

TEST(Nft, UnknownMatchCannotTell) {
  auto r = evaluate_nft_json(data("nft-unknown.json"));
  EXPECT_EQ(r.verdict, FwVerdict::Unknown) << r.detail;
}

TEST(Nft, MultiTableSetsAndNegatedIifname) {
  auto r = evaluate_nft_json(data("nft-multi-table-ok.json"));
  EXPECT_EQ(r.verdict, FwVerdict::Accept) << r.detail;
}

TEST(Nft, EmptyRulesetAndGarbage) {
  auto r = evaluate_nft_json(R"({"nftables":[{"metainfo":{"version":"1.0.6"}}]})");
  EXPECT_EQ(r.verdict, FwVerdict::NoRules);
  auto g = evaluate_nft_json("not json");
  EXPECT_EQ(g.verdict, FwVerdict::Unknown);
  EXPECT_TRUE(g.parse_error);
}

TEST(Nft, RateLimitedAcceptStillDrops) {
  const char* j = R"({"nftables":[
    {"chain":{"family":"ip","table":"t","name":"in","hook":"input","policy":"drop"}},
    {"rule":{"family":"ip","table":"t","chain":"in","handle":2,"expr":[
      {"match":{"op":"==","left":{"payload":{"protocol":"udp","field":"dport"}},"right":4791}},
      {"limit":{"rate":100,"per":"second"}},{"accept":null}]}}]})";
  EXPECT_EQ(evaluate_nft_json(j).verdict, FwVerdict::Drop);
}

TEST(Nft, JumpToUserChain) {
  const char* j = R"({"nftables":[
    {"chain":{"family":"inet","table":"t","name":"in","hook":"input","policy":"drop"}},
    {"chain":{"family":"inet","table":"t","name":"udp_in"}},
    {"rule":{"family":"inet","table":"t","chain":"in","handle":2,"expr":[
      {"match":{"op":"==","left":{"meta":{"key":"l4proto"}},"right":"udp"}},
      {"jump":{"target":"udp_in"}}]}},
    {"rule":{"family":"inet","table":"t","chain":"udp_in","handle":3,"expr":[
      {"match":{"op":"==","left":{"payload":{"protocol":"th","field":"dport"}},"right":{"range":[4000,5000]}}},
      {"accept":null}]}}]})";
  EXPECT_EQ(evaluate_nft_json(j).verdict, FwVerdict::Accept);
}

TEST(Nft, DropInPreroutingWins) {
  const char* j = R"({"nftables":[
    {"chain":{"family":"inet","table":"a","name":"pre","hook":"prerouting","policy":"accept"}},
    {"rule":{"family":"inet","table":"a","chain":"pre","handle":2,"expr":[
      {"match":{"op":"==","left":{"payload":{"protocol":"udp","field":"dport"}},"right":4791}},
      {"counter":null},{"drop":null}]}},
    {"chain":{"family":"inet","table":"b","name":"in","hook":"input","policy":"accept"}}]})";
  EXPECT_EQ(evaluate_nft_json(j).verdict, FwVerdict::Drop);
}

TEST(Iptables, PolicyDropWithoutRule) {
  auto r = evaluate_iptables_save(data("iptables-drop.txt"));
  EXPECT_EQ(r.verdict, FwVerdict::Drop) << r.detail;
}

TEST(Iptables, Udp4791Accepted) {
  auto r = evaluate_iptables_save(data("iptables-roce-ok.txt"));
  EXPECT_EQ(r.verdict, FwVerdict::Accept) << r.detail;
}

TEST(Iptables, UnknownMatchAndEmpty) {
  EXPECT_EQ(evaluate_iptables_save("").verdict, FwVerdict::NoRules);
  const char* t = "*filter\n:INPUT DROP [0:0]\n-A INPUT -m set --match-set ok src -j ACCEPT\nCOMMIT\n";
  EXPECT_EQ(evaluate_iptables_save(t).verdict, FwVerdict::Unknown);
  const char* m =
      "*filter\n:INPUT DROP [0:0]\n-A INPUT -p udp -m multiport --dports 4000:5000,6000 -j ACCEPT\nCOMMIT\n";
  EXPECT_EQ(evaluate_iptables_save(m).verdict, FwVerdict::Accept);
}

// Port specs are read with std::from_chars: single ports, open and closed ranges and lists;
// a part that is not a number cannot tell (a policy DROP then stays unknown).
TEST(Iptables, PortSpecs) {
  auto with = [](const std::string& dport) {
    return evaluate_iptables_save("*filter\n:INPUT DROP [0:0]\n-A INPUT -p udp -m multiport --dports " +
                                  dport + " -j ACCEPT\nCOMMIT\n")
        .verdict;
  };
  EXPECT_EQ(with("4791"), FwVerdict::Accept);
  EXPECT_EQ(with(":5000"), FwVerdict::Accept);
  EXPECT_EQ(with("4000:"), FwVerdict::Accept);
  EXPECT_EQ(with("22,4791"), FwVerdict::Accept);
  EXPECT_EQ(with("22"), FwVerdict::Drop);
  EXPECT_EQ(with("5000:6000"), FwVerdict::Drop);
  EXPECT_EQ(with("http"), FwVerdict::Unknown);
  EXPECT_EQ(with("4000:x"), FwVerdict::Unknown);
}

TEST(Combine, DropWins) {
  FwResult a, b;
  a.verdict = FwVerdict::Accept;
  b.verdict = FwVerdict::Drop;
  EXPECT_EQ(combine(a, b).verdict, FwVerdict::Drop);
  b.verdict = FwVerdict::NoRules;
  EXPECT_EQ(combine(a, b).verdict, FwVerdict::Accept);
}
