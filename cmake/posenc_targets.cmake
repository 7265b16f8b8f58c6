# How a posenc layer library and a test of the posenc binary are declared: once, here.

# posenc_layer(<target> <alias> <sources>...): a layer's library, its public headers in
# <dir>/include (installed as include/), linked by others as <alias> (posenc::core, ...).
function(posenc_layer target alias)
  add_library(${target} ${ARGN})
  add_library(${alias} ALIAS ${target})
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
                                              $<INSTALL_INTERFACE:include>)
endfunction()

# posenc_cli_test(<target> <sources>...): GoogleTest cases that run the posenc binary
# (cli_run.h), which is built first; extra properties for gtest_discover_tests after PROPERTIES.
function(posenc_cli_test target)
  cmake_parse_arguments(ARG "" "" "PROPERTIES" ${ARGN})
  add_executable(${target} cli_run.cc ${ARG_UNPARSED_ARGUMENTS})
  target_link_libraries(${target} PRIVATE posenc_test_support GTest::gtest_main)
  target_compile_definitions(${target} PRIVATE POSENC_CLI="$<TARGET_FILE:posenc>"
                             $<$<BOOL:${POSENC_WITH_TORCH}>:POSENC_WITH_TORCH=1>)
  add_dependencies(${target} posenc)
  if(ARG_PROPERTIES)
    gtest_discover_tests(${target} DISCOVERY_TIMEOUT 60 PROPERTIES ${ARG_PROPERTIES})
  else()
    gtest_discover_tests(${target} DISCOVERY_TIMEOUT 60)
  endif()
endfunction()
