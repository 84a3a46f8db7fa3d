// rxe-verify's one error channel: Result<T>, Error, the exceptions of the command boundary
// and the exit codes they map to.
//
// A call that can fail where its caller can act on the failure (open a device, create a
// QP, connect, send, receive, parse a peer's answer, check an option against the host)
// returns Result<T>: the value, or an Error that says what happened (summary), what to do
// about it (remedy, "" when the summary already says it), which documented exit code it
// means (exit), when it is an environment failure a report records, its diagnosis
// cause token (cause, base/cause.hpp), and the errno of the system or verbs call that
// failed (err, 0 = none or not a system call): the cause of a setup failure is decided
// from err and the operation (core/diagnosis.hpp errno_cause), never from the summary's
// text. The caller tests it (`if (!r)`), reads
// the value (`*r`, `r->`, `r.value()`) or passes the error on (`return r.error();`).
// Result is [[nodiscard]]: a failure cannot be dropped without a visible `(void)`.
// C++20 has no std::expected (g++ 12 has it only under -std=c++23): this is the small
// part of it the code needs.
//
// Exceptions are for what cannot be handled where it happens: an option a command cannot
// run with (UsageError, exit 2), a host that cannot run it, found before anything was
// pinned (NotReadyError, exit 3). Both are CommandErrors, derived from std::runtime_error;
// they are caught once, at the command boundary (run_guarded in app/app.hpp, which cli/cli.cpp
// calls), which prints "rxe-verify COMMAND: error: LINE" and returns the exit code. Any
// other std::exception reaching it is exit 1 (kExitFail).
#pragma once
#include <concepts>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

namespace rxv {

// Exit codes (documented: userspace/README.md "Exit status", rxe-verify(1)).
inline constexpr int kExitPass = 0;
inline constexpr int kExitFail = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitNotReady = 3;
inline constexpr int kExitSkip = 4;

struct Error {
  std::string summary;            // what happened: the line a user reads
  std::string remedy;             // what to do about it; "" when summary already says it
  int exit = kExitFail;           // the exit code it means (kExitFail, kExitUsage, kExitNotReady)
  std::string cause = "unknown";  // diagnosis token (base/cause.hpp), "unknown" = none
  int err = 0;                    // errno of the failed system or verbs call, 0 = none

  Error() = default;
  explicit Error(std::string summary_, std::string remedy_ = "", int exit_ = kExitFail,
                 std::string cause_ = "unknown", int err_ = 0)
      : summary(std::move(summary_)),
        remedy(std::move(remedy_)),
        exit(exit_),
        cause(std::move(cause_)),
        err(err_) {}

  // The one line: "SUMMARY; REMEDY", or SUMMARY alone.
  std::string line() const { return remedy.empty() ? summary : summary + "; " + remedy; }
};

// A bad option value: exit 2, the summary is the whole line.
inline Error usage_error(std::string summary) { return Error{std::move(summary), "", kExitUsage}; }

// Result<T>::value() on an error: a bug in the caller (it did not test the Result).
class BadResultAccess : public std::logic_error {
 public:
  explicit BadResultAccess(const Error& e) : std::logic_error("value of a failed result: " + e.line()) {}
};

template <class T>
class [[nodiscard]] Result {
 public:
  using value_type = T;
  // From a value (or anything T is made from), or from an Error. The requires clause keeps
  // Result and Error out of the forwarding constructor (clang-tidy 14 does not read it).
  // NOLINTBEGIN(bugprone-forwarding-reference-overload)
  template <class U = T>
  requires(std::is_constructible_v<T, U&&> && !std::same_as<std::remove_cvref_t<U>, Result> &&
           !std::same_as<std::remove_cvref_t<U>, Error>) Result(U&& v)
      : v_(std::in_place_index<0>, std::forward<U>(v)) {}
  // NOLINTEND(bugprone-forwarding-reference-overload)
  Result(Error e) : v_(std::in_place_index<1>, std::move(e)) {}

  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  T& value() & { return check(), std::get<0>(v_); }
  const T& value() const& { return check(), std::get<0>(v_); }
  T&& value() && { return check(), std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // The error; only when !ok().
  const Error& error() const& { return std::get<1>(v_); }
  Error&& error() && { return std::get<1>(std::move(v_)); }

 private:
  void check() const {
    if (!ok()) throw BadResultAccess(std::get<1>(v_));
  }
  std::variant<T, Error> v_;
};

// A call that returns nothing but can fail: `return {};` on success.
template <>
class [[nodiscard]] Result<void> {
 public:
  using value_type = void;
  Result() = default;
  Result(Error e) : e_(std::move(e)) {}

  bool ok() const noexcept { return !e_; }
  explicit operator bool() const noexcept { return ok(); }
  void value() const {
    if (e_) throw BadResultAccess(*e_);
  }
  const Error& error() const& { return *e_; }
  Error&& error() && { return std::move(*e_); }

 private:
  std::optional<Error> e_;
};

// What a command cannot go on with, thrown where it is found and caught once at the
// command boundary (run_guarded), which prints error().line() and returns error().exit.
class CommandError : public std::runtime_error {
 public:
  explicit CommandError(Error e) : std::runtime_error(e.line()), e_(std::move(e)) {}
  const Error& error() const noexcept { return e_; }
  int exit() const noexcept { return e_.exit; }

 private:
  Error e_;
};
// A bad option value (exit 2).
class UsageError : public CommandError {
 public:
  explicit UsageError(std::string msg) : CommandError(usage_error(std::move(msg))) {}
  explicit UsageError(const Error& e)
      : CommandError(Error(e.summary, e.remedy, kExitUsage, e.cause, e.err)) {}
};
// An environment that cannot run the request, found before anything was pinned (exit 3).
class NotReadyError : public CommandError {
 public:
  explicit NotReadyError(std::string msg) : CommandError(Error{std::move(msg), "", kExitNotReady}) {}
};

// The value of r, or r's error thrown as a CommandError (for a failure the caller cannot
// handle: an option the command cannot run with).
template <class T>
T value_or_throw(Result<T> r) {
  if (!r) throw CommandError(std::move(r).error());
  return std::move(r).value();
}
inline void value_or_throw(Result<void> r) {
  if (!r) throw CommandError(std::move(r).error());
}

}  // namespace rxv
