# The CPU stand-in of CUDA, cuBLAS, cuDNN and NCCL (docs/cuda.md, "The CPU stand-in"):
#   spk_cuda_emu          the runtime (runtime/*.cpp) behind the stub headers of include/
#   spk_kernels_cuda_emu  kernels/cuda/*.cu rewritten at build time (rewrite_cuda_source.cmake)
#                         and compiled as C++, with kernels/cuda/*.c as they are
#   <lib>_emu, spkddp_emu the application's libraries rebuilt with SPKDDP_HAVE_CUDA=1 on top of
#                         it: `spkddp_emu train --device cuda` runs the CUDA path on the CPU
#   spkddp_cuda_emu,      the two as the real build makes spkddp: the kernels and the stand-in
#   spkddp_emu_module     as the module cuda_emu/module/libspkddp_cuda.so, which the program
#                         beside it opens (kernels/cuda_module.h; SPKDDP_CUDA_PROBE=1 here)
# kernels/cuda is globbed at configure time (CONFIGURE_DEPENDS), so renamed or added files
# are picked up by the next build. The application's libraries are cloned from their
# targets' properties (sources, include directories, definitions, links), so this file names
# none of their sources.
set(SPK_EMU_DIR ${CMAKE_CURRENT_LIST_DIR})
set(SPK_EMU_GEN ${CMAKE_BINARY_DIR}/cuda_emu/src)  # rewritten sources, mirroring the tree

# Each of the stand-in's libraries is compiled once, position-independent, for the static
# library the test programs link and for the module.
file(GLOB SPK_EMU_RUNTIME_SRC CONFIGURE_DEPENDS ${SPK_EMU_DIR}/runtime/*.cpp)
add_library(spk_cuda_emu_objects OBJECT ${SPK_EMU_RUNTIME_SRC})
target_include_directories(spk_cuda_emu_objects PUBLIC ${SPK_EMU_DIR}/include)
target_link_libraries(spk_cuda_emu_objects PUBLIC MPI::MPI_C)
set_target_properties(spk_cuda_emu_objects PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF
                      POSITION_INDEPENDENT_CODE ON)
add_library(spk_cuda_emu STATIC $<TARGET_OBJECTS:spk_cuda_emu_objects>)
target_include_directories(spk_cuda_emu PUBLIC ${SPK_EMU_DIR}/include)
target_link_libraries(spk_cuda_emu PUBLIC MPI::MPI_C)

# The C++ a CUDA source (or header) becomes; its rewrite runs whenever it changes.
function(spk_emu_rewrite src out_var)
  file(RELATIVE_PATH rel ${CMAKE_SOURCE_DIR} ${src})
  set(out ${SPK_EMU_GEN}/${rel})
  if(src MATCHES "\\.cu$")
    set(out ${out}.cc)
  endif()
  add_custom_command(OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DIN=${src} -DOUT=${out} -P ${SPK_EMU_DIR}/rewrite_cuda_source.cmake
    DEPENDS ${src} ${SPK_EMU_DIR}/rewrite_cuda_source.cmake
    COMMENT "cuda-emu: rewriting ${rel}" VERBATIM)
  set(${out_var} ${out} PARENT_SCOPE)
endfunction()

# A static library of CUDA sources on the stand-in: .cu files and headers (.h, .cuh) are
# rewritten into SPK_EMU_GEN, which comes first on the include path, so a header's rewritten
# copy is the one included; .c files compile as they are.
function(spk_emu_cuda_library name)
  set(srcs)
  foreach(f ${ARGN})
    if(f MATCHES "\\.(cu|cuh|h)$")
      spk_emu_rewrite(${f} out)
      list(APPEND srcs ${out})
    else()
      list(APPEND srcs ${f})
    endif()
  endforeach()
  add_library(${name}_objects OBJECT ${srcs})
  target_include_directories(${name}_objects PUBLIC ${SPK_EMU_GEN} ${CMAKE_SOURCE_DIR})
  target_link_libraries(${name}_objects PUBLIC spk_cuda_emu spk_base)  # their headers
  set_target_properties(${name}_objects PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF
                        POSITION_INDEPENDENT_CODE ON)
  # As nvcc: CUDA C++ (__CUDACC__) with cuda_runtime.h included first.
  target_compile_options(${name}_objects PRIVATE
    "$<$<COMPILE_LANGUAGE:CXX>:SHELL:-include cuda_runtime.h>" $<$<COMPILE_LANGUAGE:CXX>:-D__CUDACC__ -Wno-unknown-pragmas>)
  add_library(${name} STATIC $<TARGET_OBJECTS:${name}_objects>)
  target_include_directories(${name} PUBLIC ${SPK_EMU_GEN} ${CMAKE_SOURCE_DIR})
  target_link_libraries(${name} PUBLIC spk_cuda_emu spk_base)
endfunction()

file(GLOB SPK_EMU_KERNEL_SRC CONFIGURE_DEPENDS
  ${CMAKE_SOURCE_DIR}/kernels/cuda/*.cu ${CMAKE_SOURCE_DIR}/kernels/cuda/*.c
  ${CMAKE_SOURCE_DIR}/kernels/cuda/*.cuh ${CMAKE_SOURCE_DIR}/kernels/cuda/*.h)
spk_emu_cuda_library(spk_kernels_cuda_emu ${SPK_EMU_KERNEL_SRC})

# ---- the application on the stand-in --------------------------------------------------------
# Its libraries, bottom up; each gets an _emu twin linking the twins below it.
set(SPK_EMU_CHAIN spk_kernels spk_io spk_model spk_dist spk_eval spk_train spk_prepare spk_cli)

# A link item of an application library, as its twin links it ("" to drop it).
function(spk_emu_link_item item out_var)
  set(core ${item})
  set(link_only 0)
  if(item MATCHES "^\\$<LINK_ONLY:(.*)>$")
    set(core ${CMAKE_MATCH_1})
    set(link_only 1)
  endif()
  if(core MATCHES "SPK_CUDA_MODULE")  # the real build's choice of kernels/cuda (kernels/CMakeLists.txt)
    set(${out_var} "" PARENT_SCOPE)
    return()
  endif()
  if(core IN_LIST SPK_EMU_CHAIN)
    set(core ${core}_emu)
  elseif(core STREQUAL "spk_kernels_cuda")
    set(core spk_kernels_cuda_emu)
  elseif(core MATCHES "^CUDA::" OR (CUDNN_LIBRARY AND core STREQUAL CUDNN_LIBRARY)
         OR (NCCL_LIBRARY AND core STREQUAL NCCL_LIBRARY))
    set(${out_var} "" PARENT_SCOPE)
    return()
  endif()
  if(link_only)
    set(core "$<LINK_ONLY:${core}>")
  endif()
  set(${out_var} ${core} PARENT_SCOPE)
endfunction()

# tgt_emu: tgt's sources, compile settings and links, with the twins in place of the originals.
function(spk_emu_clone tgt)
  get_target_property(type ${tgt} TYPE)
  get_target_property(dir ${tgt} SOURCE_DIR)
  get_target_property(rel_srcs ${tgt} SOURCES)
  set(srcs)
  foreach(s ${rel_srcs})
    if(NOT IS_ABSOLUTE ${s})
      set(s ${dir}/${s})
    endif()
    list(APPEND srcs ${s})
  endforeach()
  if(type STREQUAL "EXECUTABLE")
    add_executable(${tgt}_emu ${srcs})
  else()
    add_library(${tgt}_emu STATIC ${srcs})
  endif()
  # Sources generated by a custom command in tgt's folder (io's onnx.pb-c.[ch]) are made only
  # by tgt's build: in a fresh tree the twin must wait for it.
  add_dependencies(${tgt}_emu ${tgt})
  foreach(prop INCLUDE_DIRECTORIES COMPILE_DEFINITIONS COMPILE_OPTIONS
               INTERFACE_INCLUDE_DIRECTORIES INTERFACE_COMPILE_DEFINITIONS INTERFACE_COMPILE_OPTIONS)
    get_target_property(v ${tgt} ${prop})
    if(v)
      set_property(TARGET ${tgt}_emu PROPERTY ${prop} "${v}")
    endif()
  endforeach()
  foreach(prop LINK_LIBRARIES INTERFACE_LINK_LIBRARIES)
    get_target_property(v ${tgt} ${prop})
    if(v)
      set(mapped)
      foreach(item ${v})
        spk_emu_link_item(${item} m)
        if(m)
          list(APPEND mapped ${m})
        endif()
      endforeach()
      set_property(TARGET ${tgt}_emu PROPERTY ${prop} "${mapped}")
    endif()
  endforeach()
endfunction()

foreach(t ${SPK_EMU_CHAIN} spkddp)
  spk_emu_clone(${t})
endforeach()
# What the real CUDA build adds (kernels/CMakeLists.txt), whether or not this build has nvcc
# (kernels/cuda/nccl_comm.c comes with the rest of kernels/cuda).
target_compile_definitions(spk_kernels_emu PUBLIC SPKDDP_HAVE_CUDA=1)

# The module and the program that loads it, by kernels/CMakeLists.txt's rules (spk_cuda_module,
# spk_cuda_module_program, the loader): the module links none of kernels/base (its calls there
# reach the program's).
set(SPK_EMU_MODULE_DIR ${CMAKE_BINARY_DIR}/cuda_emu/module)
add_library(spkddp_cuda_emu MODULE $<TARGET_OBJECTS:spk_kernels_cuda_emu_objects> $<TARGET_OBJECTS:spk_cuda_emu_objects>)
target_link_libraries(spkddp_cuda_emu PRIVATE MPI::MPI_C)
spk_cuda_module(spkddp_cuda_emu)
set_target_properties(spkddp_cuda_emu PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${SPK_EMU_MODULE_DIR})
target_link_libraries(spk_kernels_emu PUBLIC
  "$<IF:$<BOOL:$<TARGET_PROPERTY:SPK_CUDA_MODULE>>,spk_cuda_loader,spk_kernels_cuda_emu>")
add_executable(spkddp_emu_module ${CMAKE_SOURCE_DIR}/app/main.c)
target_link_libraries(spkddp_emu_module PRIVATE spk_cli_emu)
spk_cuda_module_program(spkddp_emu_module)
set_target_properties(spkddp_emu_module PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${SPK_EMU_MODULE_DIR})
add_dependencies(spkddp_emu_module spkddp_cuda_emu)
