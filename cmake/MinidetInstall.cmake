# cmake --install <build> --prefix <P> lays minidet out for other CMake projects:
#
#   P/lib/libminidet_<layer>.a             every layer's static library
#   P/include/minidet/<layer>/.../*.h      the headers, so "core/tensor.h" resolves as it does in the tree
#   P/lib/cmake/minidet/                   minidetConfig.cmake (+ version and target files, MinidetNvToolsExt.cmake)
#   P/bin/minidet                          the command-line program, when it is built
#
# A consumer writes find_package(minidet REQUIRED) and links minidet::minidet (or one layer,
# minidet::<layer>). tests/install/ builds such a consumer against a fresh install tree.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(MINIDET_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/minidet")
set(MINIDET_INSTALL_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}/minidet")

get_property(_minidet_layers GLOBAL PROPERTY MINIDET_LAYERS)
set(_minidet_layer_targets)
foreach(_layer ${_minidet_layers})
  list(APPEND _minidet_layer_targets minidet_${_layer})
  # Only headers: .cuh files are kernel helpers that .cu files include, never part of the C++ interface.
  install(DIRECTORY "${PROJECT_SOURCE_DIR}/${_layer}/" DESTINATION "${MINIDET_INSTALL_INCLUDEDIR}/${_layer}"
          FILES_MATCHING PATTERN "*.h")
endforeach()

install(TARGETS ${_minidet_layer_targets} minidet_all EXPORT minidetTargets
        ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}"
        INCLUDES DESTINATION "${MINIDET_INSTALL_INCLUDEDIR}")
install(EXPORT minidetTargets NAMESPACE minidet:: DESTINATION "${MINIDET_INSTALL_CMAKEDIR}")

# The toolkit the kernels were compiled with, as a hint: a consumer finds that one unless it names another.
set(MINIDET_CUDA_TOOLKIT_ROOT "")
if(MINIDET_WITH_CUDA AND CUDAToolkit_BIN_DIR)
  get_filename_component(MINIDET_CUDA_TOOLKIT_ROOT "${CUDAToolkit_BIN_DIR}" DIRECTORY)
endif()
configure_package_config_file("${CMAKE_CURRENT_LIST_DIR}/minidetConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/minidetConfig.cmake" INSTALL_DESTINATION "${MINIDET_INSTALL_CMAKEDIR}")
# 0.x: a minor release may change the API, so only the same minor version is compatible.
write_basic_package_version_file("${PROJECT_BINARY_DIR}/minidetConfigVersion.cmake"
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/minidetConfig.cmake" "${PROJECT_BINARY_DIR}/minidetConfigVersion.cmake"
              "${CMAKE_CURRENT_LIST_DIR}/MinidetNvToolsExt.cmake" DESTINATION "${MINIDET_INSTALL_CMAKEDIR}")

# The program of examples/minidet/, when this build has it. Its run path keeps the directories it was linked
# from outside the build (the CUDA libraries), so the installed program starts without LD_LIBRARY_PATH.
if(TARGET minidet)
  set_target_properties(minidet PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)
  install(TARGETS minidet RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}")
endif()
