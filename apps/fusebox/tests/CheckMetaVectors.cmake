# Runs `fusebox classify --provider meta VECTORS` and checks, line by line,
# that "class" equals the vector's expect_class and "retryAfterSeconds" its
# expect_retry_after_s (a number or null); the ctest test
# app.cli.classify_meta_vectors (apps/fusebox/CMakeLists.txt).
#
#   cmake -DFUSEBOX=<fusebox> -DVECTORS=<jsonl> -P CheckMetaVectors.cmake

cmake_minimum_required(VERSION 3.25)

execute_process(
  COMMAND ${FUSEBOX} classify --provider meta ${VECTORS}
  RESULT_VARIABLE status
  OUTPUT_VARIABLE out
  ERROR_VARIABLE err
  TIMEOUT 60)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "fusebox classify exited ${status}:\n${err}")
endif()

file(STRINGS ${VECTORS} vectors ENCODING UTF-8)
string(REGEX REPLACE "\n$" "" out "${out}")
# Each output line is a JSON object; protect ';' (list separator) first.
string(REPLACE ";" "\\;" out "${out}")
string(REPLACE "\n" ";" lines "${out}")
list(LENGTH vectors n_vectors)
list(LENGTH lines n_lines)
if(NOT n_vectors EQUAL n_lines)
  message(FATAL_ERROR "${n_vectors} vectors but ${n_lines} output lines:\n${out}")
endif()

set(failures)
math(EXPR last "${n_vectors} - 1")
foreach(i RANGE ${last})
  list(GET vectors ${i} vector)
  list(GET lines ${i} line)
  string(JSON name GET "${vector}" name)
  string(JSON expect_class GET "${vector}" expect_class)
  string(JSON expect_type TYPE "${vector}" expect_retry_after_s)
  string(JSON got_class GET "${line}" class)
  string(JSON got_type TYPE "${line}" retryAfterSeconds)
  string(JSON reason GET "${line}" reason)
  if(NOT got_class STREQUAL expect_class)
    list(APPEND failures "${name}: class ${got_class}, expected ${expect_class} (${reason})")
  endif()
  if(NOT got_type STREQUAL expect_type)
    list(APPEND failures "${name}: retryAfterSeconds is ${got_type}, expected ${expect_type}")
  elseif(expect_type STREQUAL "NUMBER")
    string(JSON expect_s GET "${vector}" expect_retry_after_s)
    string(JSON got_s GET "${line}" retryAfterSeconds)
    if(NOT got_s EQUAL expect_s)
      list(APPEND failures "${name}: retryAfterSeconds ${got_s}, expected ${expect_s} (${reason})")
    endif()
  endif()
endforeach()
if(failures)
  list(JOIN failures "\n  " report)
  message(FATAL_ERROR "fusebox classify --provider meta ${VECTORS}:\n  ${report}")
endif()
message(STATUS "${n_vectors} vectors, each as expected")
