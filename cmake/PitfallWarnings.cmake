# pitfall.warnings: the warning flags every pitfall target takes (warnings as errors with
# PITFALL_WERROR, which the CI presets turn on).
add_library(pitfall.warnings INTERFACE)
target_compile_options(pitfall.warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
if(PITFALL_WERROR)
  target_compile_options(pitfall.warnings INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-Werror>
    $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings -Xcompiler=-Werror>)
endif()
