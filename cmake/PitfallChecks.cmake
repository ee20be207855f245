# pitfall_add_link_checks(): pitfall.static.cli_links, the `pitfall` command links no CUDA,
# cuDNN or BLAS library (it runs, and reports, where none of them loads: the probe and the
# scenarios answer for them). Read from the binary's dynamic section (DT_NEEDED, and the run
# path folders the build added for them, which survive --as-needed); and the same check shown
# able to fail, on a scenario program, which links the SDK. (The probe links the CUDA runtime
# alone and opens the rest by name: it is no longer an example of a forbidden link.)
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
  # (OpenBLAS; cuBLAS and the CUDA runtime too in a CUDA build).
  get_property(scenarios GLOBAL PROPERTY PITFALL_SCENARIOS)
  if(scenarios)
    list(GET scenarios 0 first_scenario)
    add_test(NAME pitfall.static.cli_links_detects_sdk
             COMMAND ${check} "$<TARGET_FILE:pitfall.scenario.${first_scenario}>")
    set_tests_properties(pitfall.static.cli_links_detects_sdk PROPERTIES
      LABELS "static;harness" SKIP_RETURN_CODE 77 TIMEOUT 60
      PASS_REGULAR_EXPRESSION "FAIL: ${first_scenario}: ")
  endif()
endfunction()
