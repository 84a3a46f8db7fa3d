#include <gtest/gtest.h>

#include "core/report.hpp"

using namespace rxv;

namespace {
SizeResult sample(SizeOutcome result) {
  SizeResult s;
  s.size = 1ull << 30;
  s.offset = 16;
  s.pages = 262145;
  s.metadata_bytes = 262145 * 16;
  s.metadata_order = 11;
  s.result = result;
  s.registered = result == SizeOutcome::Pass;
  s.write = {1000, 0.5};
  s.read = {1000, 0.25};
  s.verified_bytes = 2000;
  return s;
}
}  // namespace

TEST(Report, JsonSchemaPerSize) {
  auto s = sample(SizeOutcome::Fail);
  s.reg_errno = 12;
  s.diagnosis = Diagnosis{"rxe_metadata_order", "needs order 11", "load rxe-kvfix"};
  auto j = to_json(s);
  for (const char* k :
       {"size", "offset", "pages", "metadata_bytes", "metadata_order", "registered", "reg_errno",
        "reg_seconds", "write", "read", "verified_bytes", "result", "diagnosis", "mrs", "mode", "mismatch"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["pages"], 262145);
  EXPECT_EQ(j["metadata_order"], 11);
  EXPECT_FALSE(j["registered"].get<bool>());
  EXPECT_EQ(j["reg_errno"], 12);
  for (const char* k : {"bytes", "seconds", "MBps"}) EXPECT_TRUE(j["write"].contains(k)) << k;
  EXPECT_DOUBLE_EQ(j["write"]["MBps"].get<double>(), 1000 / 1e6 / 0.5);
  EXPECT_EQ(j["diagnosis"]["cause"], "rxe_metadata_order");
  EXPECT_TRUE(j["diagnosis"].contains("summary"));
  EXPECT_TRUE(j["diagnosis"].contains("remedy"));
  EXPECT_TRUE(j["mismatch"].is_null());
  EXPECT_TRUE(to_json(sample(SizeOutcome::Pass))["diagnosis"].is_null());
}

TEST(Report, TopLevelAndVerdicts) {
  RunReport r;
  r.device = "rxe0";
  r.kernel = "7.2.13+deb14-amd64";
  r.module.flavor = ModuleFlavor::RxeKvfix;
  r.module.version = "9.9.9-rxe-kvfix";
  r.results = {sample(SizeOutcome::Pass), sample(SizeOutcome::Pass)};
  EXPECT_EQ(finalize(r), kExitPass);
  auto j = to_json(r);
  for (const char* k : {"schema_version", "tool", "device", "module", "kernel", "results", "verdict"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["tool"]["name"], "rxe-verify");
  EXPECT_EQ(j["tool"]["version"], kToolVersion);
  EXPECT_EQ(j["module"]["name"], "rdma_rxe");
  EXPECT_EQ(j["module"]["flavor"], "rxe-kvfix");
  EXPECT_EQ(j["module"]["version"], "9.9.9-rxe-kvfix");
  EXPECT_EQ(j["verdict"], "pass");
  EXPECT_EQ(j["results"].size(), 2u);

  r.results.push_back(sample(SizeOutcome::Fail));
  EXPECT_EQ(finalize(r), kExitFail);
  EXPECT_EQ(r.verdict, Verdict::Fail);

  RunReport m;
  auto s = sample(SizeOutcome::Fail);
  s.diagnosis = Diagnosis{"memlock", "x", "y"};
  m.results = {s};
  EXPECT_EQ(finalize(m), kExitNotReady);

  RunReport k;
  k.results = {sample(SizeOutcome::Skip)};
  EXPECT_EQ(finalize(k), kExitSkip);

  RunReport e;
  e.error = Diagnosis{"no_device", "no rxe device", ""};
  EXPECT_EQ(finalize(e), kExitNotReady);
  EXPECT_EQ(to_json(e)["verdict"], "not_ready");
  EXPECT_TRUE(to_json(e)["device"].is_null());
}

TEST(Report, CompletionWaitMode) {
  RunReport r;
  EXPECT_EQ(to_json(r)["completion_wait"],
            nlohmann::json({{"mode", "adaptive"}, {"spin_us", kDefaultSpin.count()}}));
  r.completion_wait.mode = WaitMode::Event;
  EXPECT_EQ(to_json(r)["completion_wait"], nlohmann::json({{"mode", "event"}, {"spin_us", 0}}));
  r.completion_wait.mode = WaitMode::BusyPoll;
  EXPECT_EQ(to_json(r)["completion_wait"], nlohmann::json({{"mode", "busy_poll"}, {"spin_us", nullptr}}));
}

TEST(Report, TableMentionsEverySize) {
  RunReport r;
  r.device = "rxe0";
  auto f = sample(SizeOutcome::Fail);
  f.diagnosis = Diagnosis{"rxe_metadata_order", "needs order 11", "load rxe-kvfix"};
  r.results = {sample(SizeOutcome::Pass), f};
  finalize(r);
  auto t = to_table(r);
  EXPECT_NE(t.find("1 GiB @+16"), std::string::npos) << t;
  EXPECT_NE(t.find("rxe_metadata_order"), std::string::npos);
  EXPECT_NE(t.find("remedy: load rxe-kvfix"), std::string::npos);
  EXPECT_NE(t.find("verdict: fail"), std::string::npos);
}
