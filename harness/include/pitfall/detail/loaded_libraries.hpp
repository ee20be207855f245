// pitfall/detail/loaded_libraries.hpp: the CUDA libraries a process really has mapped, read
// from /proc/self/maps: which file the loader chose (a pip wheel's cuDNN or the system's), not
// which one a tool says is installed.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace pitfall::detail {

/// One mapped library file: its name without ".so..." ("libcudnn_ops"), the path it is mapped
/// from, that path with symlinks resolved, and the version the real file's name carries
/// ("9.14.0" of libcudnn_ops.so.9.14.0; "" where the name holds none).
struct loaded_library {
    std::string name;
    std::string path;
    std::string real_path;
    std::string version;
};

/// The version after ".so." in a file name when it is dotted numbers ("580.65.06" of
/// libcuda.so.580.65.06); "" otherwise (libcuda.so, libfoo.so.1a).
std::string version_from_file_name(const std::string& file_name);

/// The library name of a file name ("libcublasLt" of libcublasLt.so.13) when it is one of the
/// CUDA libraries recorded (libcuda, libcudart, libcublas, libcublasLt, libcudnn*, libnvrtc*,
/// libnvidia-ptxjitcompiler); "" for any other file.
std::string watched_library_name(const std::string& file_name);

/// The recorded libraries of a /proc/<pid>/maps text, each file once, in the order first
/// mapped; `resolve` turns a path into its real path ("" where it cannot: the path is kept).
/// The kernel names a mapping by its file, symlinks resolved; `loader_names` (real path ->
/// the name the loader opened, libcuda.so.1) gives back the path as the process asked for it.
std::vector<loaded_library>
parse_loaded_libraries(const std::string& maps_text,
                       const std::function<std::string(const std::string&)>& resolve,
                       const std::map<std::string, std::string>& loader_names = {});

/// This process's recorded libraries (/proc/self/maps, realpath(3), the loader's names from
/// dl_iterate_phdr); empty where the file cannot be read.
std::vector<loaded_library> read_loaded_libraries();

/// [{name, path, real_path, version}, ...]: the result document's "loaded_libraries".
nlohmann::json loaded_libraries_json(const std::vector<loaded_library>& libraries);

} // namespace pitfall::detail
