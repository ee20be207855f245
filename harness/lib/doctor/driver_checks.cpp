// The probe, the build and the driver library: whether anything is known, whether this build has
// CUDA at all, and whether the libcuda.so.1 the loader finds is a driver that starts.
#include "doctor/registry.hpp"

#include <tuple>

namespace pitfall::runner::doctor {
namespace {

// ---- the probe ----

const rule probe_failed{
    "probe-failed",
    finding_severity::error,
    "cuda.version_mismatch.missing_library",
    "missing-shared-library",
    {},
    {"pitfall-probe (a child process) could not run or printed no facts",
     "nothing about the driver, devices or libraries is known",
     "run the probe by hand; a missing shared library is named by the loader"},
    {"without the probe nothing about the driver, the devices or the libraries is known, and "
     "every CUDA case is judged blind",
     "run build/<preset>/bin/pitfall-probe by hand to see what stops it"}};

void check_probe(const facts& f, findings& out) {
    if (f.probe_error.empty())
        return;
    finding failed = probe_failed.found("the environment probe could not run: " + f.probe_error,
                                        "the probe (pitfall-probe) failed: " + f.probe_error);
    // The loader's own words, where it stopped the probe, name the library to install.
    const std::string marker = "error while loading shared libraries: ";
    if (const auto at_marker = f.probe_output.find(marker); at_marker != std::string::npos) {
        const std::string rest = f.probe_output.substr(at_marker + marker.size());
        const std::string library = rest.substr(0, rest.find(':'));
        failed.observed += "; the loader said: " + rest.substr(0, rest.find('\n'));
        failed.fix = "install " + library + " or put its folder on LD_LIBRARY_PATH";
    }
    out.push_back(std::move(failed));
}

// ---- the build ----

const rule built_without_cuda{
    "built-without-cuda",
    finding_severity::warning,
    no_reproducing_case,
    "compile-time-facts",
    {},
    {"the build has no CUDA (no toolkit found, or PITFALL_ENABLE_CUDA=OFF)",
     "only CPU cases are built", "configure with a CUDA toolkit present"},
    {"only the CPU cases run; the GPU path of each scenario is not tested on this machine",
     "install the CUDA toolkit and configure with the default or ci preset"}};

void check_build(const facts& f, findings& out) {
    if (f.built_with_cuda || !f.probe_error.empty())
        return;
    out.push_back(built_without_cuda.found(
        "this pitfall was built without CUDA: no CUDA case is built",
        "pitfall-probe reports built_with_cuda false (CMake found no CUDA toolkit, or "
        "PITFALL_ENABLE_CUDA=OFF); the driver checks below still apply"));
}

// ---- the driver library ----

const rule no_driver{
    "no-driver",
    finding_severity::error,
    "cuda.version_mismatch.runtime_vs_driver",
    "no-driver",
    {"cudaErrorInsufficientDriver"},
    {"libcuda.so.1 cannot be opened (the loader's words are the evidence)",
     "every CUDA call answers cudaErrorInsufficientDriver (35)",
     "install the NVIDIA driver of the branch the runtime needs (13.x: >= 580, 12.x: >= 525, "
     "11.x: >= 450); in a container, start it through the NVIDIA Container Toolkit"},
    {"every CUDA call answers cudaErrorInsufficientDriver (35): no CUDA work reaches a GPU (a "
     "CUDA case ends UNSUPPORTED, or PASS where its baseline expects exactly this error)",
     ""}};

const rule container_without_toolkit{
    "container-without-toolkit",
    finding_severity::error,
    "cuda.version_mismatch.runtime_vs_driver",
    "containers",
    {"cudaErrorInsufficientDriver"},
    {"in a container, /dev/nvidia* or NVIDIA_VISIBLE_DEVICES is present but libcuda.so.1 is not",
     "the devices were passed in without the host driver's user-mode libraries",
     "start the container through the NVIDIA Container Toolkit (CDI: --device "
     "nvidia.com/gpu=all; docker: --gpus all)"},
    {"the NVIDIA Container Toolkit mounts the host driver's user-mode libraries (libcuda.so.1, "
     "libnvidia-ml.so.1) into the container with the devices; without them every CUDA call "
     "answers cudaErrorInsufficientDriver",
     "start the container through the NVIDIA Container Toolkit (podman: --device "
     "nvidia.com/gpu=all with a CDI spec from `nvidia-ctk cdi generate`; docker: --gpus all), "
     "not with bare --device /dev/nvidia*"}};

const rule stub_driver{
    "stub-driver",
    finding_severity::error,
    "cuda.version_mismatch.stub_driver",
    "stub-libcuda",
    {"cudaErrorStubLibrary"},
    {"the libcuda.so.1 loaded is the toolkit's lib64/stubs/libcuda.so (its path, or cuInit "
     "answering CUDA_ERROR_STUB_LIBRARY)",
     "the stub answers every call with cudaErrorStubLibrary (34)",
     "remove the stubs folder from LD_LIBRARY_PATH and ld.so.conf"},
    {"the stub exists only so programs can link without a driver; loaded at run time it answers "
     "every call with cudaErrorStubLibrary (34), so no CUDA work runs, whatever driver the "
     "machine has",
     ""}};

const rule no_device{
    "no-device",
    finding_severity::error,
    "cuda.device_visibility.reproduce_empty_visible_devices",
    "libcuda-without-device",
    {"cudaErrorNoDevice"},
    {"libcuda.so.1 loads but cuInit answers CUDA_ERROR_NO_DEVICE",
     "a user-mode driver without a kernel module or GPU; no CUDA work runs",
     "load the nvidia kernel module / pass the GPU into the container"},
    {"a user-mode driver without a kernel module or device (a driver package installed in a "
     "container or on a machine without a GPU) answers cudaErrorNoDevice (100) instead of "
     "cudaErrorInsufficientDriver; no CUDA case can run",
     ""}};

const rule driver_init_failed{
    "driver-init-failed",
    finding_severity::error,
    "cuda.version_mismatch.runtime_vs_driver",
    "forward-compatibility",
    {"cudaErrorSystemDriverMismatch", "cudaErrorCompatNotSupportedOnDevice"},
    {"cuInit answers CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (803) or "
     "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE (804)",
     "the user-mode driver and the kernel module do not work together, or forward "
     "compatibility is used on a GPU that lacks it",
     "remove the cuda-compat folder from the loader's path or upgrade the driver"},
    {"", // which of the two refusals it is
     "remove the cuda-compat folder from the loader's path (or install the compat package that "
     "matches this kernel module), or upgrade the driver"}};

/// The loader's words and what the kernel and the runtime say, where libcuda.so.1 is missing.
std::string missing_driver_evidence(const facts& f) {
    std::string observed = "dlopen(\"libcuda.so.1\"): " + text(at(f.driver, "load_error"));
    observed += f.kernel_module.empty()
                    ? "; no NVIDIA kernel module (/proc/driver/nvidia/version absent)"
                    : "; kernel module " + f.kernel_module + " loaded";
    if (!f.cuda_error.empty())
        observed += "; cudaGetDeviceCount: " + f.cuda_error;
    return observed;
}

/// Where the driver is missing, what brings it: its libraries onto the loader's path where the
/// kernel module is there, a GPU and the toolkit for a container, else the driver itself.
std::string no_driver_fix(const facts& f) {
    const int branch = minimum_driver_branch(f.runtime_major());
    if (!f.kernel_module.empty())
        return "the kernel module is loaded but its user-mode library is not on the loader's "
               "path: reinstall the driver's libraries (libcuda.so.1) or add their folder to "
               "/etc/ld.so.conf.d and run ldconfig";
    if (f.in_container)
        return "give the host an NVIDIA GPU and " +
               (branch > 0 ? "a driver of branch " + std::to_string(branch) + " or newer"
                           : std::string("an NVIDIA driver")) +
               ", and start this container through the NVIDIA Container Toolkit (podman: "
               "--device nvidia.com/gpu=all; docker: --gpus all)";
    return "install the NVIDIA driver" +
           (branch > 0 ? " (branch " + std::to_string(branch) + " or newer)" : std::string()) +
           " on a machine with an NVIDIA GPU";
}

/// libcuda.so.1 is missing: in a container given GPU devices, the toolkit did not mount the
/// driver's libraries; anywhere else there is no driver.
finding missing_driver(const facts& f) {
    const std::string observed = missing_driver_evidence(f);
    if (f.in_container && (!f.device_nodes.empty() || f.env("NVIDIA_VISIBLE_DEVICES")))
        return container_without_toolkit.found(
            "GPU devices were passed into this container but not the driver's libraries "
            "(libcuda.so.1 not found)",
            observed + "; device nodes: " +
                (f.device_nodes.empty() ? std::string("none") : f.device_nodes.front() + "..."));
    std::string title = "no NVIDIA driver (libcuda.so.1 not found)";
    if (const std::string runtime_needs = f.minimum_driver_text(); !runtime_needs.empty())
        title += "; " + runtime_needs;
    finding missing = no_driver.found(std::move(title), observed);
    missing.fix = no_driver_fix(f);
    return missing;
}

bool loads_the_stub(const facts& f) {
    return f.libcuda_path.find("/stubs/") != std::string::npos ||
           f.cu_init == "CUDA_ERROR_STUB_LIBRARY" || f.cu_init == "CUresult 34" ||
           f.cuda_error == "cudaErrorStubLibrary";
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

finding loaded_stub(const facts& f) {
    const std::string as = f.libcuda_loaded_as.empty() ? f.libcuda_path : f.libcuda_loaded_as;
    finding stub = stub_driver.found(
        "the CUDA toolkit's stub libcuda.so is loaded as the driver (" + as + ")",
        "libcuda.so.1 resolves to " + f.libcuda_path +
            " (a link-time stub); cuInit: " + (f.cu_init.empty() ? "?" : f.cu_init) +
            (f.cuda_error.empty() ? "" : "; cudaGetDeviceCount: " + f.cuda_error));
    stub.fix = stub_fix(as);
    return stub;
}

bool finds_no_device(const facts& f) {
    return f.cu_init == "CUDA_ERROR_NO_DEVICE" || f.cu_init == "CUresult 100" ||
           f.cuda_error == "cudaErrorNoDevice";
}

finding driver_without_device(const facts& f) {
    std::string observed = "libcuda.so.1 (" + f.libcuda_path +
                           ") loads; cuInit: " + (f.cu_init.empty() ? "?" : f.cu_init);
    observed += f.kernel_module.empty() ? "; no NVIDIA kernel module loaded"
                                        : "; kernel module " + f.kernel_module;
    observed += f.device_nodes.empty() ? "; no /dev/nvidia* device nodes" : "";
    finding none = no_device.found(
        "the NVIDIA driver library is here but no GPU is (cudaErrorNoDevice)", observed);
    none.fix = f.in_container
                   ? "pass the GPU into the container through the NVIDIA Container Toolkit "
                     "(podman: --device nvidia.com/gpu=all), which also mounts the host's "
                     "matching libcuda"
                   : "check that the GPU is seen by the kernel (lspci, dmesg) and that the "
                     "nvidia kernel module is loaded (modprobe nvidia)";
    return none;
}

/// cuInit refusing to start: the user-mode driver against the kernel module (803), or forward
/// compatibility on a GPU without it (804).
void check_driver_start(const facts& f, findings& out) {
    for (const auto& [name, number, why] :
         {std::tuple<const char*, const char*, const char*>{
              "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "803",
              "the user-mode driver (libcuda, often a cuda-compat copy) and the kernel module are "
              "of releases that do not work together"},
          {"CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", "804",
           "forward compatibility (cuda-compat) is supported on data-center GPUs, select NGC-ready "
           "RTX boards and Jetson only"}})
        if (f.cu_init == name || f.cu_init == std::string("CUresult ") + number) {
            finding refused = driver_init_failed.found(
                std::string("the driver refuses to start: ") + name,
                "cuInit: " + f.cu_init + "; libcuda " + f.libcuda_path + "; kernel module " +
                    (f.kernel_module.empty() ? "none" : f.kernel_module));
            refused.why = why;
            out.push_back(std::move(refused));
        }
}

/// The driver: missing, the stub, present without a device, or unable to start.
void check_driver_library(const facts& f, findings& out) {
    if (!f.driver.is_object())
        return;
    if (f.driver_library_missing()) {
        out.push_back(missing_driver(f));
        return;
    }
    if (loads_the_stub(f)) {
        out.push_back(loaded_stub(f));
        return;
    }
    if (finds_no_device(f)) {
        // An empty CUDA_VISIBLE_DEVICES hides every device: check_visible_devices names that.
        const auto visible = f.env("CUDA_VISIBLE_DEVICES");
        if (!visible || !visible->empty())
            out.push_back(driver_without_device(f));
        return;
    }
    check_driver_start(f, out);
}

} // namespace

check probe_check() {
    return {check_probe, {&probe_failed}};
}

check build_check() {
    return {check_build, {&built_without_cuda}};
}

check driver_library_check() {
    return {
        check_driver_library,
        {&no_driver, &container_without_toolkit, &stub_driver, &no_device, &driver_init_failed}};
}

} // namespace pitfall::runner::doctor
