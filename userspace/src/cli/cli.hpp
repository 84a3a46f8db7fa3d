// Command line front end: run, serve, doctor, probe, churn (commands in app/app.hpp).
#pragma once
#include "app/app.hpp"

namespace rxv {

int cli_main(int argc, char** argv);

}  // namespace rxv
