// rxe-verify's commands as library functions: each takes its options (a *CommandConfig,
// the option texts exactly as given on the command line), the verbs Provider and the
// HostEnv, and returns an Outcome. cli/cli.cpp parses options into these structs, calls one
// command and prints the Outcome; unit tests call the commands with the fakes.
//
// A bad option value throws UsageError (exit 2); an environment found unable to run the
// request before anything was pinned throws NotReadyError (exit 3): both are CommandErrors
// (base/result.hpp), caught once, by run_guarded. Every other failure is a Result the command
// handles: the error line on stderr and, for run and churn, the report with its error.
// Progress and error lines go to stderr as the command runs.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/oob.hpp"
#include "core/report.hpp"
#include "sys/host_env.hpp"
#include "sys/verbs.hpp"

namespace rxv {

// What a command produced: its exit code, its JSON document (has_report: one exists; the
// --json output) and its text output (stdout without --json).
// NOLINTNEXTLINE(bugprone-exception-escape): its moves do not throw (static_assert below)
struct Outcome {
  int exit = kExitPass;
  bool has_report = false;
  nlohmann::json report;
  std::string text;
};
static_assert(std::is_nothrow_move_constructible_v<Outcome> && std::is_nothrow_move_assignable_v<Outcome>);

struct RunCommandConfig {
  std::vector<std::string> sizes;
  std::string offset = "0", mode = "sampled", msg_size = "64M", connect, device;
  int gid_index = -1;
  bool gid_given = false;
  unsigned passes = 0, split = 1;
  unsigned tx_depth = 128;  // -t/--tx-depth, 1..8192
  long long iters = -1;     // -n/--iters: -1 not given, else at least 1
  double duration = 0;      // -D/--duration seconds, 0 = not timed
  bool report_gbits = false;
  bool busy_poll = false;  // --busy-poll: poll the CQ without sleeping
  bool no_spin = false;    // --no-spin: sleep as soon as the CQ is empty
  // the default (adaptive) mode's spin before sleeping, as a parameter of the library
  // call; --spin USEC, when given (spin_option, its text as typed), takes its place
  std::chrono::microseconds spin = kDefaultSpin;
  std::optional<std::string> spin_option;  // --spin
  std::uint64_t seed = 0;
  double timeout = 0;
  bool json = false, no_progress = false, force = false;
  bool connect_short = false;  // given as -c: deprecated (perftest's -c is the connection type)
};
Outcome run_command(const RunCommandConfig& o, Provider& prov, HostEnv& host);

struct ServeCommandConfig {
  std::string device, bind;
  int gid_index = -1;
  bool gid_given = false;
  unsigned port = kDefaultPort;
  double timeout = 300;
  bool forever = false;
};
// Serves until the client (or, with forever, never) finishes; no report.
Outcome serve_command(const ServeCommandConfig& o, Provider& prov, HostEnv& host);

struct DoctorCommandConfig {
  std::string size = "1G";
};
Outcome doctor_command(const DoctorCommandConfig& o, HostEnv& host);

struct ProbeCommandConfig {
  std::string max, granularity = "64M", min, offset = "0", device;
  double budget = 60;
  bool json = false, force = false;
};
Outcome probe_command(const ProbeCommandConfig& o, Provider& prov, HostEnv& host);

struct ChurnCommandConfig {
  std::string size, offset = "0", device;
  unsigned count = 0;
  int gid_index = -1;
  std::uint64_t seed = 0;
  bool traffic = false, json = false, force = false;
};
Outcome churn_command(const ChurnCommandConfig& o, Provider& prov, HostEnv& host);

// The command boundary, where a command's exceptions stop: runs `command` (one command,
// returning its exit code) for `cmd`; a CommandError it throws prints "rxe-verify CMD:
// error: LINE" and returns the error's exit code (2 usage, 3 not ready), any other
// std::exception prints its what() the same way and returns kExitFail.
int run_guarded(const std::string& cmd, const std::function<int()>& command);

}  // namespace rxv
