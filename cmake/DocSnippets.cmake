# fusebox_add_doc_snippets(): every ```cpp block of README.md and docs/*.md is
# compiled, so that the docs cannot drift from the API.
#
# tools/docs/extract_snippets.py turns each page into one generated translation
# unit (at build time, whenever the page changes); the OBJECT library
# fusebox_doc_snippets compiles them with the build's warnings and -Werror: a
# compile step only, nothing linked or run. A block without a marker fails the
# build naming its page and line; a compiler error names them too (#line).
# The markers are documented in CONTRIBUTING.md ("Code in the docs").

function(fusebox_add_doc_snippets)
  find_package(Python3 COMPONENTS Interpreter REQUIRED)
  find_package(spdlog QUIET)
  set(gen_dir ${PROJECT_BINARY_DIR}/doc_snippets)
  set(script ${PROJECT_SOURCE_DIR}/tools/docs/extract_snippets.py)

  # The targets a block may require (requires="..."): each module built, and spdlog.
  set(have fusebox::core)
  file(GLOB module_dirs LIST_DIRECTORIES true ${PROJECT_SOURCE_DIR}/modules/*)
  foreach(dir IN LISTS module_dirs)
    get_filename_component(module ${dir} NAME)
    if(TARGET fusebox::${module})
      list(APPEND have fusebox::${module})
    endif()
  endforeach()
  if(TARGET spdlog::spdlog)
    list(APPEND have spdlog::spdlog)
  endif()

  file(GLOB pages CONFIGURE_DEPENDS RELATIVE ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/docs/*.md)
  list(SORT pages)
  list(PREPEND pages README.md)
  set(sources)
  foreach(page IN LISTS pages)
    string(MAKE_C_IDENTIFIER ${page} name)
    set(tu ${gen_dir}/${name}.cc)
    add_custom_command(
      OUTPUT ${tu}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${gen_dir}
      COMMAND Python3::Interpreter ${script} --root ${PROJECT_SOURCE_DIR} --page ${page}
              --out ${tu} --have ${have}
      DEPENDS ${script} ${PROJECT_SOURCE_DIR}/${page}
      COMMENT "Extracting the code blocks of ${page}"
      VERBATIM)
    list(APPEND sources ${tu})
  endforeach()

  add_library(fusebox_doc_snippets OBJECT ${sources})
  target_link_libraries(fusebox_doc_snippets PRIVATE ${have})
  set_target_properties(fusebox_doc_snippets PROPERTIES CXX_EXTENSIONS OFF)
  target_compile_features(fusebox_doc_snippets PRIVATE cxx_std_20)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    # A snippet may declare what it does not use: the warnings that would say so are off.
    target_compile_options(fusebox_doc_snippets PRIVATE ${FUSEBOX_WARNING_FLAGS} -Werror
      -Wno-unused-variable -Wno-unused-but-set-variable -Wno-unused-function
      -Wno-unused-parameter -Wno-unused-local-typedefs)
  endif()

  # The extractor itself: a block without a marker is an error naming page and line.
  if(FUSEBOX_BUILD_TESTS)
    add_test(NAME docs.snippets.unmarked_block_fails
      COMMAND Python3::Interpreter ${script} --root ${PROJECT_SOURCE_DIR}/tools/docs/testdata
              --page unmarked.md --out ${gen_dir}/unmarked.cc)
    set_tests_properties(docs.snippets.unmarked_block_fails PROPERTIES TIMEOUT 30
      PASS_REGULAR_EXPRESSION "unmarked\\.md:5: ```cpp block without a marker")
    add_test(NAME docs.snippets.marked_blocks
      COMMAND Python3::Interpreter ${script} --root ${PROJECT_SOURCE_DIR}/tools/docs/testdata
              --page marked.md --out ${gen_dir}/marked.cc)
    set_tests_properties(docs.snippets.marked_blocks PROPERTIES TIMEOUT 30)
  endif()
endfunction()
