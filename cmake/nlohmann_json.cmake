# nlohmann-json (header-only) for the tuning tables and the CLI's JSON.
# Where it comes from, first hit wins:
#   1. a CMake package (Debian's nlohmann-json3-dev, a conda or vcpkg prefix),
#   2. FLASHGEN_JSON_INCLUDE_DIR, a folder holding nlohmann/json.hpp,
#   3. the nlohmann-json package from PyPI in the Python that runs the build:
#      pip's build environment has it (a build requirement in pyproject.toml),
#      so `pip install .` needs no system -dev package. That package ships the
#      headers without a CMake config, hence the lookup through Python.
# Either way the result is the target nlohmann_json::nlohmann_json.
find_package(nlohmann_json 3 QUIET CONFIG)
if(nlohmann_json_FOUND)
  return()
endif()

set(FLASHGEN_JSON_INCLUDE_DIR "" CACHE PATH "Folder holding nlohmann/json.hpp (found when empty)")
if(NOT FLASHGEN_JSON_INCLUDE_DIR)
  find_package(Python COMPONENTS Interpreter QUIET)
  if(Python_EXECUTABLE)
    execute_process(
      COMMAND "${Python_EXECUTABLE}" -c
              "import nlohmann_json, os; print(os.path.join(os.path.dirname(nlohmann_json.__file__), 'include'))"
      OUTPUT_VARIABLE pip_json_include
      OUTPUT_STRIP_TRAILING_WHITESPACE
      RESULT_VARIABLE pip_json_result
      ERROR_QUIET)
    if(pip_json_result EQUAL 0 AND EXISTS "${pip_json_include}/nlohmann/json.hpp")
      set(FLASHGEN_JSON_INCLUDE_DIR "${pip_json_include}" CACHE PATH
          "Folder holding nlohmann/json.hpp (found when empty)" FORCE)
    endif()
  endif()
endif()
if(NOT EXISTS "${FLASHGEN_JSON_INCLUDE_DIR}/nlohmann/json.hpp")
  message(FATAL_ERROR
    "nlohmann-json not found. Install it with `pip install nlohmann-json` (for the Python "
    "that runs CMake), from your distribution (Debian: nlohmann-json3-dev), or pass "
    "-DFLASHGEN_JSON_INCLUDE_DIR=<folder holding nlohmann/json.hpp>.")
endif()
message(STATUS "nlohmann-json: ${FLASHGEN_JSON_INCLUDE_DIR}")
add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
target_include_directories(nlohmann_json::nlohmann_json SYSTEM INTERFACE "${FLASHGEN_JSON_INCLUDE_DIR}")
