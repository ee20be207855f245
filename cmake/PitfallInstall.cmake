# install() rules and the CMake package. `cmake --install build/<preset> --prefix P` gives:
#
#   P/bin/pitfall, P/bin/pitfall-probe
#   P/include/pitfall/...                          the scenario SDK's headers
#   P/lib/libpitfall_core.a, libpitfall_sdk.a
#   P/libexec/pitfall/scenarios/<name>             the scenario programs built here
#   P/share/pitfall/pitfall-index.json             their index, paths relative to itself
#   P/share/pitfall/scenarios/<name>/scenario.json
#   P/share/pitfall/expected/, P/share/pitfall/schema/
#   P/lib/cmake/pitfall/                           pitfallConfig.cmake, its version and targets,
#                                                  PitfallScenario.cmake and what it needs,
#                                                  NewScenario.cmake and the scenario template
#
# so that a project elsewhere builds its own scenarios against it (see docs/install.md,
# "Scenarios of your own, out of this tree"). The matrix driver is not installed as a command
# (the installed index names none; its modules come along in the drivers' package): it builds
# pitfall from a source tree. The fleet driver is (P/share/pitfall/fleet/pitfall-fleet, beside
# P/share/pitfall/fleet/pitfall_drivers/): a cluster runs an installed pitfall from a shared
# prefix.
include(CMakePackageConfigHelpers)

set(PITFALL_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/pitfall"
    CACHE STRING "Where the CMake package of pitfall is installed (relative to the prefix)")
set(pitfall_share "${CMAKE_INSTALL_DATADIR}/pitfall")
set(pitfall_libexec "${CMAKE_INSTALL_LIBEXECDIR}/pitfall")

install(TARGETS pitfall pitfall_probe EXPORT pitfallTargets
        RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}")
install(TARGETS pitfall_core pitfall_sdk EXPORT pitfallTargets
        ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}")
install(DIRECTORY "${PROJECT_SOURCE_DIR}/harness/include/"
        DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}"
        FILES_MATCHING PATTERN "*.hpp" PATTERN "*.cuh" PATTERN "*.h")
install(DIRECTORY "${PROJECT_SOURCE_DIR}/expected/" DESTINATION "${pitfall_share}/expected")
install(DIRECTORY "${PROJECT_SOURCE_DIR}/reports/schema/" DESTINATION "${pitfall_share}/schema")

# The scenarios of this build and their index. Paths in the index are relative to its folder,
# so the installed tree can move (and `cmake --install --prefix` picks the prefix late).
# GNUInstallDirs' FULL folders share the prefix, so the path between two does not depend on it.
set(pitfall_full_share "${CMAKE_INSTALL_FULL_DATADIR}/pitfall")
function(_pitfall_relative out to)
  file(RELATIVE_PATH rel "${pitfall_full_share}" "${to}")
  set(${out} "${rel}" PARENT_SCOPE)
endfunction()

get_property(pitfall_installed_names GLOBAL PROPERTY PITFALL_SCENARIOS)
set(pitfall_installed_entries "")
foreach(name IN LISTS pitfall_installed_names)
  get_property(manifest GLOBAL PROPERTY PITFALL_SCENARIO_MANIFEST_${name})
  install(TARGETS pitfall.scenario.${name} RUNTIME DESTINATION "${pitfall_libexec}/scenarios")
  install(FILES "${manifest}" DESTINATION "${pitfall_share}/scenarios/${name}")
  _pitfall_relative(program "${CMAKE_INSTALL_FULL_LIBEXECDIR}/pitfall/scenarios/${name}")
  list(APPEND pitfall_installed_entries
       "    {\"name\": \"${name}\", \"program\": \"${program}\", \"manifest\": \"scenarios/${name}/scenario.json\"}")
endforeach()
list(JOIN pitfall_installed_entries ",\n" pitfall_installed_body)
_pitfall_relative(pitfall_installed_probe "${CMAKE_INSTALL_FULL_BINDIR}/pitfall-probe")
# No "runs": a prefix is no place for them (the command then uses reports/runs of the working
# folder), and no "matrix_driver" (not installed).
# The fleet driver: its launcher and, beside it, the drivers' package (standard library only; the
# launcher finds the package in its own folder).
install(PROGRAMS "${PROJECT_SOURCE_DIR}/tools/pitfall-fleet" DESTINATION "${pitfall_share}/fleet")
install(DIRECTORY "${PROJECT_SOURCE_DIR}/tools/pitfall_drivers" DESTINATION "${pitfall_share}/fleet"
        FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
# The Slurm gate's wrappers (docs/clusters.md#gating-nodes-with-pitfall-gate): each finds its
# pitfall-gate.conf in its own folder, wherever they are copied together.
install(PROGRAMS "${PROJECT_SOURCE_DIR}/tools/slurm/pitfall-gate-slurm"
                 "${PROJECT_SOURCE_DIR}/tools/slurm/pitfall-gate-prolog"
                 "${PROJECT_SOURCE_DIR}/tools/slurm/pitfall-gate-health-check"
        DESTINATION "${pitfall_share}/slurm")
_pitfall_index_paths(pitfall_installed_paths EXPECTED "expected" PROBE "${pitfall_installed_probe}"
                     FLEET_DRIVER "fleet/pitfall-fleet")
_pitfall_index_document(pitfall_installed_index "${pitfall_installed_paths}" "${pitfall_installed_body}")
file(GENERATE OUTPUT "${PROJECT_BINARY_DIR}/install/pitfall-index.json"
     CONTENT "${pitfall_installed_index}")
install(FILES "${PROJECT_BINARY_DIR}/install/pitfall-index.json" DESTINATION "${pitfall_share}")

# The CMake package.
install(EXPORT pitfallTargets NAMESPACE pitfall:: DESTINATION "${PITFALL_INSTALL_CMAKEDIR}")
if(PITFALL_HAS_CUDNN)
  get_filename_component(PITFALL_CUDNN_ROOT_HINT "${CUDNN_INCLUDE_DIR}" DIRECTORY)
endif()
configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/pitfallConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/install/pitfallConfig.cmake"
  INSTALL_DESTINATION "${PITFALL_INSTALL_CMAKEDIR}")
# 0.x: a minor version may break what a scenario builds against.
write_basic_package_version_file("${PROJECT_BINARY_DIR}/install/pitfallConfigVersion.cmake"
  VERSION "${PROJECT_VERSION}" COMPATIBILITY SameMinorVersion)
install(FILES
  "${PROJECT_BINARY_DIR}/install/pitfallConfig.cmake"
  "${PROJECT_BINARY_DIR}/install/pitfallConfigVersion.cmake"
  "${PROJECT_SOURCE_DIR}/cmake/PitfallScenario.cmake"
  "${PROJECT_SOURCE_DIR}/cmake/PitfallWarnings.cmake"
  "${PROJECT_SOURCE_DIR}/cmake/FindCUDNN.cmake"
  "${PROJECT_SOURCE_DIR}/cmake/CompileCheck.cmake"
  "${PROJECT_SOURCE_DIR}/cmake/EmbedBinary.cmake"
  "${PROJECT_SOURCE_DIR}/cmake/ptxas-log.sh"
  "${PROJECT_SOURCE_DIR}/cmake/NewScenario.cmake"
  DESTINATION "${PITFALL_INSTALL_CMAKEDIR}")
install(DIRECTORY "${PROJECT_SOURCE_DIR}/cmake/templates" DESTINATION "${PITFALL_INSTALL_CMAKEDIR}")
