# The check behind the ctest test style.self_contained.
#
#   cmake -DFUSEBOX_SOURCE_DIR=<source dir> -P cmake/CheckSelfContained.cmake
#
# A clone of this repository is all a reader has: no source file, comment, doc or
# script may point at a document outside the tree (the team's working notes lived
# beside the repository; what the code relies on from them is copied into docs/),
# nor hold a path of the machine it was written on. Fails, listing file:line, on a
# relative path to the notes folder beside the repository, on the names of the team's
# style and design documents, and on paths under /wor[k], /roo[t] or /hom[e] (spelled
# with a bracket here, as in the regex, so that this file passes its own check).
# build*/ and .git/ are not looked at. GLOB_RECURSE is right here: this is a check
# over whatever exists, not a source list.

cmake_minimum_required(VERSION 3.25)

if(NOT DEFINED FUSEBOX_SOURCE_DIR)
  get_filename_component(FUSEBOX_SOURCE_DIR "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
endif()

set(forbidden_regex "(\\.\\./share[d]|STYL[E]\\.md|DESIG[N]\\.md|/wor[k]/|/roo[t]/|/hom[e]/)")

file(GLOB_RECURSE files LIST_DIRECTORIES false RELATIVE "${FUSEBOX_SOURCE_DIR}"
     "${FUSEBOX_SOURCE_DIR}/*")
list(FILTER files EXCLUDE REGEX "^(build[^/]*|\\.git|node_modules)/")
list(FILTER files EXCLUDE REGEX "/node_modules/")
# The Node addon's CMake build tree (bindings/node, docs/node.md).
list(FILTER files EXCLUDE REGEX "^bindings/node/build/")
list(FILTER files INCLUDE REGEX
     "(\\.(h|cc|cmake|md|txt|json|yaml|yml|sh|js|ts|py|toml)|Makefile|CMakeLists\\.txt|\\.clang-[a-z]+|/run)$")
list(SORT files)

set(violations)
foreach(file IN LISTS files)
  file(STRINGS "${FUSEBOX_SOURCE_DIR}/${file}" lines REGEX "${forbidden_regex}")
  if(NOT lines)
    continue()
  endif()
  file(STRINGS "${FUSEBOX_SOURCE_DIR}/${file}" all)
  set(n 0)
  foreach(line IN LISTS all)
    math(EXPR n "${n} + 1")
    if(line MATCHES "${forbidden_regex}")
      list(APPEND violations "  ${file}:${n}: ${CMAKE_MATCH_1}")
    endif()
  endforeach()
endforeach()

list(LENGTH files checked)
if(violations)
  list(JOIN violations "\n" report)
  message(FATAL_ERROR
    "A file points outside the repository. Copy the fact into docs/ (or testdata/) "
    "and cite that instead:\n${report}")
endif()
message(STATUS "style.self_contained: ${checked} files checked, nothing points outside")
