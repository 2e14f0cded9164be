# Checks that a code block in the docs is, character for character, code that
# a test compiles and runs, so that the docs cannot drift from the API.
#
#   cmake -DDOC=docs/policies.md -DSOURCE=src/fallback_test.cc -DNAME=policies-fallback
#         -P cmake/CheckDocSnippet.cmake
#
# In DOC, the block is the first ```cpp fence after a line containing
# "<!-- snippet NAME". In SOURCE, it is the lines between "// [snippet NAME]"
# and "// [end snippet NAME]", less the indentation of the first of them.

foreach(var DOC SOURCE NAME)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "CheckDocSnippet.cmake: -D${var}=... is required")
  endif()
endforeach()

file(READ ${DOC} doc)
string(FIND "${doc}" "<!-- snippet ${NAME}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${DOC}: no \"<!-- snippet ${NAME}\" marker")
endif()
string(SUBSTRING "${doc}" ${at} -1 doc)
string(FIND "${doc}" "```cpp\n" open)
if(open EQUAL -1)
  message(FATAL_ERROR "${DOC}: no ```cpp block after the snippet ${NAME} marker")
endif()
math(EXPR open "${open} + 7")
string(SUBSTRING "${doc}" ${open} -1 doc)
string(FIND "${doc}" "```" close)
string(SUBSTRING "${doc}" 0 ${close} in_doc)

file(READ ${SOURCE} src)
string(FIND "${src}" "// [snippet ${NAME}]\n" begin)
string(FIND "${src}" "// [end snippet ${NAME}]" end)
if(begin EQUAL -1 OR end EQUAL -1)
  message(FATAL_ERROR "${SOURCE}: no \"// [snippet ${NAME}]\" ... \"// [end snippet ${NAME}]\"")
endif()
# The marker's own indentation is the snippet's.
string(SUBSTRING "${src}" 0 ${begin} before)
string(REGEX MATCH "[ ]*$" indent "${before}")
string(LENGTH "// [snippet ${NAME}]\n" marker_length)
math(EXPR begin "${begin} + ${marker_length}")
math(EXPR length "${end} - ${begin}")
string(SUBSTRING "${src}" ${begin} ${length} in_source)
string(REGEX REPLACE "[ ]+$" "" in_source "${in_source}")
set(in_source "\n${in_source}")
string(REPLACE "\n${indent}" "\n" in_source "${in_source}")
string(SUBSTRING "${in_source}" 1 -1 in_source)

if(NOT in_doc STREQUAL in_source)
  message(FATAL_ERROR "${DOC}: the snippet ${NAME} differs from ${SOURCE}; the doc has\n"
                      "${in_doc}\nthe test compiles\n${in_source}")
endif()
message(STATUS "${DOC}: snippet ${NAME} is the code of ${SOURCE}")
