// Progress bar on stderr: only when enabled (stderr is a TTY) and only once an operation
// has run for more than a second.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace rxv {

bool stderr_is_tty();

class Progress {
 public:
  Progress(bool enabled, std::string label, std::uint64_t total);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  void update(std::uint64_t done);
  void set_label(std::string label);

 private:
  bool enabled_;
  bool drawn_ = false;
  std::string label_;
  std::uint64_t total_;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace rxv
