# Decide whether to build the CUDA kernels, and for which GPU architectures.
#
# CUDA is on when MINIDET_CUDA is ON and nvcc is found. The default architecture list is sm_90 (H100/H200)
# plus the architecture of every GPU visible at configure time, so a build on a GPU machine runs there and a
# build on a CPU-only machine still compiles (and checks) every kernel for Hopper.
set(MINIDET_WITH_CUDA OFF)
if(MINIDET_CUDA)
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(_archs 90)
      find_program(_nvidia_smi nvidia-smi)
      if(_nvidia_smi)
        execute_process(COMMAND ${_nvidia_smi} --query-gpu=compute_cap --format=csv,noheader
                        OUTPUT_VARIABLE _caps RESULT_VARIABLE _rc ERROR_QUIET)
        if(_rc EQUAL 0)
          string(REPLACE "." "" _caps "${_caps}")
          string(REGEX MATCHALL "[0-9]+" _caps "${_caps}")
          list(APPEND _archs ${_caps})
        endif()
      endif()
      list(REMOVE_DUPLICATES _archs)
      set(CMAKE_CUDA_ARCHITECTURES "${_archs}" CACHE STRING "CUDA architectures")
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    # CMake 3.25.1 (Debian 12's) FindCUDAToolkit marks CUDA::nvToolsExt deprecated without checking that the
    # library was found, and CUDA 13 ships none (NVTX is header-only since CUDA 10), so the configure stops
    # with "set_property could not find TARGET CUDA::nvToolsExt". minidet never links it: where the library
    # is missing, an empty target stands in for it.
    get_filename_component(_cuda_root "${CMAKE_CUDA_COMPILER}" DIRECTORY)
    get_filename_component(_cuda_root "${_cuda_root}" DIRECTORY)
    find_library(MINIDET_NVTOOLSEXT_LIBRARY NAMES nvToolsExt64_1 nvToolsExt64 nvToolsExt
                 HINTS "${_cuda_root}" PATH_SUFFIXES lib64 lib lib/x64 targets/x86_64-linux/lib)
    if(NOT MINIDET_NVTOOLSEXT_LIBRARY AND NOT TARGET CUDA::nvToolsExt)
      add_library(CUDA::nvToolsExt INTERFACE IMPORTED)
    endif()
    find_package(CUDAToolkit REQUIRED)
    set(MINIDET_WITH_CUDA ON)
  else()
    message(WARNING "minidet: nvcc not found; building CPU only (CUDA tests will be skipped)")
  endif()
endif()
