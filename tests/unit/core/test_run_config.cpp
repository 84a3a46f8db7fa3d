// What follows from a RunConfig (core/run_config.cpp): the peer's staging memory and the
// per-operation deadline.
#include <gtest/gtest.h>

#include <chrono>

#include "core/run_config.hpp"

using namespace rxv;

TEST(RunConfig, StagingMemoryFormula) {
  // each slot also holds the kGuardBytes (64) guards each side of its transfer
  RunConfig c;  // sampled, sample_max 1 MiB
  EXPECT_EQ(staging_slot_bytes(c), (1ull << 20) + 64 + 128);
  EXPECT_EQ(staging_slots(c), 15u);  // 16 MiB / (1 MiB + 192)
  c.mode = Mode::Full;               // msg-size 64 MiB: two slots
  EXPECT_EQ(staging_bytes_for(c), (128ull << 20) + 256);
  c.msg_size = 64 << 10;  // 64 KiB: tx-depth slots (128), 8 MiB + the guards
  EXPECT_EQ(staging_slots(c), 128u);
  EXPECT_EQ(staging_bytes_for(c), (8ull << 20) + 128 * 128);
  c.tx_depth = 4;
  EXPECT_EQ(staging_bytes_for(c), 4ull * ((64 << 10) + 128));
}

TEST(RunConfig, OperationDeadlineIsGivenOrThirtySecondsPlusLengthAtFourMiBPerSecond) {
  RunConfig c;
  EXPECT_EQ(op_deadline(c, 0), std::chrono::milliseconds(30000));
  EXPECT_EQ(op_deadline(c, 8ull << 20), std::chrono::milliseconds(32000));
  c.op_timeout = 1.5;
  EXPECT_EQ(op_deadline(c, 8ull << 20), std::chrono::milliseconds(1500));
}
