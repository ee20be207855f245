#include "doctor/facts.hpp"

#include "pitfall/detail/fatbin.hpp"

namespace pitfall::runner {

std::string cuda_version_text(long long v) {
    return v <= 0 ? std::to_string(v) : detail::cuda_version_text(v);
}

std::string cudnn_version_text(long long v) {
    if (v <= 0)
        return std::to_string(v);
    // cuDNN 9 encodes major*10000 + minor*100 + patch; cuDNN 8 and older major*1000 + minor*100
    // + patch (cudnn_version.h of each).
    const bool nine_or_later = v >= 90000;
    const long long major = nine_or_later ? v / 10000 : v / 1000;
    const long long rest = nine_or_later ? v % 10000 : v % 1000;
    return std::to_string(major) + "." + std::to_string(rest / 100) + "." +
           std::to_string(rest % 100);
}

int branch_of(const std::string& driver_version) {
    int branch = 0;
    for (const char c : driver_version) {
        if (c < '0' || c > '9')
            break;
        branch = branch * 10 + (c - '0');
        if (branch > 100000)
            return 0;
    }
    return branch;
}

int minimum_driver_branch(int cuda_major) {
    switch (cuda_major) {
    case 11: return 450;
    case 12: return 525;
    case 13: return 580;
    default: return 0;
    }
}

namespace doctor {

const json& at(const json& j, const char* key) {
    static const json none;
    return j.is_object() && j.contains(key) ? j[key] : none;
}

std::string text(const json& j, const std::string& fallback) {
    return j.is_string() ? j.get<std::string>() : fallback;
}

std::optional<long long> integer(const json& j) {
    if (j.is_number_integer() || j.is_number_unsigned())
        return j.get<long long>();
    return std::nullopt;
}

bool flag(const json& j) {
    return j.is_boolean() && j.get<bool>();
}

std::string folder_of(const std::string& path) {
    const auto slash = path.rfind('/');
    return slash == std::string::npos ? "." : path.substr(0, slash);
}

facts::facts(const json& fp)
    : fingerprint(fp), libraries(at(fp, "libraries")), driver(at(libraries, "driver")),
      cuda(at(libraries, "cuda")), cudnn(at(libraries, "cudnn")), nvml(at(libraries, "nvml")),
      environment(at(fp, "environment")) {
    built_with_cuda = flag(at(libraries, "built_with_cuda"));
    in_container = flag(at(at(at(fp, "host"), "container"), "in_container"));
    probe_error = text(at(libraries, "probe_error"));
    probe_output = text(at(libraries, "probe_output"));
    if (!libraries.is_object() && probe_error.empty())
        probe_error = "no probe facts in the fingerprint";
    runtime_version = integer(at(cuda, "runtime_version"));
    read_driver();
    read_devices();
}

/// The driver as the runtime, the driver API, the loader and the kernel see it.
void facts::read_driver() {
    driver_version = integer(at(cuda, "driver_version"));
    if (!driver_version || *driver_version == 0)
        if (auto v = integer(at(driver, "version")))
            driver_version = v;
    libcuda_path = text(at(driver, "path"));
    cu_init = text(at(driver, "cu_init"));
    cuda_error = text(at(at(cuda, "device_error"), "error"));
    kernel_module = text(at(at(driver, "kernel_module"), "version"));
    if (const json& loaded = at(libraries, "loaded_libraries"); loaded.is_array())
        for (const auto& l : loaded)
            if (text(l).find("libcuda.so") != std::string::npos)
                libcuda_loaded_as = text(l);
    if (const auto so = libcuda_path.rfind(".so."); so != std::string::npos)
        user_mode_driver = libcuda_path.substr(so + 4);
    if (branch_of(user_mode_driver) < 100) // "libcuda.so.1": no version in the name
        user_mode_driver = text(at(nvml, "driver_version"));
}

/// The devices: their nodes, NVML's count of every GPU, and those CUDA sees.
void facts::read_devices() {
    if (const json& nodes = at(driver, "device_nodes"); nodes.is_array())
        for (const auto& n : nodes)
            device_nodes.push_back(text(n));
    physical_devices = integer(at(nvml, "device_count"));
    if (const json& devices = at(cuda, "devices"); devices.is_array())
        for (const auto& d : devices)
            device_names.push_back(text(at(d, "name"), "device") + " (" +
                                   text(at(d, "compute_capability"), "?") + ")");
}

bool facts::driver_library_missing() const {
    return driver.is_object() && driver.contains("load_error");
}

std::optional<std::string> facts::env(const char* name) const {
    if (environment.is_object() && environment.contains(name) && environment[name].is_string())
        return environment[name].get<std::string>();
    return std::nullopt;
}

std::string facts::runtime_text() const {
    return runtime_version ? "CUDA " + cuda_version_text(*runtime_version) : "the CUDA runtime";
}

int facts::runtime_major() const {
    return runtime_version ? static_cast<int>(*runtime_version / 1000) : 0;
}

std::string facts::minimum_driver_text() const {
    const int branch = minimum_driver_branch(runtime_major());
    return branch > 0 ? runtime_text() + " needs driver >= " + std::to_string(branch) : "";
}

} // namespace doctor
} // namespace pitfall::runner
