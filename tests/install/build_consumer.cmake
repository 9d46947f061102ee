# CTest's "values/install: a consumer project builds against the install tree", run as cmake -P:
#   1. cmake --install the build tree into a fresh prefix under WORK_DIR;
#   2. configure and build tests/install/consumer against that prefix alone, with the build's compilers;
#   3. run the consumer and check what it prints.
# Inputs (-D): BUILD_DIR, CONFIG, WORK_DIR, CXX_COMPILER, CXX_FLAGS (sanitizer builds must pass theirs on).
foreach(input BUILD_DIR CONFIG WORK_DIR CXX_COMPILER)
  if(NOT DEFINED ${input})
    message(FATAL_ERROR "build_consumer.cmake: -D${input}=... is missing")
  endif()
endforeach()

function(run step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "install test: ${step} failed (${code}):\n${out}")
  endif()
  set(output "${out}" PARENT_SCOPE)
endfunction()

set(prefix "${WORK_DIR}/prefix")
set(consumer_build "${WORK_DIR}/consumer")
file(REMOVE_RECURSE "${WORK_DIR}")

run("cmake --install" "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --config "${CONFIG}" --prefix "${prefix}")
foreach(expected lib/cmake/minidet/minidetConfig.cmake lib/cmake/minidet/minidetConfigVersion.cmake
                 include/minidet/core/tensor.h include/minidet/ops/roi_align/roi_align.h)
  if(NOT EXISTS "${prefix}/${expected}")
    message(FATAL_ERROR "install test: ${prefix}/${expected} was not installed")
  endif()
endforeach()

# Only the prefix: the consumer must not see the source tree or the build tree.
run("configuring the consumer" "${CMAKE_COMMAND}" -S "${CMAKE_CURRENT_LIST_DIR}/consumer" -B "${consumer_build}"
    "-DCMAKE_PREFIX_PATH=${prefix}" "-DCMAKE_BUILD_TYPE=${CONFIG}" "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}"
    "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${CXX_FLAGS}")
run("building the consumer" "${CMAKE_COMMAND}" --build "${consumer_build}" --config "${CONFIG}")

find_program(consumer NAMES consumer PATHS "${consumer_build}" "${consumer_build}/${CONFIG}" NO_DEFAULT_PATH
             NO_CACHE REQUIRED)
run("running the consumer" "${consumer}" "${WORK_DIR}/plot.png")
if(NOT output MATCHES "loss 14.0 grad 6.0")
  message(FATAL_ERROR "install test: the consumer printed '${output}', expected 'loss 14.0 grad 6.0'")
endif()
if(NOT EXISTS "${WORK_DIR}/plot.png")
  message(FATAL_ERROR "install test: the consumer wrote no PNG")
endif()
message(STATUS "install test: ${output}")
