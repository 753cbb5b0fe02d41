# Header-only dependencies, taken from the system (Debian: catch2, libcli11-dev,
# nlohmann-json3-dev) or from an ignored .deps/include folder filled by scripts/fill-deps
# (for machines without network or packages, such as the GPU test machine).
set(GPULAB_DEPS_INCLUDE "${PROJECT_SOURCE_DIR}/.deps/include")

function(_gpulab_header_dep target header package)
  find_path(_dir_${target} NAMES ${header} PATHS /usr/include "${GPULAB_DEPS_INCLUDE}" NO_CACHE)
  if(NOT _dir_${target})
    message(FATAL_ERROR "gpulab: ${header} not found. Install it with: apt-get install ${package}"
                        " (or run scripts/fill-deps on a machine that has it).")
  endif()
  add_library(${target} INTERFACE IMPORTED GLOBAL)
  # SYSTEM: warnings inside third-party headers are not ours to fix.
  set_target_properties(${target} PROPERTIES INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${_dir_${target}}"
                                             INTERFACE_INCLUDE_DIRECTORIES "${_dir_${target}}")
  message(STATUS "gpulab: ${header} from ${_dir_${target}}")
endfunction()

_gpulab_header_dep(gpulab::catch2 catch2/catch.hpp catch2)
_gpulab_header_dep(gpulab::cli11 CLI/CLI.hpp libcli11-dev)
_gpulab_header_dep(gpulab::json nlohmann/json.hpp nlohmann-json3-dev)

# MPI (OpenMPI on Debian: openmpi-bin, libopenmpi-dev): the distributed labs need it; without it
# they are left out and `gpulab doctor` says how to install it.
find_package(MPI COMPONENTS CXX QUIET)
set(GPULAB_HAVE_MPI ${MPI_CXX_FOUND})
if(GPULAB_HAVE_MPI)
  message(STATUS "gpulab: MPI ${MPI_CXX_VERSION}, launcher ${MPIEXEC_EXECUTABLE}")
else()
  message(STATUS "gpulab: MPI not found; the distributed labs are left out (apt-get install libopenmpi-dev openmpi-bin)")
endif()
