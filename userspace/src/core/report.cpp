#include "core/report.hpp"

#include <cstdio>
#include <sstream>

#include "base/size.hpp"

namespace rxv {

std::string to_string(Verdict v) {
  switch (v) {
    case Verdict::Pass:
      return "pass";
    case Verdict::Fail:
      return "fail";
    case Verdict::Skip:
      return "skip";
    case Verdict::NotReady:
      return "not_ready";
    case Verdict::Ready:
      return "ready";
    case Verdict::Complete:
      return "complete";
    case Verdict::BudgetExhausted:
      return "budget_exhausted";
  }
  return "fail";
}

void to_json(nlohmann::json& j, Verdict v) { j = to_string(v); }

std::string to_string(SizeOutcome o) {
  switch (o) {
    case SizeOutcome::Pass:
      return "pass";
    case SizeOutcome::Fail:
      return "fail";
    case SizeOutcome::Skip:
      return "skip";
  }
  return "fail";
}
void to_json(nlohmann::json& j, SizeOutcome o) { j = to_string(o); }

std::string to_string(Direction d) { return d == Direction::Write ? "write" : "read"; }
void to_json(nlohmann::json& j, Direction d) { j = to_string(d); }
void to_json(nlohmann::json& j, Mode m) { j = to_string(m); }
void to_json(nlohmann::json& j, ModuleFlavor f) { j = to_string(f); }

int exit_code(Verdict v) {
  switch (v) {
    case Verdict::Pass:
    case Verdict::Ready:
    case Verdict::Complete:
    case Verdict::BudgetExhausted:
      return kExitPass;
    case Verdict::Fail:
      return kExitFail;
    case Verdict::NotReady:
      return kExitNotReady;
    case Verdict::Skip:
      return kExitSkip;
  }
  return kExitFail;
}

bool is_environment_cause(const std::string& cause) {
  return cause == cause::kMemlock || cause == cause::kDeviceDown;
}

namespace {
Verdict run_verdict(const RunReport& r) {
  if (r.error) return Verdict::NotReady;
  bool any_fail = false, any_pass = false, all_fail_env = true;
  for (const auto& s : r.results) {
    if (s.result == SizeOutcome::Fail) {
      any_fail = true;
      if (!(s.diagnosis && is_environment_cause(s.diagnosis->cause))) all_fail_env = false;
    }
    if (s.result == SizeOutcome::Pass) any_pass = true;
  }
  if (any_fail) return all_fail_env ? Verdict::NotReady : Verdict::Fail;
  return any_pass ? Verdict::Pass : Verdict::Skip;
}
}  // namespace

int finalize(RunReport& r) {
  r.verdict = run_verdict(r);
  return exit_code(r.verdict);
}

nlohmann::json to_json(const Diagnosis& d) {
  return {{"cause", d.cause}, {"summary", d.summary}, {"remedy", d.remedy}};
}

namespace {
nlohmann::json loop_json(const LoopStats& l) {
  // MBps: wire (RDMA time only); verified_MBps: wall time including fills and checks.
  double rate = l.seconds > 0 ? static_cast<double>(l.iterations) / l.seconds : 0;
  return {{"bytes", l.bytes},
          {"seconds", l.seconds},
          {"MBps", l.mbps()},
          {"iterations", l.iterations},
          {"transfers", l.transfers},
          {"wall_seconds", l.wall_seconds},
          {"peak_MBps", l.peak_Bps / 1e6},
          {"verified_MBps", l.verified_mbps()},
          {"msg_rate", rate}};
}
}  // namespace

nlohmann::json to_json(const SizeResult& s) {
  nlohmann::json j = {{"size", s.size},
                      {"size_text", format_size(s.size)},
                      {"offset", s.offset},
                      {"pages", s.pages},
                      {"metadata_bytes", s.metadata_bytes},
                      {"metadata_order", s.metadata_order},
                      {"mrs", s.mrs},
                      {"mode", s.mode},
                      {"passes", s.passes},
                      {"registered", s.registered},
                      {"reg_errno", s.reg_errno},
                      {"reg_seconds", s.reg_seconds},
                      {"write", loop_json(s.write)},
                      {"read", loop_json(s.read)},
                      {"verified_bytes", s.verified_bytes},
                      {"transfers", s.transfers},
                      {"result", s.result},
                      {"diagnosis", nullptr},
                      {"mismatch", nullptr}};
  if (s.diagnosis) j["diagnosis"] = to_json(*s.diagnosis);
  if (s.mismatch)
    j["mismatch"] = {{"offset", s.mismatch->offset},          {"page", s.mismatch->page},
                     {"expected", s.mismatch->expected},      {"actual", s.mismatch->actual},
                     {"bad_bytes", s.mismatch->bad_bytes},    {"direction", s.mismatch->direction},
                     {"explanation", s.mismatch->explanation}};
  return j;
}

nlohmann::json json_envelope(const std::string& command) {
  return {{"schema_version", kSchemaVersion},
          {"tool", {{"name", "rxe-verify"}, {"version", kToolVersion}}},
          {"command", command}};
}

nlohmann::json to_json(const ModuleIdentity& m) {
  auto or_null = [](const std::string& v) { return v.empty() ? nlohmann::json(nullptr) : nlohmann::json(v); };
  return {{"name", "rdma_rxe"},
          {"flavor", m.flavor},
          {"version", or_null(m.version)},
          {"installed_rxe_kvfix", or_null(m.installed)}};
}

nlohmann::json to_json(const WaitPolicy& w) {
  nlohmann::json spin = nullptr;
  if (w.mode != WaitMode::BusyPoll) spin = w.spin_bound().count();
  return {{"mode", to_string(w.mode)}, {"spin_us", spin}};
}

nlohmann::json to_json(const RunReport& r) {
  nlohmann::json j = json_envelope(r.command);
  j.update({{"device", r.device.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.device)},
            {"module", to_json(r.module)},
            {"kernel", r.kernel},
            {"transport", r.transport},
            {"gid_index", r.gid_index},
            {"seed", r.seed},
            {"completion_wait", to_json(r.completion_wait)},
            {"results", nlohmann::json::array()},
            {"error", nullptr},
            {"verdict", r.verdict}});
  for (const auto& s : r.results) j["results"].push_back(to_json(s));
  if (r.error) j["error"] = to_json(*r.error);
  return j;
}

std::string format_seconds(double s) {
  char b[32];
  if (s < 1e-3) std::snprintf(b, sizeof b, "%.0f us", s * 1e6);
  else if (s < 1) std::snprintf(b, sizeof b, "%.1f ms", s * 1e3);
  else std::snprintf(b, sizeof b, "%.2f s", s);
  return b;
}

std::string to_table(const RunReport& r, bool gbits) {
  std::ostringstream o;
  o << "rxe-verify " << kToolVersion << "  kernel " << r.kernel
    << "  module rdma_rxe: " << to_string(r.module.flavor);
  if (!r.module.version.empty()) o << " (" << r.module.version << ")";
  o << "\n";
  if (!r.device.empty())
    o << "device " << r.device << "  gid index " << r.gid_index << "  " << r.transport << "\n";
  if (r.error) {
    o << "ERROR: " << r.error->summary << "\n  remedy: " << r.error->remedy << "\n";
  }
  if (!r.results.empty()) {
    char line[512];
    std::snprintf(line, sizeof line, "%-16s %9s %11s %5s %10s %11s %11s %10s  %s\n", "size", "pages",
                  "metadata", "order", "reg", "write MB/s", "read MB/s", "verified", "result");
    o << "\n" << line;
    for (const auto& s : r.results) {
      std::string sz = format_size(s.size);
      if (s.offset) sz += " @+" + std::to_string(s.offset);
      if (s.mrs > 1) sz += " /" + std::to_string(s.mrs);
      char w[32] = "-", rd[32] = "-";
      if (s.write.seconds > 0) std::snprintf(w, sizeof w, "%.1f", s.write.mbps());
      if (s.read.seconds > 0) std::snprintf(rd, sizeof rd, "%.1f", s.read.mbps());
      std::string reg = s.registered ? format_seconds(s.reg_seconds)
                                     : (s.reg_errno ? "errno " + std::to_string(s.reg_errno) : "-");
      std::snprintf(line, sizeof line, "%-16s %9llu %11s %5d %10s %11s %11s %10s  %s\n", sz.c_str(),
                    static_cast<unsigned long long>(s.pages), format_size(s.metadata_bytes).c_str(),
                    s.metadata_order, reg.c_str(), w, rd, format_size(s.verified_bytes).c_str(),
                    to_string(s.result).c_str());
      o << line;
    }
    for (const auto& s : r.results) {
      if (!s.diagnosis) continue;
      o << "\n"
        << format_size(s.size) << (s.offset ? " @+" + std::to_string(s.offset) : "") << ": "
        << to_string(s.result) << " [" << s.diagnosis->cause << "]\n  " << s.diagnosis->summary
        << "\n  remedy: " << s.diagnosis->remedy << "\n";
    }
  }
  // perftest-style figures per size and operation (wire = RDMA time only; verified =
  // wall time including pattern fills and checks).
  bool any = false;
  for (const auto& s : r.results) any = any || s.write.iterations || s.read.iterations;
  if (any) {
    char line[256];
    // perftest's units: MiB/s (its "MB/sec" is 2^20 bytes), or Gb/s (10^9 bits)
    const double unit = gbits ? 1e9 / 8 : 1048576.0;
    const char* u = gbits ? "Gb/sec" : "MiB/s";
    std::snprintf(line, sizeof line, "\n%-16s %-5s %12s %10s %14s %17s %13s %15s\n", "bandwidth", "op",
                  "bytes", "iterations", (std::string("BW peak[") + u + "]").c_str(),
                  (std::string("BW average[") + u + "]").c_str(), "MsgRate[Mpps]",
                  (std::string("verified[") + u + "]").c_str());
    o << line;
    for (const auto& s : r.results) {
      std::string sz = format_size(s.size) + (s.offset ? " @+" + std::to_string(s.offset) : "");
      for (const auto* l : {&s.write, &s.read}) {
        if (!l->iterations) continue;
        double verified = l->wall_seconds > 0 ? static_cast<double>(l->bytes) / unit / l->wall_seconds : 0;
        double avg = l->seconds > 0 ? static_cast<double>(l->bytes) / unit / l->seconds : 0;
        std::snprintf(line, sizeof line, "%-16s %-5s %12llu %10llu %14.2f %17.2f %13.6f %15.2f\n", sz.c_str(),
                      l == &s.write ? "WRITE" : "READ", static_cast<unsigned long long>(l->bytes),
                      static_cast<unsigned long long>(l->iterations), l->peak_Bps / unit, avg,
                      l->msg_rate() / 1e6, verified);
        o << line;
      }
    }
  }
  o << "\nverdict: " << to_string(r.verdict) << "\n";
  return o.str();
}

}  // namespace rxv
