// The driver against the CUDA runtime: minor-version compatibility within a major, forward
// compatibility through cuda-compat across majors, otherwise "insufficient".
#include "doctor/registry.hpp"

namespace pitfall::runner::doctor {
namespace {

const rule forward_compat{
    "forward-compat",
    finding_severity::ok,
    "cuda.version_mismatch.runtime_vs_driver",
    "forward-compatibility",
    {},
    {"libcuda comes from a cuda-compat folder on a data-center GPU",
     "a newer CUDA major over an older kernel module, as NVIDIA supports it", ""},
    {"supported on data-center GPUs: the compat package's libcuda must be newer than the kernel "
     "module and from a release NVIDIA supports on that branch; a few features (e.g. some "
     "interop) are not available",
     ""}};

const rule compat_unsupported{
    "compat-unsupported",
    finding_severity::error,
    "cuda.version_mismatch.runtime_vs_driver",
    "forward-compatibility",
    {"cudaErrorCompatNotSupportedOnDevice"},
    {"libcuda comes from a cuda-compat folder and a GPU is not a data-center part",
     "the driver answers cudaErrorCompatNotSupportedOnDevice (804)", "upgrade the driver instead"},
    {"", ""}}; // the kernel module's branch or the GPU: each has its own why and fix

const rule driver_too_old{
    "driver-too-old",
    finding_severity::error,
    "cuda.version_mismatch.runtime_vs_driver",
    "driver-minimum-versions",
    {"cudaErrorInsufficientDriver"},
    {"the driver's CUDA major (cudaDriverGetVersion) is below the runtime's",
     "the first CUDA call answers cudaErrorInsufficientDriver (35)",
     "upgrade the driver, use cuda-compat on a data-center GPU, or build with an older toolkit"},
    {"a driver runs runtimes of its own CUDA major and older; a newer major answers "
     "cudaErrorInsufficientDriver (35) at the first call",
     ""}};

const rule minor_version_compat{
    "minor-version-compat",
    finding_severity::warning,
    "cuda.version_mismatch.runtime_vs_driver",
    "driver-minimum-versions",
    {},
    {"same CUDA major, driver minor below the runtime's",
     "newer APIs answer cudaErrorCallRequiresNewerDriver (36); newer PTX cannot JIT",
     "upgrade the driver to have every feature"},
    {"within one major a newer runtime runs on an older driver, but an API newer than the driver "
     "answers cudaErrorCallRequiresNewerDriver (36) and PTX from the newer toolkit cannot be "
     "JIT-compiled (cudaErrorUnsupportedPtxVersion, 222)",
     ""}};

const rule driver_supports_runtime{"driver",
                                   finding_severity::ok,
                                   "cuda.version_mismatch.runtime_vs_driver",
                                   "driver-minimum-versions",
                                   {},
                                   {"the driver supports the runtime's CUDA version", "", ""},
                                   {"", ""}};

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

/// The versions the rules compare, as people write them.
struct versions {
    long long runtime;
    long long driver;
    std::string runtime_text; ///< "13.0"
    std::string driver_cuda;  ///< the CUDA version the driver supports: "12.2"
    std::string branch;       ///< " 580.65.06" (with its space), "" where unknown

    explicit versions(const facts& f)
        : runtime(*f.runtime_version), driver(*f.driver_version),
          runtime_text(cuda_version_text(runtime)), driver_cuda(cuda_version_text(driver)),
          branch(f.user_mode_driver.empty() ? "" : " " + f.user_mode_driver) {}
};

std::string version_evidence(const facts& f, const versions& v) {
    std::string observed = "CUDA runtime " + v.runtime_text + " (cudaRuntimeGetVersion " +
                           std::to_string(v.runtime) + "); driver" + v.branch + " supports CUDA " +
                           v.driver_cuda + " (cudaDriverGetVersion " + std::to_string(v.driver) +
                           ")";
    if (!f.kernel_module.empty())
        observed += "; kernel module " + f.kernel_module;
    return observed;
}

/// libcuda from a cuda-compat package: supported over the kernel-module branches NVIDIA lists,
/// on the GPUs it lists; anything else is refused by the driver.
finding forward_compatibility(const facts& f, const versions& v, std::string observed) {
    observed += "; libcuda from a forward-compatibility package: " + f.libcuda_path;
    // NVIDIA's table of cuda-compat packages per kernel-module branch: cuda-compat-13-* is
    // supported over the 535 and 570 branches (580 and newer need no compat package); a
    // branch not in the table (550) is end of life and has none.
    const int module_branch = branch_of(f.kernel_module);
    if (v.driver / 1000 == 13 && module_branch > 0 && module_branch < 580 && module_branch != 535 &&
        module_branch != 570) {
        finding refused = compat_unsupported.found(
            "cuda-compat for CUDA " + v.driver_cuda + " over kernel module branch " +
                std::to_string(module_branch) + ", which NVIDIA does not support",
            std::move(observed));
        refused.why = "cuda-compat-13-* is supported over kernel-module branches 535 and 570 "
                      "only; other branches before 580 are end of life and the pair may answer "
                      "cudaErrorSystemDriverMismatch (803)";
        refused.fix =
            "move the kernel module to branch 535, 570 or 580+ (580+ needs no compat package)";
        return refused;
    }
    for (const auto& device : f.device_names)
        if (!is_data_center_part(device)) {
            finding refused = compat_unsupported.found(
                "forward compatibility (cuda-compat) on a GPU it does not support: " + device,
                std::move(observed));
            refused.why = "cuda-compat runs a newer CUDA over an older kernel module on "
                          "data-center GPUs, select NGC-ready RTX boards and Jetson only; "
                          "elsewhere the driver answers cudaErrorCompatNotSupportedOnDevice "
                          "(804)";
            refused.fix = "upgrade the driver to branch " +
                          std::to_string(minimum_driver_branch(f.runtime_major())) +
                          " or newer and remove the compat folder from the loader's path";
            return refused;
        }
    return forward_compat.found("CUDA " + v.runtime_text +
                                    " runs through forward compatibility over kernel module " +
                                    (f.kernel_module.empty() ? std::string("?") : f.kernel_module),
                                std::move(observed));
}

/// The installed driver against the runtime: an older major is insufficient, an older minor
/// runs under minor-version compatibility.
finding driver_against_runtime(const versions& v, std::string observed) {
    if (v.driver / 1000 < v.runtime / 1000) {
        const int need = minimum_driver_branch(static_cast<int>(v.runtime / 1000));
        finding too_old = driver_too_old.found(
            "the driver" + v.branch + " (CUDA " + v.driver_cuda + ") is older than the CUDA " +
                v.runtime_text + " runtime" +
                (need > 0 ? "; CUDA " + v.runtime_text + " needs driver >= " + std::to_string(need)
                          : ""),
            std::move(observed));
        too_old.fix =
            "upgrade the driver" +
            (need > 0 ? " to branch " + std::to_string(need) + " or newer" : std::string()) +
            "; on a data-center GPU, or install the cuda-compat package of this CUDA release; or "
            "build with a CUDA " +
            std::to_string(v.driver / 1000) + ".x toolkit";
        return too_old;
    }
    if (v.driver < v.runtime) {
        finding older_minor = minor_version_compat.found(
            "CUDA " + v.runtime_text + " runs on a CUDA " + v.driver_cuda +
                " driver under minor-version compatibility",
            std::move(observed));
        older_minor.fix = "upgrade the driver to one that supports CUDA " + v.runtime_text +
                          " to have every feature; SASS for each GPU avoids the PTX limit";
        return older_minor;
    }
    return driver_supports_runtime.found("driver" + v.branch + " supports CUDA " + v.driver_cuda +
                                             " >= runtime " + v.runtime_text,
                                         std::move(observed));
}

void check_driver_version(const facts& f, findings& out) {
    if (!f.runtime_version || !f.driver_version || *f.driver_version <= 0)
        return;
    if (!f.probe_error.empty() || f.driver_library_missing())
        return;
    const versions v(f);
    std::string observed = version_evidence(f, v);
    if (f.libcuda_path.find("/compat/") != std::string::npos)
        out.push_back(forward_compatibility(f, v, std::move(observed)));
    else
        out.push_back(driver_against_runtime(v, std::move(observed)));
}

} // namespace

check driver_version_check() {
    return {check_driver_version,
            {&forward_compat, &compat_unsupported, &driver_too_old, &minor_version_compat,
             &driver_supports_runtime}};
}

} // namespace pitfall::runner::doctor
