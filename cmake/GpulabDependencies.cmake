# Header-only dependencies, from cmake/dependencies.tsv (the one list of the project's Debian
# packages): each "header:" entry with a target becomes that imported target, found in the system
# (/usr/include) or in the ignored .deps folder filled by scripts/fill-deps (for machines without
# network or packages, such as the GPU test machine). Each package has its own root there
# (.deps/catch2/catch2/catch.hpp), so a target's include folder holds that package only: with one
# shared root, Catch2's folder also exposed the carried nlohmann-json 3.11.3 to the files that
# include Catch2, while the rest took the GPU machine's 3.11.2, and the link failed (2026-12-04).
set(GPULAB_DEPS_ROOT "${PROJECT_SOURCE_DIR}/.deps")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${CMAKE_CURRENT_LIST_DIR}/dependencies.tsv")

function(_gpulab_header_dep target header package)
  string(REGEX REPLACE "/.*" "" top "${header}")
  find_path(_dir_${target} NAMES ${header} PATHS /usr/include "${GPULAB_DEPS_ROOT}/${top}" NO_DEFAULT_PATH NO_CACHE)
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

file(STRINGS "${CMAKE_CURRENT_LIST_DIR}/dependencies.tsv" _gpulab_deps REGEX "^[^#]")
foreach(line IN LISTS _gpulab_deps)
  string(REPLACE "\t" ";" fields "${line}")
  list(GET fields 0 package)
  list(GET fields 1 check)
  list(GET fields 4 target)
  if(check MATCHES "^header:(.*)$" AND NOT target STREQUAL "-")
    _gpulab_header_dep(${target} "${CMAKE_MATCH_1}" ${package})
  endif()
endforeach()

# MPI (OpenMPI on Debian: openmpi-bin, libopenmpi-dev): the distributed labs need it; without it
# they are left out and `gpulab doctor` says how to install it.
find_package(MPI COMPONENTS CXX QUIET)
set(GPULAB_HAVE_MPI ${MPI_CXX_FOUND})
if(GPULAB_HAVE_MPI)
  message(STATUS "gpulab: MPI ${MPI_CXX_VERSION}, launcher ${MPIEXEC_EXECUTABLE}")
else()
  message(STATUS "gpulab: MPI not found; the distributed labs are left out (apt-get install libopenmpi-dev openmpi-bin)")
endif()
