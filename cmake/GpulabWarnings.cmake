# gpulab_warnings(<target> STRICT|LENIENT|NONE): the house rules for compiler warnings.
#   STRICT   -Wall -Wextra as errors: common/, the CLI, the emulator, the references, the tests,
#            their mains and the Catch2 runner
#   LENIENT  -Wall -Wextra shown, never errors: the learner's code, skeletons and mutants (whose
#            stubs legitimately leave variables unused)
#   NONE     -w: the emulator's builds of a lab's sources, which rewrite CUDA into C++
# CUDA files get the same flags for their host code (-Xcompiler) and nvcc's own warnings.
function(gpulab_warnings target mode)
  if(mode STREQUAL "NONE")
    target_compile_options(${target} PRIVATE -w)
    return()
  endif()
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>
                                           $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
  if(mode STREQUAL "STRICT")
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>
                                             $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Werror --Werror=all-warnings>)
  elseif(NOT mode STREQUAL "LENIENT")
    message(FATAL_ERROR "gpulab_warnings: mode is STRICT, LENIENT or NONE, not ${mode}")
  endif()
endfunction()

# gpulab_light_optimization(<target>): C++ whose speed nothing measures compiles at -O1: the test
# harness (Catch2's runner and mains, the test cases, the unit tests; Catch2's assertion macros
# make these the costliest files of the build at -O3) and the CLI (orchestration: processes, JSON,
# text). About a third of their compile time went to optimising code that runs once. The code
# under test and every yardstick (labs, references, common/, the emulator, gpulab-pingpong) keeps
# the build's -O3: a test case that times something times that code.
function(gpulab_light_optimization target)
  # CUDA files: their host code only (-Xcompiler); the device code keeps nvcc's optimisation.
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-O1> $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-O1>)
endfunction()
