# add_failure_scenario(<dir>)
#
# Builds <dir>/scenario.cu as the program `<build>/scenarios/<name>` and registers one CTest
# test per backend x variant, pitfall.<backend>.<name>.<variant>, run through the `pitfall`
# harness so that the verdict against the expected/ folder decides. Everything comes from
# <dir>/scenario.json: adding a scenario touches only its folder.
#
# scenario.json keys used here: name, backends, variants[].{name, backends, labels},
# failure_class, labels, timeout_seconds, links ("cudnn": cuDNN's headers, with CUDA only, and
# PITFALL_HAS_CUDNN defined 1 then: the SDK opens libcudnn on first call; "nccl": linked with
# CUDA only, PITFALL_HAS_NCCL defined 1; "nccl-headers": nccl.h on the include path for a
# program that loads NCCL itself at run time).
# Without CUDA the same scenario.cu is compiled as C++ (through a one-line wrapper .cpp), and
# its CUDA cases report UNSUPPORTED "built without CUDA".
#
# The same file serves pitfall's own build and, installed beside pitfallConfig.cmake, a
# project that builds its scenarios against an installed pitfall (find_package(pitfall)):
#
#   find_package(pitfall 0.1 REQUIRED)
#   enable_testing()
#   add_failure_scenario(${CMAKE_CURRENT_SOURCE_DIR}/scenarios/my_failure)
#
# There the index (<build>/pitfall-index.json) is written at the end of the configure, with
# the project's expected/ folder (PITFALL_EXPECTED_DIR, default <source>/expected) and the
# installed probe, so `pitfall run --index <build>/pitfall-index.json` runs its cases.

function(_pitfall_json_list out json)
  # A JSON array of strings as a CMake list (empty when the key is absent).
  set(result "")
  string(JSON type ERROR_VARIABLE err TYPE "${json}" ${ARGN})
  if(NOT err AND type STREQUAL "ARRAY")
    string(JSON count LENGTH "${json}" ${ARGN})
    if(count GREATER 0)
      math(EXPR last "${count} - 1")
      foreach(i RANGE ${last})
        string(JSON item GET "${json}" ${ARGN} ${i})
        list(APPEND result "${item}")
      endforeach()
    endif()
  endif()
  set(${out} "${result}" PARENT_SCOPE)
endfunction()

# pitfall_scenario_program(<target> <dir> <links>): the program alone, no tests, not indexed
# (the harness's own fixture uses it too).
function(pitfall_scenario_program target dir links)
  set(manifest "${dir}/scenario.json")
  set(source "${dir}/scenario.cu")
  # An edit of scenario.json re-runs CMake, so the program never carries a stale copy.
  set_property(DIRECTORY "${PROJECT_SOURCE_DIR}" APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${manifest}")
  file(READ "${manifest}" json)
  # scenario.json compiled into the program: --list and parameter defaults need no files.
  set(generated "${CMAKE_CURRENT_BINARY_DIR}/generated/${target}_manifest.cpp")
  file(CONFIGURE OUTPUT "${generated}" CONTENT
       "// Generated from @manifest@ by add_failure_scenario(); do not edit.\nextern const char* const pitfall_scenario_manifest;\nconst char* const pitfall_scenario_manifest = R\"pitfall_manifest(@json@)pitfall_manifest\";\n"
       @ONLY)
  if(PITFALL_HAS_CUDA)
    add_executable(${target} "${source}" "${generated}")
    set_source_files_properties("${source}" PROPERTIES LANGUAGE CUDA)
    # The per-kernel register/spill report (ptxas -v) goes to <build>/logs/ptxas/<target>.log
    # through a compiler launcher, not to the terminal; the static checks read it from there.
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xptxas=-v>)
    # nvcc compiles the architectures side by side (--threads=0: as many threads as steps), each
    # ptxas report still whole: one program built alone (`pitfall run --build`, as the README's
    # first command does) takes 10 s instead of 17 on two cores.
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--threads=0>)
    # The launcher wraps ccache's where there is one (PitfallCcache.cmake): ccache replays a
    # cached compile's output, ptxas's report with it, so the log is written on a hit too.
    set(launcher sh "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/ptxas-log.sh"
        "${CMAKE_BINARY_DIR}/logs/ptxas/${target}.log" ${CMAKE_CUDA_COMPILER_LAUNCHER})
    set_target_properties(${target} PROPERTIES CUDA_COMPILER_LAUNCHER "${launcher}")
    set_property(GLOBAL APPEND PROPERTY PITFALL_PTXAS_LOGS "${CMAKE_BINARY_DIR}/logs/ptxas/${target}.log")
    # cuBLAS and cuDNN are not linked: the SDK opens them on first call, by soname, so the
    # program's run path names their folders (where the loader's cache does not) for dlopen to
    # search, in the build tree and installed. cudart's folder is there already: it is linked.
    get_target_property(cublas_file CUDA::cublas IMPORTED_LOCATION)
    set(lazy_library_dirs "")
    if(cublas_file)
      get_filename_component(cublas_dir "${cublas_file}" DIRECTORY)
      list(APPEND lazy_library_dirs "${cublas_dir}")
    endif()
    if("cudnn" IN_LIST links AND PITFALL_HAS_CUDNN)
      # cuDNN's headers; the SDK defines the cuDNN functions and opens libcudnn when called.
      target_include_directories(${target} PRIVATE "${CUDNN_INCLUDE_DIR}")
      target_compile_definitions(${target} PRIVATE PITFALL_HAS_CUDNN=1)
      get_filename_component(cudnn_dir "${CUDNN_LIBRARY}" DIRECTORY)
      list(APPEND lazy_library_dirs "${cudnn_dir}")
    elseif("cudnn" IN_LIST links)
      # The scenario's cuDNN steps compile out (PITFALL_HAS_CUDNN=0) and say so in its result.
      message(WARNING "${manifest}: links cuDNN, but FindCUDNN found none: building it without "
                      "cuDNN (set CUDNN_ROOT to a cuDNN install or wheel folder)")
    endif()
    # NCCL's header is not part of every toolkit (Debian's have none; NVIDIA's wheel
    # nvidia-nccl-cu* carries it): PITFALL_NCCL_INCLUDE_DIR / PITFALL_NCCL_LIBRARY point at one.
    if("nccl" IN_LIST links OR "nccl-headers" IN_LIST links)
      find_path(PITFALL_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
      if(NOT PITFALL_NCCL_INCLUDE_DIR)
        message(FATAL_ERROR "${manifest}: needs NCCL's nccl.h, found neither beside the CUDA toolkit "
                            "nor on the system: set PITFALL_NCCL_INCLUDE_DIR (e.g. a nvidia-nccl-cu12 "
                            "wheel's nvidia/nccl/include)")
      endif()
      target_include_directories(${target} PRIVATE "${PITFALL_NCCL_INCLUDE_DIR}")
    endif()
    if("nccl" IN_LIST links)
      find_library(PITFALL_NCCL_LIBRARY nccl HINTS "${CUDAToolkit_LIBRARY_DIR}" "${CUDAToolkit_LIBRARY_ROOT}/lib")
      if(NOT PITFALL_NCCL_LIBRARY)
        message(FATAL_ERROR "${manifest}: links NCCL but no libnccl was found beside the CUDA toolkit: "
                            "set PITFALL_NCCL_LIBRARY")
      endif()
      target_link_libraries(${target} PRIVATE "${PITFALL_NCCL_LIBRARY}")
      target_compile_definitions(${target} PRIVATE PITFALL_HAS_NCCL=1)
    endif()
  else()
    # thrust's trick: the same .cu, seen by the host compiler through a .cpp that includes it.
    set(wrapper "${CMAKE_CURRENT_BINARY_DIR}/generated/${target}_host.cpp")
    file(CONFIGURE OUTPUT "${wrapper}" CONTENT "#include \"@source@\"\n" @ONLY)
    add_executable(${target} "${wrapper}" "${generated}")
    target_include_directories(${target} PRIVATE "${dir}")
  endif()
  target_link_libraries(${target} PRIVATE pitfall::sdk pitfall.warnings)
  if(PITFALL_HAS_CUDA)
    _pitfall_add_device_images(${target} "${dir}" "${json}")
  endif()
  if(PITFALL_HAS_CUDA AND lazy_library_dirs)
    list(REMOVE_DUPLICATES lazy_library_dirs)
    set_property(TARGET ${target} APPEND PROPERTY BUILD_RPATH ${lazy_library_dirs})
    set_property(TARGET ${target} APPEND PROPERTY INSTALL_RPATH ${lazy_library_dirs})
  endif()
endfunction()

# device_images of scenario.json: extra device code for a scenario to load at run time
# (cudaLibraryLoadData), built by nvcc apart from the program's own architectures and embedded
# in the program as `pitfall_image_<name>` / `pitfall_image_<name>_size` (EmbedBinary.cmake).
# Each entry: name, source (in the scenario's folder), format (fatbin, cubin, ptx) and
# nvcc_flags (the targets: "-gencode=arch=compute_75,code=sm_75", "-arch=compute_75").
function(_pitfall_add_device_images target dir json)
  string(JSON count ERROR_VARIABLE err LENGTH "${json}" device_images)
  if(err OR count EQUAL 0)
    return()
  endif()
  math(EXPR last "${count} - 1")
  foreach(i RANGE ${last})
    string(JSON image GET "${json}" device_images ${i} name)
    string(JSON source GET "${json}" device_images ${i} source)
    string(JSON format GET "${json}" device_images ${i} format)
    _pitfall_json_list(flags "${json}" device_images ${i} nvcc_flags)
    if(NOT EXISTS "${dir}/${source}")
      message(FATAL_ERROR "${dir}/scenario.json: field 'device_images[${i}].source': ${source} is missing")
    endif()
    set(binary "${CMAKE_CURRENT_BINARY_DIR}/generated/${target}_${image}.${format}")
    set(embedded "${CMAKE_CURRENT_BINARY_DIR}/generated/${target}_${image}_${format}.cpp")
    add_custom_command(
      OUTPUT "${binary}"
      COMMAND "${CMAKE_CUDA_COMPILER}" -${format} ${flags} -o "${binary}" "${dir}/${source}"
      DEPENDS "${dir}/${source}" "${dir}/scenario.json"
      COMMENT "nvcc -${format} ${flags}: ${image} for ${target}"
      VERBATIM)
    add_custom_command(
      OUTPUT "${embedded}"
      COMMAND "${CMAKE_COMMAND}" "-DINPUT=${binary}" "-DOUTPUT=${embedded}" "-DSYMBOL=pitfall_image_${image}"
              -P "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/EmbedBinary.cmake"
      DEPENDS "${binary}" "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/EmbedBinary.cmake"
      VERBATIM)
    target_sources(${target} PRIVATE "${embedded}")
  endforeach()
endfunction()

function(add_failure_scenario dir)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "" "")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "add_failure_scenario(${dir}): unknown arguments ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  get_filename_component(dir "${dir}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  set(manifest "${dir}/scenario.json")
  set(source "${dir}/scenario.cu")
  foreach(required "${manifest}" "${source}")
    if(NOT EXISTS "${required}")
      message(FATAL_ERROR "add_failure_scenario(${dir}): ${required} is missing")
    endif()
  endforeach()
  set_property(DIRECTORY "${PROJECT_SOURCE_DIR}" APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
               "${manifest}")
  file(READ "${manifest}" json)

  string(JSON name ERROR_VARIABLE err GET "${json}" name)
  if(err)
    message(FATAL_ERROR "${manifest}: ${err}")
  endif()
  get_filename_component(folder "${dir}" NAME)
  if(NOT name STREQUAL folder)
    message(FATAL_ERROR "${manifest}: field 'name' is '${name}' but the folder is '${folder}'")
  endif()
  string(JSON failure_class ERROR_VARIABLE err GET "${json}" failure_class)
  if(err)
    message(FATAL_ERROR "${manifest}: field 'failure_class': ${err}")
  endif()
  string(JSON timeout ERROR_VARIABLE err GET "${json}" timeout_seconds)
  if(err)
    set(timeout 60)
  endif()
  _pitfall_json_list(backends "${json}" backends)
  _pitfall_json_list(labels "${json}" labels)
  _pitfall_json_list(links "${json}" links)
  string(JSON variant_count ERROR_VARIABLE err LENGTH "${json}" variants)
  if(err OR variant_count EQUAL 0)
    message(FATAL_ERROR "${manifest}: field 'variants': missing or empty")
  endif()

  pitfall_scenario_program(pitfall.scenario.${name} "${dir}" "${links}")
  set_target_properties(pitfall.scenario.${name} PROPERTIES
    OUTPUT_NAME "${name}"
    RUNTIME_OUTPUT_DIRECTORY "${PROJECT_BINARY_DIR}/scenarios")

  get_property(known GLOBAL PROPERTY PITFALL_SCENARIOS)
  if(name IN_LIST known)
    message(FATAL_ERROR "add_failure_scenario(${dir}): a scenario named '${name}' is already added")
  endif()
  set_property(GLOBAL APPEND PROPERTY PITFALL_SCENARIOS "${name}")
  set_property(GLOBAL PROPERTY PITFALL_SCENARIO_MANIFEST_${name} "${manifest}")
  _pitfall_index_at_end()

  if(NOT PITFALL_BUILD_TESTS)
    return()
  endif()
  _pitfall_add_compile_checks("${name}" "${dir}" "${json}")
  # The variants in the code (PITFALL_SCENARIO) are exactly those of scenario.json.
  add_test(NAME pitfall.${name}.variants COMMAND pitfall.scenario.${name} --check-variants)
  set_tests_properties(pitfall.${name}.variants PROPERTIES LABELS "sdk;${name}" TIMEOUT 30)
  math(EXPR last "${variant_count} - 1")
  # The harness's own work around a case: the environment probe (<= 30 s), the TERM-to-KILL
  # grace and judging. CTest must not kill the harness before the harness can say TIMEOUT.
  math(EXPR ctest_timeout "${timeout} + 90")
  foreach(i RANGE ${last})
    string(JSON variant GET "${json}" variants ${i} name)
    string(JSON helper ERROR_VARIABLE no_helper GET "${json}" variants ${i} helper)
    if(NOT no_helper AND helper)
      continue() # a role another case starts (run_self), not a case of its own
    endif()
    _pitfall_json_list(variant_backends "${json}" variants ${i} backends)
    _pitfall_json_list(variant_labels "${json}" variants ${i} labels)
    if(NOT variant_backends)
      set(variant_backends ${backends})
    endif()
    string(JSON variant_kind GET "${json}" variants ${i} kind)
    string(JSON variant_threads ERROR_VARIABLE no_threads GET "${json}" variants ${i} threads count)
    if(no_threads)
      set(variant_threads 1)
    endif()
    # Each test is one case run beside other tests (`ctest -j`), so its timed series are
    # recorded, not judged (--timings record): the timed suite is judged as one run, where all
    # its series share one false-alarm rate (pitfall.timing.cpu_suite).
    # A variant a declared ratio divides is timed against another case of another process:
    # neither runs beside other tests (RUN_SERIAL). Every other case may run in parallel
    # (`ctest -j`): `pitfall run` itself holds a machine-wide lock, shared by an untimed case
    # and exclusive for one whose time is judged, so a timed case never shares the machine
    # with another case, and CUDA cases take a "gpus" slot each (RESOURCE_GROUPS).
    string(REGEX MATCH "\"(numerator|denominator)\": *\"${variant}\"" in_ratio "${json}")
    foreach(backend IN LISTS variant_backends)
      set(test "pitfall.${backend}.${name}.${variant}")
      # On a GPU runner (PITFALL_REQUIRE=gpu, the gpu preset) a CUDA test on a machine without
      # its GPU fails before the case, instead of passing on the baselines of no-gpu.
      set(required "")
      if(backend STREQUAL "cuda" AND PITFALL_REQUIRE)
        set(required --require "${PITFALL_REQUIRE}")
      endif()
      add_test(NAME ${test}
               COMMAND pitfall::pitfall run --index "${CMAKE_BINARY_DIR}/pitfall-index.json"
                       --scenario ${name} --backend ${backend} --variant ${variant}
                       --out "${PROJECT_BINARY_DIR}/ctest-runs/${backend}.${name}.${variant}"
                       --replace --skip-code 77 --timings record ${required})
      # The same labels `pitfall list` shows, so `ctest -L X` and `pitfall run --label X` agree.
      set(test_labels ${backend} ${name} ${failure_class} ${variant_kind} ${labels} ${variant_labels})
      if(backend STREQUAL "cuda")
        list(APPEND test_labels gpu)
      endif()
      list(REMOVE_DUPLICATES test_labels)
      set_tests_properties(${test} PROPERTIES
        LABELS "${test_labels}"
        SKIP_RETURN_CODE 77
        TIMEOUT ${ctest_timeout}
        PROCESSORS ${variant_threads})
      if(in_ratio)
        set_tests_properties(${test} PROPERTIES RUN_SERIAL TRUE)
      endif()
      if(backend STREQUAL "cuda")
        set_tests_properties(${test} PROPERTIES RESOURCE_GROUPS "gpus:1")
      endif()
    endforeach()
  endforeach()
endfunction()

# compile_checks of scenario.json: sources that must fail to compile with a given diagnostic,
# one CTest test each (pitfall.compile.<scenario>.<name>), compiled by nvcc for the first
# configured architecture with the SDK's headers.
function(_pitfall_add_compile_checks name dir json)
  string(JSON count ERROR_VARIABLE err LENGTH "${json}" compile_checks)
  if(err OR count EQUAL 0)
    return()
  endif()
  math(EXPR last "${count} - 1")
  foreach(i RANGE ${last})
    string(JSON check GET "${json}" compile_checks ${i} name)
    string(JSON source GET "${json}" compile_checks ${i} source)
    string(JSON diagnostic GET "${json}" compile_checks ${i} diagnostic)
    set(test pitfall.compile.${name}.${check})
    if(NOT PITFALL_HAS_CUDA)
      add_test(NAME ${test} COMMAND ${CMAKE_COMMAND} -E echo "SKIP: built without CUDA: no nvcc to try ${source} with")
      set_tests_properties(${test} PROPERTIES LABELS "compile;${name}" SKIP_REGULAR_EXPRESSION "SKIP: ")
      continue()
    endif()
    if(NOT EXISTS "${dir}/${source}")
      message(FATAL_ERROR "${dir}/scenario.json: field 'compile_checks[${i}].source': ${source} is missing")
    endif()
    set(regex_file "${PROJECT_BINARY_DIR}/compile-checks/${name}.${check}.regex")
    file(WRITE "${regex_file}" "${diagnostic}\n")
    get_property(sdk_include GLOBAL PROPERTY PITFALL_SDK_INCLUDE_DIR)
    list(GET CMAKE_CUDA_ARCHITECTURES 0 first_arch)
    string(REGEX MATCH "^[0-9]+" first_arch "${first_arch}")
    add_test(NAME ${test}
             COMMAND ${CMAKE_COMMAND} "-DCOMPILER=${CMAKE_CUDA_COMPILER}" "-DSOURCE=${dir}/${source}"
                     "-DINCLUDES=${sdk_include}|${dir}"
                     "-DARCH=${first_arch}" "-DDIAGNOSTIC_FILE=${regex_file}"
                     -P "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/CompileCheck.cmake")
    set_tests_properties(${test} PROPERTIES LABELS "compile;${name}" TIMEOUT 120)
  endforeach()
endfunction()

# pitfall_write_scenario_index(<path> [EXPECTED <dir>] [PROBE <file>] [MATRIX_DRIVER <file>]
#                              [FLEET_DRIVER <file>] [RUNS <dir>])
# Writes the index the `pitfall` command reads: each scenario's program, scenario.json and build
# target, and under "paths" where its baselines, probe, matrix and fleet drivers and runs are,
# and the build tree with its cmake (absolute here; the installed index has them relative to
# itself, and no build tree). A path left out is left out of "paths".
function(pitfall_write_scenario_index path)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "EXPECTED;PROBE;MATRIX_DRIVER;FLEET_DRIVER;RUNS" "")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "pitfall_write_scenario_index: unknown arguments ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  get_property(names GLOBAL PROPERTY PITFALL_SCENARIOS)
  set(entries "")
  foreach(name IN LISTS names)
    get_property(manifest GLOBAL PROPERTY PITFALL_SCENARIO_MANIFEST_${name})
    list(APPEND entries
         "    {\"name\": \"${name}\", \"program\": \"$<TARGET_FILE:pitfall.scenario.${name}>\", \"manifest\": \"${manifest}\", \"target\": \"pitfall.scenario.${name}\"}")
  endforeach()
  list(JOIN entries ",\n" body)
  # The build tree and its cmake: `pitfall run --build` builds each program there, by target.
  _pitfall_index_paths(paths EXPECTED "${ARG_EXPECTED}" PROBE "${ARG_PROBE}"
                       MATRIX_DRIVER "${ARG_MATRIX_DRIVER}"
                       FLEET_DRIVER "${ARG_FLEET_DRIVER}" RUNS "${ARG_RUNS}"
                       BUILD "${CMAKE_BINARY_DIR}" CMAKE "${CMAKE_COMMAND}")
  _pitfall_index_document(document "${paths}" "${body}")
  file(GENERATE OUTPUT "${path}" CONTENT "${document}")
  set_property(GLOBAL APPEND PROPERTY _PITFALL_INDEX_FILES "${path}")
endfunction()

# The "paths" object of an index (its members, one a line), from keyword arguments.
function(_pitfall_index_paths out)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "EXPECTED;PROBE;MATRIX_DRIVER;FLEET_DRIVER;RUNS;BUILD;CMAKE" "")
  set(members "")
  foreach(key IN ITEMS EXPECTED PROBE MATRIX_DRIVER FLEET_DRIVER RUNS BUILD CMAKE)
    if(NOT "${ARG_${key}}" STREQUAL "")
      string(TOLOWER "${key}" json_key)
      list(APPEND members "    \"${json_key}\": \"${ARG_${key}}\"")
    endif()
  endforeach()
  list(JOIN members ",\n" joined)
  set(${out} "${joined}" PARENT_SCOPE)
endfunction()

# The git revision of the sources being configured ("" outside a git checkout), recorded in the
# index (its build's "git_revision": every run's header carries it, and `pitfall history` tells
# builds apart by it). A commit or a checkout re-runs the configure: the HEAD file and the
# branch's ref are configure dependencies.
function(_pitfall_git_revision out)
  set(${out} "" PARENT_SCOPE)
  find_package(Git QUIET)
  if(NOT GIT_FOUND OR NOT EXISTS "${PROJECT_SOURCE_DIR}/.git")
    return()
  endif()
  execute_process(COMMAND "${GIT_EXECUTABLE}" rev-parse HEAD
                  WORKING_DIRECTORY "${PROJECT_SOURCE_DIR}"
                  OUTPUT_VARIABLE revision RESULT_VARIABLE rc ERROR_QUIET
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0 OR NOT revision MATCHES "^[0-9a-f]+$")
    return()
  endif()
  foreach(what HEAD refs)
    execute_process(COMMAND "${GIT_EXECUTABLE}" rev-parse --git-path ${what}
                    WORKING_DIRECTORY "${PROJECT_SOURCE_DIR}"
                    OUTPUT_VARIABLE path ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(path AND NOT IS_ABSOLUTE "${path}")
      set(path "${PROJECT_SOURCE_DIR}/${path}")
    endif()
    if(what STREQUAL "HEAD" AND EXISTS "${path}")
      set_property(DIRECTORY "${PROJECT_SOURCE_DIR}" APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${path}")
    endif()
  endforeach()
  execute_process(COMMAND "${GIT_EXECUTABLE}" symbolic-ref -q HEAD
                  WORKING_DIRECTORY "${PROJECT_SOURCE_DIR}"
                  OUTPUT_VARIABLE branch ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(branch)
    execute_process(COMMAND "${GIT_EXECUTABLE}" rev-parse --git-path "${branch}"
                    WORKING_DIRECTORY "${PROJECT_SOURCE_DIR}"
                    OUTPUT_VARIABLE ref ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(ref AND NOT IS_ABSOLUTE "${ref}")
      set(ref "${PROJECT_SOURCE_DIR}/${ref}")
    endif()
    if(ref AND EXISTS "${ref}")
      set_property(DIRECTORY "${PROJECT_SOURCE_DIR}" APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${ref}")
    endif()
  endif()
  set(${out} "${revision}" PARENT_SCOPE)
endfunction()

# An index document around its "paths" members and its scenario entries (both preformatted).
function(_pitfall_index_document out paths body)
  if(PITFALL_HAS_CUDA)
    set(cuda_json "true")
  else()
    set(cuda_json "false")
  endif()
  _pitfall_git_revision(git_revision)
  set(${out} "{
  \"schema\": \"pitfall.index/1\",
  \"built_with_cuda\": ${cuda_json},
  \"cuda_architectures\": \"${CMAKE_CUDA_ARCHITECTURES}\",
  \"cuda_compiler\": \"${CMAKE_CUDA_COMPILER_ID} ${CMAKE_CUDA_COMPILER_VERSION}\",
  \"cxx_compiler\": \"${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}\",
  \"build_type\": \"${CMAKE_BUILD_TYPE}\",
  \"git_revision\": \"${git_revision}\",
  \"paths\": {
${paths}
  },
  \"scenarios\": [
${body}
  ]
}
" PARENT_SCOPE)
endfunction()

# Out of tree (pitfall found as a package), the first add_failure_scenario() schedules the
# project's index for the end of its configure: <build>/pitfall-index.json, with the project's
# expected/ folder (PITFALL_EXPECTED_DIR), the installed probe and <build>/runs
# (PITFALL_RUNS_DIR). A project that writes that index itself is left to it.
function(_pitfall_index_at_end)
  get_property(package GLOBAL PROPERTY PITFALL_FOUND_AS_PACKAGE)
  get_property(scheduled GLOBAL PROPERTY _PITFALL_INDEX_SCHEDULED)
  if(NOT package OR scheduled)
    return()
  endif()
  set_property(GLOBAL PROPERTY _PITFALL_INDEX_SCHEDULED ON)
  cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _pitfall_write_project_index)
endfunction()

function(_pitfall_write_project_index)
  set(path "${CMAKE_BINARY_DIR}/pitfall-index.json")
  get_property(written GLOBAL PROPERTY _PITFALL_INDEX_FILES)
  if(path IN_LIST written)
    return()
  endif()
  if(NOT DEFINED PITFALL_EXPECTED_DIR)
    set(PITFALL_EXPECTED_DIR "${CMAKE_SOURCE_DIR}/expected")
  endif()
  if(NOT DEFINED PITFALL_RUNS_DIR)
    set(PITFALL_RUNS_DIR "${CMAKE_BINARY_DIR}/runs")
  endif()
  pitfall_write_scenario_index("${path}" EXPECTED "${PITFALL_EXPECTED_DIR}"
                               PROBE "$<TARGET_FILE:pitfall::probe>" RUNS "${PITFALL_RUNS_DIR}")
endfunction()

# CTest resource spec at configure time: one "gpus" entry per GPU nvidia-smi lists. Without any
# GPU it lists a single slot named "none", so GPU tests still run (one at a time) and report
# UNSUPPORTED with the real reason rather than "insufficient resources". The build replaces it
# with the probe's count (`pitfall resource-spec`, target pitfall_resource_spec): CUDA's own
# answer, where nvidia-smi may be absent or see devices CUDA does not.
function(pitfall_write_resource_spec path)
  set(ids "")
  find_program(PITFALL_NVIDIA_SMI nvidia-smi)
  if(PITFALL_NVIDIA_SMI)
    execute_process(COMMAND "${PITFALL_NVIDIA_SMI}" --query-gpu=index --format=csv,noheader
                    OUTPUT_VARIABLE smi_out RESULT_VARIABLE smi_rc ERROR_QUIET)
    if(smi_rc EQUAL 0)
      string(REGEX MATCHALL "[0-9]+" ids "${smi_out}")
    endif()
  endif()
  set(gpus "")
  foreach(id IN LISTS ids)
    list(APPEND gpus "{\"id\": \"${id}\", \"slots\": 1}")
  endforeach()
  if(NOT gpus)
    set(gpus "{\"id\": \"none\", \"slots\": 1}")
  endif()
  list(JOIN gpus ", " gpu_list)
  file(WRITE "${path}"
       "{\"version\": {\"major\": 1, \"minor\": 0},\n \"local\": [{\"gpus\": [${gpu_list}]}]}\n")
endfunction()

# A test running ci/check-cuda-binaries.py on one target's binary told to expect
# `architectures`: its output must match PASS (and must not match FAIL, where given). A ';' in
# a regex would split it into a list of which any one match passes: write '.' instead.
function(_pitfall_check_one_binary test target architectures report_dir)
  cmake_parse_arguments(PARSE_ARGV 4 ARG "" "PASS;FAIL" "")
  if(ARG_UNPARSED_ARGUMENTS OR NOT ARG_PASS)
    message(FATAL_ERROR "_pitfall_check_one_binary(${test}): PASS <regex> [FAIL <regex>] only")
  endif()
  add_test(NAME ${test}
           COMMAND Python3::Interpreter "${PROJECT_SOURCE_DIR}/ci/check-cuda-binaries.py"
                   --cuobjdump "${PITFALL_CUOBJDUMP}" --architectures "${architectures}"
                   --report-dir "${PROJECT_BINARY_DIR}/${report_dir}"
                   -- $<TARGET_FILE:${target}>)
  set_tests_properties(${test} PROPERTIES
    LABELS "static;gpu-compile" SKIP_RETURN_CODE 77 TIMEOUT 60
    PASS_REGULAR_EXPRESSION "${ARG_PASS}")
  if(ARG_FAIL)
    set_tests_properties(${test} PROPERTIES FAIL_REGULAR_EXPRESSION "${ARG_FAIL}")
  endif()
endfunction()

# pitfall.static.cuda_binaries: the architectures embedded in every scenario program must be
# exactly CMAKE_CUDA_ARCHITECTURES, and no kernel may use local memory (spills) without a
# comment saying why, read from the binaries (cuobjdump) and from the ptxas reports the build
# kept in <build>/logs/ptxas/. Reports land in <build>/static/. cuobjdump comes from
# ci/setup.sh (NVIDIA's wheel) when the toolkit lacks it; without it only the ptxas part runs
# and the test is skipped, saying so.
function(pitfall_add_static_cuda_checks)
  find_program(PITFALL_CUOBJDUMP cuobjdump
               HINTS "${CUDAToolkit_BIN_DIR}" "${PROJECT_SOURCE_DIR}/.tools/cuda-tools/nvidia/cu13/bin")
  find_package(Python3 REQUIRED COMPONENTS Interpreter)
  get_property(names GLOBAL PROPERTY PITFALL_SCENARIOS)
  set(binaries "")
  set(sources "")
  foreach(name IN LISTS names)
    list(APPEND binaries "$<TARGET_FILE:pitfall.scenario.${name}>")
    get_property(manifest GLOBAL PROPERTY PITFALL_SCENARIO_MANIFEST_${name})
    get_filename_component(dir "${manifest}" DIRECTORY)
    file(GLOB scenario_sources "${dir}/*.cu" "${dir}/*.cuh" "${dir}/*.hpp")
    list(APPEND sources ${scenario_sources})
  endforeach()
  get_property(ptxas_logs GLOBAL PROPERTY PITFALL_PTXAS_LOGS)
  add_test(NAME pitfall.static.cuda_binaries
           COMMAND Python3::Interpreter "${PROJECT_SOURCE_DIR}/ci/check-cuda-binaries.py"
                   --cuobjdump "${PITFALL_CUOBJDUMP}"
                   --architectures "${CMAKE_CUDA_ARCHITECTURES}"
                   --report-dir "${PROJECT_BINARY_DIR}/static"
                   --sources ${sources} "${PROJECT_SOURCE_DIR}/harness/include/pitfall/cuda_backend.cuh"
                   --ptxas-logs ${ptxas_logs} --require-work-counter
                   -- ${binaries} $<TARGET_FILE:pitfall_fixture>)
  set_tests_properties(pitfall.static.cuda_binaries PROPERTIES
    LABELS "static;gpu-compile" SKIP_RETURN_CODE 77 TIMEOUT 120)
  # The check can fail: told to expect only sm_75, it must name what else the fixture embeds.
  _pitfall_check_one_binary(pitfall.static.cuda_binaries_detects_mismatch pitfall_fixture
    "75-real" static-negative
    PASS "FAIL: harness_fixture: embeds SASS \\['75', '80', '86', '89', '90'\\] PTX \\['90'\\], configured SASS \\['75'\\] PTX \\[\\]")
  # Suffixes count: the sample built for "86-real;90a-real;100f" (harness/tests) embeds sm_90a
  # and sm_100f, which the check must name as such, not as sm_90 and sm_100.
  if(TARGET pitfall_fatbin_sample)
    get_target_property(sample_archs pitfall_fatbin_sample CUDA_ARCHITECTURES)
    _pitfall_check_one_binary(pitfall.static.cuda_binaries_keep_suffixes pitfall_fatbin_sample
      "${sample_archs}" static-suffixes
      PASS "fatbin-sample: SASS sm_86, sm_90a, sm_100f. PTX compute_100f" FAIL "FAIL:")
  endif()
  # The ptxas half can fail too: a kernel that spills is named (ci/tests/fixtures: the report
  # of CUDA 13.0's ptxas for a kernel holding 24 accumulators, built with -maxrregcount=16
  # -arch=sm_90), and so is a log the build did not write.
  add_test(NAME pitfall.static.ptxas_spills_detected
           COMMAND Python3::Interpreter "${PROJECT_SOURCE_DIR}/ci/check-cuda-binaries.py"
                   --cuobjdump "" --architectures "90" --report-dir "${PROJECT_BINARY_DIR}/static-negative"
                   --ptxas-logs "${PROJECT_SOURCE_DIR}/ci/tests/fixtures/ptxas-spills.log"
                                "${PROJECT_BINARY_DIR}/logs/ptxas/no-such-target.log")
  set_tests_properties(pitfall.static.ptxas_spills_detected PROPERTIES
    LABELS "static;gpu-compile" TIMEOUT 60
    PASS_REGULAR_EXPRESSION "FAIL: ptxas-spills.log: kernel [^ ]*spill_kernel[^ ]* on sm_90 spills \\(256 bytes stored, 264 loaded\\).*FAIL: no-such-target.log: no ptxas log")
  # A program without kernels of its own (it loads device code at run time) passes on its ptxas
  # module lines; a log without any ptxas line is a target built without -Xptxas=-v.
  add_test(NAME pitfall.static.ptxas_log_without_kernels
           COMMAND Python3::Interpreter "${PROJECT_SOURCE_DIR}/ci/check-cuda-binaries.py"
                   --cuobjdump "" --architectures "90" --report-dir "${PROJECT_BINARY_DIR}/static-negative"
                   --ptxas-logs "${PROJECT_SOURCE_DIR}/ci/tests/fixtures/ptxas-no-kernels.log"
                                "${PROJECT_SOURCE_DIR}/ci/tests/fixtures/ptxas-without-verbose.log")
  set_tests_properties(pitfall.static.ptxas_log_without_kernels PROPERTIES
    LABELS "static;gpu-compile" TIMEOUT 60
    PASS_REGULAR_EXPRESSION "ptxas-no-kernels.log: no kernels \\(ptxas -v ran.*FAIL: ptxas-without-verbose.log: no kernel in the ptxas log"
    FAIL_REGULAR_EXPRESSION "FAIL: ptxas-no-kernels.log")
  # A kernel that does not count itself is named: the fatbin sample's kernel is plain CUDA.
  add_test(NAME pitfall.static.uncounted_kernel_detected
           COMMAND Python3::Interpreter "${PROJECT_SOURCE_DIR}/ci/check-cuda-binaries.py"
                   --cuobjdump "" --architectures "90" --report-dir "${PROJECT_BINARY_DIR}/static-negative"
                   --sources "${PROJECT_SOURCE_DIR}/harness/tests/cuda/fatbin_sample.cu"
                             "${PROJECT_SOURCE_DIR}/ci/tests/fixtures/uncounted-kernels.cu")
  set_tests_properties(pitfall.static.uncounted_kernel_detected PROPERTIES
    LABELS "static;gpu-compile" TIMEOUT 60
    PASS_REGULAR_EXPRESSION "FAIL: fatbin_sample.cu: kernel fill_lanes does not start with pitfall::count_this_kernel\\(\\).*FAIL: uncounted-kernels.cu: kernel uncounted_static .*FAIL: uncounted-kernels.cu: kernel uncounted_template "
    FAIL_REGULAR_EXPRESSION "kernel counted ")
endfunction()
