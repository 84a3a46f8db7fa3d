// Result model, JSON (documented schema, see userspace/README.md) and the text table.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/result.hpp"  // the exit codes
#include "core/diagnosis.hpp"
#include "core/plan.hpp"
#include "sys/completion_wait.hpp"

namespace rxv {

inline constexpr const char* kToolVersion = RXV_TOOL_VERSION;
inline constexpr int kSchemaVersion = 1;

// Every command's verdict; its JSON "verdict" and text are to_string() of it.
enum class Verdict { Pass, Fail, Skip, NotReady, Ready, Complete, BudgetExhausted };
// "pass", "fail", "skip", "not_ready", "ready", "complete", "budget_exhausted"
std::string to_string(Verdict v);
void to_json(nlohmann::json& j, Verdict v);  // json(v) is to_string(v)
// The one mapping of verdicts to the exit codes above: pass, ready, complete and
// budget_exhausted 0; fail 1; not_ready 3; skip 4.
int exit_code(Verdict v);
// Diagnosis causes that say the host cannot run the test rather than that the module
// failed it (memlock, device_down): a failure of only these is not_ready.
bool is_environment_cause(const std::string& cause);

// One operation's figures over all passes of a size. `seconds` is wire time (at least one
// work request in flight); `wall_seconds` includes pattern fills and checks, so
// bytes / wall_seconds is the verified throughput.
struct LoopStats {
  std::uint64_t bytes = 0;
  double seconds = 0;
  std::uint64_t iterations = 0;  // work requests
  std::uint64_t transfers = 0;
  double wall_seconds = 0;
  double peak_Bps = 0;
  double mbps() const { return seconds > 0 ? static_cast<double>(bytes) / 1e6 / seconds : 0; }
  double mibps() const { return seconds > 0 ? static_cast<double>(bytes) / 1048576.0 / seconds : 0; }
  double verified_mbps() const {
    return wall_seconds > 0 ? static_cast<double>(bytes) / 1e6 / wall_seconds : 0;
  }
  double msg_rate() const { return seconds > 0 ? static_cast<double>(iterations) / seconds : 0; }
};

// One size's outcome; JSON "result" and text are to_string(): "pass", "fail", "skip".
enum class SizeOutcome { Pass, Fail, Skip };
std::string to_string(SizeOutcome o);
void to_json(nlohmann::json& j, SizeOutcome o);
// Which loop a mismatch was found in; to_string(): "write", "read".
enum class Direction { Write, Read };
std::string to_string(Direction d);
void to_json(nlohmann::json& j, Direction d);
void to_json(nlohmann::json& j, Mode m);  // to_string(m): "sampled", "full"
void to_json(nlohmann::json& j, ModuleFlavor f);

struct MismatchReport {
  std::uint64_t offset = 0;
  std::uint64_t page = 0;
  unsigned expected = 0, actual = 0;
  std::uint64_t bad_bytes = 0;
  Direction direction = Direction::Write;
  std::string explanation;
};

struct SizeResult {
  std::uint64_t size = 0, offset = 0, pages = 0, metadata_bytes = 0;
  int metadata_order = 0;
  unsigned mrs = 1;
  Mode mode = Mode::Sampled;
  unsigned passes = 0;
  bool registered = false;
  int reg_errno = 0;
  double reg_seconds = 0;
  LoopStats write, read;
  std::uint64_t verified_bytes = 0;
  std::uint64_t transfers = 0;
  SizeOutcome result = SizeOutcome::Skip;
  std::optional<Diagnosis> diagnosis;
  std::optional<MismatchReport> mismatch;
};

struct RunReport {
  std::string command = "run";
  std::string device;
  ModuleIdentity module;
  std::string kernel;
  std::string transport = "loopback";  // or "tcp HOST:PORT"
  int gid_index = -1;
  std::uint64_t seed = 0;
  WaitPolicy completion_wait;  // how the QPs waited for completions
  std::vector<SizeResult> results;
  std::optional<Diagnosis> error;   // environment failure before any size ran
  Verdict verdict = Verdict::Skip;  // pass | fail | skip | not_ready
};

// Computes verdict and exit code from results/error.
int finalize(RunReport& r);

// The envelope every --json document starts with (schema_version, tool, command); the
// one place it is written. Commands add their own fields to it.
nlohmann::json json_envelope(const std::string& command);
// The loaded module: {name: rdma_rxe, flavor, version, installed_rxe_kvfix} (nulls when
// unknown); the one module writer of run, churn, doctor and probe.
nlohmann::json to_json(const ModuleIdentity& m);
nlohmann::json to_json(const Diagnosis& d);
nlohmann::json to_json(const SizeResult& s);
// {mode: "adaptive"|"busy_poll"|"event", spin_us: the spin before sleeping (0 in the
// event mode), null in busy_poll (it spins until a completion or the deadline)}
nlohmann::json to_json(const WaitPolicy& w);
nlohmann::json to_json(const RunReport& r);
// gbits: the bandwidth block in Gb/s (perftest's --report_gbits) instead of MiB/s.
std::string to_table(const RunReport& r, bool gbits = false);
std::string format_seconds(double s);

}  // namespace rxv
