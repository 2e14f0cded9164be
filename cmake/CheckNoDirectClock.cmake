# The check behind the ctest test style.no_direct_clock.
#
#   cmake -DFUSEBOX_SOURCE_DIR=<source dir> -P cmake/CheckNoDirectClock.cmake
#
# Time must come from an injected fusebox::Clock: nothing
# under src/ or include/ except src/clock.cc, which implements SystemClock(),
# and include/fusebox/internal/system_clock.h, its two reads inline, may read a std::chrono clock or sleep; the same holds under apps/ and modules/ (the
# `fusebox` command runs everything on a ManualClock). Fails, listing file:line, on any of
#   steady_clock::now  system_clock::now  high_resolution_clock::now
#   sleep_for(  sleep_until(              (std::this_thread)
#   clock_gettime(  gettimeofday(  usleep(  nanosleep(   (the POSIX ways round)
# Comments are ignored. There are no other exemptions, tests included: a test
# that sleeps is a test that depends on time.
#
# GLOB_RECURSE is right here: this is a check over whatever exists, not a
# source list.

cmake_minimum_required(VERSION 3.25)

if(NOT DEFINED FUSEBOX_SOURCE_DIR)
  get_filename_component(FUSEBOX_SOURCE_DIR "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
endif()

set(allowed "src/clock.cc" "include/fusebox/internal/system_clock.h")
set(forbidden_regex
    "(steady_clock|system_clock|high_resolution_clock)[ \t\r\n]*::[ \t\r\n]*now"
    "|(^|[^A-Za-z0-9_])(sleep_for|sleep_until|clock_gettime|gettimeofday|usleep|nanosleep)"
    "[ \t\r\n]*\\(")
string(JOIN "" forbidden_regex ${forbidden_regex})

file(GLOB_RECURSE files LIST_DIRECTORIES false RELATIVE "${FUSEBOX_SOURCE_DIR}"
     "${FUSEBOX_SOURCE_DIR}/src/*"
     "${FUSEBOX_SOURCE_DIR}/include/*"
     "${FUSEBOX_SOURCE_DIR}/apps/*"
     "${FUSEBOX_SOURCE_DIR}/modules/*")
list(FILTER files INCLUDE REGEX "\\.(h|hh|hpp|cc|cpp|cxx|inc|ipp)$")
list(SORT files)

set(violations)
foreach(file IN LISTS files)
  if(file IN_LIST allowed)
    continue()
  endif()
  file(READ "${FUSEBOX_SOURCE_DIR}/${file}" text)
  # Drop // comments, so that documentation may name what it forbids. Block
  # comments are not used in this code base (Google style).
  string(REGEX REPLACE "//[^\n]*" "" code "${text}")
  string(REGEX MATCHALL "${forbidden_regex}" hits "${code}")
  if(NOT hits)
    continue()
  endif()
  # Report each distinct hit with the line of its first occurrence.
  list(REMOVE_DUPLICATES hits)
  list(REMOVE_ITEM hits "")  # a hit that began with ';' splits off an empty item
  foreach(hit IN LISTS hits)
    string(FIND "${code}" "${hit}" pos)
    string(SUBSTRING "${code}" 0 ${pos} before)
    string(REGEX MATCHALL "\n" newlines "${before}")
    list(LENGTH newlines line)
    math(EXPR line "${line} + 1")
    string(REGEX REPLACE "^[^A-Za-z_]+" "" shown "${hit}")
    list(APPEND violations "  ${file}:${line}: ${shown}")
  endforeach()
endforeach()

list(LENGTH files checked)
if(violations)
  list(JOIN violations "\n" report)
  message(FATAL_ERROR
    "Direct use of the real clock outside src/clock.cc. Take a fusebox::Clock& "
    "(or Options::clock) and call Now()/SleepFor()/SleepUntil() on it instead:\n${report}")
endif()
message(STATUS "style.no_direct_clock: ${checked} files checked, no direct clock use")
