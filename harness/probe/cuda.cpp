// The CUDA driver, by its own API opened by name (a host-only build answers too), with what
// the kernel and /dev say of it; and the CUDA runtime this build links.
#include "probe.hpp"

#include "pitfall/detail/text.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <dirent.h>
#include <dlfcn.h>

#if PITFALL_HAS_CUDA
#include <cuda_runtime_api.h>
#endif

namespace pitfall::probe {
using nlohmann::json;

namespace {

/// The NVIDIA kernel module's version from /proc/driver/nvidia/version ("NVRM version: NVIDIA
/// UNIX x86_64 Kernel Module  580.65.06  ..."); empty where no module is loaded (or, in a
/// container, where /proc/driver/nvidia was not passed in).
json kernel_module_facts() {
    std::ifstream in("/proc/driver/nvidia/version");
    std::string line;
    if (!in || !std::getline(in, line))
        return {{"loaded", false}};
    json k = {{"loaded", true}, {"line", pitfall::detail::valid_utf8(line)}};
    std::smatch m;
    if (std::regex_search(line, m, std::regex(R"(Kernel Module\s+([0-9]+(\.[0-9]+)+))")))
        k["version"] = m[1].str();
    return k;
}

/// /dev/nvidia* (nvidiactl, nvidia-uvm, nvidia0...): what a container gets from the NVIDIA
/// Container Toolkit (or --device), whatever libraries it has.
json device_nodes() {
    json nodes = json::array();
    if (DIR* dev = opendir("/dev")) {
        std::vector<std::string> names;
        while (const dirent* e = readdir(dev))
            if (std::strncmp(e->d_name, "nvidia", 6) == 0)
                names.emplace_back(std::string("/dev/") + e->d_name);
        closedir(dev);
        std::sort(names.begin(), names.end());
        for (auto& n : names)
            nodes.push_back(pitfall::detail::valid_utf8(n));
    }
    return nodes;
}

/// cuInit's answers that decide a diagnosis, by cuda.h's names (the numbers are cuda.h's).
const char* known_cu_result(int result) {
    switch (result) {
    case 0: return "CUDA_SUCCESS";
    case 3: return "CUDA_ERROR_NOT_INITIALIZED";
    case 34: return "CUDA_ERROR_STUB_LIBRARY";
    case 46: return "CUDA_ERROR_DEVICE_UNAVAILABLE";
    case 100: return "CUDA_ERROR_NO_DEVICE";
    case 101: return "CUDA_ERROR_INVALID_DEVICE";
    case 304: return "CUDA_ERROR_OPERATING_SYSTEM";
    case 803: return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
    case 804: return "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE";
    case 999: return "CUDA_ERROR_UNKNOWN";
    default: return nullptr;
    }
}

} // namespace

/// The driver as the driver API sees it, opened by name: no CUDA header or link is needed, so
/// a host-only build answers too, and a missing libcuda.so.1 is the loader's own words.
/// CUresult values are the driver API's (cuda.h): 0 success, 34 stub library, 100 no device.
json driver_facts() {
    json d = {{"library", "libcuda.so.1"},
              {"kernel_module", kernel_module_facts()},
              {"device_nodes", device_nodes()}};
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
        d["load_error"] = dl_error_text("libcuda.so.1 not found");
        return d;
    }
    using init_fn = int (*)(unsigned);
    using int_out_fn = int (*)(int*);
    using name_fn = int (*)(int, const char**);
    const auto init = reinterpret_cast<init_fn>(dlsym(lib, "cuInit"));
    const auto get_name = reinterpret_cast<name_fn>(dlsym(lib, "cuGetErrorName"));
    const auto version = reinterpret_cast<int_out_fn>(dlsym(lib, "cuDriverGetVersion"));
    const auto count = reinterpret_cast<int_out_fn>(dlsym(lib, "cuDeviceGetCount"));
    d["path"] = library_file(reinterpret_cast<void*>(init));
    if (init == nullptr) {
        d["cu_init"] = "symbol cuInit missing";
        return d;
    }
    const int result = init(0);
    const char* name = nullptr;
    if (get_name == nullptr || get_name(result, &name) != 0 || name == nullptr)
        name = known_cu_result(result); // the stub answers cuGetErrorName with an error too
    d["cu_init"] = name != nullptr ? std::string(name) : "CUresult " + std::to_string(result);
    int value = 0;
    if (version != nullptr && version(&value) == 0)
        d["version"] = value;
    if (result == 0 && count != nullptr && count(&value) == 0)
        d["device_count"] = value;
    return d; // left loaded: the runtime's calls below find the same library
}

#if PITFALL_HAS_CUDA
namespace {

json cuda_error(cudaError_t err, const char* call) {
    (void)cudaGetLastError();
    return {{"error", cudaGetErrorName(err)}, {"message", cudaGetErrorString(err)}, {"call", call}};
}

/// Device `d` as the runtime describes it, or the error that stopped it.
json cuda_device(int d) {
    cudaDeviceProp prop{};
    if (const cudaError_t err = cudaGetDeviceProperties(&prop, d); err != cudaSuccess)
        return {{"ordinal", d}, {"error", cuda_error(err, "cudaGetDeviceProperties")}};
    int pageable = 0;
    (void)cudaDeviceGetAttribute(&pageable, cudaDevAttrPageableMemoryAccess, d);
    // Decides whether a second process (or any) may open a context: cudaComputeMode.
    int mode = -1;
    (void)cudaDeviceGetAttribute(&mode, cudaDevAttrComputeMode, d);
    const char* mode_name = mode == cudaComputeModeDefault            ? "default"
                            : mode == cudaComputeModeProhibited       ? "prohibited"
                            : mode == cudaComputeModeExclusiveProcess ? "exclusive_process"
                                                                      : "unknown";
    char pci[32] = {};
    (void)cudaDeviceGetPCIBusId(pci, sizeof pci, d);
    return {{"ordinal", d},
            {"name", prop.name},
            {"compute_capability", std::to_string(prop.major) + "." + std::to_string(prop.minor)},
            {"multiprocessors", prop.multiProcessorCount},
            {"total_memory_bytes", prop.totalGlobalMem},
            {"ecc", prop.ECCEnabled != 0},
            {"pageable_memory_access", pageable != 0},
            {"compute_mode", mode_name},
            {"pci_bus_id", pci}};
}

} // namespace

json cuda_facts() {
    json cuda = {{"compiled_runtime_version", CUDART_VERSION}};
    int runtime = 0;
    if (const cudaError_t err = cudaRuntimeGetVersion(&runtime); err == cudaSuccess)
        cuda["runtime_version"] = runtime;
    else
        cuda["runtime_version_error"] = cuda_error(err, "cudaRuntimeGetVersion");
    int driver = 0;
    if (const cudaError_t err = cudaDriverGetVersion(&driver); err == cudaSuccess)
        cuda["driver_version"] = driver; // 0 when no driver is installed
    else
        cuda["driver_version_error"] = cuda_error(err, "cudaDriverGetVersion");
    int count = 0;
    const cudaError_t count_err = cudaGetDeviceCount(&count);
    json devices = json::array();
    if (count_err != cudaSuccess) {
        cuda["device_count"] = 0;
        cuda["device_error"] = cuda_error(count_err, "cudaGetDeviceCount");
    } else {
        cuda["device_count"] = count;
        for (int d = 0; d < count; ++d)
            devices.push_back(cuda_device(d));
    }
    cuda["devices"] = devices;
    return cuda;
}
#endif

} // namespace pitfall::probe
