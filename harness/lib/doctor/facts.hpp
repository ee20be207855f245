// The doctor's reading of a fingerprint, private to harness/lib/doctor: accessors that never
// throw (the probe of another build, or a hand-edited run folder, may write anything) and the
// facts the rules read, taken once.
#pragma once

#include "doctor/doctor.hpp"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace pitfall::runner::doctor {

using json = nlohmann::json;

/// `j[key]`, or null where `j` is no object or has no such key.
const json& at(const json& j, const char* key);
/// The string `j` holds, else `fallback`.
std::string text(const json& j, const std::string& fallback = "");
/// The integer `j` holds, else nullopt (a float or a string is not one).
std::optional<long long> integer(const json& j);
/// True only for a JSON true.
bool flag(const json& j);
/// The folder part of a path ("/usr/local/cuda/lib64/stubs/libcuda.so" -> ".../stubs").
std::string folder_of(const std::string& path);

/// The facts the rules read, taken once from the fingerprint. The references point into the
/// fingerprint, which must outlive this.
struct facts {
    const json& fingerprint;
    const json& libraries;
    const json& driver;
    const json& cuda;
    const json& cudnn;
    const json& nvml;
    const json& environment;
    bool built_with_cuda = false;
    bool in_container = false;
    std::string probe_error;
    std::string probe_output;
    std::optional<long long> runtime_version;
    std::optional<long long> driver_version; ///< cudaDriverGetVersion, else cuDriverGetVersion
    std::string libcuda_path;                ///< where the loaded libcuda.so.1 came from
    std::string libcuda_loaded_as;           ///< the name the loader found it under
    std::string cu_init;                     ///< cuInit's answer by name ("" when not called)
    std::string cuda_error;                  ///< the runtime's cudaGetDeviceCount error name
    std::string kernel_module;               ///< "535.104.05" ("" when none is loaded)
    std::string user_mode_driver;            ///< "580.65.06" from libcuda's file name or NVML
    std::vector<std::string> device_nodes;
    std::optional<long long> physical_devices; ///< NVML's count: every GPU, visible or not
    std::vector<std::string> device_names;     ///< the devices CUDA sees

    explicit facts(const json& fp);

    bool driver_library_missing() const;
    /// The recorded value of an environment variable; nullopt where unset or not recorded.
    std::optional<std::string> env(const char* name) const;
    /// "CUDA 13.0", or "the CUDA runtime" where its version is unknown.
    std::string runtime_text() const;
    /// The runtime's CUDA major; 0 where unknown.
    int runtime_major() const;
    /// "CUDA 13.0 needs driver >= 580"; empty where the runtime's major has no known minimum.
    std::string minimum_driver_text() const;

private:
    void read_driver();
    void read_devices();
};

} // namespace pitfall::runner::doctor
