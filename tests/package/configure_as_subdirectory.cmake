# CTest driver (cmake -P): a project of its own takes the flashgen tree with
# add_subdirectory (as FetchContent does), then builds what the library's
# configure step generates. Every path must come from flashgen's own source
# dir, not the including project's: the library keeps its sources, and the
# embedded device headers and tuning tables are found.
# Variables: SOURCE_DIR (the flashgen tree), WORK_DIR, GENERATOR.
file(REMOVE_RECURSE "${WORK_DIR}")
file(WRITE "${WORK_DIR}/CMakeLists.txt" "
cmake_minimum_required(VERSION 3.25)
project(consumer LANGUAGES CXX)
add_subdirectory(\"${SOURCE_DIR}\" flashgen)
add_executable(consumer consumer.cpp)
target_link_libraries(consumer PRIVATE flashgen::flashgen)
")
file(WRITE "${WORK_DIR}/consumer.cpp" "#include <flashgen/flashgen.hpp>\nint main() { return 0; }\n")

execute_process(COMMAND ${CMAKE_COMMAND} -S "${WORK_DIR}" -B "${WORK_DIR}/build" -G "${GENERATOR}"
                RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "configure failed:\n${out}")
endif()
if(EXISTS "${WORK_DIR}/build/flashgen/tests")
  message(FATAL_ERROR "a subproject must not get flashgen's tests unless it asks")
endif()
# The generated sources, built by their custom commands.
foreach(generated embedded_device_headers embedded_tuning_tables)
  execute_process(COMMAND ${CMAKE_COMMAND} --build "${WORK_DIR}/build"
                          --target "flashgen/generated/${generated}.cpp"
                  RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE out)
  file(SIZE "${WORK_DIR}/build/flashgen/generated/${generated}.cpp" bytes)
  if(NOT result EQUAL 0 OR bytes LESS 10000)
    message(FATAL_ERROR "${generated}.cpp was not generated from the tree (${bytes} bytes):\n${out}")
  endif()
endforeach()
file(READ "${WORK_DIR}/build/build.ninja" rules)
if(NOT rules MATCHES "src/api/c_api\\.cpp\\.o" OR NOT rules MATCHES "src/cpu/reference\\.cpp\\.o")
  message(FATAL_ERROR "the library lost its sources when included by another project")
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
