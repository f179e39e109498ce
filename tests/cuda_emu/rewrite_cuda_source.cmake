# Turns a CUDA C++ source into C++ for the CPU stand-in (run at build time):
#   cmake -DIN=kernels/cuda/x.cu -DOUT=build/.../x.cu.cc -P rewrite_cuda_source.cmake
# Three rewrites, each within a line so that line numbers stay (a #line directive keeps the
# original file name for diagnostics and __FILE__):
#   name<<<grid, block[, shared[, stream]]>>>(args)
#     -> SPK_EMU_KERNEL(name) * SPK_EMU_LAUNCH("name", grid, block[, shared[, stream]])(args)
#        (cuda_emu/device_language.h: the arguments are kept at the launch, and a lambda calls
#        the kernel with them in every thread; `(expr)<<<` becomes `(expr) * SPK_EMU_LAUNCH`)
#   extern __shared__ T name[];  ->  static ::spk_emu::DynamicShared<T> name;
#   __shared__ T name[dims];     ->  __shared__ T name[dims]; SPK_EMU_SHARED(name);
#        (fills the array with garbage when a block starts, like fresh shared memory; a
#        declaration of another form still compiles, as a static, without the garbage)
# Launches and dynamic shared memory it cannot rewrite stop the build with a sentence.
file(READ "${IN}" text)

string(REGEX MATCHALL "<<<" opens "${text}")
list(LENGTH opens n_opens)
string(REGEX REPLACE "([A-Za-z_][A-Za-z0-9_:]*(<[^<>;\n]*>)?)([ \t]*)<<<"
       "SPK_EMU_KERNEL(\\1)\\3 * SPK_EMU_LAUNCH(\"\\1\", " text "${text}")
string(REPLACE "<<<" " * SPK_EMU_LAUNCH(\"(kernel)\", " text "${text}")
string(REGEX MATCHALL ">>>[ \t\r\n]*\\(" closes "${text}")
list(LENGTH closes n_closes)
if(NOT n_opens EQUAL n_closes)
  message(FATAL_ERROR "${IN}: ${n_opens} kernel launches open with <<< but ${n_closes} close with >>>( : "
                      "tests/cuda_emu/rewrite_cuda_source.cmake cannot rewrite them")
endif()
string(REGEX REPLACE ">>>([ \t\r\n]*)\\(" ")\\1(" text "${text}")

set(type "[A-Za-z_][A-Za-z0-9_:<> \t]*[A-Za-z0-9_>]")
set(name "[A-Za-z_][A-Za-z0-9_]*")
string(REGEX REPLACE "extern[ \t]+__shared__[ \t]+(${type})[ \t]+(${name})[ \t]*\\[[ \t]*\\][ \t]*;"
       "static ::spk_emu::DynamicShared<\\1> \\2;" text "${text}")
if(text MATCHES "extern[ \t\n]+__shared__")
  message(FATAL_ERROR "${IN}: an 'extern __shared__' declaration that is not 'extern __shared__ T name[];': "
                      "extend tests/cuda_emu/rewrite_cuda_source.cmake")
endif()

# (the dimensions group always takes part in the match: CMake rejects a reference to one that
# did not, as for a scalar)
string(REGEX REPLACE "__shared__([^;{}()\n]*[^A-Za-z0-9_;{}()\n])(${name})([ \t]*\\[[^;\n]*\\]|[ \t]*);"
       "__shared__\\1\\2\\3; SPK_EMU_SHARED(\\2);" text "${text}")

file(WRITE "${OUT}" "#line 1 \"${IN}\"\n${text}")
