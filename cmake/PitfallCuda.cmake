# Decides whether the CUDA backend is built (PITFALL_HAS_CUDA) from PITFALL_ENABLE_CUDA:
#   OFF  host compiler only; every CUDA case reports UNSUPPORTED "built without CUDA"
#   AUTO CUDA when a CUDA compiler is found, else as OFF
#   ON   CUDA or a configure error
string(TOUPPER "${PITFALL_ENABLE_CUDA}" _pitfall_cuda_mode)
if(NOT _pitfall_cuda_mode MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "PITFALL_ENABLE_CUDA='${PITFALL_ENABLE_CUDA}': expected AUTO, ON or OFF")
endif()

set(PITFALL_HAS_CUDA OFF)
set(PITFALL_HAS_CUDNN OFF)
set(PITFALL_HAS_CUDA_TEXT "off (PITFALL_ENABLE_CUDA=OFF)")
if(NOT _pitfall_cuda_mode STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    foreach(arch IN LISTS CMAKE_CUDA_ARCHITECTURES)
      if(arch MATCHES "native|all")
        message(FATAL_ERROR "CMAKE_CUDA_ARCHITECTURES='${CMAKE_CUDA_ARCHITECTURES}': give an "
                            "explicit list (e.g. 75-real;80-real;90); '${arch}' depends on the "
                            "machine and 'native' fails where there is no GPU")
      endif()
    endforeach()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    # Stock CMake 3.25 (Debian 12's) marks CUDA::nvToolsExt deprecated whether or not the
    # toolkit has it, and CUDA 12.9+ and 13 have none: "set_property could not find TARGET
    # CUDA::nvToolsExt", a configure error (seen in the matrix's CUDA 13 cells). An empty
    # target of that name lets the module finish; pitfall links nvtx3 or nothing.
    if(CMAKE_VERSION VERSION_LESS 3.26 AND NOT TARGET CUDA::nvToolsExt)
      add_library(CUDA::nvToolsExt INTERFACE IMPORTED)
    endif()
    find_package(CUDAToolkit REQUIRED)
    find_package(CUDNN)
    # The SDK and the probe link the shared CUDA runtime unless CMAKE_CUDA_RUNTIME_LIBRARY=Static
    # asks for it linked in: a build carried to a machine that has a driver but not this
    # toolkit's libcudart (a CUDA 12 build run where only CUDA 13 is installed).
    string(TOUPPER "${CMAKE_CUDA_RUNTIME_LIBRARY}" _pitfall_cudart_kind)
    if(_pitfall_cudart_kind STREQUAL "STATIC")
      set(PITFALL_CUDART CUDA::cudart_static)
    else()
      set(PITFALL_CUDART CUDA::cudart)
    endif()
    set(PITFALL_HAS_CUDA ON)
    set(PITFALL_HAS_CUDNN ${CUDNN_FOUND})
    set(PITFALL_HAS_CUDA_TEXT
        "on (CUDA ${CUDAToolkit_VERSION}, archs ${CMAKE_CUDA_ARCHITECTURES}, cuDNN ${CUDNN_VERSION})")
  elseif(_pitfall_cuda_mode STREQUAL "ON")
    message(FATAL_ERROR "PITFALL_ENABLE_CUDA=ON but no CUDA compiler was found "
                        "(set CMAKE_CUDA_COMPILER or CUDACXX, or use PITFALL_ENABLE_CUDA=AUTO)")
  else()
    set(PITFALL_HAS_CUDA_TEXT "off (no CUDA compiler found)")
  endif()
endif()
