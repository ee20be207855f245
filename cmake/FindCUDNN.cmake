# FindCUDNN: cuDNN's header and library, its version read from cudnn_version.h.
#
# Hints: CUDNN_ROOT (or the CUDNN_ROOT environment variable; e.g. a pip wheel's nvidia/cudnn
# folder), then the CUDA toolkit's own folders.
# Defines: CUDNN_FOUND, CUDNN_VERSION (9.19.0), CUDNN_VERSION_MAJOR, CUDNN_INCLUDE_DIR,
# CUDNN_LIBRARY, and the imported target CUDNN::cudnn.
set(_cudnn_hints ${CUDNN_ROOT} $ENV{CUDNN_ROOT} ${CUDAToolkit_LIBRARY_ROOT}
                 ${CUDAToolkit_TARGET_DIR})
find_path(CUDNN_INCLUDE_DIR cudnn_version.h
          HINTS ${_cudnn_hints} ${CUDAToolkit_INCLUDE_DIRS}
          PATH_SUFFIXES include)
# NAMES_PER_DIR: the hinted folder's libcudnn.so.9 (a wheel has no unversioned name) before a
# libcudnn.so of another release elsewhere (an image's system cuDNN 8, say).
find_library(CUDNN_LIBRARY NAMES cudnn libcudnn.so.9 libcudnn.so.8 NAMES_PER_DIR
             HINTS ${_cudnn_hints} ${CUDAToolkit_LIBRARY_DIR}
             PATH_SUFFIXES lib lib64)

if(CUDNN_INCLUDE_DIR AND EXISTS "${CUDNN_INCLUDE_DIR}/cudnn_version.h")
  file(STRINGS "${CUDNN_INCLUDE_DIR}/cudnn_version.h" _cudnn_defines
       REGEX "^#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) +[0-9]+")
  foreach(part MAJOR MINOR PATCHLEVEL)
    string(REGEX MATCH "CUDNN_${part} +([0-9]+)" _ "${_cudnn_defines}")
    set(CUDNN_VERSION_${part} "${CMAKE_MATCH_1}")
  endforeach()
  set(CUDNN_VERSION "${CUDNN_VERSION_MAJOR}.${CUDNN_VERSION_MINOR}.${CUDNN_VERSION_PATCHLEVEL}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CUDNN
  REQUIRED_VARS CUDNN_LIBRARY CUDNN_INCLUDE_DIR
  VERSION_VAR CUDNN_VERSION)

if(CUDNN_FOUND AND NOT TARGET CUDNN::cudnn)
  add_library(CUDNN::cudnn UNKNOWN IMPORTED)
  set_target_properties(CUDNN::cudnn PROPERTIES
    IMPORTED_LOCATION "${CUDNN_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${CUDNN_INCLUDE_DIR}")
endif()
mark_as_advanced(CUDNN_INCLUDE_DIR CUDNN_LIBRARY)
