// The CUDA libraries the cases open: cuBLAS and cuDNN present, cuDNN's versions and
// sub-libraries of one release, and no second copy of a library on the loader's path.
#include "doctor/registry.hpp"

#include <set>

namespace pitfall::runner::doctor {
namespace {

// ---- cuBLAS ----

const rule cublas_missing{
    "cublas-missing",
    finding_severity::error,
    "cuda.version_mismatch.missing_library",
    "cublas",
    {},
    {"libcublas.so.<major> cannot be opened",
     "the CUDA cases' first cuBLAS call fails (library_not_loaded)",
     "install cuBLAS of this CUDA release"},
    {"the scenario programs open cuBLAS on first call: every CUDA case that calls it fails there "
     "(host error library_not_loaded, in these words)",
     "install the CUDA math libraries of this release (libcublas) or add their folder to "
     "LD_LIBRARY_PATH"}};

void check_cublas(const facts& f, findings& out) {
    const json& cublas = at(f.libraries, "cublas");
    if (!cublas.is_object())
        return;
    if (cublas.contains("load_error"))
        out.push_back(cublas_missing.found("cuBLAS (" + text(at(cublas, "library")) +
                                               ") is not on the loader's path",
                                           "dlopen: " + text(at(cublas, "load_error"))));
}

// ---- cuDNN ----

const rule cudnn_missing{
    "cudnn-missing",
    finding_severity::warning,
    "cuda.version_mismatch.missing_library",
    "cudnn-version-rule",
    {},
    {"libcudnn.so.<major> cannot be opened", "cuDNN cases cannot run",
     "install cuDNN of the major the build used"},
    {"programs that link cuDNN stop before main (exit 127); those that open it at run time fail "
     "their first cuDNN call",
     ""}};

const rule cudnn_version{
    "cudnn-version",
    finding_severity::error, // ok where the loaded cuDNN satisfies the build
    "cuda.version_mismatch.cudnn_compiled_vs_loaded",
    "cudnn-version-rule",
    {},
    {"cuDNN loaded vs built: same major, loaded minor >= built minor",
     "an older or other-major cuDNN may lack what the build uses",
     "load the cuDNN the build needs, or rebuild"},
    {"cuDNN promises nothing across majors, and within one only that a newer minor runs what an "
     "older one built: an older loaded cuDNN may lack engines or symbols the build uses",
     ""}};

const rule cudnn_mixed{
    "cudnn-mixed",
    finding_severity::error,
    "cuda.version_mismatch.cudnn_compiled_vs_loaded",
    "cudnn-sub-libraries",
    {},
    {"cuDNN's sub-library version checks, each in its own process (a mixed install can abort "
     "the process)",
     "sub-libraries from two releases fail or abort", "keep one cuDNN on the loader's path"},
    {"cuDNN 9 loads its sub-libraries (graph, ops, cnn, adv, engines) by name; copies from two "
     "installs (a pip wheel and the system) fail the version checks "
     "(CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH) or abort the process",
     "keep one cuDNN on the loader's path: remove the other copy's folder from LD_LIBRARY_PATH"}};

finding missing_cudnn(const facts& f) {
    finding missing =
        cudnn_missing.found("cuDNN is not on the loader's path: the cuDNN cases cannot run",
                            "dlopen: " + text(at(f.cudnn, "load_error")));
    missing.fix = "install cuDNN " +
                  cudnn_version_text(integer(at(f.cudnn, "compiled_version")).value_or(0)) +
                  " or newer of the same major, or add its folder to LD_LIBRARY_PATH";
    return missing;
}

// cudnnGetVersion's major and minor (cudnn_version_text decodes the same numbers).
long long cudnn_major(long long v) {
    return v >= 90000 ? v / 10000 : v / 1000;
}
long long cudnn_minor(long long v) {
    return v >= 90000 ? v % 10000 / 100 : v % 1000 / 100;
}

/// The loaded cuDNN against the one the build was compiled with: the same major, a minor no
/// older.
void compare_cudnn_versions(const facts& f, findings& out) {
    const auto built = integer(at(f.cudnn, "compiled_version"));
    const auto loaded = integer(at(f.cudnn, "loaded_version"));
    if (!built || !loaded)
        return;
    const std::string b = cudnn_version_text(*built), l = cudnn_version_text(*loaded);
    std::string observed =
        "built against " + b + ", loaded " + l + " from " + text(at(f.cudnn, "loaded_from"), "?");
    const bool other_major = cudnn_major(*built) != cudnn_major(*loaded);
    if (!other_major && cudnn_minor(*loaded) >= cudnn_minor(*built)) {
        finding fits =
            cudnn_version.found("cuDNN " + l + " loaded, built against " + b, std::move(observed));
        fits.severity = finding_severity::ok;
        fits.why.clear();
        out.push_back(std::move(fits));
        return;
    }
    finding mismatch = cudnn_version.found("cuDNN " + l + " is loaded but this build needs " + b +
                                               (other_major ? " (another major)" : " or newer"),
                                           std::move(observed));
    mismatch.fix = "put cuDNN " + b + " or a newer " + std::to_string(cudnn_major(*built)) +
                   ".x first on the loader's path (a pip wheel's folder or the system's), or "
                   "rebuild against the cuDNN you load";
    out.push_back(std::move(mismatch));
}

/// The probe runs each sub-library's version check in a process of its own: any answer but
/// success means copies of two releases.
void check_cudnn_sub_libraries(const facts& f, findings& out) {
    std::vector<std::string> failed;
    if (const json& sub = at(f.cudnn, "sublibrary_checks"); sub.is_object())
        for (const auto& [name, answer] : sub.items())
            if (text(answer).rfind("CUDNN_STATUS_SUCCESS", 0) != 0)
                failed.push_back(name + ": " + text(answer, "?"));
    if (failed.empty())
        return;
    std::string observed;
    for (const auto& s : failed)
        observed += (observed.empty() ? "" : "; ") + s;
    out.push_back(cudnn_mixed.found(
        "cuDNN's sub-libraries are of different releases (" + failed.front() + ")", observed));
}

void check_cudnn(const facts& f, findings& out) {
    if (!f.cudnn.is_object() || f.cudnn.contains("unavailable"))
        return;
    if (f.cudnn.contains("load_error")) {
        out.push_back(missing_cudnn(f));
        return;
    }
    compare_cudnn_versions(f, out);
    check_cudnn_sub_libraries(f, out);
}

// ---- copies on the loader's path ----

const rule duplicate_library{
    "duplicate-library",
    finding_severity::warning, // ok where the copies are of one version
    "cuda.version_mismatch.cudnn_compiled_vs_loaded",
    "duplicate-libraries",
    {},
    {"two or more copies of one CUDA library soname in the loader's folders (LD_LIBRARY_PATH, "
     "ld.so.conf, system folders)",
     "which one loads depends on the order alone", "keep one copy"},
    {"the first folder in LD_LIBRARY_PATH / ld.so.conf order wins; another program, or another "
     "sub-library, may load the other copy (a pip wheel's cuDNN beside the system's is the usual "
     "case)",
     "keep one copy on the loader's path, or make sure the one you mean comes first"}};

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
        const bool differ = versions.size() > 1;
        finding found = duplicate_library.found(std::to_string(list.size()) + " copies of " +
                                                    soname + " on the loader's path" +
                                                    (differ ? " (versions differ)" : ""),
                                                "first found, and loaded: " + observed);
        if (!differ)
            found.severity = finding_severity::ok;
        if (soname.rfind("libcudart", 0) == 0)
            found.why = "two CUDA runtimes: " + found.why;
        out.push_back(std::move(found));
    }
}

} // namespace

check cublas_check() {
    return {check_cublas, {&cublas_missing}};
}

check cudnn_check() {
    return {check_cudnn, {&cudnn_missing, &cudnn_version, &cudnn_mixed}};
}

check loader_copies_check() {
    return {check_loader_copies, {&duplicate_library}};
}

} // namespace pitfall::runner::doctor
