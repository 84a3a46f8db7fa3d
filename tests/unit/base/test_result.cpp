// result.hpp: Result<T> holds a value or an Error, Result<void> success or an Error; the
// exceptions of the command boundary carry their Error and exit code.
#include "base/result.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "core/diagnosis.hpp"

using namespace rxv;

namespace {
struct Base {
  virtual ~Base() = default;
};
struct Derived : Base {};

Result<int> half(int n) {
  if (n % 2) return Error{std::to_string(n) + " is odd", "pass an even number", kExitUsage};
  return n / 2;
}
Result<void> even(int n) {
  if (auto h = half(n); !h) return h.error();
  return {};
}
}  // namespace

TEST(Result, HoldsTheValue) {
  auto r = half(8);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(*r, 4);
  EXPECT_EQ(r.value(), 4);
  Result<std::string> s = "text";  // from anything the value is made from
  EXPECT_EQ(s->size(), 4u);
  Result<std::unique_ptr<Base>> p = std::make_unique<Derived>();  // move-only, converted
  ASSERT_TRUE(p);
  std::unique_ptr<Base> taken = std::move(p).value();
  EXPECT_NE(taken, nullptr);
}

TEST(Result, HoldsTheErrorWithCauseRemedyAndExit) {
  auto r = half(7);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().summary, "7 is odd");
  EXPECT_EQ(r.error().remedy, "pass an even number");
  EXPECT_EQ(r.error().exit, kExitUsage);
  EXPECT_EQ(r.error().cause, cause::kUnknown);  // the default cause token
  EXPECT_EQ(r.error().line(), "7 is odd; pass an even number");
  EXPECT_EQ(Error{"no remedy"}.line(), "no remedy");
  EXPECT_EQ(Error{"x"}.exit, kExitFail);  // an error is a failure unless it says otherwise
}

TEST(Result, VoidResultPassesAnErrorOn) {
  EXPECT_TRUE(even(2));
  auto r = even(3);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().summary, "3 is odd");
  EXPECT_NO_THROW(even(2).value());
}

// Reading the value of a failed result is a bug in the caller: a logic_error naming the
// error, never a silent default.
TEST(Result, ValueOfAnErrorThrows) {
  auto r = half(5);
  EXPECT_THROW((void)r.value(), BadResultAccess);
  EXPECT_THROW(even(5).value(), std::logic_error);
  try {
    (void)*r;
  } catch (const BadResultAccess& e) {
    EXPECT_EQ(std::string(e.what()), "value of a failed result: 5 is odd; pass an even number");
  }
}

TEST(Result, CommandErrorsAreRuntimeErrorsWithTheirExitCode) {
  UsageError u("--size: size must be greater than 0");
  EXPECT_EQ(u.exit(), kExitUsage);
  EXPECT_EQ(u.error().exit, kExitUsage);
  EXPECT_EQ(std::string(u.what()), "--size: size must be greater than 0");
  const std::runtime_error& base = u;  // derived from std::runtime_error
  EXPECT_EQ(std::string(base.what()), u.what());
  NotReadyError n("--size 64 GiB exceeds the available memory");
  EXPECT_EQ(n.exit(), kExitNotReady);
  CommandError c(Error{"summary", "remedy", kExitNotReady});
  EXPECT_EQ(std::string(c.what()), "summary; remedy");
}

TEST(Result, ValueOrThrowRaisesTheErrorAsACommandError) {
  EXPECT_EQ(value_or_throw(half(6)), 3);
  try {
    (void)value_or_throw(half(1));
    ADD_FAILURE() << "no throw";
  } catch (const CommandError& e) {
    EXPECT_EQ(e.exit(), kExitUsage);
    EXPECT_EQ(e.error().summary, "1 is odd");
  }
  EXPECT_THROW(value_or_throw(even(1)), CommandError);
}
