# The ctest test app.html.chromium: `fusebox sim --html` pages loaded in
# headless Chromium must raise no console message (the pages log nothing, so
# any message is an error: an exception, a failed load) and must show the
# breaker's states once their script has run.
#
#   cmake -DFUSEBOX=<fusebox> -DCHROMIUM=<chromium> -DWORK_DIR=<dir>
#         -DBROKEN_PAGE=<page with a script error> -P CheckHtmlInChromium.cmake
#
# Chromium runs as root in CI, hence --no-sandbox; every network feature is
# off and each run gets a fresh profile. A missing Chromium fails the test:
# `make deps` installs Debian's `chromium`.

cmake_minimum_required(VERSION 3.25)

if(NOT CHROMIUM OR NOT EXISTS "${CHROMIUM}")
  message(FATAL_ERROR "Chromium not found (looked for chromium, chromium-browser, "
                      "google-chrome): run `make deps`, which installs Debian's chromium")
endif()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

# Loads `page`; sets <prefix>_dom and <prefix>_console (the console lines).
function(load_page page prefix)
  get_filename_component(name "${page}" NAME_WE)
  set(profile "${WORK_DIR}/profile-${name}")
  file(REMOVE_RECURSE "${profile}")
  execute_process(
    COMMAND "${CHROMIUM}" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run
            --disable-background-networking --disable-component-update --disable-sync
            --disable-extensions --user-data-dir=${profile}
            --enable-logging=stderr --v=0 --dump-dom "file://${page}"
    RESULT_VARIABLE status
    OUTPUT_VARIABLE dom
    ERROR_VARIABLE log
    TIMEOUT 90)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "chromium failed on ${page} (status ${status}):\n${log}")
  endif()
  # Console messages are logged as "...:INFO:CONSOLE:<line>] "<text>", source: ...".
  string(REGEX MATCHALL "[^\n]*:CONSOLE[^\n]*" console "${log}")
  set(${prefix}_dom "${dom}" PARENT_SCOPE)
  set(${prefix}_console "${console}" PARENT_SCOPE)
endfunction()

# The check must be able to fail: a page with a script error shows up.
load_page("${BROKEN_PAGE}" broken)
if(NOT broken_console)
  message(FATAL_ERROR "self-check: the script error in ${BROKEN_PAGE} was not seen on the "
                      "console; this Chromium logs differently and the check below proves nothing")
endif()

foreach(lang en ko)
  set(page "${WORK_DIR}/default-${lang}.html")
  execute_process(COMMAND "${FUSEBOX}" sim default --lang ${lang} --html "${page}"
                  RESULT_VARIABLE status OUTPUT_QUIET ERROR_VARIABLE err)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "fusebox sim --html failed (${status}): ${err}")
  endif()
  load_page("${page}" page)
  if(page_console)
    list(JOIN page_console "\n" lines)
    message(FATAL_ERROR "${page}: console messages:\n${lines}")
  endif()
  # The script ran to its end (it sets data-ready to the number of marks).
  string(FIND "${page_dom}" "data-ready=\"40\"" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${page}: the page's script did not finish (no data-ready=\"40\")")
  endif()
  foreach(state CLOSED OPEN HALF_OPEN)
    string(FIND "${page_dom}" ">${state}<" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "${page}: state ${state} not shown")
    endif()
  endforeach()
  foreach(result success failure rejected)
    string(FIND "${page_dom}" "class=\"mark ${result}\"" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "${page}: no ${result} mark")
    endif()
  endforeach()
  message(STATUS "${page}: loaded with no console message; CLOSED, OPEN, HALF_OPEN shown")
endforeach()
