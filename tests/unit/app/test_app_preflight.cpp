// app/preflight.cpp's error paths: each returns or throws the message and exit code a user
// saw before the one error channel (result.hpp); the texts here are those of the
// bad-input table (tests/badinput/cases.tsv) and of the code before it.
#include "app/preflight.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <stdexcept>
#include <string>

#include "app_fixtures.hpp"
#include "fake_host.hpp"
#include "fake_verbs.hpp"

using namespace rxv;
using rxv::testing::FakeHost;

TEST(AppPreflight, MemlockPreflightNamesTheLimitAndTheNeed) {
  FakeHost host;
  host.files["/proc/self/limits"] =
      "Max locked memory         65536                65536                bytes     \n";
  auto r = memlock_preflight(host, 8ull << 20, "the 8 MiB region and the staging buffer");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().summary,
            "RLIMIT_MEMLOCK is 64 KiB, below the 8192 KiB this run pins (the 8 MiB region and the staging "
            "buffer) and the process lacks CAP_IPC_LOCK");
  EXPECT_EQ(r.error().remedy, memlock_remedy(8ull << 20));
  EXPECT_EQ(r.error().exit, kExitNotReady);
  EXPECT_EQ(r.error().cause, cause::kMemlock);
}
