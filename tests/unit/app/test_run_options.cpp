// `rxe-verify run`'s option checks (app/run_options.cpp) without running anything: the
// waiting-mode options (--busy-poll, --no-spin, --spin USEC) into the WaitPolicy the
// queue pairs get, and each bad value or combination as its one usage line.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>

#include "app/run_options.hpp"
#include "app_fixtures.hpp"
#include "fake_host.hpp"

using namespace rxv;
using namespace std::chrono_literals;
using rxv::testing::FakeHost;
using rxv::testing::small_run;

namespace {

// The usage line validate_run_options throws, or "" when it accepts the options.
std::string usage_of(const RunCommandConfig& o) {
  FakeHost host;
  try {
    validate_run_options(o, host);
  } catch (const UsageError& u) {
    return u.what();
  }
  return "";
}

}  // namespace

TEST(RunOptionsSpin, ParsesWholeMicroseconds) {
  struct Case {
    const char* text;
    long long us;  // -1: rejected
  };
  for (const Case& c :
       {Case{"0", 0}, Case{"1", 1}, Case{"50", 50}, Case{"200", 200}, Case{"1000", 1000}, Case{"0200", 200},
        Case{"000", 0}, Case{"1000000", 1000000}, Case{"001000000", 1000000}}) {
    auto v = parse_spin_us(c.text);
    ASSERT_TRUE(v) << c.text << ": " << v.error().summary;
    EXPECT_EQ(v->count(), c.us) << c.text;
  }
}

TEST(RunOptionsSpin, RejectsWithOneLineThatSaysWhatToUse) {
  struct Case {
    const char* text;
    const char* says;
  };
  const std::string range = "use a whole number of microseconds from 0 to 1000000 (e.g. --spin 200)";
  for (const Case& c :
       {Case{"", "'' is not a number of microseconds; "}, Case{"abc", "'abc' is not a number"},
        Case{"-1", "'-1' is not a number"}, Case{"+5", "'+5' is not a number"},
        Case{"50us", "'50us' is not a number"}, Case{"1.5", "'1.5' is not a number"},
        Case{" 50", "' 50' is not a number"}, Case{"1e3", "'1e3' is not a number"}}) {
    auto v = parse_spin_us(c.text);
    ASSERT_FALSE(v) << c.text;
    const std::string& err = v.error().summary;
    EXPECT_EQ(err.rfind(c.says, 0), 0u) << err;
    EXPECT_NE(err.find(range), std::string::npos) << err;
    EXPECT_EQ(v.error().exit, kExitUsage);
  }
  for (const char* big : {"1000001", "2000000", "99999999999999999999999999"}) {
    auto v = parse_spin_us(big);
    ASSERT_FALSE(v) << big;
    EXPECT_EQ(v.error().summary, std::string(big) +
                                     " us is beyond the longest spin, 1000000 us (1 s); use at "
                                     "most --spin 1000000, or --busy-poll to spin without a bound");
    EXPECT_EQ(v.error().exit, kExitUsage);
  }
  EXPECT_EQ(kMaxSpin, 1s);
}

TEST(RunOptionsSpin, WaitingModesIntoThePolicy) {
  struct Case {
    bool busy_poll, no_spin;
    std::optional<std::string> spin;
    WaitMode mode;
    std::chrono::microseconds want_spin;
  };
  for (const Case& c : {Case{false, false, std::nullopt, WaitMode::Adaptive, kDefaultSpin},
                        Case{false, false, "200", WaitMode::Adaptive, 200us},
                        Case{false, false, "1000", WaitMode::Adaptive, 1000us},
                        Case{false, false, "0", WaitMode::Adaptive, 0us},
                        Case{true, false, std::nullopt, WaitMode::BusyPoll, kDefaultSpin},
                        Case{false, true, std::nullopt, WaitMode::Event, kDefaultSpin}}) {
    auto o = small_run({"64K"});
    o.busy_poll = c.busy_poll;
    o.no_spin = c.no_spin;
    o.spin_option = c.spin;
    FakeHost host;
    const std::string what =
        c.spin.value_or("-") + (c.busy_poll ? " busy" : "") + (c.no_spin ? " nospin" : "");
    RunOptions r = validate_run_options(o, host);
    EXPECT_EQ(r.wait.mode, c.mode) << what;
    EXPECT_EQ(r.wait.spin, c.want_spin) << what;
  }
  // --spin 0 spins as little as --no-spin: a wait arms at once either way
  auto zero = small_run({"64K"});
  zero.spin_option = "0";
  FakeHost host;
  EXPECT_EQ(validate_run_options(zero, host).wait.spin_bound(), 0us);
  // the library parameter applies when --spin is not given
  auto lib = small_run({"64K"});
  lib.spin = 300us;
  EXPECT_EQ(validate_run_options(lib, host).wait.spin, 300us);
  lib.spin_option = "70";
  EXPECT_EQ(validate_run_options(lib, host).wait.spin, 70us);
}

TEST(RunOptionsSpin, ConflictsAndBadValuesAreUsageErrors) {
  struct Case {
    bool busy_poll, no_spin;
    std::optional<std::string> spin;
    const char* line;
  };
  const char* const spin_and_busy_poll =
      "--spin and --busy-poll: pick one (--busy-poll spins without a bound; --spin USEC "
      "spins that long, then sleeps)";
  for (const Case& c :
       {Case{true, true, std::nullopt,
             "--busy-poll and --no-spin: pick one (spin only, or sleep at once; neither: spin "
             "briefly, then sleep)"},
        Case{true, false, "200", spin_and_busy_poll},
        Case{false, true, "200",
             "--spin and --no-spin: pick one (--no-spin sleeps at once, as --spin 0 does)"},
        // a bad value beside a conflicting mode: the conflict is named first
        Case{true, false, "x", spin_and_busy_poll},
        Case{false, false, "fast",
             "--spin: 'fast' is not a number of microseconds; use a whole number of "
             "microseconds from 0 to 1000000 (e.g. --spin 200)"},
        Case{false, false, "5000000",
             "--spin: 5000000 us is beyond the longest spin, 1000000 us (1 s); use at most "
             "--spin 1000000, or --busy-poll to spin without a bound"}}) {
    auto o = small_run({"64K"});
    o.busy_poll = c.busy_poll;
    o.no_spin = c.no_spin;
    o.spin_option = c.spin;
    EXPECT_EQ(usage_of(o), c.line);
  }
}

// A size whose sum with --offset, the staging buffer and the guard room does not fit 64
// bits is a usage error (it wrapped to a small number and passed the memory check, even
// more so with --force, and failed later as out_of_memory or worse).
TEST(RunOptionsSizes, SumBeyond64BitsIsAUsageError) {
  auto o = small_run({"16777215T+1099511627775"});  // 2^64 - 1
  o.force = true;
  EXPECT_EQ(usage_of(o).rfind("--size: ", 0), 0u) << usage_of(o);
  EXPECT_NE(usage_of(o).find("does not fit 64 bits"), std::string::npos) << usage_of(o);
  o.sizes = {"16777215T"};  // 2^64 - 2^40: + 16 MiB staging still fits
  o.offset = "16";
  EXPECT_EQ(usage_of(o).find("does not fit"), std::string::npos) << usage_of(o);
}
