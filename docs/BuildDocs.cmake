# Run at build time (cmake -P): finds Doxygen now (so one installed after configuring is used),
# then builds the site into OUT from DOXYFILE. Doxygen's warnings are errors (WARN_AS_ERROR).
find_program(DOXYGEN doxygen NO_CACHE)
if(NOT DOXYGEN)
  message(FATAL_ERROR "gpulab: Doxygen is not installed: apt-get install doxygen (./gpulab docs installs it when run as root)")
endif()
file(REMOVE_RECURSE "${OUT}")
file(MAKE_DIRECTORY "${OUT}")
execute_process(COMMAND "${DOXYGEN}" "${DOXYFILE}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gpulab: Doxygen failed (exit ${rc}); its warnings are in ${OUT}/warnings.log")
endif()
