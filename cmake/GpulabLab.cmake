# gpulab_add_lab(<NN-slug>)
#
# Everything about the lab is in tests/NN-slug/lab.json, the one place it is declared, and is
# read here by the CLI's own parser (base/lab_config.cpp, run as lab-scan at configure time):
# "sources" (the files the learner edits), "timeout_s", "mpi_ranks" and "perf_ranks" (a
# distributed lab: every case under mpirun at each W) and "build": its "tests" (the test
# sources), "libraries", "main" ("cuda", or "mpi" for a distributed lab), "emulator" (true, or
# the sources and tests to emulate) and "assemble_for" (more architectures the reference's .cu
# files must assemble for). tests/CMakeLists.txt calls it for every tests/NN-slug/lab.json.
#
# From the one list of sources it creates, for lab NN:
#   labNN_ref        solutions/NN-slug/            (the reference; its cases are registered in CTest)
#   labNN            labs/NN-slug/                 (the learner's working copy)
#   labNN_sub        build/submission/NN/          (a snapshot `gpulab grade --submission` copies in)
#   labNN_skeleton   rendered from solutions/ as `gpulab sync` would write labs/
#   labNN_mutant_K   the reference with region NN.K alone replaced by its stub; only the file that
#                    holds the region is compiled again, the others are the reference's objects
# and, for a lab whose "build.emulator" says so when GPULAB_ENABLE_EMULATOR is on, the same
# variants built for the CPU block emulator (tools/emulator): labNN_emu_ref, labNN_emu,
# labNN_emu_sub, labNN_emu_skeleton, labNN_emu_mutant_K. Every variant links the same test
# objects, so all are judged by the same cases; student and reference code live in separate
# executables. "emulator": {"sources", "tests"} narrows the emulator's variants to the kernel part
# of a lab whose other parts need libraries the emulator has no stand-in for.
# The CLI learns about the lab from build/labinfo/NN.json, written here.

set(GPULAB_LABINFO_DIR "${CMAKE_BINARY_DIR}/labinfo")
set(GPULAB_CMAKE_DIR "${CMAKE_CURRENT_LIST_DIR}")
set(GPULAB_EMU_DIR "${PROJECT_SOURCE_DIR}/tools/emulator")
define_property(GLOBAL PROPERTY GPULAB_LABS BRIEF_DOCS "labs" FULL_DOCS "lab slugs added")

# lab-scan (tools/gpulab/base/lab_scan.cpp): the CLI's parsers of lab.json and of SOLUTION
# regions, compiled at configure time, so that the build and the CLI read a lab one way.
function(_gpulab_lab_scan out)
  set(dir "${PROJECT_SOURCE_DIR}/tools/gpulab")
  set(srcs "${dir}/base/lab_scan.cpp" "${dir}/base/lab_config.cpp" "${dir}/base/regions.cpp" "${dir}/base/files.cpp")
  set(exe "${CMAKE_BINARY_DIR}/lab-scan")
  set(stale OFF)
  foreach(s IN LISTS srcs ITEMS "${dir}/base/lab_config.hpp" "${dir}/base/regions.hpp" "${dir}/base/files.hpp" "${dir}/base/paths.hpp")
    if(NOT EXISTS "${exe}" OR "${s}" IS_NEWER_THAN "${exe}")
      set(stale ON)
    endif()
  endforeach()
  if(stale)
    # One compiler per file, side by side (execute_process runs its COMMANDs at once), at -O0:
    # it runs a few dozen times per configure, and its compile is on every first configure's path.
    set(compiles)
    set(objects)
    foreach(src IN LISTS srcs)
      get_filename_component(name "${src}" NAME_WE)
      list(APPEND compiles COMMAND "${CMAKE_CXX_COMPILER}" -std=c++17 -O0 -Wall -Wextra -Werror "-I${dir}"
                                   "-I${PROJECT_SOURCE_DIR}/common/include" -c "${src}" -o "${exe}-${name}.o")
      list(APPEND objects "${exe}-${name}.o")
    endforeach()
    execute_process(${compiles} RESULTS_VARIABLE results ERROR_VARIABLE err OUTPUT_VARIABLE compiler_output)
    foreach(rc IN LISTS results)
      if(NOT rc EQUAL 0)
        message(FATAL_ERROR "gpulab: compiling lab-scan failed:\n${err}")
      endif()
    endforeach()
    execute_process(COMMAND "${CMAKE_CXX_COMPILER}" ${objects} -o "${exe}" RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE compiler_output)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "gpulab: linking lab-scan failed:\n${err}")
    endif()
  endif()
  set(${out} "${exe}" PARENT_SCOPE)
endfunction()

# The regions of @p file as "id" list; a malformed marker stops the configure with file:line.
function(_gpulab_regions_of file number out)
  _gpulab_lab_scan(scanner)
  execute_process(COMMAND "${scanner}" regions "${file}" "${number}" RESULT_VARIABLE rc OUTPUT_VARIABLE ids ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "gpulab: ${err}")
  endif()
  string(STRIP "${ids}" ids)
  string(REPLACE "\n" ";" ids "${ids}")
  set(${out} "${ids}" PARENT_SCOPE)
endfunction()

# A JSON list of strings from a CMake list (generator expressions allowed in the items).
function(_gpulab_json_list out)
  set(q)
  foreach(item IN LISTS ARGN)
    list(APPEND q "\"${item}\"")
  endforeach()
  list(JOIN q "," joined)
  set(${out} "[${joined}]" PARENT_SCOPE)
endfunction()

# An executable from object-library targets, linked with the lab's tests; and its labinfo entry.
function(_gpulab_lab_exe name own_objects other_objects tests main exclude json_out)
  set(files)
  foreach(o IN LISTS own_objects other_objects)
    list(APPEND files $<TARGET_OBJECTS:${o}>)
  endforeach()
  add_executable(${name} ${files})
  target_link_libraries(${name} PRIVATE ${tests} ${main})
  if(exclude)
    set_target_properties(${name} PROPERTIES EXCLUDE_FROM_ALL ON)
  endif()
  _gpulab_json_list(compile ${own_objects})
  set(own_files)
  foreach(o IN LISTS own_objects)
    list(APPEND own_files "$<JOIN:$<TARGET_OBJECTS:${o}>,\",\">")
  endforeach()
  _gpulab_json_list(objects ${own_files})
  set(${json_out} "{\"target\":\"${name}\",\"exe\":\"$<TARGET_FILE:${name}>\",\"compile\":${compile},\"objects\":${objects}}"
      PARENT_SCOPE)
endfunction()

# Source files rendered by the CLI from solutions/ (mode: skeleton or mutant, or emu: a .cu file
# rewritten for the emulator). Sets ${out} to the rendered paths.
function(_gpulab_render out_dir slug mode region files out)
  set(outputs)
  foreach(in IN LISTS files)
    get_filename_component(f "${in}" NAME)
    if(mode STREQUAL "emu")
      set(dest "${out_dir}/${f}.cpp")
      add_custom_command(OUTPUT "${dest}" COMMAND gpulab-cli emu-transform --input "${in}" --output "${dest}"
                         DEPENDS "${in}" gpulab-cli COMMENT "gpulab: emulator build of ${f}" VERBATIM)
    else()
      set(dest "${out_dir}/${f}")
      add_custom_command(OUTPUT "${dest}"
                         COMMAND gpulab-cli render --mode ${mode} --region "${region}" --lab ${slug} --input "${in}" --output "${dest}"
                         DEPENDS "${in}" gpulab-cli COMMENT "gpulab: rendering ${mode} ${region} of ${slug}/${f}" VERBATIM)
    endif()
    list(APPEND outputs "${dest}")
  endforeach()
  set(${out} "${outputs}" PARENT_SCOPE)
endfunction()

# gpulab_register_tests(<target> <label> <timeout> [MPI_RANKS <W...>] [PERF_RANKS <W...>]
#                       [CASES_FILE <file>]):
# one CTest entry per test case of a test program, discovered after each build (the program
# lists its cases with --gpulab-list, which also enforces the [cpu]/[gpu] tags), labelled <label>
# and cpu or gpu. With MPI_RANKS, one entry per case and W, run by `gpulab-cli mpirun` (mpirun
# with a time limit, per-rank output files and no orphans), labelled mpi too. CASES_FILE: also
# keep the listing there (the CLI reads a lab's cases and their tags from it).
function(gpulab_register_tests target label timeout)
  cmake_parse_arguments(PARSE_ARGV 3 ARG "" "CASES_FILE" "MPI_RANKS;PERF_RANKS")
  set(tests_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_tests.cmake")
  string(REPLACE ";" "," ranks "${ARG_MPI_RANKS}")
  string(REPLACE ";" "," perf_ranks "${ARG_PERF_RANKS}")
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND "${CMAKE_COMMAND}" -D "EXE=$<TARGET_FILE:${target}>" -D "OUT=${tests_file}"
            -D "PREFIX=${target}" -D "LABEL=${label}" -D "TIMEOUT=${timeout}"
            -D "RANKS=${ranks}" -D "PERF_RANKS=${perf_ranks}" -D "CLI=$<TARGET_FILE:gpulab-cli>"
            -D "LOGS=${CMAKE_CURRENT_BINARY_DIR}/mpi-logs" -D "CASES_FILE=${ARG_CASES_FILE}"
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

# The variants of one lab for one toolchain (prefix "" for the real build, "emu_" for the
# emulator's); appends their labinfo entries to ${variants_json} and ${mutants_json}.
function(_gpulab_variant_set num slug prefix iface tests main region_files)
  set(sol_dir "${PROJECT_SOURCE_DIR}/solutions/${slug}")
  set(lab_dir "${PROJECT_SOURCE_DIR}/labs/${slug}")
  set(sub_dir "${CMAKE_BINARY_DIR}/submission/${num}")
  set(gen "${CMAKE_BINARY_DIR}/variants")
  set(emu OFF)
  set(exclude_ref OFF)
  set(strict STRICT)
  set(lenient LENIENT)
  if(prefix STREQUAL "emu_")
    set(emu ON)
    set(exclude_ref ON)
    set(strict NONE)
    set(lenient NONE)
  endif()
  # Where each variant's sources come from: emulator builds compile transformed copies.
  macro(_sources_for var dir)
    set(${var})
    foreach(f IN LISTS GPULAB_LAB_SOURCES)
      list(APPEND ${var} "${dir}/${f}")
    endforeach()
    if(emu)
      _gpulab_render("${gen}/lab${num}_${prefix}${ARGV2}" ${slug} emu "" "${${var}}" ${var})
    endif()
  endmacro()
  set(vjson "")
  set(mjson "")
  # Reference (strict warnings), learner and submission (warnings shown, never errors).
  _sources_for(ref_files "${sol_dir}" ref)
  _gpulab_objects_of(lab${num}_${prefix}ref "${ref_files}" ${iface} ${strict})
  _gpulab_lab_exe(lab${num}_${prefix}ref "${lab${num}_${prefix}ref_objects}" "" ${tests} ${main} ${exclude_ref} j)
  string(APPEND vjson "\"${prefix}ref\":${j}")
  set(ref_objects "${lab${num}_${prefix}ref_objects}")
  if(GPULAB_LAB_HAS_LEARNER_FILES)
    _sources_for(lab_files "${lab_dir}" lab)
    _gpulab_objects_of(lab${num}_${prefix}lab "${lab_files}" ${iface} ${lenient})
    if(emu)
      set(lab_name lab${num}_emu)
    else()
      set(lab_name lab${num})
    endif()
    # Built when graded (./gpulab grade NN), not with everything: selftest judges the skeleton,
    # which sync writes to the same text.
    _gpulab_lab_exe(${lab_name} "${lab${num}_${prefix}lab_objects}" "" ${tests} ${main} ON j)
    string(APPEND vjson ",\"${prefix}lab\":${j}")
    _sources_for(sub_files "${sub_dir}" sub)
    _gpulab_objects_of(lab${num}_${prefix}sub "${sub_files}" ${iface} ${lenient})
    _gpulab_lab_exe(lab${num}_${prefix}sub "${lab${num}_${prefix}sub_objects}" "" ${tests} ${main} ON j)
    string(APPEND vjson ",\"${prefix}sub\":${j}")
  endif()
  # Skeleton: every file rendered. Mutants: one file rendered, the rest the reference's objects.
  set(skel)
  foreach(f IN LISTS GPULAB_LAB_SOURCES)
    list(APPEND skel "${sol_dir}/${f}")
  endforeach()
  _gpulab_render("${gen}/lab${num}_${prefix}skeleton" ${slug} skeleton "" "${skel}" skel)
  if(emu)
    _gpulab_render("${gen}/lab${num}_${prefix}skeleton" ${slug} emu "" "${skel}" skel)
  endif()
  _gpulab_objects_of(lab${num}_${prefix}skeleton "${skel}" ${iface} ${lenient})
  _gpulab_lab_exe(lab${num}_${prefix}skeleton "${lab${num}_${prefix}skeleton_objects}" "" ${tests} ${main} ON j)
  string(APPEND vjson ",\"${prefix}skeleton\":${j}")
  set(variant_targets lab${num}_${prefix}skeleton)
  set(sep "")
  foreach(pair IN LISTS region_files)
    string(REPLACE "|" ";" pair "${pair}")
    list(GET pair 0 r)
    list(GET pair 1 index)
    list(GET GPULAB_LAB_SOURCES ${index} f)
    string(REPLACE "." "_" rid "${r}")
    set(name lab${num}_${prefix}mutant_${rid})
    _gpulab_render("${gen}/${name}" ${slug} mutant "${r}" "${sol_dir}/${f}" mutated)
    if(emu)
      _gpulab_render("${gen}/${name}" ${slug} emu "" "${mutated}" mutated)
    endif()
    _gpulab_objects_of(${name} "${mutated}" ${iface} ${lenient})
    set(others "${ref_objects}")
    list(REMOVE_AT others ${index})
    _gpulab_lab_exe(${name} "${${name}_objects}" "${others}" ${tests} ${main} ON j)
    string(APPEND mjson "${sep}\"${r}\":${j}")
    set(sep ",")
    list(APPEND variant_targets ${name})
  endforeach()
  add_custom_target(lab${num}_${prefix}variants DEPENDS ${variant_targets})
  if(emu)
    add_dependencies(gpulab_emu_variants lab${num}_${prefix}variants)
  else()
    add_dependencies(gpulab_variants lab${num}_${prefix}variants)
  endif()
  if(variants_json)
    set(vjson "${variants_json},${vjson}")
  endif()
  set(variants_json "${vjson}" PARENT_SCOPE)
  set(${prefix}mutants_json "${mjson}" PARENT_SCOPE)
endfunction()

# One object library per source file of a variant, so that a mutant recompiles one file only.
# Sets ${name}_objects (the targets) in the caller. warnings: STRICT, LENIENT or NONE (emulator).
function(_gpulab_objects_of name files iface warnings)
  set(objs)
  set(i 0)
  foreach(file IN LISTS files)
    add_library(${name}_src${i} OBJECT "${file}")
    target_link_libraries(${name}_src${i} PRIVATE ${iface})
    gpulab_warnings(${name}_src${i} ${warnings})
    set_target_properties(${name}_src${i} PROPERTIES EXCLUDE_FROM_ALL ON)
    list(APPEND objs ${name}_src${i})
    math(EXPR i "${i} + 1")
  endforeach()
  set(${name}_objects "${objs}" PARENT_SCOPE)
endfunction()

function(_gpulab_write_labinfo num content)
  file(GENERATE OUTPUT "${GPULAB_LABINFO_DIR}/${num}.json" CONTENT "${content}\n")
endfunction()

function(gpulab_add_lab slug)
  string(SUBSTRING "${slug}" 0 2 num)
  set(test_dir "${PROJECT_SOURCE_DIR}/tests/${slug}")
  set(sol_dir "${PROJECT_SOURCE_DIR}/solutions/${slug}")
  set(lab_dir "${PROJECT_SOURCE_DIR}/labs/${slug}")
  set(sub_dir "${CMAKE_BINARY_DIR}/submission/${num}")
  set_property(GLOBAL APPEND PROPERTY GPULAB_LABS "${slug}")

  # lab.json, read by lab-scan into GPULAB_LAB_* (editing it re-runs configure); an error names
  # the file and the key.
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${test_dir}/lab.json")
  _gpulab_lab_scan(scanner)
  execute_process(COMMAND "${scanner}" facts "${PROJECT_SOURCE_DIR}" "${slug}" RESULT_VARIABLE rc OUTPUT_VARIABLE facts ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "gpulab: ${err}")
  endif()
  file(WRITE "${CMAKE_CURRENT_BINARY_DIR}/lab-facts.cmake" "${facts}")
  include("${CMAKE_CURRENT_BINARY_DIR}/lab-facts.cmake")
  list(TRANSFORM GPULAB_LAB_TESTS PREPEND "${test_dir}/" OUTPUT_VARIABLE lab_tests)

  # Regions, read at configure time with the CLI's own grammar; editing a solution re-runs it.
  set(region_files)
  set(regions_json "")
  set(sep "")
  set(index 0)
  foreach(f IN LISTS GPULAB_LAB_SOURCES)
    if(NOT EXISTS "${sol_dir}/${f}")
      message(FATAL_ERROR "gpulab: tests/${slug}/lab.json names ${f}, which is not in solutions/${slug}/")
    endif()
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${sol_dir}/${f}")
    _gpulab_regions_of("${sol_dir}/${f}" ${num} ids)
    foreach(r IN LISTS ids)
      list(APPEND region_files "${r}|${index}")
      string(APPEND regions_json "${sep}{\"id\":\"${r}\",\"file\":\"${f}\"}")
      set(sep ",")
    endforeach()
    math(EXPR index "${index} + 1")
  endforeach()

  # The learner's folder: written by `gpulab sync` and committed. If a file is missing (deleted
  # by accident, or a new lab before its first sync) the learner targets are left out, so the
  # rest of the tree, sync included, still builds.
  set(GPULAB_LAB_HAS_LEARNER_FILES ON)
  foreach(f IN LISTS GPULAB_LAB_SOURCES)
    if(NOT EXISTS "${lab_dir}/${f}")
      set(GPULAB_LAB_HAS_LEARNER_FILES OFF)
      # Configure again once it exists (after `./gpulab sync`). CMake drops a dependency on a
      # file that does not exist, so the folder that will hold it is watched: its time changes
      # when the file appears.
      if(EXISTS "${lab_dir}")
        set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${lab_dir}")
      else()
        set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/labs")
      endif()
      message(WARNING "gpulab: labs/${slug}/${f} is missing: restore it with `git checkout labs/` "
                      "or write it with `./gpulab sync`. Lab ${num} cannot be graded until then.")
    elseif(NOT EXISTS "${sub_dir}/${f}")
      file(COPY "${lab_dir}/${f}" DESTINATION "${sub_dir}")
    endif()
  endforeach()

  set(head "\"number\":\"${num}\",\"slug\":\"${slug}\",\"submission_dir\":\"${sub_dir}\",\"regions\":[${regions_json}]")
  set(variants_json "")
  set(mutants_json "")
  set(emu_mutants_json "")
  # The emulator: the labs whose lab.json says "emulator" (kernel labs; distributed labs run on
  # the CPU as they are). "emulator": {"sources", "tests"}: a lab whose other parts need libraries
  # the emulator does not stand in for (lab 04's training on gpulab::nn) emulates only these
  # sources and tests; its other regions get no emulated mutant (their [cpu] cases run natively).
  if(GPULAB_ENABLE_EMULATOR AND GPULAB_LAB_EMULATOR)
    set(emu_tests ${lab_tests})
    set(emu_region_files "${region_files}")
    set(all_sources "${GPULAB_LAB_SOURCES}")
    if(GPULAB_LAB_EMU_TESTS)
      list(TRANSFORM GPULAB_LAB_EMU_TESTS PREPEND "${test_dir}/" OUTPUT_VARIABLE emu_tests)
    endif()
    if(GPULAB_LAB_EMU_SOURCES)
      set(emu_region_files)
      foreach(pair IN LISTS region_files)
        string(REPLACE "|" ";" parts "${pair}")
        list(GET parts 0 r)
        list(GET parts 1 index)
        list(GET all_sources ${index} f)
        list(FIND GPULAB_LAB_EMU_SOURCES "${f}" emu_index)
        if(emu_index GREATER -1)
          list(APPEND emu_region_files "${r}|${emu_index}")
        endif()
      endforeach()
      set(GPULAB_LAB_SOURCES "${GPULAB_LAB_EMU_SOURCES}")
    endif()
    add_library(lab${num}_emu_interface INTERFACE)
    target_include_directories(lab${num}_emu_interface INTERFACE "${test_dir}")
    target_link_libraries(lab${num}_emu_interface INTERFACE gpulab_emu)
    add_library(lab${num}_emu_tests OBJECT ${emu_tests})
    target_link_libraries(lab${num}_emu_tests PUBLIC gpulab_emu gpulab_testing lab${num}_emu_interface)
    set_target_properties(lab${num}_emu_tests PROPERTIES EXCLUDE_FROM_ALL ON)
    gpulab_warnings(lab${num}_emu_tests STRICT)
    gpulab_light_optimization(lab${num}_emu_tests)
    _gpulab_variant_set(${num} ${slug} emu_ lab${num}_emu_interface lab${num}_emu_tests gpulab_emu_main "${emu_region_files}")
    set(GPULAB_LAB_SOURCES "${all_sources}")
  endif()

  set(missing "")
  if(NOT GPULAB_HAVE_CUDA)
    set(missing "no CUDA toolkit")
  elseif(NOT TARGET ${GPULAB_LAB_MAIN})
    set(missing "no MPI (apt-get install libopenmpi-dev openmpi-bin)")
  endif()
  foreach(library IN LISTS GPULAB_LAB_LIBRARIES)
    if(NOT missing AND NOT TARGET ${library})
      set(missing "${library} is not built here (./gpulab doctor says what is missing)")
    endif()
  endforeach()
  if(missing)
    _gpulab_write_labinfo(${num} "{${head},\"buildable\":false,\"reason\":\"${missing}\",\"variants\":{${variants_json}},\"emu_mutants\":{${emu_mutants_json}}}")
    message(STATUS "gpulab: lab ${slug} not built: ${missing}")
    return()
  endif()

  # The interface header(s) in tests/NN-slug are owned by the tests; labs and solutions include them.
  add_library(lab${num}_interface INTERFACE)
  target_include_directories(lab${num}_interface INTERFACE "${test_dir}")
  target_link_libraries(lab${num}_interface INTERFACE gpulab ${GPULAB_LAB_LIBRARIES})
  add_library(lab${num}_tests OBJECT ${lab_tests})
  target_link_libraries(lab${num}_tests PUBLIC gpulab gpulab_testing lab${num}_interface ${GPULAB_LAB_LIBRARIES})
  gpulab_warnings(lab${num}_tests STRICT)
  gpulab_light_optimization(lab${num}_tests)
  _gpulab_variant_set(${num} ${slug} "" lab${num}_interface lab${num}_tests ${GPULAB_LAB_MAIN} "${region_files}")

  # "assemble_for": the reference's .cu files also assembled (ptxas only, nothing runs) for these
  # architectures, so that an instruction or operand that does not exist on the build's own
  # architecture (sm_75 without a GPU) still fails the build here, not first on a GPU.
  if(GPULAB_LAB_ASSEMBLE_FOR)
    set(cu_files "${GPULAB_LAB_SOURCES}")
    list(FILTER cu_files INCLUDE REGEX "\\.cu$")
    list(TRANSFORM cu_files PREPEND "${sol_dir}/")
    add_library(lab${num}_arch_check OBJECT ${cu_files})
    target_link_libraries(lab${num}_arch_check PRIVATE lab${num}_interface)
    set_target_properties(lab${num}_arch_check PROPERTIES CUDA_ARCHITECTURES "${GPULAB_LAB_ASSEMBLE_FOR}")
    gpulab_warnings(lab${num}_arch_check STRICT)
  endif()

  # What the grader must find unchanged after every learner process (its own build).
  set(grader_files "\"$<TARGET_FILE:lab${num}_ref>\",\"$<JOIN:$<TARGET_OBJECTS:lab${num}_tests>,\",\">\",\"$<TARGET_FILE:gpulab_host>\"")
  if(TARGET gpulab)
    string(APPEND grader_files ",\"$<TARGET_FILE:gpulab>\"")
  endif()
  string(APPEND head ",\"grader_files\":[${grader_files}]")
  # CTest: one entry per reference test case; the listing is kept for the CLI.
  gpulab_register_tests(lab${num}_ref lab${num} ${GPULAB_LAB_TIMEOUT} MPI_RANKS ${GPULAB_LAB_MPI_RANKS} PERF_RANKS ${GPULAB_LAB_PERF_RANKS}
                        CASES_FILE "${GPULAB_LABINFO_DIR}/${num}-cases.txt")
  _gpulab_write_labinfo(${num} "{${head},\"buildable\":true,\"variants\":{${variants_json}},\"mutants\":{${mutants_json}},\"emu_mutants\":{${emu_mutants_json}}}")
endfunction()
