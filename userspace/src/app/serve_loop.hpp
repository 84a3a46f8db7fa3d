// `rxe-verify serve`'s server loop (app/serve_loop.cpp): its options, one client session,
// the listening loop. serve_command (app/app.hpp, app/serve.cpp) runs it.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "core/oob.hpp"
#include "sys/verbs.hpp"

namespace rxv {

struct ServeOptions {
  std::string device;  // resolved device name
  int gid_index = -1;  // resolved
  std::string bind;    // "" = any
  std::uint16_t port = kDefaultPort;
  double timeout = 300;  // seconds waiting for a client / between messages; 0 = wait for a
                         // client forever (a session still idles out after kDefaultIdleSeconds)
  bool forever = false;
  std::string module_flavor;
  std::uint64_t max_staging = (2ull << 30) + 4096;  // largest staging buffer a client gets
  bool quiet = false;                               // no per-session progress lines (the fuzz target)
  // Whether this host may pin a staging buffer of that many bytes (serve_command: its
  // RLIMIT_MEMLOCK and CAP_IPC_LOCK); unset: not checked. An error refuses the hello
  // with its line and cause.
  std::function<Result<void>(std::uint64_t staging)> memlock;
};

// One client session on an accepted socket (run_server's loop; the fuzz target and the
// unit tests drive it over a socketpair): success on a clean end, else the one-line reason.
Result<void> serve_session(Provider& prov, const ServeOptions& o, LineSocket& s);

// Runs the server loop; returns an exit code. Messages go to stderr (one line each).
int run_server(Provider& prov, const ServeOptions& o);

}  // namespace rxv
