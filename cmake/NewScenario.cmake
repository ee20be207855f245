# cmake -DNAME=<name> [-DDEST=<folder>] -P NewScenario.cmake
#
# Stamps a new failure scenario from templates/scenario/: <DEST>/<NAME>/scenario.cu and
# scenario.json, a reproduce and a remedy variant that build, run and pass as they are on both
# backends. Then fill in the What / Why / Expected / Remedy / Evidence block and the cases.
# DEST defaults to ./scenarios. In pitfall's tree, re-run CMake and the scenario is built and
# tested; out of tree, add_failure_scenario(<DEST>/<NAME>) after find_package(pitfall).
if(NOT DEFINED NAME OR NAME STREQUAL "")
  message(FATAL_ERROR "NewScenario.cmake: -DNAME=<name> is required (e.g. -DNAME=my_failure)")
endif()
if(NOT NAME MATCHES "^[a-z][a-z0-9_]*$")
  message(FATAL_ERROR "NewScenario.cmake: NAME '${NAME}': use lower case letters, digits and _, "
                      "starting with a letter (it names the program, its tests and its baselines)")
endif()
if(NOT DEFINED DEST OR DEST STREQUAL "")
  set(DEST "scenarios")
endif()
get_filename_component(folder "${DEST}/${NAME}" ABSOLUTE)
if(EXISTS "${folder}")
  message(FATAL_ERROR "NewScenario.cmake: ${folder} exists already; pick another NAME or DEST")
endif()
set(templates "${CMAKE_CURRENT_LIST_DIR}/templates/scenario")
foreach(file scenario.cu scenario.json)
  configure_file("${templates}/${file}.in" "${folder}/${file}" @ONLY)
endforeach()
message(STATUS "New scenario ${NAME}: ${folder}/scenario.cu and scenario.json")
