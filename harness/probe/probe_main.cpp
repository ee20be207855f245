// pitfall-probe: prints, as JSON, what the CUDA and cuDNN libraries say about themselves and
// the devices. It runs as a child of the harness, so a missing library (the loader stops it
// before main) or a broken driver cannot take the harness down; every value comes from the
// libraries' own calls, never from tools on PATH.
#include "pitfall/detail/process.hpp"
#include "pitfall/detail/text.hpp"
#include "pitfall/process.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <dirent.h>
#include <dlfcn.h>
#include <glob.h>
#include <link.h>
#include <sys/stat.h>
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

std::string dl_error_text(const char* fallback) {
    const char* why = dlerror();
    return pitfall::detail::valid_utf8(why != nullptr ? why : fallback);
}

/// The file a loaded library came from, symlinks resolved (libcuda.so.1 ->
/// libcuda.so.580.65.06: the name carries the user-mode driver's version).
std::string library_file(void* symbol) {
    Dl_info where{};
    if (symbol == nullptr || dladdr(symbol, &where) == 0 || where.dli_fname == nullptr)
        return {};
    char resolved[PATH_MAX];
    return pitfall::detail::valid_utf8(
        realpath(where.dli_fname, resolved) != nullptr ? resolved : where.dli_fname);
}

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

/// NVML (libnvidia-ml.so.1, shipped with the driver), opened by name. The few types used are
/// declared here as NVML's API reference gives them (nvml.h is not part of the toolkit).
struct nvml_memory {
    unsigned long long total, free, used;
};
json nvml_device(void* lib, void* device, std::string (*error)(void*, int)) {
    auto fn = [&](const char* name) { return dlsym(lib, name); };
    json dev = json::object();
    char text[96] = {};
    using text_fn = int (*)(void*, char*, unsigned);
    if (auto f = reinterpret_cast<text_fn>(fn("nvmlDeviceGetName"));
        f && f(device, text, sizeof text) == 0)
        dev["name"] = pitfall::detail::valid_utf8(text);
    if (auto f = reinterpret_cast<text_fn>(fn("nvmlDeviceGetUUID"));
        f && f(device, text, sizeof text) == 0)
        dev["uuid"] = pitfall::detail::valid_utf8(text);
    if (auto f = reinterpret_cast<int (*)(void*, nvml_memory*)>(fn("nvmlDeviceGetMemoryInfo"))) {
        nvml_memory m{};
        if (const int r = f(device, &m); r == 0)
            dev["memory"] = {{"total_bytes", m.total}, {"used_bytes", m.used}};
        else
            dev["memory_error"] = error(lib, r);
    }
    // Only the count: NVML answers NVML_ERROR_INSUFFICIENT_SIZE (7) with the number of compute
    // processes when given no room, so no process-record layout is assumed.
    if (auto f = reinterpret_cast<int (*)(void*, unsigned*, void*)>(
            fn("nvmlDeviceGetComputeRunningProcesses_v3"))) {
        unsigned n = 0;
        if (const int r = f(device, &n, nullptr); r == 0 || r == 7)
            dev["compute_processes"] = n;
    }
    using int_fn = int (*)(void*, int*);
    using two_int_fn = int (*)(void*, int*, int*);
    if (auto f = reinterpret_cast<int_fn>(fn("nvmlDeviceGetComputeMode"))) {
        int mode = 0;
        if (f(device, &mode) == 0)
            dev["compute_mode"] = mode; // 0 default, 2 prohibited, 3 exclusive process
    }
    if (auto f = reinterpret_cast<two_int_fn>(fn("nvmlDeviceGetMigMode"))) {
        int current = 0, pending = 0;
        if (f(device, &current, &pending) == 0)
            dev["mig_mode"] = {{"current", current}, {"pending", pending}};
    }
    if (auto f = reinterpret_cast<int_fn>(fn("nvmlDeviceGetPersistenceMode"))) {
        int mode = 0;
        if (f(device, &mode) == 0)
            dev["persistence_mode"] = mode != 0;
    }
    if (auto f = reinterpret_cast<two_int_fn>(fn("nvmlDeviceGetEccMode"))) {
        int current = 0, pending = 0;
        if (f(device, &current, &pending) == 0)
            dev["ecc_mode"] = {{"current", current != 0}, {"pending", pending != 0}};
    }
    if (auto f = reinterpret_cast<int_fn>(fn("nvmlDeviceGetRetiredPagesPendingStatus"))) {
        int pending = 0;
        if (f(device, &pending) == 0)
            dev["retired_pages_pending"] = pending != 0;
    }
    if (auto f = reinterpret_cast<int (*)(void*, unsigned*, unsigned*, unsigned*, unsigned*)>(
            fn("nvmlDeviceGetRemappedRows"))) {
        unsigned corrected = 0, uncorrected = 0, pending = 0, failed = 0;
        if (f(device, &corrected, &uncorrected, &pending, &failed) == 0)
            dev["remapped_rows"] = {{"correctable", corrected},
                                    {"uncorrectable", uncorrected},
                                    {"pending", pending != 0},
                                    {"failure", failed != 0}};
    }
    if (auto f = reinterpret_cast<int (*)(void*, unsigned long long*)>(
            fn("nvmlDeviceGetCurrentClocksThrottleReasons"))) {
        unsigned long long reasons = 0;
        if (f(device, &reasons) == 0)
            dev["clocks_throttle_reasons"] = reasons;
    }
    using clock_fn = int (*)(void*, int, unsigned*);
    unsigned mhz = 0;
    if (auto f = reinterpret_cast<clock_fn>(fn("nvmlDeviceGetClockInfo"));
        f && f(device, 1, &mhz) == 0)
        dev["sm_clock_mhz"] = mhz; // 1 = NVML_CLOCK_SM
    if (auto f = reinterpret_cast<clock_fn>(fn("nvmlDeviceGetMaxClockInfo"));
        f && f(device, 1, &mhz) == 0)
        dev["sm_clock_max_mhz"] = mhz;
    return dev;
}

std::string nvml_error(void* lib, int result) {
    using string_fn = const char* (*)(int);
    if (auto f = reinterpret_cast<string_fn>(dlsym(lib, "nvmlErrorString")))
        if (const char* s = f(result))
            return s;
    return "nvmlReturn " + std::to_string(result);
}

json nvml_facts() {
    json n = {{"library", "libnvidia-ml.so.1"}};
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
        n["load_error"] = dl_error_text("libnvidia-ml.so.1 not found");
        return n;
    }
    const auto init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
    n["path"] = library_file(reinterpret_cast<void*>(init));
    if (init == nullptr) {
        n["init_error"] = "symbol nvmlInit_v2 missing";
        return n;
    }
    if (const int r = init(); r != 0) {
        n["init_error"] = nvml_error(lib, r);
        return n;
    }
    char version[96] = {};
    if (auto f =
            reinterpret_cast<int (*)(char*, unsigned)>(dlsym(lib, "nvmlSystemGetDriverVersion"));
        f != nullptr && f(version, sizeof version) == 0)
        n["driver_version"] = pitfall::detail::valid_utf8(version);
    unsigned count = 0;
    json devices = json::array();
    const auto get_count =
        reinterpret_cast<int (*)(unsigned*)>(dlsym(lib, "nvmlDeviceGetCount_v2"));
    const auto handle =
        reinterpret_cast<int (*)(unsigned, void**)>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
    if (get_count != nullptr && handle != nullptr && get_count(&count) == 0) {
        n["device_count"] = count;
        for (unsigned i = 0; i < count; ++i) {
            void* device = nullptr;
            if (const int r = handle(i, &device); r != 0) {
                devices.push_back({{"index", i}, {"error", nvml_error(lib, r)}});
                continue;
            }
            json dev = nvml_device(lib, device, nvml_error);
            dev["index"] = i;
            devices.push_back(std::move(dev));
        }
    }
    n["devices"] = devices;
    if (auto shutdown = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlShutdown")))
        shutdown();
    return n;
}

/// The folders the dynamic loader searches, in its order: LD_LIBRARY_PATH, then
/// /etc/ld.so.conf (with its includes), then the built-in system folders. Two copies of one
/// soname there (a pip wheel's cuDNN and the system's, two toolkits' runtimes) decide which
/// loads by this order alone.
std::vector<std::string> loader_folders() {
    std::vector<std::string> dirs;
    if (const char* path = std::getenv("LD_LIBRARY_PATH")) {
        std::string all = path;
        for (std::size_t start = 0; start <= all.size();) {
            const std::size_t colon = std::min(all.find(':', start), all.size());
            if (colon > start)
                dirs.push_back(all.substr(start, colon - start));
            start = colon + 1;
        }
    }
    std::vector<std::string> conf_files = {"/etc/ld.so.conf"};
    for (std::size_t i = 0; i < conf_files.size() && i < 256; ++i) {
        std::ifstream in(conf_files[i]);
        for (std::string line; std::getline(in, line);) {
            line = line.substr(0, line.find('#'));
            const auto first = line.find_first_not_of(" \t");
            if (first == std::string::npos)
                continue;
            line = line.substr(first, line.find_last_not_of(" \t\r") - first + 1);
            if (line.rfind("include", 0) == 0) {
                glob_t found{};
                const std::string pattern = line.substr(line.find_first_not_of(" \t", 7));
                if (glob(pattern.c_str(), 0, nullptr, &found) == 0)
                    for (std::size_t k = 0; k < found.gl_pathc; ++k)
                        conf_files.emplace_back(found.gl_pathv[k]);
                globfree(&found);
            } else if (line.front() == '/') {
                dirs.push_back(line);
            }
        }
    }
    for (const char* system :
         {"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
          "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"})
        dirs.emplace_back(system);
    return dirs;
}

/// Every copy of a CUDA library's soname (libcudart.so.13, libcudnn.so.9, ...) in the loader's
/// folders, in search order, with the version its file name carries. The same file reached
/// twice (a symlinked folder) counts once.
json loader_path_copies() {
    static const std::regex soname(
        R"(lib(cuda|cudart|cudnn|cublas|cublasLt|nvidia-ml|nvrtc)\.so\.[0-9]+)");
    std::map<std::string, json> by_soname;
    std::set<std::string> seen_files;
    std::set<std::string> seen_dirs;
    for (const auto& dir : loader_folders()) {
        char resolved_dir[PATH_MAX];
        if (realpath(dir.c_str(), resolved_dir) == nullptr ||
            !seen_dirs.insert(resolved_dir).second)
            continue;
        DIR* d = opendir(dir.c_str());
        if (d == nullptr)
            continue;
        std::vector<std::string> names;
        while (const dirent* e = readdir(d))
            if (std::regex_match(e->d_name, soname))
                names.emplace_back(e->d_name);
        closedir(d);
        std::sort(names.begin(), names.end());
        for (const auto& name : names) {
            std::string file = dir + "/";
            file += name;
            char resolved[PATH_MAX];
            if (realpath(file.c_str(), resolved) == nullptr || !seen_files.insert(resolved).second)
                continue;
            std::string real = resolved;
            const std::size_t so = real.rfind(".so.");
            json copy = {{"folder", pitfall::detail::valid_utf8(dir)},
                         {"file", pitfall::detail::valid_utf8(real)}};
            if (so != std::string::npos)
                copy["version"] = pitfall::detail::valid_utf8(real.substr(so + 4));
            by_soname[name].push_back(std::move(copy));
        }
    }
    json out = json::object();
    for (auto& [name, copies] : by_soname)
        out[name] = std::move(copies);
    return out;
}

/// OpenBLAS as the scenarios' CPU backend loads it (by its soname, which OpenBLAS keeps at
/// .so.0): its version and build, and the kernel type it chose for this CPU. With DYNAMIC_ARCH
/// (Debian's build) the kernels follow the CPU model, or OPENBLAS_CORETYPE where set: a
/// Haswell and a SkylakeX kernel are different speeds on the same machine.
json openblas_facts() {
    json b = {{"library", "libopenblas.so.0"}};
    void* lib = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
        b["load_error"] = dl_error_text("not found");
        return b;
    }
    using text_fn = char* (*)();
    using int_fn = int (*)();
    if (auto config = reinterpret_cast<text_fn>(dlsym(lib, "openblas_get_config")))
        b["config"] = pitfall::detail::valid_utf8(config());
    if (auto core = reinterpret_cast<text_fn>(dlsym(lib, "openblas_get_corename")))
        b["core"] = pitfall::detail::valid_utf8(core());
    if (auto threads = reinterpret_cast<int_fn>(dlsym(lib, "openblas_get_num_threads")))
        b["default_threads"] = threads();
    if (auto parallel = reinterpret_cast<int_fn>(dlsym(lib, "openblas_get_parallel"))) {
        const int mode = parallel();
        b["threading"] = mode == 0 ? "sequential" : mode == 1 ? "pthreads" : "openmp";
    }
    b["path"] = library_file(dlsym(lib, "openblas_get_config"));
    return b;
}

#if PITFALL_HAS_CUDA
/// cuBLAS opened by name, the major this build was compiled against (cuBLAS follows the
/// toolkit's major): a missing cuBLAS is then a fact, not a probe the loader will not start.
json cublas_facts() {
    const std::string soname = "libcublas.so." + std::to_string(CUDART_VERSION / 1000);
    json c = {{"library", soname}};
    void* lib = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
        c["load_error"] = dl_error_text("not found");
        return c;
    }
    c["path"] = library_file(dlsym(lib, "cublasCreate_v2"));
    return c;
}

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
            // Decides whether a second process (or any) may open a context: cudaComputeMode.
            int mode = -1;
            (void)cudaDeviceGetAttribute(&mode, cudaDevAttrComputeMode, d);
            const char* mode_name = mode == cudaComputeModeDefault            ? "default"
                                    : mode == cudaComputeModeProhibited       ? "prohibited"
                                    : mode == cudaComputeModeExclusiveProcess ? "exclusive_process"
                                                                              : "unknown";
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
                               {"compute_mode", mode_name},
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

int main() try {
    if (!pitfall::ensure_standard_descriptors()) // its answer goes to stdout: 1 must be a pipe's
        return 2;
    json out = {{"schema", "pitfall.probe/1"}, {"built_with_cuda", PITFALL_HAS_CUDA != 0}};
    // The driver first, by its own API: what the runtime's calls below answer follows from it.
    out["driver"] = driver_facts();
    out["nvml"] = nvml_facts();
    out["openblas"] = openblas_facts();
#if PITFALL_HAS_CUDA
    out["cuda"] = cuda_facts();
    out["cublas"] = cublas_facts();
#else
    out["cuda"] = {{"unavailable", "built without CUDA"}};
#endif
#if PITFALL_HAS_CUDNN
    out["cudnn"] = cudnn_facts();
#else
    out["cudnn"] = {{"unavailable", "built without cuDNN"}};
#endif
    out["loaded_libraries"] = loaded_libraries();
    out["loader_path_copies"] = loader_path_copies();
    out["loader_folders"] = loader_folders(); // stamped with a kept answer: see fingerprint.cpp
    std::cout << out.dump(2, ' ', false, json::error_handler_t::replace) << '\n';
    return 0;
} catch (const std::exception& e) { // a bug or the system (memory): said, and the harness
    std::cerr << "pitfall-probe: error: " << e.what() << '\n'; // records the probe as failed
    return 2;
}
