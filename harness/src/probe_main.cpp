// pitfall-probe: prints, as JSON, what the CUDA and cuDNN libraries say about themselves and
// the devices. It runs as a child of the harness, so a missing library (the loader stops it
// before main) or a broken driver cannot take the harness down; every value comes from the
// libraries' own calls, never from tools on PATH.
#include "pitfall/backend.hpp"
#include "pitfall/detail/process.hpp"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <iostream>

#include <dlfcn.h>
#include <link.h>
#include <sys/wait.h>
#include <unistd.h>

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
            for (const char* interesting :
                 {"cuda", "cublas", "cudnn", "openblas", "nvrtc", "libcuda"})
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
                devices.push_back(
                    {{"ordinal", d}, {"error", cuda_error(err, "cudaGetDeviceProperties")}});
                continue;
            }
            int pageable = 0;
            (void)cudaDeviceGetAttribute(&pageable, cudaDevAttrPageableMemoryAccess, d);
            char pci[32] = {};
            (void)cudaDeviceGetPCIBusId(pci, sizeof pci, d);
            devices.push_back({{"ordinal", d},
                               {"name", prop.name},
                               {"compute_capability",
                                std::to_string(prop.major) + "." + std::to_string(prop.minor)},
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
// cuDNN is opened at run time, not linked: a missing or broken cuDNN is then a recorded fact,
// not a probe that cannot start (and so a fingerprint without GPU facts).
#define PITFALL_STRINGIFY_INNER(x) #x
#define PITFALL_STRINGIFY(x) PITFALL_STRINGIFY_INNER(x)
/// One sub-library check in a child process: with sub-libraries of two releases mixed, cuDNN
/// 9's loader can fail to load one and then abort the process ("Invalid handle. Cannot load
/// symbol cudnnOpsVersionCheck"). Then only this fact is lost, named by the signal and what
/// cuDNN printed, not the whole fingerprint (and cuDNN's words stay out of the probe's JSON).
/// The child touches no CUDA state: it calls the check and reports its status.
std::string isolated_check(cudnnStatus_t (*check)(), const char* (*error_name)(cudnnStatus_t)) {
    int status_pipe[2];
    int output_pipe[2];
    if (::pipe(status_pipe) != 0)
        return "not checked: pipe failed";
    if (::pipe(output_pipe) != 0) {
        ::close(status_pipe[0]);
        ::close(status_pipe[1]);
        return "not checked: pipe failed";
    }
    std::cout.flush();
    const pid_t child = ::fork();
    if (child < 0) {
        for (int fd : {status_pipe[0], status_pipe[1], output_pipe[0], output_pipe[1]})
            ::close(fd);
        return "not checked: fork failed";
    }
    if (child == 0) {
        ::close(status_pipe[0]);
        ::close(output_pipe[0]);
        ::dup2(output_pipe[1], STDOUT_FILENO);
        ::dup2(output_pipe[1], STDERR_FILENO);
        const int st = static_cast<int>(check());
        [[maybe_unused]] const auto n = ::write(status_pipe[1], &st, sizeof st);
        ::_exit(0);
    }
    ::close(status_pipe[1]);
    ::close(output_pipe[1]);
    std::string said; // what the library printed: read to the end first, so the child never blocks
    char buffer[512];
    for (ssize_t n; (n = ::read(output_pipe[0], buffer, sizeof buffer)) != 0;) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            break;
        if (said.size() < 2000)
            said.append(buffer, static_cast<std::size_t>(n));
    }
    ::close(output_pipe[0]);
    int st = -1;
    const bool got = ::read(status_pipe[0], &st, sizeof st) == static_cast<ssize_t>(sizeof st);
    ::close(status_pipe[0]);
    int wstatus = 0;
    while (::waitpid(child, &wstatus, 0) < 0 && errno == EINTR) {
    }
    while (!said.empty() && (said.back() == '\n' || said.back() == ' '))
        said.pop_back();
    for (char& c : said)
        if (c == '\n')
            c = ';';
    const std::string printed = said.empty() ? "" : " (cuDNN printed: " + said + ")";
    if (WIFSIGNALED(wstatus))
        return "killed the process: " + pitfall::signal_name(WTERMSIG(wstatus)) + printed;
    if (!got)
        return "no status: the check's process exited " + std::to_string(WEXITSTATUS(wstatus)) +
               printed;
    const auto status = static_cast<cudnnStatus_t>(st);
    return (error_name != nullptr ? error_name(status) : std::to_string(st)) + printed;
}

json cudnn_facts() {
    json cudnn = {{"compiled_version", CUDNN_VERSION}};
    const char* soname = "libcudnn.so." PITFALL_STRINGIFY(CUDNN_MAJOR);
    void* lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
        const char* why = dlerror();
        cudnn["load_error"] = why != nullptr ? why : soname;
        return cudnn;
    }
    using version_fn = std::size_t (*)();
    using check_fn = cudnnStatus_t (*)();
    using name_fn = const char* (*)(cudnnStatus_t);
    auto symbol = [&](const char* name) { return dlsym(lib, name); };
    if (auto f = reinterpret_cast<version_fn>(symbol("cudnnGetVersion")))
        cudnn["loaded_version"] = f();
    if (auto f = reinterpret_cast<version_fn>(symbol("cudnnGetCudartVersion")))
        cudnn["cudart_version"] = f();
    if (auto f = reinterpret_cast<version_fn>(symbol("cudnnGetMaxDeviceVersion")))
        cudnn["max_device_version"] = f();
    const auto error_name = reinterpret_cast<name_fn>(symbol("cudnnGetErrorString"));
    // The sub-library checks need no GPU: a mixed install fails them by name.
    json sub = json::object();
    for (const char* name : {"cudnnGraphVersionCheck", "cudnnOpsVersionCheck",
                             "cudnnCnnVersionCheck", "cudnnAdvVersionCheck"}) {
        const auto check = reinterpret_cast<check_fn>(symbol(name));
        if (check == nullptr) {
            sub[name] = "symbol missing";
            continue;
        }
        sub[name] = isolated_check(check, error_name);
    }
    cudnn["sublibrary_checks"] = sub;
    Dl_info where{};
    if (auto f = symbol("cudnnGetVersion");
        f != nullptr && dladdr(f, &where) != 0 && where.dli_fname != nullptr)
        cudnn["loaded_from"] = where.dli_fname;
    return cudnn; // left loaded: loaded_libraries below lists it with the rest
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
