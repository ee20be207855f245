# Compiles through ccache where it is installed (ci/setup.sh installs it), for the host compilers
# and nvcc alike, so that a second build of unchanged sources on one machine -- a second clone
# included -- compiles little. PITFALL_CCACHE=OFF turns it off; a launcher the user set wins.
#
# CCACHE_BASEDIR makes the paths under the source tree relative in what ccache hashes, and
# CCACHE_NOHASHDIR leaves the working folder out of it: a fresh clone elsewhere then hits the
# entries an earlier clone wrote. (__FILE__ is already relative: -fmacro-prefix-map.)
option(PITFALL_CCACHE "Compile through ccache where it is installed" ON)
if(PITFALL_CCACHE)
  find_program(PITFALL_CCACHE_PROGRAM ccache)
  if(PITFALL_CCACHE_PROGRAM)
    # Precompiled headers (harness/CMakeLists.txt; off by default under ccache, on when asked)
    # are cached as ccache documents it: the pch_defines and time_macros sloppiness, and GCC's
    # -fpch-preprocess.
    # nvcc gets the __FILE__ prefix map as -Xcompiler=-fmacro-prefix-map=<tree>/=, which ccache
    # does not read as a path: left in the hash, it made every clone miss every nvcc entry. It
    # maps each clone's own root to "", so the objects are alike and it can be left out.
    set(pitfall_launcher "${CMAKE_COMMAND}" -E env "CCACHE_BASEDIR=${PROJECT_SOURCE_DIR}"
        CCACHE_NOHASHDIR=1 CCACHE_SLOPPINESS=pch_defines,time_macros
        "CCACHE_IGNOREOPTIONS=-Xcompiler=-fmacro-prefix-map=*" "${PITFALL_CCACHE_PROGRAM}")
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fpch-preprocess>)
    endif()
    foreach(lang C CXX CUDA)
      if(NOT DEFINED CMAKE_${lang}_COMPILER_LAUNCHER)
        set(CMAKE_${lang}_COMPILER_LAUNCHER ${pitfall_launcher})
      endif()
    endforeach()
    message(STATUS "pitfall: compiling through ${PITFALL_CCACHE_PROGRAM}")
  else()
    message(STATUS "pitfall: ccache not found: every build compiles everything (ci/setup.sh installs it)")
  endif()
endif()
