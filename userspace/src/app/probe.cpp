// `rxe-verify probe`: find the largest MR that registers, by bisection between --min and
// --max within a time budget, and show the rxe metadata (pages x 16 B, its order) on
// either side of the boundary.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "app/common.hpp"
#include "app/device.hpp"
#include "app/options.hpp"
#include "app/preflight.hpp"
#include "base/size.hpp"
#include "core/diag_context.hpp"
#include "core/mapped_buffer.hpp"
#include "core/plan.hpp"
#include "sys/procfs.hpp"

namespace rxv {
using nlohmann::json;

namespace {

// The sizes probe tries, from its options: checked before anything is opened.
struct ProbeRange {
  std::uint64_t gran = 0, max = 0, min = 0, offset = 0;
};
ProbeRange probe_range(const ProbeCommandConfig& o, HostEnv& host) {
  ProbeRange r;
  r.gran = need_size("--granularity", o.granularity, false);
  std::uint64_t total = mem_total(host);
  r.max = o.max.empty() ? std::min<std::uint64_t>(4ull << 30, total / 2 / r.gran * r.gran)
                        : need_size("--max", o.max, false);
  r.min = o.min.empty() ? r.gran : need_size("--min", o.min, false);
  r.offset = need_offset(o.offset);
  if (o.budget <= 0) usage("--budget: must be greater than 0 seconds");
  if (r.min > r.max)
    usage("--min " + format_size(r.min) + " is larger than --max " + format_size(r.max) +
          "; pass a --min no larger than --max");
  check_ram(host, "--max", r.max, checked_total("--max", r.max, {r.offset}), o.force);
  return r;
}

// A probe that could not start: its error line with the cause ("[CAUSE] SUMMARY;
// REMEDY", the token run's and churn's reports carry), no report.
Outcome probe_failed(const Error& e) {
  print_error("probe", "[" + e.cause + "] " + e.line());
  Outcome out;
  out.exit = e.exit;
  return out;
}

// The bisection between --min and --max: each attempt registers one size of the region
// and records it; an environment failure (memlock, ...) stops it.
class Bisection {
 public:
  Bisection(Device& dev, unsigned char* base, const ProbeRange& r, const ProbeCommandConfig& o,
            DiagContext dctx)
      : dev_(dev), base_(base), r_(r), o_(o), dctx_(std::move(dctx)) {}

  void run() {
    if (attempt(r_.max)) {
      lo_ok = r_.max;
      complete = true;
      return;
    }
    if (env_stop) return;
    hi_fail = r_.max;
    if (!attempt(r_.min)) {
      hi_fail = r_.min;
      complete = true;
      return;
    }
    lo_ok = r_.min;
    complete = true;
    while (*hi_fail - *lo_ok > r_.gran) {
      if (elapsed() > o_.budget) {
        complete = false;
        break;
      }
      std::uint64_t mid = (*lo_ok + (*hi_fail - *lo_ok) / 2) / r_.gran * r_.gran;
      if (mid <= *lo_ok) mid = *lo_ok + r_.gran;
      if (mid >= *hi_fail) break;
      if (attempt(mid)) lo_ok = mid;
      else if (env_stop) break;
      else hi_fail = mid;
    }
  }
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }

  json attempts = json::array();
  std::optional<Diagnosis> fail_diag;
  bool env_stop = false, complete = false;
  std::optional<std::uint64_t> lo_ok, hi_fail;

 private:
  bool attempt(std::uint64_t sz) {
    auto md = rxe_metadata(r_.offset, sz);
    auto a0 = std::chrono::steady_clock::now();
    auto r = dev_.reg_mr(base_, sz);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - a0).count();
    bool ok = r.mr != nullptr;
    r.mr.reset();
    attempts.push_back({{"size", sz},
                        {"pages", md.pages},
                        {"metadata_bytes", md.bytes},
                        {"metadata_order", md.order},
                        {"registered", ok},
                        {"reg_errno", r.err},
                        {"reg_seconds", s}});
    if (!o_.json)
      std::fprintf(
          stderr, "  %-12s pages %-8llu metadata %-10s order %-2d  %s\n", format_size(sz).c_str(),
          static_cast<unsigned long long>(md.pages), format_size(md.bytes).c_str(), md.order,
          ok ? ("ok " + format_seconds(s)).c_str() : ("FAILED errno " + std::to_string(r.err)).c_str());
    if (!ok) {
      DiagInput in = dctx_();
      in.stage = Stage::Register;
      in.err = r.err;
      in.size = sz;
      in.offset = r_.offset;
      auto d = diagnose(in);
      if (is_environment_cause(d.cause)) env_stop = true;
      fail_diag = d;
    }
    return ok;
  }

  Device& dev_;
  unsigned char* base_;
  const ProbeRange& r_;
  const ProbeCommandConfig& o_;
  DiagContext dctx_;
  const std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

// The "probe" object of the report: the range, every attempt, the boundary found.
json probe_json(const ProbeRange& r, const ProbeCommandConfig& o, const Bisection& b, int lf) {
  json pj = {{"max", r.max},
             {"min", r.min},
             {"granularity", r.gran},
             {"offset", r.offset},
             {"budget_seconds", o.budget},
             {"elapsed_seconds", b.elapsed()},
             {"attempts", b.attempts},
             {"complete", b.complete && !b.env_stop}};
  auto md_json = [&](std::optional<std::uint64_t> v) -> json {
    if (!v) return nullptr;
    auto md = rxe_metadata(r.offset, *v);
    return {{"size", *v}, {"pages", md.pages}, {"metadata_bytes", md.bytes}, {"metadata_order", md.order}};
  };
  pj["largest_ok"] = md_json(b.lo_ok);
  pj["smallest_fail"] = md_json(b.hi_fail);
  pj["diagnosis"] = b.fail_diag && b.hi_fail ? to_json(*b.fail_diag) : json(nullptr);
  pj["stock_rxe_max_mr_now"] = lf >= 0 ? json(stock_mr_limit_for_order(lf)) : json(nullptr);
  return pj;
}

std::string probe_text(const std::string& device, const ModuleIdentity& mod, const ProbeRange& r,
                       const Bisection& b, int lf, Verdict verdict) {
  const auto& lo_ok = b.lo_ok;
  const auto& hi_fail = b.hi_fail;
  std::ostringstream txt;
  txt << "device " << device << ", module rdma_rxe " << to_string(mod.flavor) << "\n";
  if (lo_ok && !hi_fail) txt << "every size up to --max " << format_size(r.max) << " registered\n";
  if (lo_ok && hi_fail) {
    auto a = rxe_metadata(r.offset, *lo_ok), c = rxe_metadata(r.offset, *hi_fail);
    txt << "boundary: " << format_size(*lo_ok) << " registers (" << a.pages
        << " pages x 16 B = " << format_size(a.bytes) << ", order " << a.order << "), "
        << format_size(*hi_fail) << " fails (" << c.pages << " pages x 16 B = " << format_size(c.bytes)
        << ", order " << c.order << ")"
        << (b.complete ? "" : " [budget exhausted: not narrowed to the granularity]") << "\n";
  }
  if (!lo_ok && hi_fail) txt << "even --min " << format_size(*hi_fail) << " fails\n";
  if (b.fail_diag && hi_fail)
    txt << "diagnosis [" << b.fail_diag->cause << "]: " << b.fail_diag->summary
        << "\n  remedy: " << b.fail_diag->remedy << "\n";
  if (lf >= 0)
    txt << "largest free block now: order " << lf << " => a stock rxe could register at most "
        << format_size(stock_mr_limit_for_order(lf)) << " per MR\n";
  txt << "verdict: " << to_string(verdict) << "\n";
  return txt.str();
}

}  // namespace

Outcome probe_command(const ProbeCommandConfig& o, Provider& prov, HostEnv& host) {
  const ProbeRange r = probe_range(o, host);
  json j = json_envelope("probe");
  j["kernel"] = host.kernel();
  ModuleIdentity mod = host.module();
  j["module"] = to_json(mod);
  auto resolved = resolve_device(prov, host, o.device, 0);
  if (!resolved) {
    throw_if_usage(resolved.error());
    return probe_failed(resolved.error());
  }
  const DeviceChoice& dc = *resolved;
  j["device"] = dc.name;
  auto opened = prov.open(dc.name);
  if (!opened) return probe_failed(open_failure(dc.name, opened.error(), uverbs_node_denied(dc.name)));
  std::unique_ptr<Device> dev = std::move(*opened);
  MappedBuffer buf(static_cast<std::size_t>(r.max + r.offset));
  if (!buf)
    return probe_failed(
        Error("cannot allocate " + format_size(r.max + r.offset) + ": " + std::strerror(buf.error()), "",
              kExitNotReady, cause::kOutOfMemory, buf.error()));
  buf.populate();
  Bisection b(*dev, buf.data() + r.offset, r, o, make_diag_context(host, port_reader(*dev), false, mod));
  b.run();
  int lf = largest_free_order(parse_buddyinfo(host.read("/proc/buddyinfo").value_or("")));
  j["probe"] = probe_json(r, o, b, lf);
  const Verdict verdict =
      b.env_stop ? Verdict::NotReady : (b.complete ? Verdict::Complete : Verdict::BudgetExhausted);
  j["verdict"] = verdict;
  return reported(exit_code(verdict), std::move(j), probe_text(dc.name, mod, r, b, lf, verdict));
}

}  // namespace rxv
