// The two-host fault tables' server side (test_fault_table.cpp, test_fault_table_peer.cpp):
// `rxe-verify serve`'s loop (run_server) on a thread over its own fake device, listening on
// 127.0.0.1 at a free port, and the client's hello to it.
#pragma once
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <thread>

#include "app/serve_loop.hpp"
#include "core/oob.hpp"
#include "fake_verbs.hpp"

namespace rxv::testing {

// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, read, closed).
inline std::uint16_t free_loopback_port() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t l = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &l);
  close(fd);
  return ntohs(a.sin_port);
}

// run_server on a thread from construction, over the fake device of `ctl`; `rc` is its
// return once join()ed.
class ServeThread {
 public:
  ServeThread() {
    so.device = "rxe0";
    so.bind = "127.0.0.1";
    so.port = free_loopback_port();
    so.timeout = 20;
    th_ = std::thread([this] { rc = run_server(prov_, so); });
  }
  ~ServeThread() {
    if (th_.joinable()) th_.join();
  }
  ServeThread(const ServeThread&) = delete;
  ServeThread& operator=(const ServeThread&) = delete;
  void join() { th_.join(); }
  // the client could not reach it: do not wait for its accept timeout
  void detach() { th_.detach(); }

  FakeControl ctl;
  ServeOptions so;
  int rc = -1;

 private:
  FakeProvider prov_{ctl};
  std::thread th_;
};

// The server's staging buffer, from its answer to our hello.
struct ServerStaging {
  std::uint64_t addr = 0;
  std::uint32_t rkey = 0;
  std::uint64_t size = 0;
};
// Our hello (protocol `version`, our QP, the run's staging size) and the server's staging
// buffer from its "ok" answer; nullopt when the send failed or the answer was no "ok".
inline std::optional<ServerStaging> hello(LineSocket& sock, const QpAddr& qp, std::uint64_t staging,
                                          int version) {
  if (!sock.send(nlohmann::json{
          {"op", "hello"}, {"version", version}, {"qp", qp_to_json(qp)}, {"staging", staging}}))
    return std::nullopt;
  auto hr = sock.recv(std::chrono::seconds(10));
  if (!hr || !hr->value("ok", false)) return std::nullopt;
  const auto& st = (*hr)["staging"];
  return ServerStaging{st["addr"].get<std::uint64_t>(), st["rkey"].get<std::uint32_t>(),
                       st["size"].get<std::uint64_t>()};
}

}  // namespace rxv::testing
