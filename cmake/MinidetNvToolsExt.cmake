# minidet_stand_in_for_nvtoolsext(TOOLKIT_ROOT): call it before find_package(CUDAToolkit).
#
# CMake 3.25.1 (Debian 12's) FindCUDAToolkit marks CUDA::nvToolsExt deprecated without checking that the
# library was found, and CUDA 13 ships none (NVTX is header-only since CUDA 10), so find_package stops with
# "set_property could not find TARGET CUDA::nvToolsExt". minidet never links it: where the toolkit has no such
# library, an empty target stands in for it. Used by the build (MinidetCuda.cmake) and by an installed
# minidet's package config (minidetConfig.cmake.in), whose find_dependency(CUDAToolkit) meets the same bug.
function(minidet_stand_in_for_nvtoolsext toolkit_root)
  if(TARGET CUDA::nvToolsExt)
    return()
  endif()
  find_library(MINIDET_NVTOOLSEXT_LIBRARY NAMES nvToolsExt64_1 nvToolsExt64 nvToolsExt
               HINTS "${toolkit_root}" PATH_SUFFIXES lib64 lib lib/x64 targets/x86_64-linux/lib NO_CACHE)
  if(NOT MINIDET_NVTOOLSEXT_LIBRARY)
    add_library(CUDA::nvToolsExt INTERFACE IMPORTED GLOBAL)
  endif()
endfunction()
