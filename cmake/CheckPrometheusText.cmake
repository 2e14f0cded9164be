# The check behind the ctests metrics.promtool.*: Prometheus text exposition
# parsed back by Prometheus' own parser and linter, `promtool check metrics`
# (Debian package prometheus).
#
#   cmake -DPROMTOOL=<promtool> -DPROGRAM=<program> -DWORK_DIR=<dir> -P CheckPrometheusText.cmake
#   cmake -DPROMTOOL=<promtool> -DFILE=<exposition file> -P CheckPrometheusText.cmake
#
# With PROGRAM, runs it and checks what it prints; with FILE, checks the file.
# Fails, never skips, when promtool is missing: the proof is the real parser.

cmake_minimum_required(VERSION 3.25)

if(NOT PROMTOOL OR NOT EXISTS "${PROMTOOL}")
  message(FATAL_ERROR "promtool not found (PROMTOOL='${PROMTOOL}'): install the Debian package "
                      "'prometheus' (make deps), then re-run cmake")
endif()

if(DEFINED PROGRAM)
  file(MAKE_DIRECTORY "${WORK_DIR}")
  get_filename_component(name "${PROGRAM}" NAME)
  set(FILE "${WORK_DIR}/${name}.prom")
  execute_process(COMMAND "${PROGRAM}" OUTPUT_FILE "${FILE}" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${PROGRAM} failed: ${rc}")
  endif()
endif()

if(NOT EXISTS "${FILE}")
  message(FATAL_ERROR "no exposition file '${FILE}'")
endif()
file(SIZE "${FILE}" size)
if(size EQUAL 0)
  message(FATAL_ERROR "'${FILE}' is empty: nothing to check")
endif()

# promtool reads the text on stdin and exits non-zero on a parse error or a
# lint problem, printing what is wrong.
execute_process(COMMAND "${PROMTOOL}" check metrics
                INPUT_FILE "${FILE}"
                RESULT_VARIABLE rc
                OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "promtool check metrics rejected '${FILE}' (exit ${rc}):\n${out}${err}")
endif()
message(STATUS "promtool check metrics: '${FILE}' OK (${size} bytes)")
