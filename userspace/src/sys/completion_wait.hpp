// How a queue pair waits for completions when its completion queue is empty: the policy
// (spin, then sleep) apart from libibverbs, so that it can be driven over a fake CQ and
// a fake clock. verbs_ibv.cpp gives it ibv_poll_cq, ibv_req_notify_cq and a sleep on the
// completion channel.
//
// The three modes and what each costs:
//   Adaptive  poll the CQ for at most `spin`, then arm the channel and sleep. A
//             completion that comes within the spin is reaped without a wake-up; a
//             longer wait costs at most `spin` of CPU before it sleeps.
//   BusyPoll  poll until a completion or the deadline (perftest's way): the lowest
//             latency, one CPU core busy for as long as the wait lasts.
//   Event     arm and sleep as soon as the CQ is empty: no CPU spent spinning, but every
//             wait pays a wake-up (poll(2), the completion event, the scheduler).
#pragma once
#include <chrono>
#include <functional>
#include <string>

namespace rxv {

enum class WaitMode { Adaptive, BusyPoll, Event };
// "adaptive", "busy_poll", "event" (the JSON report's completion_wait.mode)
std::string to_string(WaitMode m);

// The adaptive mode's default spin. A wait that blocks costs about one sleep/wake-up
// cycle on the completion channel (a system call, the event's interrupt path, a
// scheduler wake-up: roughly 10 us on bare metal, a few tens under a hypervisor or
// emulation; estimates, not measured by this code). Spinning about that long before sleeping never costs more
// than twice the better of the two choices, whatever the completion's delay (the rent-or-buy bound), and
// keeps a long check's idle CPU to at most this much per wait.
inline constexpr std::chrono::microseconds kDefaultSpin{50};
// The longest spin `rxe-verify run --spin` accepts (1 s): a spin longer than any wait
// is --busy-poll, which says so.
inline constexpr std::chrono::microseconds kMaxSpin{1000000};
// The longest single sleep: the waiter re-polls at least this often while waiting.
inline constexpr std::chrono::milliseconds kMaxSleep{200};

struct WaitPolicy {
  WaitMode mode = WaitMode::Adaptive;
  std::chrono::microseconds spin = kDefaultSpin;  // Adaptive only
  // The spin of one wait: `spin` (Adaptive), 0 (Event); BusyPoll spins to the deadline.
  std::chrono::microseconds spin_bound() const;
};

// One queue pair's waiting. The CQ stays armed across wait() calls until its event is
// consumed by a sleep: re-arming on every call would cost a system call per wake-up.
class CompletionWaiter {
 public:
  using Clock = std::chrono::steady_clock;
  struct Hooks {
    // Request an event for the CQ's next completion (ibv_req_notify_cq); false on failure.
    std::function<bool()> arm;
    // Sleep until the CQ's event or at most the given time; true when an event was
    // consumed (the CQ is no longer armed).
    std::function<bool(std::chrono::milliseconds)> sleep;
    std::function<Clock::time_point()> now = [] { return Clock::now(); };
  };

  CompletionWaiter(WaitPolicy policy, Hooks hooks);

  // Calls `poll` (which reaps completions: how many, 0 none, < 0 failure) until it finds
  // some or `deadline` passes, spinning and sleeping as the policy says. Returns poll's
  // count, 0 at the deadline, -1 when polling or arming failed. A deadline already
  // passed means one poll and no waiting.
  int wait(const std::function<int()>& poll, Clock::time_point deadline);

  const WaitPolicy& policy() const { return policy_; }
  bool armed() const { return armed_; }

 private:
  WaitPolicy policy_;
  Hooks hooks_;
  bool armed_ = false;  // armed, its event not yet consumed
};

}  // namespace rxv
