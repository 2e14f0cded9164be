# The check behind the ctest test style.file_size.
#
#   cmake -DFUSEBOX_SOURCE_DIR=<source dir> -P cmake/CheckFileSize.cmake
#
# docs/style.md, "Size": no C++ source file over 1,000 lines without a reason
# stated at its top. Fails, listing each such file and its length, unless one
# of its first 40 lines says why in the words "lines on purpose" (as in
# "Over 1,000 lines on purpose: one suite that reads as ..."). build*/ and
# .git/ are not looked at; GLOB_RECURSE is right here: a check over whatever
# exists, not a source list.

cmake_minimum_required(VERSION 3.25)

if(NOT DEFINED FUSEBOX_SOURCE_DIR)
  get_filename_component(FUSEBOX_SOURCE_DIR "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
endif()

set(max_lines 1000)

file(GLOB_RECURSE files LIST_DIRECTORIES false RELATIVE "${FUSEBOX_SOURCE_DIR}"
     "${FUSEBOX_SOURCE_DIR}/*.h" "${FUSEBOX_SOURCE_DIR}/*.cc")
list(FILTER files EXCLUDE REGEX "^(build[^/]*|\\.git)/")
# The Node package's dependencies and build tree (bindings/node, docs/node.md).
list(FILTER files EXCLUDE REGEX "(^|/)node_modules/|^bindings/node/build/")
list(SORT files)

set(violations)
foreach(file IN LISTS files)
  # One entry per line, blank lines included.
  file(STRINGS "${FUSEBOX_SOURCE_DIR}/${file}" lines)
  file(READ "${FUSEBOX_SOURCE_DIR}/${file}" text)
  string(REGEX MATCHALL "\n" newlines "${text}")
  list(LENGTH newlines n)
  if(n LESS_EQUAL max_lines)
    continue()
  endif()
  list(SUBLIST lines 0 40 head)
  string(JOIN "\n" head ${head})
  if(NOT head MATCHES "lines on purpose")
    list(APPEND violations "  ${file}: ${n} lines")
  endif()
endforeach()

list(LENGTH files checked)
if(violations)
  list(JOIN violations "\n" report)
  message(FATAL_ERROR
    "Over ${max_lines} lines without a reason at the top (split the file by concern, or "
    "say why not in a comment with the words \"lines on purpose\"):\n${report}")
endif()
message(STATUS "style.file_size: ${checked} files checked, none over ${max_lines} lines without a reason")
