# minidet_add_layer(<layer> DEPENDS <lower layers...>)
#
# Every layer is built the same way: all .cpp files under the layer's folder, plus its .cu files when CUDA
# is on. Sources are globbed so that adding an op means adding a folder, never editing a central list.
# With MINIDET_UNITY_BUILD the .cpp files compile in batches, so two files of one layer may not define the
# same name at namespace scope, even inside an anonymous namespace: shared constants live in a header
# (ops/common/parallel.h), and a file's own helpers get names of their own.
#
# Headers are included as "core/tensor.h" from the source root while building, and from
# <prefix>/include/minidet once installed (cmake/MinidetInstall.cmake); each layer is minidet::<layer> in
# both. The layer's name is recorded in the global property MINIDET_LAYERS, which the install rules walk.
function(minidet_add_layer layer)
  cmake_parse_arguments(ARG "" "" "DEPENDS" ${ARGN})
  file(GLOB_RECURSE _cpp CONFIGURE_DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/*.cpp")
  set(_sources ${_cpp})
  if(MINIDET_WITH_CUDA)
    file(GLOB_RECURSE _cu CONFIGURE_DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/*.cu")
    list(APPEND _sources ${_cu})
  endif()
  if(NOT _sources)
    add_library(minidet_${layer} INTERFACE)
    target_include_directories(minidet_${layer} INTERFACE $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>)
    target_link_libraries(minidet_${layer} INTERFACE ${ARG_DEPENDS})
  else()
    add_library(minidet_${layer} STATIC ${_sources})
    target_include_directories(minidet_${layer} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>)
    target_link_libraries(minidet_${layer} PUBLIC ${ARG_DEPENDS})
    target_compile_options(minidet_${layer} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>
      $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -Xcompiler=-Wall>)
    set_target_properties(minidet_${layer} PROPERTIES POSITION_INDEPENDENT_CODE ON
                          CUDA_SEPARABLE_COMPILATION OFF)
    if(MINIDET_UNITY_BUILD)  # the .cpp files in batches of 32 (top-level CMakeLists.txt says why); .cu files alone
      set_target_properties(minidet_${layer} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 32)
      if(_cu)
        set_source_files_properties(${_cu} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
      endif()
    endif()
  endif()
  set_target_properties(minidet_${layer} PROPERTIES EXPORT_NAME ${layer})
  add_library(minidet::${layer} ALIAS minidet_${layer})
  set_property(GLOBAL APPEND PROPERTY MINIDET_LAYERS ${layer})
endfunction()
