#include "cli/cli.hpp"

int main(int argc, char** argv) { return rxv::cli_main(argc, argv); }
