// The command boundary shared by the commands in app/: the error line, the Outcome of a
// command with a report, and a setup failure of run or churn reported as one.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "app/app.hpp"
#include "core/diagnosis.hpp"

namespace rxv {

void print_error(const std::string& cmd, const std::string& msg);

// The outcome of a command that produced a report.
inline Outcome reported(int exit, nlohmann::json report, std::string text = "") {
  Outcome o;
  o.exit = exit;
  o.has_report = true;
  o.report = std::move(report);
  o.text = std::move(text);
  return o;
}

// A setup failure of run or churn: the error line on stderr, the report with its error
// (no text: the line said it), exit e.exit.
template <class Report>
Outcome setup_failed(const char* cmd, const Error& e, Report& rep) {
  print_error(cmd, e.line());
  rep.error = Diagnosis{e.cause, e.summary, e.remedy};
  finalize(rep);
  return reported(e.exit, to_json(rep));
}

}  // namespace rxv
