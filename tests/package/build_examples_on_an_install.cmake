# CTest driver (cmake -P): installs the build into a scratch prefix, then
# builds examples/ as a separate project that finds it with
# find_package(flashgen CONFIG), and runs the C++ and the C program.
# Variables: BUILD_DIR (the flashgen build), EXAMPLES_DIR, WORK_DIR, GENERATOR.
file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${what} failed (${result}):\n${out}")
  endif()
  message(STATUS "${what}: ok")
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

run_step("install" ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")
foreach(file include/flashgen/flashgen.hpp include/flashgen/flashgen.h lib/libflashgen.so
        lib/libflashgen.a lib/cmake/flashgen/flashgenConfig.cmake bin/flashgen)
  if(NOT EXISTS "${prefix}/${file}")
    message(FATAL_ERROR "the install lacks ${file}")
  endif()
endforeach()

# Nothing of the source or build tree is visible to the consumer: only the prefix.
run_step("configure examples" ${CMAKE_COMMAND} -S "${EXAMPLES_DIR}" -B "${WORK_DIR}/build"
         -G "${GENERATOR}" -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=${prefix}"
         -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
run_step("build examples" ${CMAKE_COMMAND} --build "${WORK_DIR}/build")
foreach(program attention_cpp attention_c)
  run_step("${program}" "${WORK_DIR}/build/${program}")
  message(STATUS "${step_output}")
  if(NOT step_output MATCHES "\nok\n$")
    message(FATAL_ERROR "${program} did not print ok:\n${step_output}")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")
