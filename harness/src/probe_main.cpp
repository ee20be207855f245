// pitfall-probe: prints, as JSON, what the CUDA and cuDNN libraries say about themselves and
// the devices. It runs as a child of the harness, so a missing library (the loader stops it
// before main) or a broken driver cannot take the harness down; every value comes from the
// libraries' own calls, never from tools on PATH.
#include "pitfall/backend.hpp"

#include <nlohmann/json.hpp>

#include <iostream>
#include <link.h>

#if PITFALL_HAS_CUDA
#include <cuda_runtime_api.h>
#endif
#if PITFALL_HAS_CUDNN
#include <cudnn.h>
#endif

namespace {
using nlohmann::json;

// The shared libraries actually loaded (a system cuDNN vs a pip wheel's is exactly the
// difference that matters; tools that print the "installed" version get it wrong).
json loaded_libraries() {
    json out = json::array();
    dl_iterate_phdr(
        [](struct dl_phdr_info* info, size_t, void* data) {
            const std::string name = info->dlpi_name != nullptr ? info->dlpi_name : "";
            for (const char* interesting : {"cuda", "cublas", "cudnn", "openblas", "nvrtc", "libcuda"})
                if (name.find(interesting) != std::string::npos) {
                    static_cast<json*>(data)->push_back(name);
                    break;
                }
            return 0;
        },
        &out);
    return out;
}

#if PITFALL_HAS_CUDA
json cuda_error(cudaError_t err, const char* call) {
    (void)cudaGetLastError();
    return {{"error", cudaGetErrorName(err)}, {"message", cudaGetErrorString(err)}, {"call", call}};
}

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
        for (int d = 0; d < count; ++d) {
            cudaDeviceProp prop{};
            if (const cudaError_t err = cudaGetDeviceProperties(&prop, d); err != cudaSuccess) {
                devices.push_back({{"ordinal", d}, {"error", cuda_error(err, "cudaGetDeviceProperties")}});
                continue;
            }
            int pageable = 0;
            (void)cudaDeviceGetAttribute(&pageable, cudaDevAttrPageableMemoryAccess, d);
            char pci[32] = {};
            (void)cudaDeviceGetPCIBusId(pci, sizeof pci, d);
            devices.push_back({{"ordinal", d},
                               {"name", prop.name},
                               {"compute_capability", std::to_string(prop.major) + "." + std::to_string(prop.minor)},
                               {"multiprocessors", prop.multiProcessorCount},
                               {"total_memory_bytes", prop.totalGlobalMem},
                               {"ecc", prop.ECCEnabled != 0},
                               {"pageable_memory_access", pageable != 0},
                               {"pci_bus_id", pci}});
        }
    }
    cuda["devices"] = devices;
    return cuda;
}
#endif

#if PITFALL_HAS_CUDNN
json cudnn_facts() {
    json cudnn = {{"compiled_version", CUDNN_VERSION},
                  {"loaded_version", cudnnGetVersion()},
                  {"cudart_version", cudnnGetCudartVersion()},
                  {"max_device_version", cudnnGetMaxDeviceVersion()}};
    // The sub-library checks need no GPU: a mixed install fails them by name.
    const std::pair<const char*, cudnnStatus_t> checks[] = {
        {"graph", cudnnGraphVersionCheck()},
        {"ops", cudnnOpsVersionCheck()},
        {"cnn", cudnnCnnVersionCheck()},
        {"adv", cudnnAdvVersionCheck()}};
    json sub = json::object();
    for (const auto& [name, st] : checks)
        sub[name] = cudnnGetErrorString(st);
    cudnn["sublibrary_checks"] = sub;
    return cudnn;
}
#endif
} // namespace

int main() {
    json out = {{"schema", "pitfall.probe/1"}, {"built_with_cuda", PITFALL_HAS_CUDA != 0}};
#if PITFALL_HAS_CUDA
    out["cuda"] = cuda_facts();
#else
    out["cuda"] = {{"unavailable", "built without CUDA"}};
#endif
#if PITFALL_HAS_CUDNN
    out["cudnn"] = cudnn_facts();
#else
    out["cudnn"] = {{"unavailable", "built without cuDNN"}};
#endif
    out["loaded_libraries"] = loaded_libraries();
    std::cout << out.dump(2) << '\n';
    return 0;
}
