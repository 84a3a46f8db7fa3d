#include "app/common.hpp"

#include <cstdio>

namespace rxv {

void print_error(const std::string& cmd, const std::string& msg) {
  std::fprintf(stderr, "rxe-verify %s: error: %s\n", cmd.c_str(), msg.c_str());
}

int run_guarded(const std::string& cmd, const std::function<int()>& command) {
  try {
    return command();
  } catch (const CommandError& e) {
    print_error(cmd, e.error().line());
    return e.exit();
  } catch (const std::exception& e) {
    print_error(cmd, e.what());
    return kExitFail;
  }
}

}  // namespace rxv
