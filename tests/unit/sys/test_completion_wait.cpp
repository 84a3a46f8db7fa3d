// completion_wait.cpp over a fake completion queue on a fake clock: completions land at
// scripted times; arming, the channel's event and sleeping behave as with libibverbs (an
// armed CQ raises one event, for the first completion that lands after the arm).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "sys/completion_wait.hpp"

using namespace rxv;
using namespace std::chrono_literals;
using Clock = CompletionWaiter::Clock;

namespace {

class FakeCq {
 public:
  // Every poll costs this much time: a spin on the fake clock ends.
  static constexpr std::chrono::nanoseconds kPollCost = 1us;
  // Between the event and the sleeper running again.
  static constexpr std::chrono::nanoseconds kWakeLatency = 30us;

  Clock::time_point t0 = Clock::time_point{} + 1h;
  Clock::time_point t = t0;
  std::vector<Clock::time_point> lands;  // when each completion lands, in order
  std::size_t reaped = 0;
  unsigned polls = 0, arms = 0, sleeps = 0, events = 0;
  std::vector<Clock::time_point> arm_times, sleep_times;
  std::vector<std::chrono::milliseconds> sleep_lengths;
  std::function<void()> on_arm;  // runs as the arm takes effect
  bool fail_poll = false, fail_arm = false;

  void land_at(Clock::duration after_t0) { lands.push_back(t0 + after_t0); }

  int poll() {
    ++polls;
    if (fail_poll) return -1;
    t += kPollCost;
    int n = 0;
    while (reaped < lands.size() && lands[reaped] <= t) {
      ++reaped;
      ++n;
    }
    return n;
  }
  bool arm() {
    ++arms;
    if (fail_arm) return false;
    if (on_arm) on_arm();  // e.g. a completion landing just before the arm
    armed_ = true;
    armed_at_ = t;
    arm_times.push_back(t);
    return true;
  }
  bool sleep(std::chrono::milliseconds max) {
    ++sleeps;
    sleep_times.push_back(t);
    sleep_lengths.push_back(max);
    if (armed_) {
      // the first completion after the arm raises the event
      auto it = std::upper_bound(lands.begin(), lands.end(), armed_at_);
      if (it != lands.end() && *it <= t + max) {
        t = std::max(t, *it) + kWakeLatency;
        armed_ = false;
        ++events;
        return true;
      }
    }
    t += max;
    return false;
  }
  CompletionWaiter::Hooks hooks() {
    return {[this] { return arm(); }, [this](std::chrono::milliseconds m) { return sleep(m); },
            [this] { return t; }};
  }
  std::function<int()> poller() {
    return [this] { return poll(); };
  }

 private:
  bool armed_ = false;
  Clock::time_point armed_at_{};
};

WaitPolicy policy(WaitMode m, std::chrono::microseconds spin = kDefaultSpin) {
  WaitPolicy p;
  p.mode = m;
  p.spin = spin;
  return p;
}

}  // namespace

TEST(CompletionWait, DefaultIsAdaptiveWithTheDocumentedSpin) {
  WaitPolicy p;
  EXPECT_EQ(p.mode, WaitMode::Adaptive);
  EXPECT_EQ(p.spin, kDefaultSpin);
  EXPECT_EQ(kDefaultSpin, 50us);
  EXPECT_EQ(p.spin_bound(), 50us);
  EXPECT_EQ(policy(WaitMode::Event).spin_bound(), 0us);
  EXPECT_EQ(to_string(WaitMode::Adaptive), "adaptive");
  EXPECT_EQ(to_string(WaitMode::BusyPoll), "busy_poll");
  EXPECT_EQ(to_string(WaitMode::Event), "event");
}

namespace {

// One completion at a scripted time, one wait(): what each policy does to reap it. The
// columns are the counts on the fake CQ; every poll costs 1 us of the fake clock, so a
// spin of S us is S empty polls, and the arm comes at the first poll past the spin.

struct OneCompletion {
  const char* what;
  WaitPolicy policy;
  Clock::duration lands;  // after t0
  unsigned polls, arms, sleeps;
  Clock::duration ends;                     // after t0: when wait() returned
  std::optional<Clock::duration> armed_at;  // after t0, when it armed
};

constexpr auto kWake = FakeCq::kWakeLatency;
constexpr auto kPoll = FakeCq::kPollCost;

void PrintTo(const OneCompletion& c, std::ostream* os) { *os << c.what; }

}  // namespace

class CompletionWaitOne : public ::testing::TestWithParam<OneCompletion> {};

TEST_P(CompletionWaitOne, ReapsItAsThePolicySays) {
  const OneCompletion& c = GetParam();
  FakeCq cq;
  cq.land_at(c.lands);
  CompletionWaiter w(c.policy, cq.hooks());
  const auto deadline = cq.t0 + 50ms;
  EXPECT_EQ(w.wait(cq.poller(), deadline), 1);
  EXPECT_EQ(cq.polls, c.polls);
  EXPECT_EQ(cq.arms, c.arms);
  EXPECT_EQ(cq.sleeps, c.sleeps);
  EXPECT_EQ(cq.events, c.sleeps) << "every sleep here ends with the completion's event";
  EXPECT_EQ(cq.t, cq.t0 + c.ends);
  EXPECT_FALSE(w.armed()) << "no arm, or its event consumed: the next wait arms again";
  if (c.armed_at) {
    ASSERT_EQ(cq.arm_times.size(), 1u);
    EXPECT_EQ(cq.arm_times[0], cq.t0 + *c.armed_at);
  }
  if (c.sleeps) {
    // polled once more after the arm, then slept for what is left to the deadline
    EXPECT_EQ(cq.sleep_times[0], cq.arm_times[0] + kPoll);
    EXPECT_EQ(cq.sleep_lengths[0],
              std::clamp(std::chrono::ceil<std::chrono::milliseconds>(deadline - cq.sleep_times[0]), 1ms,
                         kMaxSleep));
  }
}

// (the first empty poll is at +1 us; the spin starts there)
INSTANTIATE_TEST_SUITE_P(
    Policies, CompletionWaitOne,
    ::testing::Values(
        // the default: a completion within the spin is reaped without a wake-up
        OneCompletion{"within the default spin", policy(WaitMode::Adaptive), 20us, 20, 0, 0, 20us, {}},
        // ... one after it: the whole spin, an arm, one more poll, one sleep to the event
        OneCompletion{"after the default spin", policy(WaitMode::Adaptive), 5ms,
                      static_cast<unsigned>(kDefaultSpin / 1us) + 1 + 1 + 1, 1, 1, 5ms + kWake + kPoll,
                      1us + kDefaultSpin},
        OneCompletion{"within a 200 us spin", policy(WaitMode::Adaptive, 200us), 150us, 150, 0, 0, 150us, {}},
        OneCompletion{"after a 1000 us spin", policy(WaitMode::Adaptive, 1000us), 5ms, 1001 + 1 + 1, 1, 1,
                      5ms + kWake + kPoll, 1001us},
        // busy-poll: a poll every microsecond until it lands, never an arm or a sleep
        OneCompletion{"busy-poll", policy(WaitMode::BusyPoll), 5ms, 5000, 0, 0, 5ms, {}},
        // event mode: an arm at the first empty poll, though the default spin would have
        // caught it (empty, empty again after the arm, the completion after the wake)
        OneCompletion{"event mode", policy(WaitMode::Event), 20us, 3, 1, 1, 20us + kWake + kPoll, 1us},
        OneCompletion{"event mode ignores a spin", policy(WaitMode::Event, 1000us), 20us, 3, 1, 1,
                      20us + kWake + kPoll, 1us},
        OneCompletion{"adaptive with a zero spin is the event mode", policy(WaitMode::Adaptive, 0us), 20us, 3,
                      1, 1, 20us + kWake + kPoll, 1us}),
    [](const ::testing::TestParamInfo<OneCompletion>& i) {
      std::string n;
      for (const char* p = i.param.what; *p; ++p)
        n += std::isalnum(static_cast<unsigned char>(*p)) ? *p : '_';
      return n;
    });

TEST(CompletionWait, CompletionBetweenTheLastPollAndTheArmIsReapedWithoutSleeping) {
  FakeCq cq;
  // it lands as the CQ is being armed: no event will ever come for it
  cq.on_arm = [&cq] {
    if (cq.lands.empty()) cq.lands.push_back(cq.t);
  };
  CompletionWaiter w(policy(WaitMode::Adaptive), cq.hooks());
  EXPECT_EQ(w.wait(cq.poller(), cq.t0 + 50ms), 1);
  EXPECT_EQ(cq.arms, 1u);
  EXPECT_EQ(cq.sleeps, 0u) << "slept on a CQ whose completion raised no event";
  EXPECT_LT(cq.t, cq.t0 + 100us);

  // Still armed (no event consumed): the next wait sleeps without arming again, and the
  // next completion's event wakes it.
  EXPECT_TRUE(w.armed());
  cq.land_at(3ms);
  EXPECT_EQ(w.wait(cq.poller(), cq.t + 50ms), 1);
  EXPECT_EQ(cq.arms, 1u);
  EXPECT_EQ(cq.sleeps, 1u);
  EXPECT_EQ(cq.events, 1u);
  EXPECT_FALSE(w.armed());
}

TEST(CompletionWait, AStaleEventIsConsumedAndTheCqArmedAgain) {
  FakeCq cq;
  // lands after the arm and before the poll that follows it: reaped by that poll, its
  // event stays pending on the channel
  cq.land_at(1500ns);
  CompletionWaiter w(policy(WaitMode::Event), cq.hooks());
  EXPECT_EQ(w.wait(cq.poller(), cq.t0 + 50ms), 1);
  EXPECT_EQ(cq.arms, 1u);
  EXPECT_EQ(cq.sleeps, 0u);
  EXPECT_TRUE(w.armed());
  // The next wait's first sleep consumes that stale event at once; the CQ is armed again
  // (and polled again) before it sleeps for the next completion.
  cq.land_at(20ms);
  EXPECT_EQ(w.wait(cq.poller(), cq.t0 + 50ms), 1);
  EXPECT_EQ(cq.arms, 2u);
  EXPECT_EQ(cq.sleeps, 2u);
  EXPECT_EQ(cq.events, 2u);
  EXPECT_EQ(cq.t, cq.t0 + 20ms + FakeCq::kWakeLatency + FakeCq::kPollCost);
}

TEST(CompletionWait, DeadlineBoundsEveryMode) {
  // nothing ever lands: each mode returns 0 at the deadline; busy-poll never arms and
  // polls every microsecond of it, the others arm once and sleep the rest
  struct Case {
    WaitMode mode;
    unsigned arms;
    std::optional<unsigned> polls;
  };
  for (const Case& c :
       {Case{WaitMode::Adaptive, 1, {}}, Case{WaitMode::Event, 1, {}}, Case{WaitMode::BusyPoll, 0, 30000}}) {
    SCOPED_TRACE(to_string(c.mode));
    FakeCq cq;
    CompletionWaiter w(policy(c.mode), cq.hooks());
    EXPECT_EQ(w.wait(cq.poller(), cq.t0 + 30ms), 0);
    EXPECT_GE(cq.t, cq.t0 + 30ms);
    EXPECT_LT(cq.t, cq.t0 + 32ms);
    EXPECT_EQ(cq.arms, c.arms);
    EXPECT_EQ(cq.sleeps > 0, c.arms > 0);
    if (c.polls) {
      EXPECT_EQ(cq.polls, *c.polls);
    }
    // a deadline already passed: one poll, no waiting
    FakeCq now;
    CompletionWaiter n(policy(c.mode), now.hooks());
    EXPECT_EQ(n.wait(now.poller(), now.t0), 0);
    EXPECT_EQ(now.polls, 1u);
    EXPECT_EQ(now.arms + now.sleeps, 0u);
  }
}

TEST(CompletionWait, LongWaitsSleepInBoundedSteps) {
  FakeCq cq;
  CompletionWaiter w(policy(WaitMode::Adaptive), cq.hooks());
  EXPECT_EQ(w.wait(cq.poller(), cq.t0 + 1s), 0);
  EXPECT_EQ(cq.arms, 1u);
  ASSERT_GE(cq.sleeps, 5u);
  for (auto l : cq.sleep_lengths) {
    EXPECT_GE(l, 1ms);
    EXPECT_LE(l, kMaxSleep);
  }
}

TEST(CompletionWait, FailuresAreReported) {
  FakeCq bad_poll;
  bad_poll.fail_poll = true;
  CompletionWaiter p(policy(WaitMode::Adaptive), bad_poll.hooks());
  EXPECT_EQ(p.wait(bad_poll.poller(), bad_poll.t0 + 50ms), -1);
  FakeCq bad_arm;
  bad_arm.fail_arm = true;
  CompletionWaiter a(policy(WaitMode::Adaptive), bad_arm.hooks());
  EXPECT_EQ(a.wait(bad_arm.poller(), bad_arm.t0 + 50ms), -1);
  EXPECT_EQ(bad_arm.sleeps, 0u);
  EXPECT_FALSE(a.armed());
}
