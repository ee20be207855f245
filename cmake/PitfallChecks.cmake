# pitfall_add_link_checks(): pitfall.static.cli_links, the `pitfall` command links no CUDA,
# cuDNN or BLAS library (it runs, and reports, where none of them loads: the probe and the
# scenarios answer for them). Read from the binary's dynamic section (DT_NEEDED, and the run
# path folders the build added for them, which survive --as-needed); and the same check shown
# able to fail, on a scenario program, which links the SDK. (The probe links the CUDA runtime
# alone and opens the rest by name: it is no longer an example of a forbidden link.) And, in a
# CUDA build, pitfall.static.scenario_links: the scenario programs need no cuBLAS or cuDNN to
# start.
function(pitfall_add_link_checks)
  find_package(Python3 REQUIRED COMPONENTS Interpreter)
  set(forbidden libcudart libcublas libcublasLt libcudnn libopenblas libblas libnccl)
  set(forbidden_dirs ${OPENBLAS_LIBRARY_DIRS})
  if(PITFALL_HAS_CUDA)
    list(APPEND forbidden_dirs "${CUDAToolkit_LIBRARY_DIR}")
  endif()
  if(PITFALL_HAS_CUDNN)
    get_filename_component(cudnn_dir "${CUDNN_LIBRARY}" DIRECTORY)
    list(APPEND forbidden_dirs "${cudnn_dir}")
  endif()
  set(check Python3::Interpreter "${PROJECT_SOURCE_DIR}/ci/check-linked-libraries.py"
            --forbid ${forbidden} --forbid-dir ${forbidden_dirs} --)
  add_test(NAME pitfall.static.cli_links COMMAND ${check} "$<TARGET_FILE:pitfall::pitfall>")
  set_tests_properties(pitfall.static.cli_links PROPERTIES
    LABELS "static;harness" SKIP_RETURN_CODE 77 TIMEOUT 60)
  # The check shown able to fail: on the first scenario program built, which links the SDK
  # (OpenBLAS, and the CUDA runtime in a CUDA build).
  get_property(scenarios GLOBAL PROPERTY PITFALL_SCENARIOS)
  if(scenarios)
    list(GET scenarios 0 first_scenario)
    add_test(NAME pitfall.static.cli_links_detects_sdk
             COMMAND ${check} "$<TARGET_FILE:pitfall.scenario.${first_scenario}>")
    set_tests_properties(pitfall.static.cli_links_detects_sdk PROPERTIES
      LABELS "static;harness" SKIP_RETURN_CODE 77 TIMEOUT 60
      PASS_REGULAR_EXPRESSION "FAIL: ${first_scenario}: ")
  endif()
  # pitfall.static.scenario_links: no scenario program (nor the fixture) needs cuBLAS, cuBLASLt
  # or cuDNN to start (DT_NEEDED): the SDK opens them on first call, so a CPU case never maps
  # them and a missing one is the error of the case that calls it. The run path is not checked:
  # cudart, which they link, lives in the folder that holds cuBLAS as well.
  if(PITFALL_HAS_CUDA AND scenarios)
    set(programs "$<TARGET_FILE:pitfall_fixture>")
    foreach(name IN LISTS scenarios)
      list(APPEND programs "$<TARGET_FILE:pitfall.scenario.${name}>")
    endforeach()
    set(opened_on_first_call Python3::Interpreter "${PROJECT_SOURCE_DIR}/ci/check-linked-libraries.py"
                             --forbid libcublas libcublasLt libcudnn --)
    add_test(NAME pitfall.static.scenario_links COMMAND ${opened_on_first_call} ${programs})
    set_tests_properties(pitfall.static.scenario_links PROPERTIES
      LABELS "static;harness" SKIP_RETURN_CODE 77 TIMEOUT 60)
    # Shown able to fail on a binary that does need one of them: libcublas needs libcublasLt.
    add_test(NAME pitfall.static.scenario_links_detects_cublas
             COMMAND ${opened_on_first_call} "$<TARGET_FILE:CUDA::cublas>")
    set_tests_properties(pitfall.static.scenario_links_detects_cublas PROPERTIES
      LABELS "static;harness" SKIP_RETURN_CODE 77 TIMEOUT 60
      PASS_REGULAR_EXPRESSION "FAIL: libcublas[^:]*: links libcublasLt[.]so")
  endif()
endfunction()
