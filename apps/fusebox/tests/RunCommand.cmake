# Runs the real `fusebox` binary once and checks what it did; the ctest tests
# app.cli.* (apps/fusebox/CMakeLists.txt).
#
#   cmake -DCOMMAND=<fusebox> -DARGS=<a|b|c> [-DSTDIN=<file>] -DEXIT=<status>
#         [-DEXPECT=<text in stdout>] [-DEXPECT_ERR=<text in stderr>]
#         [-DGOLDEN=<file stdout must equal>] -P RunCommand.cmake
#
# ARGS are separated by '|' (a ';' list would be split on its way through
# add_test). Texts are plain substrings, not regular expressions.

cmake_minimum_required(VERSION 3.25)

string(REPLACE "|" ";" args "${ARGS}")
set(input)
if(STDIN)
  set(input INPUT_FILE ${STDIN})
endif()
execute_process(
  COMMAND ${COMMAND} ${args}
  ${input}
  RESULT_VARIABLE status
  OUTPUT_VARIABLE out
  ERROR_VARIABLE err
  TIMEOUT 60)

set(failures)
if(NOT "${status}" STREQUAL "${EXIT}")
  list(APPEND failures "exit status ${status}, expected ${EXIT}")
endif()
if(EXPECT)
  string(FIND "${out}" "${EXPECT}" at)
  if(at EQUAL -1)
    list(APPEND failures "stdout lacks: ${EXPECT}")
  endif()
endif()
if(EXPECT_ERR)
  string(FIND "${err}" "${EXPECT_ERR}" at)
  if(at EQUAL -1)
    list(APPEND failures "stderr lacks: ${EXPECT_ERR}")
  endif()
endif()
if(GOLDEN)
  file(READ "${GOLDEN}" golden)
  if(NOT out STREQUAL golden)
    file(WRITE "${CMAKE_CURRENT_BINARY_DIR}/actual-output.txt" "${out}")
    list(APPEND failures "stdout differs from ${GOLDEN}; actual output written to "
                         "${CMAKE_CURRENT_BINARY_DIR}/actual-output.txt")
  endif()
endif()
if(failures)
  list(JOIN failures "\n  " report)
  message(FATAL_ERROR "fusebox ${args}:\n  ${report}\n--- stdout ---\n${out}\n--- stderr ---\n${err}")
endif()
