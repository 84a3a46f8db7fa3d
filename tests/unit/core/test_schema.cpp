// userspace/rxe-verify.schema.json against what the commands really print: every
// command's --json report (through the fakes, in its pass, fail and not-ready shapes) is
// written to a temporary directory and validated with python3-jsonschema
// (validate_json.py); documents with a field missing or mistyped must be rejected.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "app/app.hpp"
#include "app_fixtures.hpp"
#include "fake_host.hpp"
#include "fake_verbs.hpp"
#include "sys/procfs.hpp"
#include "test_paths.hpp"

using namespace rxv;
using rxv::testing::FakeControl;
using rxv::testing::FakeHost;
using rxv::testing::FakeProvider;
using rxv::testing::small_churn;
using rxv::testing::small_probe;
using rxv::testing::small_run;
namespace fs = std::filesystem;

namespace {

fs::path out_dir() {
  static fs::path d = [] {
    auto p = fs::temp_directory_path() / ("rxe-verify-schema-" + std::to_string(getpid()));
    fs::create_directories(p);
    return p;
  }();
  return d;
}

// The written documents are removed when the tests end.
struct RemoveOutDir : ::testing::Environment {
  void TearDown() override { fs::remove_all(out_dir()); }
};
const auto* const kRemoveOutDir = ::testing::AddGlobalTestEnvironment(new RemoveOutDir);

fs::path write(const std::string& name, const nlohmann::json& j) {
  fs::path p = out_dir() / (name + ".json");
  std::ofstream(p) << j.dump(2) << "\n";
  return p;
}

// validate_json.py's exit status (0 valid, 1 invalid, 2 no validator).
int validate(const fs::path& file) {
  std::string cmd = std::string(RXV_PYTHON3) + " " + RXV_TEST_SRC + "/validate_json.py " + RXV_SCHEMA + " '" +
                    file.string() + "'";
  int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void expect_valid(const std::string& name, const Outcome& out) {
  ASSERT_TRUE(out.has_report) << name;
  EXPECT_EQ(validate(write(name, out.report)), 0) << name << ": " << out.report.dump(2);
}

nlohmann::json valid_run() {
  FakeControl c;
  FakeProvider prov(c);
  FakeHost host;
  return run_command(small_run({"64K"}), prov, host).report;
}

}  // namespace

TEST(Schema, ValidatorIsInstalled) {
  // 2: python3-jsonschema missing (tests/host-deps installs it); the rest would be vacuous
  ASSERT_EQ(validate(write("run-pass", valid_run())), 0);
}

TEST(Schema, RunReports) {
  {
    FakeControl c;
    FakeProvider prov(c);
    FakeHost host;
    expect_valid("run-pass", run_command(small_run({"64K,128K+16"}), prov, host));
  }
  {
    FakeControl c;
    c.corrupt_op_at = 1;  // a mismatch object
    FakeProvider prov(c);
    FakeHost host;
    expect_valid("run-corrupt", run_command(small_run({"64K", "64K"}), prov, host));
  }
  {
    FakeControl c;
    c.reg_errno = [](std::size_t len) { return len >= (64u << 10) ? ENOMEM : 0; };
    FakeProvider prov(c);
    FakeHost host;
    expect_valid("run-reg-fail", run_command(small_run({"64K"}), prov, host));
  }
  {
    FakeControl c;
    c.port_active = false;
    FakeProvider prov(c);
    FakeHost host;
    expect_valid("run-not-ready", run_command(small_run({"64K"}), prov, host));
  }
  for (int mode = 0; mode < 2; ++mode) {  // the waiting modes' completion_wait shapes
    FakeControl c;
    FakeProvider prov(c);
    FakeHost host;
    auto o = small_run({"64K"});
    (mode == 0 ? o.busy_poll : o.no_spin) = true;
    expect_valid(mode == 0 ? "run-busy-poll" : "run-no-spin", run_command(o, prov, host));
  }
}

TEST(Schema, DoctorReports) {
  FakeHost ready;
  expect_valid("doctor-ready", doctor_command({}, ready));
  FakeHost bad;
  bad.mod = ModuleIdentity{};
  bad.devices.clear();
  bad.files.erase("/proc/meminfo");
  bad.files.erase("/proc/self/limits");
  expect_valid("doctor-not-ready", doctor_command({}, bad));
  FakeHost stock;
  stock.mod.flavor = ModuleFlavor::Stock;
  stock.files[std::string(kKvfixStatusDir) + stock.kernel()] =
      "state=failed\ntime=2026-12-05T18:00:00Z\nversion=1.0.0\nmessage=no source\n";
  expect_valid("doctor-kvfix-build-failed", doctor_command({}, stock));
}

TEST(Schema, ProbeReports) {
  {
    FakeControl c;
    c.reg_errno = [](std::size_t len) { return len > 100 * 4096 ? ENOMEM : 0; };
    FakeProvider prov(c);
    FakeHost host;
    expect_valid("probe-boundary", probe_command(small_probe(), prov, host));
  }
  {
    FakeControl c;
    FakeProvider prov(c);
    FakeHost host;
    expect_valid("probe-all-ok", probe_command(small_probe(), prov, host));
  }
}

TEST(Schema, ChurnReports) {
  {
    FakeControl c;
    FakeProvider prov(c);
    FakeHost host;
    expect_valid("churn-traffic", churn_command(small_churn(3, true), prov, host));
  }
  {
    FakeControl c;
    int n = 0;
    c.reg_errno = [&](std::size_t) { return ++n == 2 ? ENOMEM : 0; };
    FakeProvider prov(c);
    FakeHost host;
    host.files.erase("/proc/buddyinfo");
    expect_valid("churn-reg-fail", churn_command(small_churn(3, false), prov, host));
  }
  {
    FakeControl c;
    c.port_active = false;
    FakeProvider prov(c);
    FakeHost host;
    expect_valid("churn-not-ready", churn_command(small_churn(3, true), prov, host));
  }
}

TEST(Schema, BrokenFixtureIsRejected) {
  // tests/unit/data/schema-broken-run.json: verdict missing, seed a string
  EXPECT_EQ(validate(fs::path(RXV_TEST_DATA) / "schema-broken-run.json"), 1);
}

TEST(Schema, AMissingOrMistypedFieldIsRejected) {
  nlohmann::json j = valid_run();
  auto missing = j;
  missing["results"][0].erase("verified_bytes");
  EXPECT_EQ(validate(write("broken-missing", missing)), 1);
  auto mistyped = j;
  mistyped["results"][0]["registered"] = "yes";
  EXPECT_EQ(validate(write("broken-mistyped", mistyped)), 1);
  auto bad_verdict = j;
  bad_verdict["verdict"] = "passed";
  EXPECT_EQ(validate(write("broken-verdict", bad_verdict)), 1);
  auto no_wait = j;
  no_wait.erase("completion_wait");
  EXPECT_EQ(validate(write("broken-no-completion-wait", no_wait)), 1);
  auto wait_mode = j;
  wait_mode["completion_wait"]["mode"] = "spin";
  EXPECT_EQ(validate(write("broken-wait-mode", wait_mode)), 1);
  auto busy_spin = j;  // busy_poll has no spin bound
  busy_spin["completion_wait"] = {{"mode", "busy_poll"}, {"spin_us", 50}};
  EXPECT_EQ(validate(write("broken-busy-poll-spin", busy_spin)), 1);
  auto event_spin = j;  // the event mode does not spin
  event_spin["completion_wait"] = {{"mode", "event"}, {"spin_us", 50}};
  EXPECT_EQ(validate(write("broken-event-spin", event_spin)), 1);
  auto no_envelope = j;
  no_envelope.erase("schema_version");
  EXPECT_EQ(validate(write("broken-envelope", no_envelope)), 1);
}

// --find DIR, as the VM runner uses it on what a guest captured: rxe-verify documents are
// validated, other tools' JSON is left alone, a truncated document is an error.
int validate_dir(const fs::path& dir) {
  std::string cmd = std::string(RXV_PYTHON3) + " " + RXV_TEST_SRC + "/validate_json.py --find '" +
                    dir.string() + "' " + RXV_SCHEMA + " >/dev/null 2>&1";
  int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(Schema, FindModeChecksTheGuestsRxeVerifyDocuments) {
  fs::path dir = out_dir() / "guest";
  fs::create_directories(dir / "proof-k");
  std::ofstream(dir / "proof-k" / "fixed-1G.json") << valid_run().dump(2) << "\n";
  std::ofstream(dir / "results.json") << R"({"what": "the benchmark's own file"})"
                                      << "\n";
  std::ofstream(dir / "empty.json") << "";
  EXPECT_EQ(validate_dir(dir), 0);
  auto broken = valid_run();
  broken.erase("verdict");
  std::ofstream(dir / "proof-k" / "stock-1G.json") << broken.dump(2) << "\n";
  EXPECT_EQ(validate_dir(dir), 1);
  fs::remove(dir / "proof-k" / "stock-1G.json");
  std::ofstream(dir / "proof-k" / "stock-2G.json") << valid_run().dump(2).substr(0, 200);
  EXPECT_EQ(validate_dir(dir), 1);
}
