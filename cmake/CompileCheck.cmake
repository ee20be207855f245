# cmake -P CompileCheck.cmake: a source that must NOT compile, failing for the stated reason.
#   -DCOMPILER=nvcc -DSOURCE=file.cu -DINCLUDES=dir1|dir2 -DARCH=75 -DDIAGNOSTIC_FILE=regex.txt
# Passes when the compiler fails AND its output matches the regular expression (CMake syntax)
# in DIAGNOSTIC_FILE; a source that compiles, or fails for another reason, fails the test.
foreach(var COMPILER SOURCE ARCH DIAGNOSTIC_FILE)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "CompileCheck.cmake: -D${var}=... is required")
  endif()
endforeach()
file(READ "${DIAGNOSTIC_FILE}" diagnostic)
string(STRIP "${diagnostic}" diagnostic)
set(include_flags "")
string(REPLACE "|" ";" include_dirs "${INCLUDES}")
foreach(dir IN LISTS include_dirs)
  list(APPEND include_flags "-I${dir}")
endforeach()
execute_process(
  COMMAND "${COMPILER}" -std=c++17 "-arch=sm_${ARCH}" ${include_flags} -c "${SOURCE}" -o /dev/null
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(output "${out}${err}")
if(rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled, but it must not (expected a diagnostic matching: ${diagnostic})")
endif()
if(NOT output MATCHES "${diagnostic}")
  message(FATAL_ERROR "${SOURCE} failed to compile, but not with a diagnostic matching '${diagnostic}'. "
                      "The compiler said:\n${output}")
endif()
message(STATUS "${SOURCE} fails to compile as expected: ${CMAKE_MATCH_0}")
