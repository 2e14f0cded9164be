# The check behind the ctest test style.test_timeouts.
#
#   cmake -DCTEST=<ctest> -DBUILD_DIR=<build dir> -P cmake/CheckTestTimeouts.cmake
#
# docs/testing.md, "Every test is bounded": every test registered in the build
# tree carries its own TIMEOUT property, so that a test that blocks fails at its
# limit however ctest is run (`ctest --test-dir`, as tools/mutation/run.py does,
# does not read the presets' default). Fails listing each test without one.
# Tests that gtest_discover_tests registers appear once their binary is built;
# the placeholder of a binary not built yet (<target>_NOT_BUILT, which fails
# at once) is not counted.

cmake_minimum_required(VERSION 3.25)

if(NOT CTEST OR NOT BUILD_DIR)
  message(FATAL_ERROR "usage: cmake -DCTEST=<ctest> -DBUILD_DIR=<dir> -P CheckTestTimeouts.cmake")
endif()

execute_process(COMMAND "${CTEST}" --show-only=json-v1
                WORKING_DIRECTORY "${BUILD_DIR}"
                OUTPUT_VARIABLE json RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ctest --show-only=json-v1 failed (${rc}): ${err}")
endif()

string(JSON n_tests LENGTH "${json}" tests)
set(missing)
# Each test's entry is taken out once and read on its own: reading the whole
# document for every field was quadratic (over a minute at 1,100 tests).
string(JSON all_tests GET "${json}" tests)
if(n_tests GREATER 0)
  math(EXPR last "${n_tests} - 1")
  foreach(i RANGE ${last})
    string(JSON test GET "${all_tests}" ${i})
    string(JSON name GET "${test}" name)
    if(name MATCHES "_NOT_BUILT$")
      continue()
    endif()
    string(JSON n_props ERROR_VARIABLE no_props LENGTH "${test}" properties)
    set(timeout "")
    if(NOT no_props AND n_props GREATER 0)
      math(EXPR last_prop "${n_props} - 1")
      foreach(j RANGE ${last_prop})
        string(JSON prop GET "${test}" properties ${j} name)
        if(prop STREQUAL "TIMEOUT")
          string(JSON timeout GET "${test}" properties ${j} value)
        endif()
      endforeach()
    endif()
    if(timeout STREQUAL "" OR timeout LESS_EQUAL 0)
      list(APPEND missing "  ${name}")
    endif()
  endforeach()
endif()

if(missing)
  list(JOIN missing "\n" text)
  message(FATAL_ERROR "tests without a TIMEOUT property (set one where the test is added):\n"
                      "${text}")
endif()
message(STATUS "${n_tests} tests, each with a TIMEOUT")
