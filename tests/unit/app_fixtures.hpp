// Small command configs for the app/ tests (test_app_*.cpp, test_schema.cpp): sizes in
// KiB so the fakes run them in milliseconds, fixed seeds, JSON mode (no progress lines).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "app/app.hpp"

namespace rxv::testing {

inline RunCommandConfig small_run(std::vector<std::string> sizes) {
  RunCommandConfig o;
  o.sizes = std::move(sizes);
  o.seed = 42;
  o.json = true;
  o.no_progress = true;
  return o;
}

// --max 1M, --min and --granularity one page.
inline ProbeCommandConfig small_probe() {
  ProbeCommandConfig o;
  o.max = "1M";
  o.min = "4K";
  o.granularity = "4K";
  o.json = true;
  return o;
}

inline ChurnCommandConfig small_churn(unsigned count, bool traffic) {
  ChurnCommandConfig o;
  o.size = "64K";
  o.count = count;
  o.traffic = traffic;
  o.seed = 7;
  o.json = true;
  return o;
}

}  // namespace rxv::testing
