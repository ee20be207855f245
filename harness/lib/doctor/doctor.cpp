#include "doctor/doctor.hpp"

#include "pitfall/detail/fatbin.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <sstream>

namespace pitfall::runner {
using nlohmann::json;

const char* severity_name(finding_severity s) {
    switch (s) {
    case finding_severity::error: return "error";
    case finding_severity::warning: return "warning";
    case finding_severity::ok: break;
    }
    return "ok";
}

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

namespace {
constexpr const char* rules_doc = "docs/cuda-rules.md";

std::string rule_link(const char* anchor) {
    return std::string(rules_doc) + "#" + anchor;
}

// ---- reading the fingerprint: read, never trusted (a probe of another build may differ) ----
const json& at(const json& j, const char* key) {
    static const json none;
    return j.is_object() && j.contains(key) ? j[key] : none;
}
std::string text(const json& j, const std::string& fallback = "") {
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

/// The folder part of a path ("/usr/local/cuda/lib64/stubs/libcuda.so" -> ".../stubs").
std::string folder_of(const std::string& path) {
    const auto slash = path.rfind('/');
    return slash == std::string::npos ? "." : path.substr(0, slash);
}

/// The facts the rules read, taken once from the fingerprint.
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
    std::vector<std::string> env_set;          ///< "NAME=value" of the variables recorded

    explicit facts(const json& fp)
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
        if (const json& nodes = at(driver, "device_nodes"); nodes.is_array())
            for (const auto& n : nodes)
                device_nodes.push_back(text(n));
        physical_devices = integer(at(nvml, "device_count"));
        if (const json& devices = at(cuda, "devices"); devices.is_array())
            for (const auto& d : devices)
                device_names.push_back(text(at(d, "name"), "device") + " (" +
                                       text(at(d, "compute_capability"), "?") + ")");
    }
    bool driver_library_missing() const {
        return driver.is_object() && driver.contains("load_error");
    }
    std::optional<std::string> env(const char* name) const {
        if (environment.is_object() && environment.contains(name) && environment[name].is_string())
            return environment[name].get<std::string>();
        return std::nullopt;
    }
    std::string runtime_text() const {
        return runtime_version ? "CUDA " + cuda_version_text(*runtime_version) : "the CUDA runtime";
    }
    int runtime_major() const {
        return runtime_version ? static_cast<int>(*runtime_version / 1000) : 0;
    }
    std::string minimum_driver_text() const {
        const int branch = minimum_driver_branch(runtime_major());
        return branch > 0 ? runtime_text() + " needs driver >= " + std::to_string(branch) : "";
    }
};

using findings = std::vector<finding>;

finding make(const char* id, finding_severity severity, std::string title, std::string observed,
             std::string why, std::string fix, std::string reproduced_by, const char* anchor) {
    return {id,
            severity,
            std::move(title),
            std::move(observed),
            std::move(why),
            std::move(fix),
            std::move(reproduced_by),
            rule_link(anchor)};
}

// ---- the rules, one function each; each appends what it finds (nothing when it has no say) ----

void check_probe(const facts& f, findings& out) {
    if (f.probe_error.empty())
        return;
    std::string observed = "the probe (pitfall-probe) failed: " + f.probe_error;
    std::string fix = "run build/<preset>/bin/pitfall-probe by hand to see what stops it";
    const std::string marker = "error while loading shared libraries: ";
    if (const auto at_marker = f.probe_output.find(marker); at_marker != std::string::npos) {
        const std::string rest = f.probe_output.substr(at_marker + marker.size());
        const std::string library = rest.substr(0, rest.find(':'));
        observed += "; the loader said: " + rest.substr(0, rest.find('\n'));
        fix = "install " + library + " or put its folder on LD_LIBRARY_PATH";
    }
    out.push_back(make("probe-failed", finding_severity::error,
                       "the environment probe could not run: " + f.probe_error, observed,
                       "without the probe nothing about the driver, the devices or the libraries "
                       "is known, and every CUDA case is judged blind",
                       fix, "cuda.version_mismatch.missing_library", "missing-shared-library"));
}

void check_build(const facts& f, findings& out) {
    if (f.built_with_cuda || !f.probe_error.empty())
        return;
    out.push_back(
        make("built-without-cuda", finding_severity::warning,
             "this pitfall was built without CUDA: no CUDA case is built",
             "pitfall-probe reports built_with_cuda false (CMake found no CUDA toolkit, or "
             "PITFALL_ENABLE_CUDA=OFF); the driver checks below still apply",
             "only the CPU cases run; the GPU path of each scenario is not tested on this machine",
             "install the CUDA toolkit and configure with the default or ci preset", "",
             "compile-time-facts"));
}

/// The loader's trusted folders (ld.so(8)): searched after LD_LIBRARY_PATH and ld.so.cache
/// without being named anywhere, so a file there was put there, not pointed at.
bool is_system_library_folder(const std::string& folder) {
    for (const char* system :
         {"/lib", "/usr/lib", "/lib64", "/usr/lib64", "/lib/x86_64-linux-gnu",
          "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu"})
        if (folder == system)
            return true;
    return false;
}

/// What removes a stub driver: its folder off the search path, or, where the stub was
/// installed under the driver's own name in a system folder (an image built with the stubs
/// copied in), the file itself.
std::string stub_fix(const std::string& loaded_as) {
    const std::string folder = folder_of(loaded_as);
    if (is_system_library_folder(folder))
        return "delete " + loaded_as +
               ": the stub was installed there under the driver's name (reinstall the driver's "
               "libcuda1 / libnvidia-compute package, or in a container let the NVIDIA "
               "container toolkit mount the host's driver); never copy lib64/stubs into a "
               "system library folder";
    return "remove " + folder +
           " from LD_LIBRARY_PATH (and from /etc/ld.so.conf.d); never put lib64/stubs on the "
           "run-time path";
}

/// The driver: missing, the stub, present without a device, or unable to start.
void check_driver_library(const facts& f, findings& out) {
    if (!f.driver.is_object())
        return;
    const std::string runtime_needs = f.minimum_driver_text();
    if (f.driver_library_missing()) {
        const std::string loader_words = text(at(f.driver, "load_error"));
        std::string observed = "dlopen(\"libcuda.so.1\"): " + loader_words;
        observed += f.kernel_module.empty()
                        ? "; no NVIDIA kernel module (/proc/driver/nvidia/version absent)"
                        : "; kernel module " + f.kernel_module + " loaded";
        if (!f.cuda_error.empty())
            observed += "; cudaGetDeviceCount: " + f.cuda_error;
        if (f.in_container && (!f.device_nodes.empty() || f.env("NVIDIA_VISIBLE_DEVICES"))) {
            out.push_back(make(
                "container-without-toolkit", finding_severity::error,
                "GPU devices were passed into this container but not the driver's libraries "
                "(libcuda.so.1 not found)",
                observed + "; device nodes: " +
                    (f.device_nodes.empty() ? std::string("none") : f.device_nodes.front() + "..."),
                "the NVIDIA Container Toolkit mounts the host driver's user-mode libraries "
                "(libcuda.so.1, libnvidia-ml.so.1) into the container with the devices; without "
                "them every CUDA call answers cudaErrorInsufficientDriver",
                "start the container through the NVIDIA Container Toolkit (podman: --device "
                "nvidia.com/gpu=all with a CDI spec from `nvidia-ctk cdi generate`; docker: "
                "--gpus all), not with bare --device /dev/nvidia*",
                "cuda.version_mismatch.runtime_vs_driver", "containers"));
            return;
        }
        const int branch = minimum_driver_branch(f.runtime_major());
        const std::string driver_wanted =
            branch > 0 ? "a driver of branch " + std::to_string(branch) + " or newer"
                       : "an NVIDIA driver";
        std::string title = "no NVIDIA driver (libcuda.so.1 not found)";
        if (!runtime_needs.empty())
            title += "; " + runtime_needs;
        std::string fix =
            !f.kernel_module.empty()
                ? "the kernel module is loaded but its user-mode library is not on "
                  "the loader's path: reinstall the driver's libraries (libcuda.so.1) "
                  "or add their folder to /etc/ld.so.conf.d and run ldconfig"
            : f.in_container
                ? "give the host an NVIDIA GPU and " + driver_wanted +
                      ", and start this container through the NVIDIA Container Toolkit "
                      "(podman: --device nvidia.com/gpu=all; docker: --gpus all)"
                : "install the NVIDIA driver" +
                      (runtime_needs.empty()
                           ? std::string()
                           : " (branch " +
                                 std::to_string(minimum_driver_branch(f.runtime_major())) +
                                 " or newer)") +
                      " on a machine with an NVIDIA GPU";
        out.push_back(make("no-driver", finding_severity::error, title, observed,
                           "every CUDA call answers cudaErrorInsufficientDriver (35): no CUDA work "
                           "reaches a GPU (a CUDA case ends UNSUPPORTED, or PASS where its "
                           "baseline expects exactly this error)",
                           fix, "cuda.version_mismatch.runtime_vs_driver", "no-driver"));
        return;
    }
    const bool stub = f.libcuda_path.find("/stubs/") != std::string::npos ||
                      f.cu_init == "CUDA_ERROR_STUB_LIBRARY" || f.cu_init == "CUresult 34" ||
                      f.cuda_error == "cudaErrorStubLibrary";
    if (stub) {
        const std::string as = f.libcuda_loaded_as.empty() ? f.libcuda_path : f.libcuda_loaded_as;
        out.push_back(make(
            "stub-driver", finding_severity::error,
            "the CUDA toolkit's stub libcuda.so is loaded as the driver (" + as + ")",
            "libcuda.so.1 resolves to " + f.libcuda_path +
                " (a link-time stub); cuInit: " + (f.cu_init.empty() ? "?" : f.cu_init) +
                (f.cuda_error.empty() ? "" : "; cudaGetDeviceCount: " + f.cuda_error),
            "the stub exists only so programs can link without a driver; loaded at run time it "
            "answers every call with cudaErrorStubLibrary (34), so no CUDA work runs, whatever "
            "driver the machine has",
            stub_fix(as), "cuda.version_mismatch.stub_driver", "stub-libcuda"));
        return;
    }
    const bool no_device = f.cu_init == "CUDA_ERROR_NO_DEVICE" || f.cu_init == "CUresult 100" ||
                           f.cuda_error == "cudaErrorNoDevice";
    if (no_device) {
        const auto visible = f.env("CUDA_VISIBLE_DEVICES");
        if (visible && visible->empty())
            return; // check_visible_devices names the cause
        std::string observed = "libcuda.so.1 (" + f.libcuda_path +
                               ") loads; cuInit: " + (f.cu_init.empty() ? "?" : f.cu_init);
        observed += f.kernel_module.empty() ? "; no NVIDIA kernel module loaded"
                                            : "; kernel module " + f.kernel_module;
        observed += f.device_nodes.empty() ? "; no /dev/nvidia* device nodes" : "";
        out.push_back(make(
            "no-device", finding_severity::error,
            "the NVIDIA driver library is here but no GPU is (cudaErrorNoDevice)", observed,
            "a user-mode driver without a kernel module or device (a driver package installed in "
            "a container or on a machine without a GPU) answers cudaErrorNoDevice (100) instead "
            "of cudaErrorInsufficientDriver; no CUDA case can run",
            f.in_container ? "pass the GPU into the container through the NVIDIA Container Toolkit "
                             "(podman: --device nvidia.com/gpu=all), which also mounts the host's "
                             "matching libcuda"
                           : "check that the GPU is seen by the kernel (lspci, dmesg) and that the "
                             "nvidia kernel module is loaded (modprobe nvidia)",
            "cuda.device_visibility.reproduce_empty_visible_devices", "libcuda-without-device"));
        return;
    }
    for (const auto& [name, number, why] :
         {std::tuple<const char*, const char*, const char*>{
              "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "803",
              "the user-mode driver (libcuda, often a cuda-compat copy) and the kernel module are "
              "of releases that do not work together"},
          {"CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", "804",
           "forward compatibility (cuda-compat) is supported on data-center GPUs, select NGC-ready "
           "RTX boards and Jetson only"}})
        if (f.cu_init == name || f.cu_init == std::string("CUresult ") + number)
            out.push_back(make("driver-init-failed", finding_severity::error,
                               std::string("the driver refuses to start: ") + name,
                               "cuInit: " + f.cu_init + "; libcuda " + f.libcuda_path +
                                   "; kernel module " +
                                   (f.kernel_module.empty() ? "none" : f.kernel_module),
                               why,
                               "remove the cuda-compat folder from the loader's path (or install "
                               "the compat package that matches this kernel module), or upgrade "
                               "the driver",
                               "cuda.version_mismatch.runtime_vs_driver", "forward-compatibility"));
}

bool is_data_center_part(const std::string& name) {
    // NVIDIA's data-center product names (and Jetson): the parts forward compatibility covers.
    for (const char* part :
         {"Tesla", "A100", "A800", "A30",   "A40",  "A10", "A16",    "A2",   "H100",
          "H200",  "H800", "H20",  "GH200", "L4",   "L40", "L20",    "B100", "B200",
          "GB200", "B300", "T4",   "V100",  "P100", "P40", "Jetson", "Orin", "Thor"})
        if (name.find(part) != std::string::npos)
            return true;
    return false;
}

/// Driver vs runtime: minor-version compatibility within a major, forward compatibility through
/// cuda-compat across majors, otherwise "insufficient".
void check_driver_version(const facts& f, findings& out) {
    if (!f.runtime_version || !f.driver_version || *f.driver_version <= 0)
        return;
    if (!f.probe_error.empty() || f.driver_library_missing())
        return;
    const long long runtime = *f.runtime_version;
    const long long driver = *f.driver_version;
    const std::string runtime_text = cuda_version_text(runtime);
    const std::string driver_cuda = cuda_version_text(driver);
    const std::string branch = f.user_mode_driver.empty() ? "" : " " + f.user_mode_driver;
    const bool compat = f.libcuda_path.find("/compat/") != std::string::npos;
    std::string observed = "CUDA runtime " + runtime_text + " (cudaRuntimeGetVersion " +
                           std::to_string(runtime) + "); driver" + branch + " supports CUDA " +
                           driver_cuda + " (cudaDriverGetVersion " + std::to_string(driver) + ")";
    if (!f.kernel_module.empty())
        observed += "; kernel module " + f.kernel_module;
    if (compat) {
        observed += "; libcuda from a forward-compatibility package: " + f.libcuda_path;
        std::vector<std::string> consumer;
        for (const auto& d : f.device_names)
            if (!is_data_center_part(d))
                consumer.push_back(d);
        // NVIDIA's table of cuda-compat packages per kernel-module branch: cuda-compat-13-* is
        // supported over the 535 and 570 branches (580 and newer need no compat package); a
        // branch not in the table (550) is end of life and has none.
        const int module_branch = branch_of(f.kernel_module);
        if (driver / 1000 == 13 && module_branch > 0 && module_branch < 580 &&
            module_branch != 535 && module_branch != 570) {
            out.push_back(make(
                "compat-unsupported", finding_severity::error,
                "cuda-compat for CUDA " + driver_cuda + " over kernel module branch " +
                    std::to_string(module_branch) + ", which NVIDIA does not support",
                observed,
                "cuda-compat-13-* is supported over kernel-module branches 535 and 570 only; "
                "other branches before 580 are end of life and the pair may answer "
                "cudaErrorSystemDriverMismatch (803)",
                "move the kernel module to branch 535, 570 or 580+ (580+ needs no compat package)",
                "cuda.version_mismatch.runtime_vs_driver", "forward-compatibility"));
            return;
        }
        if (!consumer.empty()) {
            out.push_back(make(
                "compat-unsupported", finding_severity::error,
                "forward compatibility (cuda-compat) on a GPU it does not support: " +
                    consumer.front(),
                observed,
                "cuda-compat runs a newer CUDA over an older kernel module on data-center GPUs, "
                "select NGC-ready RTX boards and Jetson only; elsewhere the driver answers "
                "cudaErrorCompatNotSupportedOnDevice (804)",
                "upgrade the driver to branch " +
                    std::to_string(minimum_driver_branch(f.runtime_major())) +
                    " or newer and remove the compat folder from the loader's path",
                "cuda.version_mismatch.runtime_vs_driver", "forward-compatibility"));
            return;
        }
        out.push_back(make("forward-compat", finding_severity::ok,
                           "CUDA " + runtime_text +
                               " runs through forward compatibility over kernel module " +
                               (f.kernel_module.empty() ? std::string("?") : f.kernel_module),
                           observed,
                           "supported on data-center GPUs: the compat package's libcuda must be "
                           "newer than the kernel module and from a release NVIDIA supports on "
                           "that branch; a few features (e.g. some interop) are not available",
                           "", "cuda.version_mismatch.runtime_vs_driver", "forward-compatibility"));
        return;
    }
    if (driver / 1000 < runtime / 1000) {
        const int need = minimum_driver_branch(static_cast<int>(runtime / 1000));
        out.push_back(make(
            "driver-too-old", finding_severity::error,
            "the driver" + branch + " (CUDA " + driver_cuda + ") is older than the CUDA " +
                runtime_text + " runtime" +
                (need > 0 ? "; CUDA " + runtime_text + " needs driver >= " + std::to_string(need)
                          : ""),
            observed,
            "a driver runs runtimes of its own CUDA major and older; a newer major answers "
            "cudaErrorInsufficientDriver (35) at the first call",
            "upgrade the driver" +
                (need > 0 ? " to branch " + std::to_string(need) + " or newer" : std::string()) +
                "; on a data-center GPU, or install the cuda-compat package of this CUDA "
                "release; or build with a CUDA " +
                std::to_string(driver / 1000) + ".x toolkit",
            "cuda.version_mismatch.runtime_vs_driver", "driver-minimum-versions"));
        return;
    }
    if (driver < runtime) {
        out.push_back(make(
            "minor-version-compat", finding_severity::warning,
            "CUDA " + runtime_text + " runs on a CUDA " + driver_cuda +
                " driver under minor-version compatibility",
            observed,
            "within one major a newer runtime runs on an older driver, but an API newer than the "
            "driver answers cudaErrorCallRequiresNewerDriver (36) and PTX from the newer "
            "toolkit cannot be JIT-compiled (cudaErrorUnsupportedPtxVersion, 222)",
            "upgrade the driver to one that supports CUDA " + runtime_text +
                " to have every feature; SASS for each GPU avoids the PTX limit",
            "cuda.version_mismatch.runtime_vs_driver", "driver-minimum-versions"));
        return;
    }
    out.push_back(make(
        "driver", finding_severity::ok,
        "driver" + branch + " supports CUDA " + driver_cuda + " >= runtime " + runtime_text,
        observed, "", "", "cuda.version_mismatch.runtime_vs_driver", "driver-minimum-versions"));
}

/// CUDA_VISIBLE_DEVICES: empty hides every device; CUDA stops at the first entry it cannot
/// match, so an index past the last GPU hides it and everything after it.
void check_visible_devices(const facts& f, findings& out) {
    const auto value = f.env("CUDA_VISIBLE_DEVICES");
    if (!value)
        return;
    const std::string observed_prefix = "CUDA_VISIBLE_DEVICES='" + *value + "'";
    if (value->find_first_not_of(" \t") == std::string::npos) {
        out.push_back(make(
            "visible-devices-empty", finding_severity::error,
            "CUDA_VISIBLE_DEVICES is set but empty: it hides every GPU",
            observed_prefix + (f.cuda_error.empty() ? "" : "; cudaGetDeviceCount: " + f.cuda_error),
            "an empty list is not 'no restriction': CUDA sees no device and answers "
            "cudaErrorNoDevice (100); frameworks may then fall back to the CPU "
            "without a word",
            "unset CUDA_VISIBLE_DEVICES, or list the GPUs to use (0,1 or GPU-<uuid>)",
            "cuda.device_visibility.reproduce_empty_visible_devices", "cuda-visible-devices"));
        return;
    }
    std::vector<std::string> entries;
    for (std::size_t start = 0; start <= value->size();) {
        const std::size_t comma = std::min(value->find(',', start), value->size());
        entries.push_back(value->substr(start, comma - start));
        start = comma + 1;
    }
    bool mig = false;
    for (std::size_t i = 0; i < entries.size(); ++i) {
        const std::string& e = entries[i];
        mig = mig || e.rfind("MIG-", 0) == 0;
        const bool index = !e.empty() && e.find_first_not_of("0123456789") == std::string::npos;
        const bool uuid = e.rfind("GPU-", 0) == 0 || e.rfind("MIG-", 0) == 0;
        std::string problem;
        if (!index && !uuid)
            problem = "'" + e + "' is neither a device index nor a GPU-/MIG- UUID";
        else if (index && f.physical_devices && e.size() < 10 &&
                 std::stoll(e) >= *f.physical_devices)
            problem = "index " + e + " is past the last GPU (NVML counts " +
                      std::to_string(*f.physical_devices) + ")";
        if (problem.empty())
            continue;
        std::string observed = observed_prefix;
        observed.append("; ").append(problem);
        out.push_back(make(
            "visible-devices-invalid", i == 0 ? finding_severity::error : finding_severity::warning,
            "CUDA_VISIBLE_DEVICES hides " +
                std::string(i == 0 ? "every GPU"
                                   : "the GPUs from entry " + std::to_string(i + 1) + " on") +
                ": " + problem,
            std::move(observed),
            "CUDA reads the list up to the first entry it cannot match and ignores "
            "the rest, so a typo or a stale index silently removes GPUs "
            "(cudaErrorNoDevice when none is left)",
            "list only existing indices or UUIDs (nvidia-smi -L)",
            "cuda.device_visibility.reproduce_ordinal_past_last", "cuda-visible-devices"));
        break;
    }
    if (mig)
        out.push_back(
            make("visible-devices-mig", finding_severity::warning,
                 "CUDA_VISIBLE_DEVICES names a MIG instance: this process sees one GPU slice",
                 observed_prefix,
                 "a CUDA process enumerates a single MIG instance (the first usable "
                 "entry): a multi-GPU case sees one device and memory limits are the "
                 "slice's, not the GPU's",
                 "expected for MIG; list one MIG UUID per process",
                 "cuda.multi_gpu_distribution.remedy", "cuda-visible-devices"));
}

void check_device_order(const facts& f, findings& out) {
    const long long gpus =
        f.physical_devices.value_or(static_cast<long long>(f.device_names.size()));
    if (gpus < 2)
        return;
    const auto order = f.env("CUDA_DEVICE_ORDER");
    if (order && *order == "PCI_BUS_ID")
        return;
    out.push_back(make(
        "device-order", finding_severity::warning,
        "CUDA numbers these " + std::to_string(gpus) + " GPUs fastest first, nvidia-smi by PCI bus",
        "CUDA_DEVICE_ORDER " +
            (order ? "= '" + *order + "'" : std::string("unset (FASTEST_FIRST)")),
        "with mixed GPUs CUDA's device 0 may not be nvidia-smi's GPU 0: CUDA_VISIBLE_DEVICES "
        "indices and per-device monitoring then name different GPUs",
        "export CUDA_DEVICE_ORDER=PCI_BUS_ID", "cuda.device_visibility.remedy_explicit_device",
        "cuda-device-order"));
}

void check_cublas(const facts& f, findings& out) {
    const json& cublas = at(f.libraries, "cublas");
    if (!cublas.is_object())
        return;
    if (cublas.contains("load_error"))
        out.push_back(
            make("cublas-missing", finding_severity::error,
                 "cuBLAS (" + text(at(cublas, "library")) + ") is not on the loader's path",
                 "dlopen: " + text(at(cublas, "load_error")),
                 "the scenario programs open cuBLAS on first call: every CUDA case that "
                 "calls it fails there (host error library_not_loaded, in these words)",
                 "install the CUDA math libraries of this release (libcublas) or add "
                 "their folder to LD_LIBRARY_PATH",
                 "cuda.version_mismatch.missing_library", "cublas"));
}

void check_cudnn(const facts& f, findings& out) {
    if (!f.cudnn.is_object() || f.cudnn.contains("unavailable"))
        return;
    if (f.cudnn.contains("load_error")) {
        out.push_back(
            make("cudnn-missing", finding_severity::warning,
                 "cuDNN is not on the loader's path: the cuDNN cases cannot run",
                 "dlopen: " + text(at(f.cudnn, "load_error")),
                 "programs that link cuDNN stop before main (exit 127); those that open "
                 "it at run time fail their first cuDNN call",
                 "install cuDNN " +
                     cudnn_version_text(integer(at(f.cudnn, "compiled_version")).value_or(0)) +
                     " or newer of the same major, or add its folder to LD_LIBRARY_PATH",
                 "cuda.version_mismatch.missing_library", "cudnn-version-rule"));
        return;
    }
    const auto built = integer(at(f.cudnn, "compiled_version"));
    const auto loaded = integer(at(f.cudnn, "loaded_version"));
    if (built && loaded) {
        const std::string b = cudnn_version_text(*built), l = cudnn_version_text(*loaded);
        const auto major = [](long long v) { return v >= 90000 ? v / 10000 : v / 1000; };
        const auto minor = [](long long v) {
            return v >= 90000 ? v % 10000 / 100 : v % 1000 / 100;
        };
        std::string observed = "built against " + b + ", loaded " + l + " from " +
                               text(at(f.cudnn, "loaded_from"), "?");
        if (major(*built) != major(*loaded) || minor(*loaded) < minor(*built))
            out.push_back(
                make("cudnn-version", finding_severity::error,
                     "cuDNN " + l + " is loaded but this build needs " + b +
                         (major(*built) != major(*loaded) ? " (another major)" : " or newer"),
                     observed,
                     "cuDNN promises nothing across majors, and within one only that a "
                     "newer minor runs what an older one built: an older loaded cuDNN may "
                     "lack engines or symbols the build uses",
                     "put cuDNN " + b + " or a newer " + std::to_string(major(*built)) +
                         ".x first on the loader's path (a pip wheel's folder or the "
                         "system's), or rebuild against the cuDNN you load",
                     "cuda.version_mismatch.cudnn_compiled_vs_loaded", "cudnn-version-rule"));
        else
            out.push_back(make("cudnn-version", finding_severity::ok,
                               "cuDNN " + l + " loaded, built against " + b, observed, "", "",
                               "cuda.version_mismatch.cudnn_compiled_vs_loaded",
                               "cudnn-version-rule"));
    }
    std::vector<std::string> failed;
    if (const json& sub = at(f.cudnn, "sublibrary_checks"); sub.is_object())
        for (const auto& [name, answer] : sub.items())
            if (text(answer).rfind("CUDNN_STATUS_SUCCESS", 0) != 0)
                failed.push_back(name + ": " + text(answer, "?"));
    if (!failed.empty()) {
        std::string observed;
        for (const auto& s : failed)
            observed += (observed.empty() ? "" : "; ") + s;
        out.push_back(make(
            "cudnn-mixed", finding_severity::error,
            "cuDNN's sub-libraries are of different releases (" + failed.front() + ")", observed,
            "cuDNN 9 loads its sub-libraries (graph, ops, cnn, adv, engines) by "
            "name; copies from two installs (a pip wheel and the system) fail the "
            "version checks (CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH) or abort the "
            "process",
            "keep one cuDNN on the loader's path: remove the other copy's folder "
            "from LD_LIBRARY_PATH",
            "cuda.version_mismatch.cudnn_compiled_vs_loaded", "cudnn-sub-libraries"));
    }
}

/// Two copies of one soname on the loader's path: which loads depends on the order alone.
void check_loader_copies(const facts& f, findings& out) {
    const json& copies = at(f.libraries, "loader_path_copies");
    if (!copies.is_object())
        return;
    for (const auto& [soname, list] : copies.items()) {
        if (!list.is_array() || list.size() < 2)
            continue;
        std::set<std::string> versions;
        std::string observed;
        for (const auto& c : list) {
            versions.insert(text(at(c, "version"), "?"));
            observed += (observed.empty() ? "" : "; then ") + text(at(c, "file"), "?") + " (in " +
                        text(at(c, "folder"), "?") + ")";
        }
        const bool runtime = soname.rfind("libcudart", 0) == 0;
        out.push_back(
            make("duplicate-library",
                 versions.size() > 1 ? finding_severity::warning : finding_severity::ok,
                 std::to_string(list.size()) + " copies of " + soname + " on the loader's path" +
                     (versions.size() > 1 ? " (versions differ)" : ""),
                 "first found, and loaded: " + observed,
                 std::string(runtime ? "two CUDA runtimes: " : "") +
                     "the first folder in LD_LIBRARY_PATH / ld.so.conf order wins; another "
                     "program, or another sub-library, may load the other copy (a pip wheel's "
                     "cuDNN beside the system's is the usual case)",
                 "keep one copy on the loader's path, or make sure the one you mean comes first",
                 "cuda.version_mismatch.cudnn_compiled_vs_loaded", "duplicate-libraries"));
    }
}

/// NVML's view of each GPU: memory already held, compute mode, MIG, persistence, ECC, clocks.
void check_nvml_device(const json& dev, findings& out) {
    const std::string name =
        text(at(dev, "name"), "GPU " + std::to_string(integer(at(dev, "index")).value_or(0)));
    const json& memory = at(dev, "memory");
    const auto total = integer(at(memory, "total_bytes"));
    const auto used = integer(at(memory, "used_bytes"));
    const auto processes = integer(at(dev, "compute_processes"));
    if (total && used && *total > 0 && (*used * 10 > *total || processes.value_or(0) > 0)) {
        std::ostringstream observed;
        observed << (*used >> 20) << " MiB of " << (*total >> 20) << " MiB in use";
        if (processes)
            observed << " by " << *processes << " compute process(es)";
        out.push_back(
            make("memory-in-use", finding_severity::warning,
                 name + ": memory is already held by other processes (" + observed.str() + ")",
                 observed.str(),
                 "cases that size their data by the GPU's total memory meet "
                 "cudaErrorMemoryAllocation sooner, and timings share the GPU",
                 "stop the other processes (nvidia-smi lists them) or give pitfall a GPU of "
                 "its own",
                 "cuda.memory_growth.reproduce", "other-processes"));
    }
    if (const auto mode = integer(at(dev, "compute_mode")); mode && *mode != 0) {
        // Exclusive_Process with a process already there refuses this one outright.
        const bool refused =
            *mode == 2 || (*mode == 3 && integer(at(dev, "compute_processes")).value_or(0) > 0);
        const std::string mode_name = *mode == 2   ? "Prohibited"
                                      : *mode == 3 ? "Exclusive_Process"
                                                   : "Exclusive_Thread";
        out.push_back(
            make("compute-mode", refused ? finding_severity::error : finding_severity::warning,
                 name + ": compute mode " + mode_name +
                     (refused && *mode == 3 ? ", and another process holds the GPU" : ""),
                 "nvmlDeviceGetComputeMode: " + std::to_string(*mode) + "; compute processes: " +
                     std::to_string(integer(at(dev, "compute_processes")).value_or(0)),
                 *mode == 2 ? "no process may create a CUDA context on this GPU"
                            : "one process at a time: a second process (memory_growth's "
                              "helper, a parallel case) fails with cudaErrorDevicesUnavailable",
                 "nvidia-smi -c DEFAULT (as root) for shared use",
                 "cuda.memory_growth.second_process", "compute-mode"));
    }
    const json& mig = at(dev, "mig_mode");
    if (integer(at(mig, "current")).value_or(0) == 1 ||
        integer(at(mig, "pending")) != integer(at(mig, "current")))
        out.push_back(make(
            "mig-mode", finding_severity::warning,
            name + ": MIG mode is " +
                (integer(at(mig, "current")).value_or(0) == 1 ? "on" : "changing (reset pending)"),
            "nvmlDeviceGetMigMode: current " +
                std::to_string(integer(at(mig, "current")).value_or(-1)) + ", pending " +
                std::to_string(integer(at(mig, "pending")).value_or(-1)),
            "with MIG on, CUDA sees MIG instances, not the whole GPU: name one with "
            "CUDA_VISIBLE_DEVICES=MIG-<uuid>; memory and SM counts are the slice's",
            "expected on a MIG-partitioned GPU; otherwise nvidia-smi -mig 0 and a GPU reset",
            "cuda.device_visibility.helper_count_devices", "mig-mode"));
    if (at(dev, "persistence_mode").is_boolean() && !flag(at(dev, "persistence_mode")))
        out.push_back(make("persistence-off", finding_severity::warning,
                           name + ": persistence mode is off",
                           "nvmlDeviceGetPersistenceMode: disabled",
                           "the driver tears the GPU's state down when no process holds it, so "
                           "every case's first CUDA call pays its initialisation (up to seconds) "
                           "and short timings include it",
                           "run nvidia-persistenced (or nvidia-smi -pm 1 as root)",
                           "cuda.batch_size_one.reproduce", "persistence-mode"));
    // A remap failure or a page retirement pending after uncorrectable errors stops trust in
    // the GPU; a pending row remapping alone lets work go on until a reset applies it.
    const json& rows = at(dev, "remapped_rows");
    const bool failed = flag(at(rows, "failure"));
    const bool retiring = flag(at(dev, "retired_pages_pending"));
    if (failed || retiring || flag(at(rows, "pending")))
        out.push_back(make(
            "memory-errors",
            failed || retiring ? finding_severity::error : finding_severity::warning,
            name + (failed     ? ": row remapping failed"
                    : retiring ? ": memory pages wait to be retired (reset needed)"
                               : ": a row remapping waits for a GPU reset"),
            std::string("retired pages pending: ") + (retiring ? "yes" : "no") +
                "; remapped rows pending: " + (flag(at(rows, "pending")) ? "yes" : "no") +
                "; remap failure: " + (failed ? "yes" : "no"),
            failed || retiring ? "uncorrectable memory errors were found: until a reset retires "
                                 "the pages, results on this GPU cannot be trusted"
                               : "memory rows were marked for remapping after errors; the "
                                 "remap takes effect at the next GPU reset",
            failed ? "take the GPU out of service and have it replaced"
                   : "drain the GPU and reset it (nvidia-smi -r) or reboot",
            "", "ecc-and-retired-pages"));
    if (const auto reasons = integer(at(dev, "clocks_throttle_reasons"))) {
        // nvml.h's clocks event reasons: 0x8 HW slowdown, 0x20 SW thermal, 0x40 HW thermal,
        // 0x80 HW power brake. Idle (0x1) and the power cap (0x4) are normal at rest.
        std::string names;
        for (const auto& [bit, what] : {std::pair<long long, const char*>{0x8, "HW slowdown"},
                                        {0x20, "SW thermal slowdown"},
                                        {0x40, "HW thermal slowdown"},
                                        {0x80, "HW power brake"}})
            if ((*reasons & bit) != 0)
                names += (names.empty() ? "" : ", ") + std::string(what);
        if (!names.empty())
            out.push_back(
                make("clocks-slowed", finding_severity::warning,
                     name + ": clocks are being slowed (" + names + ")",
                     "nvmlDeviceGetCurrentClocksThrottleReasons: " + std::to_string(*reasons) +
                         "; SM clock " +
                         std::to_string(integer(at(dev, "sm_clock_mhz")).value_or(0)) + " of " +
                         std::to_string(integer(at(dev, "sm_clock_max_mhz")).value_or(0)) + " MHz",
                     "timings taken now are slower than this GPU's normal: a timing "
                     "verdict would blame the code for the machine",
                     "check cooling and power (nvidia-smi -q -d PERFORMANCE) before "
                     "timing anything",
                     "", "clock-event-reasons"));
    }
}

void check_nvml(const facts& f, findings& out) {
    if (!f.nvml.is_object())
        return;
    if (f.nvml.contains("load_error") || f.nvml.contains("init_error")) {
        if (f.cu_init != "CUDA_SUCCESS")
            return; // no working driver: no-driver, stub-driver or no-device says why
        out.push_back(make("no-nvml", finding_severity::warning,
                           "NVML (libnvidia-ml.so.1) could not be used: the GPUs' state is unknown",
                           text(at(f.nvml, "load_error"), text(at(f.nvml, "init_error"))),
                           "memory held by other processes, compute and MIG modes, ECC and clocks "
                           "cannot be checked; NVML ships with the driver, so a missing one often "
                           "means a partial driver install or a container without the toolkit",
                           "install the driver's NVML library of the same version as libcuda", "",
                           "nvml"));
        return;
    }
    if (const json& devices = at(f.nvml, "devices"); devices.is_array())
        for (const auto& dev : devices)
            check_nvml_device(dev, out);
}

void check_pageable_memory(const facts& f, findings& out) {
    const json& devices = at(f.cuda, "devices");
    if (!devices.is_array())
        return;
    for (const auto& d : devices) {
        const json& pageable = at(d, "pageable_memory_access");
        if (!pageable.is_boolean())
            continue;
        const bool yes = pageable.get<bool>();
        out.push_back(make(
            "pageable-memory", finding_severity::ok,
            text(at(d, "name"), "device") +
                (yes ? ": kernels may read pageable host memory (HMM/ATS)"
                     : ": kernels cannot touch pageable host memory (no HMM/ATS)"),
            "cudaDevAttrPageableMemoryAccess = " + std::string(yes ? "1" : "0"),
            yes ? "a host pointer passed to a kernel works here but faults "
                  "(cudaErrorIllegalAddress) on machines without HMM/ATS"
                : "a host pointer passed to a kernel faults with "
                  "cudaErrorIllegalAddress, a sticky error that ends the process's CUDA",
            "", "cuda.host_only_custom_op.reproduce_kernel_host_data", "pageable-memory-access"));
    }
}

const char* variant_name(detail::arch_variant v) {
    switch (v) {
    case detail::arch_variant::arch_specific: return "arch_specific";
    case detail::arch_variant::family: return "family";
    case detail::arch_variant::plain: break;
    }
    return "plain";
}

/// The images of build_images() back, as the prediction rules take them; nullopt where the
/// facts are not such a list.
std::optional<std::vector<detail::fatbin_image>> images_of(const json& program) {
    const json& list = at(program, "images");
    if (!list.is_array())
        return std::nullopt;
    std::vector<detail::fatbin_image> images;
    for (const auto& i : list) {
        detail::fatbin_image img;
        img.kind =
            text(at(i, "kind")) == "ptx" ? detail::image_kind::ptx : detail::image_kind::sass;
        img.arch = static_cast<unsigned>(integer(at(i, "arch")).value_or(0));
        const std::string variant = text(at(i, "variant"));
        img.variant = variant == "arch_specific" ? detail::arch_variant::arch_specific
                      : variant == "family"      ? detail::arch_variant::family
                                                 : detail::arch_variant::plain;
        img.version_major = static_cast<unsigned>(integer(at(i, "version_major")).value_or(0));
        img.version_minor = static_cast<unsigned>(integer(at(i, "version_minor")).value_or(0));
        img.container = static_cast<unsigned>(integer(at(i, "container")).value_or(0));
        if (img.arch == 0 || img.arch > 10000)
            return std::nullopt;
        images.push_back(img);
    }
    return images;
}

/// This build's SASS and PTX against each device CUDA sees: a program none of whose images a
/// device can run (per translation unit: a kernel runs only from its own container's images)
/// fails its first launch there.
void check_kernel_images(const facts& f, findings& out) {
    const json& programs = at(f.fingerprint, "build_images");
    if (!programs.is_object() || programs.empty())
        return;
    const bool force_jit = f.env("CUDA_FORCE_PTX_JIT").value_or("0") == "1";
    const bool no_jit = f.env("CUDA_DISABLE_PTX_JIT").value_or("0") == "1";
    const int driver = static_cast<int>(f.driver_version.value_or(0));
    std::map<std::string, std::vector<std::string>> embedded; // image name -> programs
    struct device_view {
        std::string name;
        unsigned cc;
    };
    std::vector<device_view> devices;
    if (const json& list = at(f.cuda, "devices"); list.is_array())
        for (const auto& d : list)
            if (const auto cc = detail::parse_compute_capability(text(at(d, "compute_capability"))))
                devices.push_back({text(at(d, "name"), "device"), *cc});
    for (const auto& device : devices) {
        std::string failing, jitted, error = "cudaErrorNoKernelImageForDevice";
        std::size_t checked = 0;
        for (const auto& [program, facts_of] : programs.items()) {
            const auto images = images_of(facts_of);
            if (!images || images->empty())
                continue;
            ++checked;
            std::map<unsigned, std::vector<detail::fatbin_image>> containers;
            for (const auto& img : *images)
                containers[img.container].push_back(img);
            for (const auto& [container, held] : containers) {
                const auto p = detail::predict_image(held, device.cc, driver, force_jit, no_jit);
                if (p.how == detail::image_path::no_image) {
                    failing += (failing.empty() ? "" : "; ") + program + ": " + p.reason;
                    error = p.error.empty() ? error : p.error;
                    break;
                }
                if (p.how == detail::image_path::ptx_jit &&
                    jitted.find(program) == std::string::npos)
                    jitted += (jitted.empty() ? "" : ", ") + program;
            }
        }
        if (checked == 0)
            return;
        const std::string where = device.name + " (" + detail::cc_text(device.cc) + ")";
        std::string title = "this build has no image " + where;
        title.append(" can run (").append(error).append(")");
        if (!failing.empty())
            out.push_back(
                make(error == "cudaErrorUnsupportedPtxVersion" ? "ptx-too-new" : "no-kernel-image",
                     finding_severity::error, std::move(title), failing,
                     "the first kernel launch fails with " + error +
                         " (with lazy loading, at the launch, not at start-up)",
                     "rebuild with this architecture in CMAKE_CUDA_ARCHITECTURES (" +
                         std::to_string(device.cc) + "-real, or " + std::to_string(device.cc) +
                         "-virtual for PTX), or upgrade "
                         "the driver where only the PTX ISA is too new",
                     "cuda.version_mismatch.arch_coverage", "binary-compatibility"));
        else if (!jitted.empty())
            out.push_back(
                make("ptx-jit", finding_severity::warning,
                     where + " runs this build by PTX JIT (no SASS for it)",
                     "JIT-compiled at the first launch: " + jitted,
                     "the first launch of each kernel compiles it (seconds; cached in "
                     "~/.nv/ComputeCache), so first-run timings are not steady state",
                     "add " + std::to_string(device.cc) + "-real to CMAKE_CUDA_ARCHITECTURES",
                     "cuda.version_mismatch.arch_coverage", "binary-compatibility"));
        else
            out.push_back(make("kernel-images", finding_severity::ok,
                               where + " runs every program of this build from SASS",
                               std::to_string(checked) + " programs checked", "", "",
                               "cuda.version_mismatch.arch_coverage", "binary-compatibility"));
    }
    if (!devices.empty())
        return;
    for (const auto& [program, facts_of] : programs.items())
        if (const auto images = images_of(facts_of))
            for (const auto& img : *images)
                embedded[img.name()].push_back(program);
    if (embedded.empty())
        return;
    std::string names;
    for (const auto& [name, users] : embedded)
        names += (names.empty() ? "" : ", ") + name;
    out.push_back(make("kernel-images", finding_severity::ok,
                       "this build embeds " + names + " (no device here to compare with)",
                       std::to_string(programs.size()) + " programs read", "", "",
                       "cuda.version_mismatch.arch_coverage", "binary-compatibility"));
}

/// Variables that slow or alter every CUDA program (DCGM's "Environmental Variables" list, plus
/// the JIT and synchronisation switches): set, they change what the cases measure.
void check_cuda_env(const facts& f, findings& out) {
    std::string set;
    for (const char* name :
         {"NSIGHT_CUDA_DEBUGGER", "CUDA_INJECTION32_PATH", "CUDA_INJECTION64_PATH",
          "CUDA_AUTO_BOOST", "CUDA_ENABLE_COREDUMP_ON_EXCEPTION", "CUDA_COREDUMP_FILE",
          "CUDA_DEVICE_WAITS_ON_EXCEPTION", "CUDA_PROFILE", "COMPUTE_PROFILE", "OPENCL_PROFILE",
          "CUDA_LAUNCH_BLOCKING", "CUDA_FORCE_PTX_JIT", "CUDA_DISABLE_PTX_JIT"})
        if (const auto value = f.env(name))
            set += (set.empty() ? "" : ", ") + std::string(name) + "=" + *value;
    if (set.empty())
        return;
    const auto comma = set.find(',');
    out.push_back(make("cuda-env", finding_severity::warning,
                       "variables that slow or alter CUDA work are set (" + set.substr(0, comma) +
                           (comma == std::string::npos ? ")" : ", ...)"),
                       set,
                       "injection, profiling, core dumps on exceptions, synchronous launches "
                       "and forced or disabled PTX JIT change what every CUDA program does and "
                       "how long it takes: timings and outcomes are not this machine's normal",
                       "unset them for measurements (keep them for debugging)", "",
                       "environment-variables"));
}

int rank(finding_severity s) {
    return static_cast<int>(s);
}

/// "cuda.version_mismatch.stub_driver" -> that, and the command line that runs it.
std::string reproduce_hint(const std::string& case_id) {
    const auto first = case_id.find('.');
    const auto last = case_id.rfind('.');
    if (case_id.empty() || first == std::string::npos || first == last)
        return case_id;
    return case_id + "  (pitfall run --backend " + case_id.substr(0, first) + " --scenario " +
           case_id.substr(first + 1, last - first - 1) + " --variant " + case_id.substr(last + 1) +
           ")";
}
} // namespace

json build_images(const std::vector<std::pair<std::string, std::string>>& programs) {
    json out = json::object();
    for (const auto& [name, path] : programs) {
        auto elf = detail::read_elf(path);
        if (!elf.is_ok()) {
            out[name] = {{"error", elf.error().message()}};
            continue;
        }
        auto images = detail::fatbin_images(elf.value(), path);
        if (!images.is_ok()) {
            out[name] = {{"error", images.error().message()}};
            continue;
        }
        if (images.value().empty())
            continue; // host code only
        json list = json::array();
        for (const auto& img : images.value())
            list.push_back({{"name", img.name()},
                            {"kind", img.is_ptx() ? "ptx" : "sass"},
                            {"arch", img.arch},
                            {"variant", variant_name(img.variant)},
                            {"version_major", img.version_major},
                            {"version_minor", img.version_minor},
                            {"container", img.container}});
        out[name] = {{"images", std::move(list)}};
    }
    return out;
}

bool diagnosis::cuda_usable() const {
    return std::none_of(findings.begin(), findings.end(),
                        [](const finding& f) { return f.severity == finding_severity::error; });
}

std::string diagnosis::headline() const {
    for (const auto& f : findings)
        if (f.severity == finding_severity::error)
            return f.title;
    return {};
}

std::vector<std::string> diagnosis::environment_errors() const {
    std::vector<std::string> names = explained_errors();
    names.erase(std::remove(names.begin(), names.end(), "cudaErrorInsufficientDriver"),
                names.end());
    return names;
}

std::vector<std::string> diagnosis::explained_errors() const {
    static const std::map<std::string, std::vector<std::string>> explained = {
        {"no-driver", {"cudaErrorInsufficientDriver"}},
        {"container-without-toolkit", {"cudaErrorInsufficientDriver"}},
        {"driver-too-old", {"cudaErrorInsufficientDriver"}},
        {"stub-driver", {"cudaErrorStubLibrary"}},
        {"no-device", {"cudaErrorNoDevice"}},
        {"visible-devices-empty", {"cudaErrorNoDevice"}},
        {"visible-devices-invalid", {"cudaErrorNoDevice", "cudaErrorInvalidDevice"}},
        {"driver-init-failed",
         {"cudaErrorSystemDriverMismatch", "cudaErrorCompatNotSupportedOnDevice"}},
        {"compat-unsupported", {"cudaErrorCompatNotSupportedOnDevice"}}};
    std::vector<std::string> names;
    for (const auto& f : findings)
        if (f.severity == finding_severity::error)
            if (const auto it = explained.find(f.id); it != explained.end())
                names.insert(names.end(), it->second.begin(), it->second.end());
    return names;
}

json diagnosis::to_json() const {
    json list = json::array();
    std::map<std::string, int> counts = {{"error", 0}, {"warning", 0}, {"ok", 0}};
    for (const auto& f : findings) {
        ++counts[severity_name(f.severity)];
        json j = {{"id", f.id},       {"severity", severity_name(f.severity)},
                  {"title", f.title}, {"observed", f.observed},
                  {"why", f.why},     {"fix", f.fix},
                  {"rule", f.rule}};
        j["reproduced_by"] = f.reproduced_by.empty() ? json(nullptr) : json(f.reproduced_by);
        list.push_back(std::move(j));
    }
    return {{"schema", "pitfall.doctor/1"},
            {"cuda_usable", cuda_usable()},
            {"headline", headline()},
            {"counts", counts},
            {"findings", std::move(list)}};
}

diagnosis diagnose(const json& fingerprint) {
    const facts f(fingerprint);
    diagnosis d;
    for (auto* check :
         {check_probe, check_build, check_driver_library, check_driver_version,
          check_visible_devices, check_device_order, check_cublas, check_cudnn, check_loader_copies,
          check_nvml, check_pageable_memory, check_cuda_env, check_kernel_images})
        check(f, d.findings);
    std::stable_sort(d.findings.begin(), d.findings.end(), [](const finding& a, const finding& b) {
        return rank(a.severity) < rank(b.severity);
    });
    return d;
}

std::string render_diagnosis(const diagnosis& d) {
    std::map<finding_severity, int> counts;
    for (const auto& f : d.findings)
        ++counts[f.severity];
    std::ostringstream out;
    const auto plural = [](int n, const char* word) {
        return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
    };
    out << (d.cuda_usable() ? "CUDA work can run here" : "not ready for CUDA work") << " ("
        << plural(counts[finding_severity::error], "error") << ", "
        << plural(counts[finding_severity::warning], "warning") << ", "
        << counts[finding_severity::ok] << " ok)\n";
    for (const auto& f : d.findings) {
        out << '\n'
            << severity_name(f.severity)
            << (f.severity == finding_severity::ok      ? "      "
                : f.severity == finding_severity::error ? "   "
                                                        : " ")
            << f.title << "  [" << f.id << "]\n";
        const auto field = [&](const char* label, const std::string& value) {
            if (!value.empty())
                out << "  " << label << value << '\n';
        };
        field("observed  ", f.observed);
        field("why       ", f.why);
        field("fix       ", f.fix);
        field("case      ", reproduce_hint(f.reproduced_by));
        if (f.severity != finding_severity::ok)
            field("rule      ", f.rule);
    }
    if (!d.findings.empty())
        out << "\n`pitfall doctor --explain ID` says what a finding checks.\n";
    return out.str();
}

const std::vector<rule_doc>& doctor_rules() {
    // What each finding checks, for `--explain`: the same words whether or not it fires here.
    static const std::vector<rule_doc> rules = {
        {"probe-failed", "pitfall-probe (a child process) could not run or printed no facts",
         "nothing about the driver, devices or libraries is known",
         "run the probe by hand; a "
         "missing shared library is named by the loader",
         "cuda.version_mismatch.missing_library", rule_link("missing-shared-library")},
        {"built-without-cuda",
         "the build has no CUDA (no toolkit found, or PITFALL_ENABLE_CUDA=OFF)",
         "only CPU cases are built", "configure with a CUDA toolkit present", "",
         rule_link("compile-time-facts")},
        {"no-driver", "libcuda.so.1 cannot be opened (the loader's words are the evidence)",
         "every CUDA call answers cudaErrorInsufficientDriver (35)",
         "install the NVIDIA driver of the branch the runtime needs (13.x: >= 580, 12.x: >= 525, "
         "11.x: >= 450); in a container, start it through the NVIDIA Container Toolkit",
         "cuda.version_mismatch.runtime_vs_driver", rule_link("no-driver")},
        {"container-without-toolkit",
         "in a container, /dev/nvidia* or NVIDIA_VISIBLE_DEVICES is present but libcuda.so.1 is "
         "not",
         "the devices were passed in without the host driver's user-mode libraries",
         "start the container through the NVIDIA Container Toolkit (CDI: --device "
         "nvidia.com/gpu=all; docker: --gpus all)",
         "cuda.version_mismatch.runtime_vs_driver", rule_link("containers")},
        {"stub-driver",
         "the libcuda.so.1 loaded is the toolkit's lib64/stubs/libcuda.so (its path, or "
         "cuInit answering CUDA_ERROR_STUB_LIBRARY)",
         "the stub answers every call with cudaErrorStubLibrary (34)",
         "remove the stubs folder from LD_LIBRARY_PATH and ld.so.conf",
         "cuda.version_mismatch.stub_driver", rule_link("stub-libcuda")},
        {"no-device", "libcuda.so.1 loads but cuInit answers CUDA_ERROR_NO_DEVICE",
         "a user-mode driver without a kernel module or GPU; no CUDA work runs",
         "load the nvidia kernel module / pass the GPU into the container",
         "cuda.device_visibility.reproduce_empty_visible_devices",
         rule_link("libcuda-without-device")},
        {"driver-init-failed",
         "cuInit answers CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (803) or "
         "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE (804)",
         "the user-mode driver and the kernel module do not work together, or forward "
         "compatibility is used on a GPU that lacks it",
         "remove the cuda-compat folder from the loader's path or upgrade the driver",
         "cuda.version_mismatch.runtime_vs_driver", rule_link("forward-compatibility")},
        {"forward-compat", "libcuda comes from a cuda-compat folder on a data-center GPU",
         "a newer CUDA major over an older kernel module, as NVIDIA supports it", "",
         "cuda.version_mismatch.runtime_vs_driver", rule_link("forward-compatibility")},
        {"compat-unsupported",
         "libcuda comes from a cuda-compat folder and a GPU is not a "
         "data-center part",
         "the driver answers cudaErrorCompatNotSupportedOnDevice (804)",
         "upgrade the driver instead", "cuda.version_mismatch.runtime_vs_driver",
         rule_link("forward-compatibility")},
        {"driver-too-old", "the driver's CUDA major (cudaDriverGetVersion) is below the runtime's",
         "the first CUDA call answers cudaErrorInsufficientDriver (35)",
         "upgrade the driver, use cuda-compat on a data-center GPU, or build with an older toolkit",
         "cuda.version_mismatch.runtime_vs_driver", rule_link("driver-minimum-versions")},
        {"minor-version-compat", "same CUDA major, driver minor below the runtime's",
         "newer APIs answer cudaErrorCallRequiresNewerDriver (36); newer PTX cannot JIT",
         "upgrade the driver to have every feature", "cuda.version_mismatch.runtime_vs_driver",
         rule_link("driver-minimum-versions")},
        {"driver", "the driver supports the runtime's CUDA version", "", "",
         "cuda.version_mismatch.runtime_vs_driver", rule_link("driver-minimum-versions")},
        {"visible-devices-empty", "CUDA_VISIBLE_DEVICES is set to an empty string",
         "CUDA sees no device (cudaErrorNoDevice, 100)", "unset it or list devices",
         "cuda.device_visibility.reproduce_empty_visible_devices",
         rule_link("cuda-visible-devices")},
        {"visible-devices-invalid",
         "an entry of CUDA_VISIBLE_DEVICES is malformed or past the "
         "last GPU (NVML's count)",
         "CUDA ignores that entry and every one after it", "list only existing indices or UUIDs",
         "cuda.device_visibility.reproduce_ordinal_past_last", rule_link("cuda-visible-devices")},
        {"visible-devices-mig", "CUDA_VISIBLE_DEVICES names a MIG- instance",
         "a process enumerates one MIG instance", "expected with MIG",
         "cuda.multi_gpu_distribution.remedy", rule_link("cuda-visible-devices")},
        {"device-order", "two or more GPUs and CUDA_DEVICE_ORDER is not PCI_BUS_ID",
         "CUDA's device numbers differ from nvidia-smi's", "export CUDA_DEVICE_ORDER=PCI_BUS_ID",
         "cuda.device_visibility.remedy_explicit_device", rule_link("cuda-device-order")},
        {"cublas-missing", "libcublas.so.<major> cannot be opened",
         "the CUDA cases' first cuBLAS call fails (library_not_loaded)",
         "install cuBLAS of this CUDA release", "cuda.version_mismatch.missing_library",
         rule_link("cublas")},
        {"cudnn-missing", "libcudnn.so.<major> cannot be opened", "cuDNN cases cannot run",
         "install cuDNN of the major the build used", "cuda.version_mismatch.missing_library",
         rule_link("cudnn-version-rule")},
        {"cudnn-version", "cuDNN loaded vs built: same major, loaded minor >= built minor",
         "an older or other-major cuDNN may lack what the build uses",
         "load the cuDNN the build needs, or rebuild",
         "cuda.version_mismatch.cudnn_compiled_vs_loaded", rule_link("cudnn-version-rule")},
        {"cudnn-mixed",
         "cuDNN's sub-library version checks, each in its own process (a mixed "
         "install can abort the process)",
         "sub-libraries from two releases fail or abort", "keep one cuDNN on the loader's path",
         "cuda.version_mismatch.cudnn_compiled_vs_loaded", rule_link("cudnn-sub-libraries")},
        {"duplicate-library",
         "two or more copies of one CUDA library soname in the loader's "
         "folders (LD_LIBRARY_PATH, ld.so.conf, system folders)",
         "which one loads depends on the order alone", "keep one copy",
         "cuda.version_mismatch.cudnn_compiled_vs_loaded", rule_link("missing-shared-library")},
        {"no-nvml", "the driver is here but NVML cannot be opened or initialised",
         "the GPUs' state cannot be read", "install the driver's NVML library", "",
         rule_link("nvml")},
        {"memory-in-use",
         "NVML: more than a tenth of a GPU's memory used, or compute processes running",
         "cases sized by total memory fail sooner; timings share the GPU",
         "stop the other processes", "cuda.memory_growth.reproduce", rule_link("other-processes")},
        {"compute-mode", "NVML: compute mode other than Default",
         "Prohibited allows no context; exclusive modes allow one process", "nvidia-smi -c DEFAULT",
         "cuda.memory_growth.second_process", rule_link("compute-mode")},
        {"mig-mode", "NVML: MIG mode on or a change pending", "CUDA sees MIG instances only",
         "name a MIG instance, or disable MIG", "cuda.device_visibility.helper_count_devices",
         rule_link("mig-mode")},
        {"persistence-off", "NVML: persistence mode off", "each process pays driver initialisation",
         "run nvidia-persistenced", "cuda.batch_size_one.reproduce", rule_link("persistence-mode")},
        {"memory-errors",
         "NVML: retired pages pending, rows waiting to be remapped, or a remap failure",
         "uncorrectable memory errors; results cannot be trusted until a reset",
         "reset the GPU, or replace it after a remap failure", "",
         rule_link("ecc-and-retired-pages")},
        {"clocks-slowed", "NVML: HW slowdown, thermal or power-brake throttle reasons",
         "timings are slower than the GPU's normal", "fix cooling or power first", "",
         rule_link("clock-event-reasons")},
        {"no-kernel-image",
         "each program of this build against each device: SASS of the same "
         "major and a minor no newer, an a target only on its exact compute capability, an f "
         "target within its family, else PTX no newer than the device",
         "the first launch fails with cudaErrorNoKernelImageForDevice",
         "add the architecture to CMAKE_CUDA_ARCHITECTURES", "cuda.version_mismatch.arch_coverage",
         rule_link("binary-compatibility")},
        {"ptx-too-new", "only PTX would serve a device, and its ISA is newer than the driver JITs",
         "the first launch fails with cudaErrorUnsupportedPtxVersion",
         "upgrade the driver or embed SASS for the device", "cuda.version_mismatch.arch_coverage",
         rule_link("binary-compatibility")},
        {"ptx-jit", "a device runs some program of this build only by PTX JIT",
         "first launches compile (seconds): first-run timings are not steady state",
         "embed SASS for the device", "cuda.version_mismatch.arch_coverage",
         rule_link("binary-compatibility")},
        {"kernel-images",
         "every program of this build has SASS for each device (or, without a "
         "device, which images it embeds)",
         "", "", "cuda.version_mismatch.arch_coverage", rule_link("binary-compatibility")},
        {"cuda-env",
         "DCGM's list of variables that slow or alter CUDA (injection, profiling, core "
         "dumps) and CUDA_LAUNCH_BLOCKING, CUDA_FORCE_PTX_JIT, CUDA_DISABLE_PTX_JIT",
         "set, they change outcomes and timings of every CUDA program",
         "unset them for measurements", "", rule_link("environment-variables")},
        {"pageable-memory", "cudaDevAttrPageableMemoryAccess of each device (HMM/ATS)",
         "whether a host pointer in a kernel works or faults", "",
         "cuda.host_only_custom_op.reproduce_kernel_host_data",
         rule_link("pageable-memory-access")},
    };
    return rules;
}

std::optional<rule_doc> find_rule(const std::string& id) {
    for (const auto& r : doctor_rules())
        if (r.id == id)
            return r;
    return std::nullopt;
}

} // namespace pitfall::runner
