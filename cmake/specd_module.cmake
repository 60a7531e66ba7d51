# specd_module(NAME DEPS a b c)
# One static library per folder from every *.cc that is not a *_test.cc, and one
# GoogleTest executable "specd_<name>_tests" from the *_test.cc files beside them.
# Sources are globbed so a new file needs no CMake edit.
function(specd_module name)
  cmake_parse_arguments(ARG "" "" "DEPS;TEST_DEPS" ${ARGN})
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cc
                                   ${CMAKE_CURRENT_SOURCE_DIR}/cpu/*.cc)
  file(GLOB tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*_test.cc
                                    ${CMAKE_CURRENT_SOURCE_DIR}/cpu/*_test.cc)
  list(REMOVE_ITEM srcs ${tests} "")
  if(srcs)
    add_library(specd_${name} STATIC ${srcs})
    set(vis PUBLIC)
  else()
    add_library(specd_${name} INTERFACE)
    set(vis INTERFACE)
  endif()
  target_include_directories(specd_${name} ${vis} ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(specd_${name} ${vis} ${ARG_DEPS})
  if(tests)
    add_executable(specd_${name}_tests ${tests})
    target_link_libraries(specd_${name}_tests PRIVATE specd_${name} ${ARG_TEST_DEPS}
                          GTest::gtest GTest::gtest_main GTest::gmock)
    target_compile_definitions(specd_${name}_tests PRIVATE
      SPECD_SHARED_DATA="${PROJECT_SOURCE_DIR}/../shared/data"
      SPECD_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
      SPECD_BINARY_DIR="${PROJECT_BINARY_DIR}")
    include(GoogleTest)
    # MpiWorker.* is the rank side of the MpiBackend tests, run by them under
    # mpirun; on its own it has nothing to do, so it is not a test of its own.
    gtest_discover_tests(specd_${name}_tests DISCOVERY_TIMEOUT 60 TEST_FILTER "-MpiWorker.*"
                         PROPERTIES LABELS ${name})
  endif()
endfunction()
