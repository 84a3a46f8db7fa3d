#include "pipeline.hpp"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace rxv {

namespace {

using Clock = std::chrono::steady_clock;

// Verifies completed transfers in order on its own thread (or inline).
class Checker {
 public:
  Checker(const std::function<VerifyOutcome(std::size_t)>& check, bool threaded)
      : check_(check), threaded_(threaded) {
    if (threaded_) th_ = std::thread([this] { loop(); });
  }
  ~Checker() { stop(); }
  Checker(const Checker&) = delete;
  Checker& operator=(const Checker&) = delete;

  void push(std::size_t i) {
    if (!threaded_) {
      if (failed_) return;
      record(i, check_(i));
      return;
    }
    std::lock_guard<std::mutex> l(m_);
    q_.push_back(i);
    cv_.notify_one();
  }
  std::size_t verified() {
    std::lock_guard<std::mutex> l(m_);
    return verified_;
  }
  bool failed() {
    std::lock_guard<std::mutex> l(m_);
    return failed_;
  }
  // Wait until the verified count or the failure state changes (bounded).
  void wait(std::size_t seen, std::chrono::milliseconds t) {
    if (!threaded_) return;
    std::unique_lock<std::mutex> l(m_);
    done_cv_.wait_for(l, t, [&] { return verified_ != seen || failed_; });
  }
  // Wait for every queued check.
  void finish() {
    if (!threaded_) return;
    std::unique_lock<std::mutex> l(m_);
    done_cv_.wait(l, [&] { return (q_.empty() && !busy_) || failed_; });
  }
  void stop() {
    if (!th_.joinable()) return;
    {
      std::lock_guard<std::mutex> l(m_);
      stop_ = true;
      cv_.notify_one();
    }
    th_.join();
  }
  std::size_t failed_index() const { return fail_i_; }
  const VerifyOutcome& failure() const { return fail_; }

 private:
  void record(std::size_t i, VerifyOutcome v) {
    if (v.ok) {
      ++verified_;
    } else if (!failed_) {
      failed_ = true;
      fail_i_ = i;
      fail_ = std::move(v);
    }
  }
  void loop() {
    std::unique_lock<std::mutex> l(m_);
    while (true) {
      cv_.wait(l, [&] { return stop_ || !q_.empty(); });
      if (stop_) return;
      std::size_t i = q_.front();
      q_.pop_front();
      if (failed_) continue;
      busy_ = true;
      l.unlock();
      VerifyOutcome v = check_(i);
      l.lock();
      busy_ = false;
      record(i, std::move(v));
      done_cv_.notify_all();
    }
  }

  const std::function<VerifyOutcome(std::size_t)>& check_;
  bool threaded_;
  std::thread th_;
  std::mutex m_;
  std::condition_variable cv_, done_cv_;
  std::deque<std::size_t> q_;
  std::size_t verified_ = 0;
  bool busy_ = false, failed_ = false, stop_ = false;
  std::size_t fail_i_ = 0;
  VerifyOutcome fail_;
};

double secs(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

LoopResult run_pipeline(QueuePair& qp, const LoopSpec& s) {
  LoopResult res;
  LoopFailure& f = res.failure;
  const auto t_start = Clock::now();
  const unsigned depth = std::max(1u, s.depth);
  const unsigned slots = std::max(1u, s.slots);
  // Periodic signalling keeps completions (and free send queue slots) flowing.
  const unsigned sig_wr = std::max(1u, depth / 4);
  Checker checker(s.check, s.threaded);

  std::vector<std::uint64_t> last_wr(s.count, 0);  // wr_id of each transfer's last WR
  std::vector<std::uint64_t> bytes_of(s.count, 0);
  std::size_t next = 0, completed = 0, reported = 0;
  std::uint64_t posted = 0, done_wr = 0, in_flight_bytes = 0;
  std::vector<WorkRequest> pending;  // WRs of transfer `next`, pending_pos of them posted
  std::size_t pending_pos = 0;
  bool have_pending = false;
  auto build = [&](std::size_t i) {
    pending = s.wrs(i);
    have_pending = true;
  };
  auto fail = [&](LoopFailure::Kind k, std::size_t transfer, std::uint64_t wr, int st, std::string text) {
    f.kind = k;
    f.transfer = transfer;
    f.wr_id = wr;
    f.wc_status = st;
    f.status_str = std::move(text);
    f.completed_before = completed;
    f.verified_before = checker.verified();
    f.in_flight = posted - done_wr;
  };
  Clock::time_point busy_since{}, last_progress = Clock::now(), win_start = Clock::now();
  std::uint64_t win_bytes = 0;
  std::vector<Completion> comps;

  while (true) {
    if (checker.failed()) {
      fail(LoopFailure::Kind::Check, checker.failed_index(), 0, 0, "data check failed");
      break;
    }
    // Post while the send queue and the staging slots allow; a transfer of several WRs
    // may be posted across iterations (its last WR makes it count as posted).
    while (next < s.count && posted - done_wr < depth) {
      const std::size_t ver = checker.verified();
      if (!have_pending) {
        if (next - ver >= slots) break;
        if (s.prepare) {
          if (auto prepared = s.prepare(next); !prepared) {
            fail(LoopFailure::Kind::Prepare, next, 0, 0, prepared.error().summary);
            break;
          }
        }
        build(next);
        pending_pos = 0;
        if (pending.empty()) {
          fail(LoopFailure::Kind::Prepare, next, 0, 0, "transfer has no work requests");
          break;
        }
      }
      WorkRequest& w = pending[pending_pos];
      const bool last_of_transfer = pending_pos + 1 == pending.size();
      // Signal when posting the next WR will have to wait (send queue full, loop done,
      // staging slots all unverified), or nothing would ever report this one's
      // completion; and every sig_wr-th WR so the queue keeps draining.
      const bool stall = posted - done_wr + 1 >= depth ||
                         (last_of_transfer && (next + 1 == s.count || next + 1 - ver >= slots));
      w.wr_id = posted + 1;
      w.op = s.op;
      w.signaled = stall || w.wr_id % sig_wr == 0;
      if (posted == done_wr) busy_since = Clock::now();
      if (auto posted_ok = qp.post(w); !posted_ok) {
        fail(LoopFailure::Kind::Post, next, w.wr_id, 0, posted_ok.error().summary);
        break;
      }
      ++posted;
      if (!last_of_transfer) {
        ++pending_pos;
        continue;
      }
      have_pending = false;
      last_wr[next] = posted;
      bytes_of[next] = s.bytes(next);
      in_flight_bytes += bytes_of[next];
      ++next;
    }
    if (f.kind != LoopFailure::Kind::None) break;
    if (completed == s.count) break;
    if (posted == done_wr) {
      // Nothing in flight: waiting for the checker to free a staging slot.
      checker.wait(checker.verified(), std::chrono::milliseconds(50));
    } else {
      comps.clear();
      // Slot-bound (every staging slot posted and unverified): a slot freed by the checker
      // is noticed at the next completion or within 10 ms (1 ms meant a thousand wake-ups
      // a second on an emulated CPU that also runs rxe).
      bool slot_bound = next < s.count && next - checker.verified() >= slots;
      auto wait = slot_bound ? std::chrono::milliseconds(10) : std::chrono::milliseconds(50);
      int n = qp.poll(comps, 32, wait);
      if (n < 0) {
        fail(LoopFailure::Kind::Poll, completed, done_wr + 1, 0, "ibv_poll_cq failed");
        break;
      }
      for (const auto& c : comps) {
        if (c.status != 0) {
          auto it = std::lower_bound(last_wr.begin(), last_wr.begin() + static_cast<long>(next), c.wr_id);
          fail(LoopFailure::Kind::Completion, static_cast<std::size_t>(it - last_wr.begin()), c.wr_id,
               c.status, c.status_str);
          break;
        }
        done_wr = std::max(done_wr, c.wr_id);  // completions may arrive in any order in a batch
      }
      if (f.kind != LoopFailure::Kind::None) break;
      bool progressed = false;
      while (completed < next && last_wr[completed] <= done_wr) {
        res.bytes += bytes_of[completed];
        win_bytes += bytes_of[completed];
        in_flight_bytes -= bytes_of[completed];
        checker.push(completed++);
        progressed = true;
      }
      auto now = Clock::now();
      if (progressed) {
        last_progress = now;
        if (posted == done_wr) res.wire_seconds += secs(now - busy_since);
        if (now - win_start >= std::chrono::milliseconds(50)) {
          res.peak_Bps = std::max(res.peak_Bps, static_cast<double>(win_bytes) / secs(now - win_start));
          win_start = now;
          win_bytes = 0;
        }
      } else if (now - last_progress > s.deadline(in_flight_bytes)) {
        fail(LoopFailure::Kind::Timeout, completed, done_wr + 1, 0,
             "no completion within " +
                 std::to_string(
                     std::chrono::duration_cast<std::chrono::seconds>(s.deadline(in_flight_bytes)).count()) +
                 " s");
        break;
      }
    }
    if (s.progress) {
      std::size_t v = checker.verified();
      if (v != reported) s.progress(reported = v);
    }
  }

  if (f.kind != LoopFailure::Kind::None) {
    if (posted != done_wr) {
      res.wire_seconds += secs(Clock::now() - busy_since);
      qp.drain();
    }
    if (f.kind != LoopFailure::Kind::Check) {
      checker.stop();
    } else {
      f.check = checker.failure();
    }
  } else {
    checker.finish();
    if (checker.failed()) {
      fail(LoopFailure::Kind::Check, checker.failed_index(), 0, 0, "data check failed");
      f.check = checker.failure();
    }
  }
  checker.stop();
  res.verified = checker.verified();
  res.wrs = posted;
  res.wall_seconds = secs(Clock::now() - t_start);
  if (res.peak_Bps == 0 && res.wire_seconds > 0)
    res.peak_Bps = static_cast<double>(res.bytes) / res.wire_seconds;
  if (s.progress && res.verified != reported) s.progress(res.verified);
  return res;
}

std::string describe(const LoopFailure& f) {
  std::string what;
  switch (f.kind) {
    case LoopFailure::Kind::None:
      return "";
    case LoopFailure::Kind::Post:
      what = "could not be posted";
      break;
    case LoopFailure::Kind::Completion:
      what = "completed with an error";
      break;
    case LoopFailure::Kind::Timeout:
      what = "did not complete";
      break;
    case LoopFailure::Kind::Poll:
      what = "could not be polled";
      break;
    case LoopFailure::Kind::Prepare:
      what = "could not be prepared";
      break;
    case LoopFailure::Kind::Check:
      what = "failed its data check";
      break;
  }
  std::string s = "transfer " + std::to_string(f.transfer);
  if (f.wr_id) s += " (wr_id " + std::to_string(f.wr_id) + ")";
  s += " " + what;
  if (!f.status_str.empty()) s += ": " + f.status_str;
  s += "; " + std::to_string(f.completed_before) + " transfers completed (" +
       std::to_string(f.verified_before) + " verified) before it";
  if (f.in_flight) s += ", " + std::to_string(f.in_flight) + " work requests in flight were drained";
  return s;
}

}  // namespace rxv
