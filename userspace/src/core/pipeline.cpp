#include "core/pipeline.hpp"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace rxv {

namespace {

using Clock = std::chrono::steady_clock;

// A FIFO of transfer indices on a ring that only grows, to the most ever queued (at
// most the staging slots, its capacity from the start): nothing is allocated per
// transfer, where std::deque allocated a block every 64 of them.
class Fifo {
 public:
  explicit Fifo(std::size_t capacity) : buf_(std::max<std::size_t>(capacity, 1)) {}
  bool empty() const { return n_ == 0; }
  void push(std::size_t v) {
    if (n_ == buf_.size()) {
      std::vector<std::size_t> b(2 * buf_.size());
      for (std::size_t k = 0; k < n_; ++k) b[k] = buf_[(head_ + k) % buf_.size()];
      buf_.swap(b);
      head_ = 0;
    }
    buf_[(head_ + n_++) % buf_.size()] = v;
  }
  std::size_t pop() {
    const std::size_t v = buf_[head_];
    head_ = (head_ + 1) % buf_.size();
    --n_;
    return v;
  }

 private:
  std::vector<std::size_t> buf_;
  std::size_t head_ = 0, n_ = 0;
};

// Verifies completed transfers in order on its own thread (or inline).
class Checker {
 public:
  Checker(const std::function<VerifyOutcome(std::size_t)>& check, bool threaded, std::size_t slots)
      : check_(check), threaded_(threaded), q_(slots) {
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
    q_.push(i);
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
      const std::size_t i = q_.pop();
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
  Fifo q_;  // completed transfers waiting for their check
  std::size_t verified_ = 0;
  bool busy_ = false, failed_ = false, stop_ = false;
  std::size_t fail_i_ = 0;
  VerifyOutcome fail_;
};

double secs(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// One run_pipeline call: its counters and the steps of its loop (post while there is
// room, collect completions, hand completed transfers to the checker, finish).
class Loop {
 public:
  Loop(QueuePair& qp, const LoopSpec& s)
      : qp_(qp),
        s_(s),
        depth_(std::max(1u, s.depth)),
        slots_(std::max(1u, s.slots)),
        sig_wr_(std::max(1u, depth_ / 4)),  // periodic signalling keeps completions flowing
        checker_(s.check, s.threaded, slots_),
        last_wr_(s.count, 0),
        bytes_of_(s.count, 0) {}

  LoopResult run() {
    while (true) {
      if (checker_.failed()) {
        fail(LoopFailure::Kind::Check, checker_.failed_index(), 0, 0, "data check failed");
        break;
      }
      post_while_room();
      if (failed() || completed_ == s_.count) break;
      if (posted_ == done_wr_) {
        // Nothing in flight: waiting for the checker to free a staging slot.
        checker_.wait(checker_.verified(), std::chrono::milliseconds(50));
      } else if (!collect_completions()) {
        break;
      }
      if (s_.progress) {
        std::size_t v = checker_.verified();
        if (v != reported_) s_.progress(reported_ = v);
      }
    }
    return finish();
  }

 private:
  bool failed() const { return res_.failure.kind != LoopFailure::Kind::None; }

  void fail(LoopFailure::Kind k, std::size_t transfer, std::uint64_t wr, int st, std::string text) {
    LoopFailure& f = res_.failure;
    f.kind = k;
    f.transfer = transfer;
    f.wr_id = wr;
    f.wc_status = st;
    f.status_str = std::move(text);
    f.completed_before = completed_;
    f.verified_before = checker_.verified();
    f.in_flight = posted_ - done_wr_;
  }

  // Post while the send queue and the staging slots allow; a transfer of several WRs
  // may be posted across calls (its last WR makes it count as posted).
  void post_while_room() {
    while (next_ < s_.count && posted_ - done_wr_ < depth_) {
      const std::size_t ver = checker_.verified();
      if (!have_pending_ && !start_transfer(ver)) return;
      if (!post_next_wr(ver)) return;
    }
  }

  // The work requests of transfer next_, once a staging slot is free and it is prepared;
  // false when no slot is free or it failed.
  bool start_transfer(std::size_t ver) {
    if (next_ - ver >= slots_ || waits_for_overlap(next_, ver)) return false;
    if (s_.prepare) {
      if (auto prepared = s_.prepare(next_); !prepared) {
        fail(LoopFailure::Kind::Prepare, next_, 0, 0, prepared.error().summary);
        res_.failure.cause = prepared.error().cause;
        return false;
      }
    }
    pending_n_ = s_.wrs(next_, pending_);
    have_pending_ = true;
    pending_pos_ = 0;
    if (pending_n_ == 0) {
      fail(LoopFailure::Kind::Prepare, next_, 0, 0, "transfer has no work requests");
      return false;
    }
    return true;
  }

  // True when transfer i overlaps one still in flight (WRITE) or not yet verified (READ)
  // among those before it: it waits (LoopSpec::overlaps).
  bool waits_for_overlap(std::size_t i, std::size_t ver) const {
    if (!s_.overlaps || i >= s_.count) return false;
    for (std::size_t j = s_.op == OpCode::Read ? ver : completed_; j < std::min(i, next_ + 1); ++j)
      if (s_.overlaps(i, j)) return true;
    return false;
  }

  // Posts the next pending WR; false when the post failed.
  bool post_next_wr(std::size_t ver) {
    WorkRequest& w = pending_[pending_pos_];
    const bool last_of_transfer = pending_pos_ + 1 == pending_n_;
    // Signal when posting the next WR will have to wait (send queue full, loop done,
    // staging slots all unverified), or nothing would ever report this one's
    // completion; and every sig_wr-th WR so the queue keeps draining.
    const bool stall = posted_ - done_wr_ + 1 >= depth_ ||
                       (last_of_transfer && (next_ + 1 == s_.count || next_ + 1 - ver >= slots_ ||
                                             waits_for_overlap(next_ + 1, ver)));
    w.wr_id = posted_ + 1;
    w.op = s_.op;
    w.signaled = stall || w.wr_id % sig_wr_ == 0;
    if (posted_ == done_wr_) {
      // work in flight from now: the no-progress deadline counts from here, not from the
      // last completion before an idle gap (a peer's fill, a slot awaiting its check)
      busy_since_ = Clock::now();
      last_progress_ = busy_since_;
    }
    if (auto sent = qp_.post(w); !sent) {
      fail(LoopFailure::Kind::Post, next_, w.wr_id, 0, sent.error().summary);
      return false;
    }
    ++posted_;
    if (!last_of_transfer) {
      ++pending_pos_;
      return true;
    }
    have_pending_ = false;
    last_wr_[next_] = posted_;
    bytes_of_[next_] = s_.bytes(next_);
    in_flight_bytes_ += bytes_of_[next_];
    ++next_;
    return true;
  }

  // Waits for completions (bounded), hands the completed transfers to the checker and
  // keeps the no-progress deadline; false on a failure.
  bool collect_completions() {
    comps_.clear();
    // Slot-bound (every staging slot posted and unverified): a slot freed by the checker
    // is noticed at the next completion or within 10 ms (1 ms meant a thousand wake-ups
    // a second on an emulated CPU that also runs rxe).
    bool slot_bound = next_ < s_.count && next_ - checker_.verified() >= slots_;
    auto wait = slot_bound ? std::chrono::milliseconds(10) : std::chrono::milliseconds(50);
    int n = qp_.poll(comps_, 32, wait);
    if (n < 0) {
      fail(LoopFailure::Kind::Poll, completed_, done_wr_ + 1, 0, "ibv_poll_cq failed");
      return false;
    }
    for (const auto& c : comps_) {
      if (c.status != 0) {
        auto it = std::lower_bound(last_wr_.begin(), last_wr_.begin() + static_cast<long>(next_), c.wr_id);
        fail(LoopFailure::Kind::Completion, static_cast<std::size_t>(it - last_wr_.begin()), c.wr_id,
             c.status, c.status_str);
        return false;
      }
      done_wr_ = std::max(done_wr_, c.wr_id);  // completions may arrive in any order in a batch
    }
    bool progressed = false;
    while (completed_ < next_ && last_wr_[completed_] <= done_wr_) {
      res_.bytes += bytes_of_[completed_];
      win_bytes_ += bytes_of_[completed_];
      in_flight_bytes_ -= bytes_of_[completed_];
      checker_.push(completed_++);
      progressed = true;
    }
    auto now = Clock::now();
    if (progressed) {
      note_progress(now);
    } else if (now - last_progress_ > s_.deadline(in_flight_bytes_)) {
      fail(LoopFailure::Kind::Timeout, completed_, done_wr_ + 1, 0,
           "no completion within " +
               std::to_string(
                   std::chrono::duration_cast<std::chrono::seconds>(s_.deadline(in_flight_bytes_)).count()) +
               " s");
      return false;
    }
    return true;
  }

  // Wire time (while nothing is left in flight) and the peak rate over >= 50 ms windows.
  void note_progress(Clock::time_point now) {
    last_progress_ = now;
    if (posted_ == done_wr_) res_.wire_seconds += secs(now - busy_since_);
    if (now - win_start_ >= std::chrono::milliseconds(50)) {
      res_.peak_Bps = std::max(res_.peak_Bps, static_cast<double>(win_bytes_) / secs(now - win_start_));
      win_start_ = now;
      win_bytes_ = 0;
    }
  }

  // After the loop: drain what a failure left in flight, wait for (or stop) the checker,
  // and fill in the totals.
  LoopResult finish() {
    LoopFailure& f = res_.failure;
    if (f.kind != LoopFailure::Kind::None) {
      if (posted_ != done_wr_) {
        res_.wire_seconds += secs(Clock::now() - busy_since_);
        qp_.drain();
      }
      if (f.kind != LoopFailure::Kind::Check) {
        checker_.stop();
      } else {
        f.check = checker_.failure();
      }
    } else {
      checker_.finish();
      if (checker_.failed()) {
        fail(LoopFailure::Kind::Check, checker_.failed_index(), 0, 0, "data check failed");
        f.check = checker_.failure();
      }
    }
    checker_.stop();
    res_.verified = checker_.verified();
    res_.wrs = posted_;
    res_.wall_seconds = secs(Clock::now() - t_start_);
    if (res_.peak_Bps == 0 && res_.wire_seconds > 0)
      res_.peak_Bps = static_cast<double>(res_.bytes) / res_.wire_seconds;
    if (s_.progress && res_.verified != reported_) s_.progress(res_.verified);
    return std::move(res_);
  }

  QueuePair& qp_;
  const LoopSpec& s_;
  const Clock::time_point t_start_ = Clock::now();
  const unsigned depth_, slots_, sig_wr_;
  LoopResult res_;
  Checker checker_;
  std::vector<std::uint64_t> last_wr_;  // wr_id of each transfer's last WR
  std::vector<std::uint64_t> bytes_of_;
  std::size_t next_ = 0, completed_ = 0, reported_ = 0;
  std::uint64_t posted_ = 0, done_wr_ = 0, in_flight_bytes_ = 0;
  std::vector<WorkRequest>
      pending_;  // WRs of transfer next_ (the first pending_n_), pending_pos_ of them posted
  std::size_t pending_n_ = 0, pending_pos_ = 0;
  bool have_pending_ = false;
  Clock::time_point busy_since_{}, last_progress_ = Clock::now(), win_start_ = Clock::now();
  std::uint64_t win_bytes_ = 0;
  std::vector<Completion> comps_;
};

}  // namespace

LoopResult run_pipeline(QueuePair& qp, const LoopSpec& s) { return Loop(qp, s).run(); }

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
