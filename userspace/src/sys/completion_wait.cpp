#include "sys/completion_wait.hpp"

#include <algorithm>
#include <utility>

namespace rxv {

std::string to_string(WaitMode m) {
  switch (m) {
    case WaitMode::Adaptive:
      return "adaptive";
    case WaitMode::BusyPoll:
      return "busy_poll";
    case WaitMode::Event:
      return "event";
  }
  return "adaptive";
}

std::chrono::microseconds WaitPolicy::spin_bound() const {
  return mode == WaitMode::Adaptive ? std::max(spin, std::chrono::microseconds(0))
                                    : std::chrono::microseconds(0);
}

CompletionWaiter::CompletionWaiter(WaitPolicy policy, Hooks hooks)
    : policy_(policy), hooks_(std::move(hooks)) {}

int CompletionWaiter::wait(const std::function<int()>& poll, Clock::time_point deadline) {
  const bool forever = policy_.mode == WaitMode::BusyPoll;
  bool spinning = false;
  Clock::time_point spin_end{};
  while (true) {
    int n = poll();
    if (n != 0) return n < 0 ? -1 : n;
    const auto now = hooks_.now();
    if (now >= deadline) return 0;
    if (!spinning) {  // the spin starts at the first empty poll
      spinning = true;
      spin_end = now + policy_.spin_bound();
    }
    if (forever || now < spin_end) continue;
    if (!armed_) {
      if (!hooks_.arm()) return -1;
      armed_ = true;
      // Poll again before sleeping: a completion that arrived between the last poll and
      // the arm raises no event, and a sleep would miss it until the deadline.
      continue;
    }
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now);
    if (hooks_.sleep(std::clamp(left, std::chrono::milliseconds(1), kMaxSleep))) armed_ = false;
  }
}

}  // namespace rxv
