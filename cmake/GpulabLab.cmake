# gpulab_add_lab(<NN-slug> SOURCES <file names in the lab folder> TESTS <test sources>
#                [LIBRARIES <libraries the lab and its tests need>] [TIMEOUT <seconds per case>]
#                [MAIN <test main library>] [MPI_RANKS <W...>] [PERF_RANKS <W...>])
# MPI_RANKS: the lab is distributed; every case runs under mpirun once per W (PERF_RANKS for the
# [perf] cases), in CTest and in the grader. MAIN defaults to gpulab_catch_main_cuda.
#
# From one list of sources it creates, for lab NN:
#   labNN_ref        solutions/NN-slug/            (the reference; its cases are registered in CTest)
#   labNN            labs/NN-slug/                 (the learner's working copy)
#   labNN_sub        build/submission/NN/          (a snapshot `gpulab grade --submission` copies in)
#   labNN_skeleton   rendered from solutions/ as `gpulab sync` would write labs/
#   labNN_mutant_K   the reference with region NN.K alone replaced by its stub
# Every variant links the same test objects, so all are judged by the same cases. Student and
# reference code live in separate executables and may define the same symbols.
# The CLI learns about the lab from build/labinfo/NN.json, written here.

set(GPULAB_LABINFO_DIR "${CMAKE_BINARY_DIR}/labinfo")
set(GPULAB_CMAKE_DIR "${CMAKE_CURRENT_LIST_DIR}")
define_property(GLOBAL PROPERTY GPULAB_LABS BRIEF_DOCS "labs" FULL_DOCS "lab slugs added")

# One executable from a folder holding the lab's sources.
function(_gpulab_lab_exe name num dir sources exclude)
  set(files)
  foreach(f IN LISTS sources)
    list(APPEND files "${dir}/${f}")
  endforeach()
  add_library(${name}_src OBJECT ${files})
  target_link_libraries(${name}_src PRIVATE gpulab lab${num}_interface)
  add_executable(${name} $<TARGET_OBJECTS:${name}_src>)
  target_link_libraries(${name} PRIVATE lab${num}_tests lab${num}_main)
  if(exclude)
    set_target_properties(${name}_src ${name} PROPERTIES EXCLUDE_FROM_ALL ON)
  endif()
endfunction()

# A variant whose sources the CLI renders from solutions/ (mode: skeleton or mutant).
function(_gpulab_rendered_exe name num slug mode region sources)
  set(out_dir "${CMAKE_BINARY_DIR}/variants/${name}")
  set(outputs)
  foreach(f IN LISTS sources)
    set(in "${PROJECT_SOURCE_DIR}/solutions/${slug}/${f}")
    add_custom_command(
      OUTPUT "${out_dir}/${f}"
      COMMAND gpulab-cli render --mode ${mode} --region "${region}" --lab ${slug}
              --input "${in}" --output "${out_dir}/${f}"
      DEPENDS "${in}" gpulab-cli
      COMMENT "gpulab: rendering ${mode} ${region} of ${slug}/${f}" VERBATIM)
  endforeach()
  _gpulab_lab_exe(${name} ${num} "${out_dir}" "${sources}" ON)
endfunction()

# gpulab_register_tests(<target> <label> <timeout> [MPI_RANKS <W...>] [PERF_RANKS <W...>]):
# one CTest entry per test case of a test program, discovered after each build (the program
# lists its cases with --gpulab-list, which also enforces the [cpu]/[gpu] tags), labelled <label>
# and cpu or gpu. With MPI_RANKS, one entry per case and W, run by `gpulab-cli mpirun` (mpirun
# with a time limit, per-rank output files and no orphans), labelled mpi too.
function(gpulab_register_tests target label timeout)
  cmake_parse_arguments(PARSE_ARGV 3 ARG "" "" "MPI_RANKS;PERF_RANKS")
  set(tests_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_tests.cmake")
  string(REPLACE ";" "," ranks "${ARG_MPI_RANKS}")
  string(REPLACE ";" "," perf_ranks "${ARG_PERF_RANKS}")
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND "${CMAKE_COMMAND}" -D "EXE=$<TARGET_FILE:${target}>" -D "OUT=${tests_file}"
            -D "PREFIX=${target}" -D "LABEL=${label}" -D "TIMEOUT=${timeout}"
            -D "RANKS=${ranks}" -D "PERF_RANKS=${perf_ranks}" -D "CLI=$<TARGET_FILE:gpulab-cli>"
            -D "LOGS=${CMAKE_CURRENT_BINARY_DIR}/mpi-logs"
            -P "${GPULAB_CMAKE_DIR}/GpulabWriteTests.cmake"
    VERBATIM)
  if(ARG_MPI_RANKS)
    add_dependencies(${target} gpulab-cli)
  endif()
  # CTest reads this file; before the first build it registers one failing placeholder.
  set(include_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_include.cmake")
  file(WRITE "${include_file}"
       "if(EXISTS \"${tests_file}\")\n  include(\"${tests_file}\")\nelse()\n"
       "  add_test(${target}_NOT_BUILT \"${CMAKE_COMMAND}\" -E false)\nendif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${include_file}")
endfunction()

function(gpulab_add_lab slug)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "TIMEOUT;MAIN" "SOURCES;TESTS;LIBRARIES;MPI_RANKS;PERF_RANKS")
  string(SUBSTRING "${slug}" 0 2 num)
  set(test_dir "${CMAKE_CURRENT_SOURCE_DIR}")
  set(sol_dir "${PROJECT_SOURCE_DIR}/solutions/${slug}")
  set(lab_dir "${PROJECT_SOURCE_DIR}/labs/${slug}")
  set(sub_dir "${CMAKE_BINARY_DIR}/submission/${num}")
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  if(NOT ARG_MAIN)
    set(ARG_MAIN gpulab_catch_main_cuda)
  endif()
  if(ARG_MPI_RANKS AND NOT ARG_PERF_RANKS)
    set(ARG_PERF_RANKS ${ARG_MPI_RANKS})
  endif()
  set_property(GLOBAL APPEND PROPERTY GPULAB_LABS "${slug}")

  # Regions, read at configure time; editing a solution re-runs configure.
  set(regions)
  foreach(f IN LISTS ARG_SOURCES)
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${sol_dir}/${f}")
    file(STRINGS "${sol_dir}/${f}" lines REGEX "BEGIN SOLUTION\\([0-9]+\\.[0-9]+\\)")
    foreach(l IN LISTS lines)
      string(REGEX MATCH "BEGIN SOLUTION\\(([0-9]+\\.[0-9]+)\\)" _m "${l}")
      list(APPEND regions "${CMAKE_MATCH_1}")
    endforeach()
  endforeach()

  set(missing "")
  if(NOT GPULAB_HAVE_CUDA)
    set(missing "no CUDA toolkit")
  elseif(ARG_MPI_RANKS AND NOT GPULAB_HAVE_MPI)
    set(missing "no MPI (apt-get install libopenmpi-dev openmpi-bin)")
  endif()
  if(missing)
    file(WRITE "${GPULAB_LABINFO_DIR}/${num}.json"
         "{\"number\":\"${num}\",\"slug\":\"${slug}\",\"buildable\":false,\"reason\":\"${missing}\"}\n")
    message(STATUS "gpulab: lab ${slug} not built: ${missing}")
    return()
  endif()

  # The interface header(s) in tests/NN-slug are owned by the tests; labs and solutions include them.
  add_library(lab${num}_interface INTERFACE)
  target_include_directories(lab${num}_interface INTERFACE "${test_dir}")
  target_link_libraries(lab${num}_interface INTERFACE ${ARG_LIBRARIES})
  add_library(lab${num}_main INTERFACE)
  target_link_libraries(lab${num}_main INTERFACE ${ARG_MAIN})
  add_library(lab${num}_tests OBJECT ${ARG_TESTS})
  target_link_libraries(lab${num}_tests PUBLIC gpulab gpulab_testing lab${num}_interface ${ARG_LIBRARIES})

  _gpulab_lab_exe(lab${num}_ref ${num} "${sol_dir}" "${ARG_SOURCES}" OFF)
  # The learner's folder: written by `gpulab sync` and committed. If a file is missing (deleted
  # by accident, or a new lab before its first sync) the learner targets are left out, so the
  # rest of the tree, sync included, still builds.
  set(have_lab_files ON)
  foreach(f IN LISTS ARG_SOURCES)
    if(NOT EXISTS "${lab_dir}/${f}")
      set(have_lab_files OFF)
      message(WARNING "gpulab: labs/${slug}/${f} is missing: restore it with `git checkout labs/` "
                      "or write it with `./gpulab sync`. Lab ${num} cannot be graded until then.")
    endif()
  endforeach()
  if(have_lab_files)
    _gpulab_lab_exe(lab${num} ${num} "${lab_dir}" "${ARG_SOURCES}" OFF)
    foreach(f IN LISTS ARG_SOURCES)
      if(NOT EXISTS "${sub_dir}/${f}")
        file(COPY "${lab_dir}/${f}" DESTINATION "${sub_dir}")
      endif()
    endforeach()
    _gpulab_lab_exe(lab${num}_sub ${num} "${sub_dir}" "${ARG_SOURCES}" ON)
    set(objs "$<JOIN:$<TARGET_OBJECTS:lab${num}_src>,\",\">")
    set(sub_objs "$<JOIN:$<TARGET_OBJECTS:lab${num}_sub_src>,\",\">")
    set(learner_json
"  \"lab\":{\"target\":\"lab${num}\",\"exe\":\"$<TARGET_FILE:lab${num}>\",\"objects\":[\"${objs}\"]},
  \"sub\":{\"target\":\"lab${num}_sub\",\"exe\":\"$<TARGET_FILE:lab${num}_sub>\",\"objects\":[\"${sub_objs}\"]},
")
  else()
    set(learner_json "")
  endif()

  _gpulab_rendered_exe(lab${num}_skeleton ${num} ${slug} skeleton "" "${ARG_SOURCES}")
  set(variant_targets lab${num}_skeleton)
  set(mutants_json "")
  set(sep "")
  foreach(r IN LISTS regions)
    string(REPLACE "." "_" rid "${r}")
    _gpulab_rendered_exe(lab${num}_mutant_${rid} ${num} ${slug} mutant "${r}" "${ARG_SOURCES}")
    list(APPEND variant_targets lab${num}_mutant_${rid})
    string(APPEND mutants_json "${sep}\"${r}\":{\"target\":\"lab${num}_mutant_${rid}\",\"exe\":\"$<TARGET_FILE:lab${num}_mutant_${rid}>\"}")
    set(sep ",")
  endforeach()
  add_custom_target(lab${num}_variants DEPENDS ${variant_targets})
  add_dependencies(gpulab_variants lab${num}_variants)

  # CTest: one entry per reference test case.
  gpulab_register_tests(lab${num}_ref lab${num} ${ARG_TIMEOUT} MPI_RANKS ${ARG_MPI_RANKS} PERF_RANKS ${ARG_PERF_RANKS})

  # What the CLI needs to know about this lab.
  string(REPLACE ";" "," mpi_ranks_json "${ARG_MPI_RANKS}")
  string(REPLACE ";" "," perf_ranks_json "${ARG_PERF_RANKS}")
  list(TRANSFORM ARG_SOURCES PREPEND "\"" OUTPUT_VARIABLE q)
  list(TRANSFORM q APPEND "\"")
  list(JOIN q "," sources_json)
  list(TRANSFORM regions PREPEND "\"" OUTPUT_VARIABLE q)
  list(TRANSFORM q APPEND "\"")
  list(JOIN q "," regions_json)
  file(GENERATE OUTPUT "${GPULAB_LABINFO_DIR}/${num}.json" CONTENT
"{\"number\":\"${num}\",\"slug\":\"${slug}\",\"buildable\":true,\"timeout_s\":${ARG_TIMEOUT},
 \"mpi_ranks\":[${mpi_ranks_json}],\"perf_ranks\":[${perf_ranks_json}],
 \"sources\":[${sources_json}],\"regions\":[${regions_json}],
 \"test_dir\":\"${test_dir}\",\"submission_dir\":\"${sub_dir}\",
 \"variants\":{
  \"ref\":{\"target\":\"lab${num}_ref\",\"exe\":\"$<TARGET_FILE:lab${num}_ref>\"},
${learner_json}  \"skeleton\":{\"target\":\"lab${num}_skeleton\",\"exe\":\"$<TARGET_FILE:lab${num}_skeleton>\"}},
 \"mutants\":{${mutants_json}}}
")
endfunction()
