// completion_wait.cpp over a fake completion queue on a fake clock: completions land at
// scripted times; arming, the channel's event and sleeping behave as with libibverbs (an
// armed CQ raises one event, for the first completion that lands after the arm).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "completion_wait.hpp"

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

TEST(CompletionWait, CompletionWithinTheSpinNeverSleeps) {
  FakeCq cq;
  cq.land_at(20us);
  CompletionWaiter w(policy(WaitMode::Adaptive), cq.hooks());
  EXPECT_EQ(w.wait(cq.poller(), cq.t0 + 50ms), 1);
  EXPECT_EQ(cq.arms, 0u);
  EXPECT_EQ(cq.sleeps, 0u);
  EXPECT_FALSE(w.armed());
  EXPECT_EQ(cq.polls, 20u);  // one per microsecond of the fake clock
  EXPECT_EQ(cq.t, cq.t0 + 20us);
}

TEST(CompletionWait, CompletionAfterTheSpinArmsAndSleepsOnce) {
  FakeCq cq;
  cq.land_at(5ms);
  CompletionWaiter w(policy(WaitMode::Adaptive), cq.hooks());
  EXPECT_EQ(w.wait(cq.poller(), cq.t0 + 50ms), 1);
  // spun for the whole bound (first empty poll at +1 us), armed once, polled once more,
  // slept once until the event, reaped after the wake-up
  ASSERT_EQ(cq.arms, 1u);
  EXPECT_EQ(cq.arm_times[0], cq.t0 + 1us + kDefaultSpin);
  ASSERT_EQ(cq.sleeps, 1u);
  EXPECT_EQ(cq.sleep_times[0], cq.arm_times[0] + FakeCq::kPollCost);
  EXPECT_EQ(cq.sleep_lengths[0], 50ms);  // what is left to the deadline, rounded up
  EXPECT_EQ(cq.events, 1u);
  EXPECT_EQ(cq.polls, 51u + 1u + 1u);
  EXPECT_EQ(cq.t, cq.t0 + 5ms + FakeCq::kWakeLatency + FakeCq::kPollCost);
  EXPECT_FALSE(w.armed());  // the event was consumed: the next wait arms again
}

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

TEST(CompletionWait, BusyPollNeverArmsNorSleeps) {
  FakeCq cq;
  cq.land_at(5ms);
  CompletionWaiter w(policy(WaitMode::BusyPoll), cq.hooks());
  EXPECT_EQ(w.wait(cq.poller(), cq.t0 + 50ms), 1);
  EXPECT_EQ(cq.arms, 0u);
  EXPECT_EQ(cq.sleeps, 0u);
  EXPECT_EQ(cq.polls, 5000u);
  // nothing comes: it spins to the deadline and returns 0
  FakeCq idle;
  CompletionWaiter i(policy(WaitMode::BusyPoll), idle.hooks());
  EXPECT_EQ(i.wait(idle.poller(), idle.t0 + 2ms), 0);
  EXPECT_EQ(idle.arms + idle.sleeps, 0u);
  EXPECT_EQ(idle.polls, 2000u);
}

TEST(CompletionWait, NoSpinArmsAtTheFirstEmptyPoll) {
  FakeCq cq;
  cq.land_at(20us);  // would have been caught by the default spin
  CompletionWaiter w(policy(WaitMode::Event), cq.hooks());
  EXPECT_EQ(w.wait(cq.poller(), cq.t0 + 50ms), 1);
  ASSERT_EQ(cq.arms, 1u);
  EXPECT_EQ(cq.arm_times[0], cq.t0 + 1us);
  EXPECT_EQ(cq.sleeps, 1u);
  EXPECT_EQ(cq.polls, 3u);  // empty, empty again after the arm, the completion after the wake
  // a spin set on the policy does not apply to the event mode
  FakeCq e;
  e.land_at(20us);
  CompletionWaiter we(policy(WaitMode::Event, 1000us), e.hooks());
  EXPECT_EQ(we.wait(e.poller(), e.t0 + 50ms), 1);
  EXPECT_EQ(e.sleeps, 1u);
}

TEST(CompletionWait, ZeroSpinAdaptiveIsTheEventMode) {
  FakeCq cq;
  cq.land_at(20us);
  CompletionWaiter w(policy(WaitMode::Adaptive, 0us), cq.hooks());
  EXPECT_EQ(w.wait(cq.poller(), cq.t0 + 50ms), 1);
  EXPECT_EQ(cq.arms, 1u);
  EXPECT_EQ(cq.sleeps, 1u);
  EXPECT_EQ(cq.polls, 3u);
}

TEST(CompletionWait, DeadlineBoundsEveryMode) {
  for (auto m : {WaitMode::Adaptive, WaitMode::Event, WaitMode::BusyPoll}) {
    FakeCq cq;
    CompletionWaiter w(policy(m), cq.hooks());
    EXPECT_EQ(w.wait(cq.poller(), cq.t0 + 30ms), 0) << to_string(m);
    EXPECT_GE(cq.t, cq.t0 + 30ms) << to_string(m);
    EXPECT_LT(cq.t, cq.t0 + 32ms) << to_string(m);
    // a deadline already passed: one poll, no waiting
    FakeCq now;
    CompletionWaiter n(policy(m), now.hooks());
    EXPECT_EQ(n.wait(now.poller(), now.t0), 0) << to_string(m);
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
