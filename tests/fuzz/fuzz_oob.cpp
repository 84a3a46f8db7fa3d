// libFuzzer target for the network-facing side of rxe-verify: the out-of-band framing and
// parser (LineSocket::recv, qp_from_json, parse_hello_reply, RemotePeer) and the server's
// message handling (serve_session). What the input means: oob_harness.hpp. Built and run by
// tests/fuzz/run (clang, -fsanitize=fuzzer,address,undefined); every input that once
// crashed it is in tests/fuzz/regressions and replayed by the unit tests.
#include "oob_harness.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  rxv::fuzz::one_input(data, size);
  return 0;
}
