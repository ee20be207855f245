// This build's SASS and PTX against each device CUDA sees: a program none of whose images a
// device can run (per translation unit: a kernel runs only from its own container's images)
// fails its first launch there. build_images() reads the images from the programs.
#include "doctor/registry.hpp"

#include "pitfall/detail/fatbin.hpp"

#include <map>

namespace pitfall::runner {
namespace doctor {
namespace {

const rule no_kernel_image{
    "no-kernel-image",
    finding_severity::error,
    "cuda.version_mismatch.arch_coverage",
    "binary-compatibility",
    {},
    {"each program of this build against each device: SASS of the same major and a minor no "
     "newer, an a target only on its exact compute capability, an f target within its family, "
     "else PTX no newer than the device",
     "the first launch fails with cudaErrorNoKernelImageForDevice",
     "add the architecture to CMAKE_CUDA_ARCHITECTURES"},
    {"", ""}}; // both name the device and the error its launch answers

const rule ptx_too_new{"ptx-too-new",
                       finding_severity::error,
                       "cuda.version_mismatch.arch_coverage",
                       "binary-compatibility",
                       {},
                       {"only PTX would serve a device, and its ISA is newer than the driver JITs",
                        "the first launch fails with cudaErrorUnsupportedPtxVersion",
                        "upgrade the driver or embed SASS for the device"},
                       {"", ""}}; // as no-kernel-image's

const rule ptx_jit{
    "ptx-jit",
    finding_severity::warning,
    "cuda.version_mismatch.arch_coverage",
    "binary-compatibility",
    {},
    {"a device runs some program of this build only by PTX JIT",
     "first launches compile (seconds): first-run timings are not steady state",
     "embed SASS for the device"},
    {"the first launch of each kernel compiles it (seconds; cached in ~/.nv/ComputeCache), so "
     "first-run timings are not steady state",
     ""}};

const rule kernel_images{"kernel-images",
                         finding_severity::ok,
                         "cuda.version_mismatch.arch_coverage",
                         "binary-compatibility",
                         {},
                         {"every program of this build has SASS for each device (or, without a "
                          "device, which images it embeds)",
                          "", ""},
                         {"", ""}};

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

/// A device CUDA sees, by name and compute capability (90 for 9.0).
struct device_view {
    std::string name;
    unsigned cc;
};

std::vector<device_view> devices_of(const facts& f) {
    std::vector<device_view> devices;
    if (const json& list = at(f.cuda, "devices"); list.is_array())
        for (const auto& d : list)
            if (const auto cc = detail::parse_compute_capability(text(at(d, "compute_capability"))))
                devices.push_back({text(at(d, "name"), "device"), *cc});
    return devices;
}

/// What decides which image a device loads besides the images: the driver's PTX ISA and the
/// JIT switches.
struct loading {
    int driver = 0;
    bool force_jit = false;
    bool no_jit = false;
};

/// What one device makes of the build's programs.
struct device_outcome {
    std::string failing; ///< "program: why" of each program it cannot run
    std::string jitted;  ///< the programs it runs only by PTX JIT
    std::string error = "cudaErrorNoKernelImageForDevice"; ///< the failing launch's error
    std::size_t checked = 0;                               ///< the programs with images
};

/// One program's containers on one device: the first a device cannot run fails the program.
void predict_program(const std::string& program, const std::vector<detail::fatbin_image>& images,
                     unsigned cc, const loading& how, device_outcome& outcome) {
    std::map<unsigned, std::vector<detail::fatbin_image>> containers;
    for (const auto& img : images)
        containers[img.container].push_back(img);
    for (const auto& [container, held] : containers) {
        const auto p = detail::predict_image(held, cc, how.driver, how.force_jit, how.no_jit);
        if (p.how == detail::image_path::no_image) {
            outcome.failing += (outcome.failing.empty() ? "" : "; ") + program + ": " + p.reason;
            outcome.error = p.error.empty() ? outcome.error : p.error;
            return;
        }
        if (p.how == detail::image_path::ptx_jit &&
            outcome.jitted.find(program) == std::string::npos)
            outcome.jitted += (outcome.jitted.empty() ? "" : ", ") + program;
    }
}

device_outcome predict_device(const json& programs, unsigned cc, const loading& how) {
    device_outcome outcome;
    for (const auto& [program, facts_of] : programs.items()) {
        const auto images = images_of(facts_of);
        if (!images || images->empty())
            continue;
        ++outcome.checked;
        predict_program(program, *images, cc, how, outcome);
    }
    return outcome;
}

/// A program failing there is an error, one run by JIT a warning, else all is well.
finding device_finding(const device_view& device, const device_outcome& outcome) {
    const std::string where = device.name + " (" + detail::cc_text(device.cc) + ")";
    const std::string cc = std::to_string(device.cc);
    if (!outcome.failing.empty()) {
        const rule& fails =
            outcome.error == "cudaErrorUnsupportedPtxVersion" ? ptx_too_new : no_kernel_image;
        finding found =
            fails.found("this build has no image " + where + " can run (" + outcome.error + ")",
                        outcome.failing);
        found.why = "the first kernel launch fails with " + outcome.error +
                    " (with lazy loading, at the launch, not at start-up)";
        found.fix = "rebuild with this architecture in CMAKE_CUDA_ARCHITECTURES (" + cc +
                    "-real, or " + cc +
                    "-virtual for PTX), or upgrade the driver where only the PTX ISA is too new";
        return found;
    }
    if (!outcome.jitted.empty()) {
        finding found = ptx_jit.found(where + " runs this build by PTX JIT (no SASS for it)",
                                      "JIT-compiled at the first launch: " + outcome.jitted);
        found.fix = "add " + cc + "-real to CMAKE_CUDA_ARCHITECTURES";
        return found;
    }
    return kernel_images.found(where + " runs every program of this build from SASS",
                               std::to_string(outcome.checked) + " programs checked");
}

/// Without a device to compare with, which images the build embeds.
void report_embedded(const json& programs, findings& out) {
    std::map<std::string, std::vector<std::string>> embedded; // image name -> programs
    for (const auto& [program, facts_of] : programs.items())
        if (const auto images = images_of(facts_of))
            for (const auto& img : *images)
                embedded[img.name()].push_back(program);
    if (embedded.empty())
        return;
    std::string names;
    for (const auto& [name, users] : embedded)
        names += (names.empty() ? "" : ", ") + name;
    out.push_back(
        kernel_images.found("this build embeds " + names + " (no device here to compare with)",
                            std::to_string(programs.size()) + " programs read"));
}

void check_kernel_images(const facts& f, findings& out) {
    const json& programs = at(f.fingerprint, "build_images");
    if (!programs.is_object() || programs.empty())
        return;
    loading how;
    how.driver = static_cast<int>(f.driver_version.value_or(0));
    how.force_jit = f.env("CUDA_FORCE_PTX_JIT").value_or("0") == "1";
    how.no_jit = f.env("CUDA_DISABLE_PTX_JIT").value_or("0") == "1";
    const std::vector<device_view> devices = devices_of(f);
    for (const auto& device : devices) {
        const device_outcome outcome = predict_device(programs, device.cc, how);
        if (outcome.checked == 0)
            return; // no program has device code: nothing to say of any device
        out.push_back(device_finding(device, outcome));
    }
    if (devices.empty())
        report_embedded(programs, out);
}

const char* variant_name(detail::arch_variant v) {
    switch (v) {
    case detail::arch_variant::arch_specific: return "arch_specific";
    case detail::arch_variant::family: return "family";
    case detail::arch_variant::plain: break;
    }
    return "plain";
}

} // namespace

check kernel_images_check() {
    return {check_kernel_images, {&no_kernel_image, &ptx_too_new, &ptx_jit, &kernel_images}};
}

} // namespace doctor

nlohmann::json build_images(const std::vector<std::pair<std::string, std::string>>& programs) {
    using nlohmann::json;
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
                            {"variant", doctor::variant_name(img.variant)},
                            {"version_major", img.version_major},
                            {"version_minor", img.version_minor},
                            {"container", img.container}});
        out[name] = {{"images", std::move(list)}};
    }
    return out;
}

} // namespace pitfall::runner
