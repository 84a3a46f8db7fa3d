// Pattern fill/verify throughput against memset/memcmp on the same buffers, same run.
// Not a pass/fail test: prints bytes/s per benchmark and the ratios at the end.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/pattern.hpp"

namespace {
constexpr std::size_t kBytes = 64u << 20;  // larger than caches
std::vector<unsigned char>& buf_a() {
  static std::vector<unsigned char> v(kBytes, 1);
  return v;
}
std::vector<unsigned char>& buf_b() {
  static std::vector<unsigned char> v(kBytes, 1);
  return v;
}
std::map<std::string, double>& rates() {
  static std::map<std::string, double> m;
  return m;
}
void record(benchmark::State& st, const char*) {
  st.SetBytesProcessed(static_cast<std::int64_t>(st.iterations()) * static_cast<std::int64_t>(kBytes));
}

void BM_memset(benchmark::State& st) {
  auto& a = buf_a();
  int v = 0;
  for (auto _ : st) {
    std::memset(a.data(), ++v, kBytes);
    benchmark::ClobberMemory();
  }
  record(st, "memset");
}
void BM_pattern_fill(benchmark::State& st) {
  auto& a = buf_a();
  std::uint32_t pass = 0;
  for (auto _ : st) {
    rxv::pattern_fill(a.data(), 16, kBytes, rxv::pattern_key(1, pass++, rxv::Phase::Write));
    benchmark::ClobberMemory();
  }
  record(st, "pattern_fill");
}
void BM_memcmp(benchmark::State& st) {
  auto& a = buf_a();
  auto& b = buf_b();
  std::memcpy(b.data(), a.data(), kBytes);
  for (auto _ : st) {
    int r = std::memcmp(a.data(), b.data(), kBytes);
    benchmark::DoNotOptimize(r);
  }
  record(st, "memcmp");
}
void BM_pattern_verify(benchmark::State& st) {
  auto& a = buf_a();
  const std::uint64_t key = rxv::pattern_key(1, 0, rxv::Phase::Read);
  rxv::pattern_fill(a.data(), 16, kBytes, key);
  for (auto _ : st) {
    auto m = rxv::pattern_verify(a.data(), 16, kBytes, key);
    benchmark::DoNotOptimize(m);
    if (m) st.SkipWithError("pattern mismatch");
  }
  record(st, "pattern_verify");
}
BENCHMARK(BM_memset)->Unit(benchmark::kMillisecond)->MinTime(0.5);
BENCHMARK(BM_pattern_fill)->Unit(benchmark::kMillisecond)->MinTime(0.5);
BENCHMARK(BM_memcmp)->Unit(benchmark::kMillisecond)->MinTime(0.5);
BENCHMARK(BM_pattern_verify)->Unit(benchmark::kMillisecond)->MinTime(0.5);

class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& r : runs) {
      double s = r.GetAdjustedRealTime();  // per iteration, in the run's time unit
      double mul = r.time_unit == benchmark::kMillisecond   ? 1e-3
                   : r.time_unit == benchmark::kMicrosecond ? 1e-6
                   : r.time_unit == benchmark::kNanosecond  ? 1e-9
                                                            : 1.0;
      std::string n = r.benchmark_name();
      rates()[n] = static_cast<double>(kBytes) / (s * mul) / 1e9;
    }
    ConsoleReporter::ReportRuns(runs);
  }
};
}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  RatioReporter rep;
  benchmark::RunSpecifiedBenchmarks(&rep);
  auto& m = rates();
  auto get = [&](const char* k) { return m.count(k) ? m[k] : 0.0; };
  double ms = get("BM_memset/min_time:0.500"), pf = get("BM_pattern_fill/min_time:0.500");
  double mc = get("BM_memcmp/min_time:0.500"), pv = get("BM_pattern_verify/min_time:0.500");
  std::printf("\nthroughput GB/s (64 MiB buffer, one core):\n");
  std::printf("  memset %.2f  pattern_fill %.2f  ratio fill/memset %.2f\n", ms, pf, ms > 0 ? pf / ms : 0);
  std::printf(
      "  memcmp %.2f (of one buffer; reads two)  pattern_verify %.2f  ratio verify/memcmp %.2f (target >= "
      "0.5)\n",
      mc, pv, mc > 0 ? pv / mc : 0);
  benchmark::Shutdown();
  return 0;
}
