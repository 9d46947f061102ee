# Decide what dist/ (data-parallel training) can use: MPI for the process group and CPU all-reduce, NCCL for
# CUDA tensors. Both are optional and found at configure time:
#
#   MINIDET_WITH_MPI   MPI was found (Debian: libopenmpi-dev; scripts/install-deps.sh installs it).
#                      Without it dist/ still builds, as a process group of one process (rank 0 of 1), so
#                      programs have one code path and `minidet train` simply runs alone.
#   MINIDET_WITH_NCCL  nccl.h and libnccl were found and CUDA is on: CUDA tensors are all-reduced by NCCL.
#                      Without it they are copied to the host and all-reduced by MPI (correct, slower).
set(MINIDET_WITH_MPI OFF)
set(MINIDET_WITH_NCCL OFF)
if(MINIDET_MPI)
  # The C API through the C++ compiler (the project enables no C language); the deprecated MPI C++ bindings
  # are not used, so they are not linked either.
  set(MPI_CXX_SKIP_MPICXX ON CACHE BOOL "minidet uses MPI's C API only")
  find_package(MPI COMPONENTS CXX QUIET)
  if(MPI_CXX_FOUND)
    set(MINIDET_WITH_MPI ON)
  else()
    message(STATUS "minidet: MPI not found; dist/ is single-process only (apt-get install libopenmpi-dev)")
  endif()
endif()
# Flags the tests put after mpiexec (MINIDET_MPIEXEC_FLAGS): Open MPI refuses more ranks than cores, and as
# root (CI containers) refuses to start at all, unless told.
set(MINIDET_MPIEXEC_FLAGS "")
set(MINIDET_OPEN_MPI OFF)  # Open MPI's launcher (its options, e.g. a launch agent, are Open MPI's own)
if(MINIDET_WITH_MPI)
  execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _mpiexec_version ERROR_QUIET)
  if(_mpiexec_version MATCHES "Open MPI|OpenRTE")
    set(MINIDET_OPEN_MPI ON)
    set(MINIDET_MPIEXEC_FLAGS --oversubscribe --allow-run-as-root)
  endif()
endif()
if(MINIDET_NCCL AND MINIDET_WITH_MPI AND MINIDET_WITH_CUDA)
  # NCCL_HOME first, then the system (Debian's libnccl-dev), then the CUDA toolkit's folders, where some
  # installs put NCCL (include/nccl.h, lib/libnccl.so).
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ENV NCCL_HOME PATH_SUFFIXES include
            PATHS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(NCCL_LIBRARY nccl HINTS ENV NCCL_HOME PATH_SUFFIXES lib lib64
               PATHS ${CUDAToolkit_LIBRARY_DIR} "${CUDAToolkit_LIBRARY_ROOT}/lib")
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(MINIDET_WITH_NCCL ON)
  endif()
endif()
