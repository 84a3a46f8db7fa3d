#include "core/progress.hpp"

#include <unistd.h>

#include <cstdio>

namespace rxv {

bool stderr_is_tty() { return isatty(STDERR_FILENO) == 1; }

Progress::Progress(bool enabled, std::string label, std::uint64_t total)
    : enabled_(enabled),
      label_(std::move(label)),
      total_(total),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

Progress::~Progress() {
  if (drawn_) std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
}

void Progress::set_label(std::string label) { label_ = std::move(label); }

void Progress::update(std::uint64_t done) {
  if (!enabled_ || total_ == 0) return;
  auto now = std::chrono::steady_clock::now();
  if (now - start_ < std::chrono::seconds(1)) return;
  if (drawn_ && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  drawn_ = true;
  double f = static_cast<double>(done) / static_cast<double>(total_);
  if (f > 1) f = 1;
  const int width = 30;
  int fill = static_cast<int>(f * width);
  char bar[width + 1];
  for (int i = 0; i < width; ++i) bar[i] = i < fill ? '#' : '.';
  bar[width] = 0;
  double el = std::chrono::duration<double>(now - start_).count();
  std::fprintf(stderr, "\r\033[K%s [%s] %3.0f%% %.0fs", label_.c_str(), bar, f * 100, el);
  std::fflush(stderr);
}

}  // namespace rxv
