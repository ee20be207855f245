# pitfall.warnings: the warning flags every pitfall target takes (warnings as errors with
# PITFALL_WERROR, which the CI presets turn on).
add_library(pitfall.warnings INTERFACE)
target_compile_options(pitfall.warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>
  # status and status_or are [[nodiscard]]. nvcc's front end also flags `s = f()` (#2810: the
  # assignment's own status& result "ignored"), which g++ rightly does not; a status really
  # dropped is #3004, which stays on.
  $<$<COMPILE_LANGUAGE:CUDA>:--diag-suppress=2810>)
if(PITFALL_WERROR)
  target_compile_options(pitfall.warnings INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-Werror>
    $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings -Xcompiler=-Werror>)
endif()
