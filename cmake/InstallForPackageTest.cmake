# Installs a fusebox build tree into a fresh prefix; the setup step (ctest
# fixture) of the package.find_package test.
#
#   cmake -DBUILD_DIR=<build dir> -DPREFIX=<prefix> [-DCONFIG=<config>]
#         [-DSOURCE_DIR=<source dir>] -P cmake/InstallForPackageTest.cmake
#
# The prefix is emptied first, so that a header or target removed from the
# install rules cannot linger from an earlier run and hide the mistake.

cmake_minimum_required(VERSION 3.25)

foreach(var BUILD_DIR PREFIX)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "InstallForPackageTest.cmake: pass -D${var}=...")
  endif()
endforeach()

file(REMOVE_RECURSE "${PREFIX}")

set(config_args)
if(DEFINED CONFIG AND NOT "${CONFIG}" STREQUAL "")
  set(config_args --config "${CONFIG}")
endif()

execute_process(
  COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${PREFIX}" ${config_args}
  RESULT_VARIABLE result
)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "cmake --install ${BUILD_DIR} --prefix ${PREFIX} failed: ${result}")
endif()

# Only headers from the source tree's include/ may be installed, never a
# private header from src/.
if(DEFINED SOURCE_DIR)
  file(GLOB_RECURSE installed_headers LIST_DIRECTORIES false RELATIVE "${PREFIX}/include"
       "${PREFIX}/include/*")
  foreach(header IN LISTS installed_headers)
    # Core headers come from include/, a module's from modules/<name>/include/.
    file(GLOB module_copies "${SOURCE_DIR}/modules/*/include/${header}")
    if(NOT EXISTS "${SOURCE_DIR}/include/${header}" AND NOT module_copies)
      message(FATAL_ERROR "installed ${header}, which is not in ${SOURCE_DIR}/include "
                          "nor in ${SOURCE_DIR}/modules/*/include")
    endif()
  endforeach()
endif()
