// Where the unit tests find their data, sources, the JSON Schema, python3 and the
// rxe-verify binary. The paths are compiled into test_paths.cpp alone, so no other test
// source changes with the checkout's location: a fresh clone on a warm machine gets
// them from ccache (tests/run-all) and compiles only test_paths.cpp.
#pragma once

namespace rxe_test {
const char* test_data_dir();  // tests/unit/data
const char* test_src_dir();   // tests/unit
const char* python3();        // the python3 CMake found
const char* schema_path();    // userspace/rxe-verify.schema.json
const char* verify_bin();     // the built rxe-verify
}  // namespace rxe_test

#define RXV_TEST_DATA (::rxe_test::test_data_dir())
#define RXV_TEST_SRC (::rxe_test::test_src_dir())
#define RXV_PYTHON3 (::rxe_test::python3())
#define RXV_SCHEMA (::rxe_test::schema_path())
#define RXV_VERIFY_BIN (::rxe_test::verify_bin())
