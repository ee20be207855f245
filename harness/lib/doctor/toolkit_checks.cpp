// The CUDA toolkit a rebuild would use (nvcc on PATH, $CUDA_HOME/bin/nvcc) against the CUDA
// runtime this build loads: the facts (each nvcc asked its release in a child process) and the
// rule over them.
#include "doctor/registry.hpp"

#include "pitfall/detail/process.hpp"

#include <cstdlib>
#include <sys/stat.h>
#include <unistd.h>

namespace pitfall::runner {
namespace {

using nlohmann::json;

/// An executable regular file (a folder named nvcc, or a file without x, is not one).
bool is_executable_file(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
           ::access(path.c_str(), X_OK) == 0;
}

/// The first executable `nvcc` on a PATH value, as execvp finds it (an empty entry is the
/// current folder); "" where there is none.
std::string nvcc_on(const std::string& path) {
    for (std::size_t start = 0; start <= path.size();) {
        std::size_t colon = path.find(':', start);
        if (colon == std::string::npos)
            colon = path.size();
        const std::string dir = colon == start ? "." : path.substr(start, colon - start);
        if (std::string candidate = dir + "/nvcc"; is_executable_file(candidate))
            return candidate;
        start = colon + 1;
    }
    return "";
}

} // namespace

std::string nvcc_release(const std::string& version_output) {
    // "Cuda compilation tools, release 13.0, V13.0.88": the digits and the one dot after it.
    const std::string key = "release ";
    const auto at = version_output.find(key);
    if (at == std::string::npos)
        return "";
    std::string release;
    bool dot = false;
    for (std::size_t i = at + key.size(); i < version_output.size() && release.size() < 12; ++i) {
        const char c = version_output[i];
        if (c >= '0' && c <= '9')
            release += c;
        else if (c == '.' && !dot && !release.empty())
            dot = true, release += c;
        else
            break;
    }
    return dot && release.back() != '.' ? release : "";
}

namespace {
/// `nvcc --version` in a child process (argv, no shell; 20 s at most): its release, or why not.
json ask_nvcc(const std::string& nvcc) {
    json entry = {{"nvcc", nvcc}};
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/pitfall-nvcc-XXXXXX";
    const int fd = ::mkstemp(pattern.data());
    if (fd < 0) {
        entry["error"] = "cannot make a file under $TMPDIR for nvcc's answer";
        return entry;
    }
    ::close(fd);
    process_request request;
    request.argv = {nvcc, "--version"};
    request.output_path = pattern;
    request.timeout_seconds = 20;
    const process_outcome out = run_process(request);
    const std::string said = read_tail(pattern, 4096);
    ::unlink(pattern.c_str());
    if (!out.started)
        entry["error"] = "did not start: " + out.start_error;
    else if (out.timed_out)
        entry["error"] = "`nvcc --version` did not answer within 20 s";
    else if (out.exit_code.value_or(-1) != 0)
        entry["error"] = "`nvcc --version` failed (" +
                         (out.signal ? signal_name(*out.signal)
                                     : "exit " + std::to_string(out.exit_code.value_or(-1))) +
                         ")";
    else if (const std::string release = nvcc_release(said); release.empty())
        entry["error"] = "`nvcc --version` names no release";
    else
        entry["release"] = release;
    return entry;
}
} // namespace

json toolkit_facts(const std::optional<std::string>& path,
                   const std::optional<std::pair<std::string, std::string>>& cuda_home) {
    json facts = json::object();
    const std::string on_path = path ? nvcc_on(*path) : "";
    facts["path"] = on_path.empty() ? json{{"error", "no nvcc on PATH"}} : ask_nvcc(on_path);
    if (cuda_home) {
        const std::string nvcc = cuda_home->second + "/bin/nvcc";
        json home = is_executable_file(nvcc)
                        ? ask_nvcc(nvcc)
                        : json{{"nvcc", nvcc}, {"error", "no executable bin/nvcc there"}};
        home["variable"] = cuda_home->first;
        home["folder"] = cuda_home->second;
        facts["cuda_home"] = std::move(home);
    }
    return facts;
}

json toolkit_facts_of_environment() {
    std::optional<std::string> path;
    if (const char* p = std::getenv("PATH"))
        path = p;
    std::optional<std::pair<std::string, std::string>> home;
    // PyTorch's cpp_extension and CMake's FindCUDAToolkit read CUDA_HOME, then CUDA_PATH.
    for (const char* name : {"CUDA_HOME", "CUDA_PATH"})
        if (const char* v = std::getenv(name); v != nullptr && *v != '\0' && !home)
            home = std::make_pair(std::string(name), std::string(v));
    return toolkit_facts(path, home);
}

namespace doctor {
namespace {

const rule toolkit_mismatch{
    "toolkit-mismatch",
    finding_severity::warning,
    "cuda.toolkit_path_mismatch.reproduce_rebuild_with_path_toolkit",
    "toolkit-on-path",
    {},
    {"the release of nvcc on PATH and of $CUDA_HOME/bin/nvcc (CUDA_PATH where CUDA_HOME is "
     "unset), asked with `nvcc --version`, against the CUDA runtime this build loads",
     "a rebuild compiles with one toolkit while the program loads another runtime",
     "point PATH and CUDA_HOME at the toolkit of the runtime loaded, or rebuild everything with "
     "one toolkit"},
    {"what a rebuild compiles (an extension, a plugin, this suite) takes the headers, PTX ISA "
     "and runtime symbols of the toolkit it finds, while the process loads another runtime: "
     "PTX newer than the driver is refused (cudaErrorUnsupportedPtxVersion, 222), objects "
     "from a newer toolkit need runtime symbols an older libcudart lacks, and build tools "
     "refuse outright (PyTorch: \"The detected CUDA version mismatches the version that was "
     "used to compile PyTorch\")",
     "put the loaded runtime's toolkit first on PATH and set CUDA_HOME to it (or install the "
     "build of the framework made for the toolkit you have), then rebuild"}};

const rule toolkit_matches{"toolkit",
                           finding_severity::ok,
                           "cuda.toolkit_path_mismatch.remedy_rebuild_with_matching_toolkit",
                           "toolkit-on-path",
                           {},
                           {"nvcc on PATH and in CUDA_HOME match the runtime loaded", "", ""},
                           {"", ""}};

/// "PATH: /usr/local/cuda/bin/nvcc, release 13.0" and the like.
std::string describe(const char* label, const json& entry) {
    std::string s = std::string(label) + ": ";
    if (const std::string v = text(at(entry, "variable")); !v.empty())
        s = v + "=" + text(at(entry, "folder")) + ": ";
    s += text(at(entry, "nvcc"), "");
    if (const std::string release = text(at(entry, "release")); !release.empty())
        return s + (s.back() == ' ' ? "" : ", ") + "release " + release;
    return s + (s.back() == ' ' ? "" : ", ") + text(at(entry, "error"), "unknown");
}

/// The runtime to compare with: the one loaded (cudaRuntimeGetVersion), else the build's.
std::optional<long long> runtime_of(const facts& f) {
    if (f.runtime_version)
        return f.runtime_version;
    return integer(at(f.cuda, "compiled_runtime_version"));
}

void check_toolkits(const facts& f, findings& out) {
    const json& toolkits = at(f.fingerprint, "toolkits");
    const std::optional<long long> runtime = runtime_of(f);
    if (!toolkits.is_object() || !runtime || *runtime <= 0)
        return; // not asked (a run, not doctor), or no CUDA runtime to compare with
    const std::string runtime_release = cuda_version_text(*runtime);
    std::string observed = "runtime loaded: CUDA " + runtime_release;
    std::string differing;
    bool any_release = false;
    for (const auto& [key, label] : {std::pair{"path", "PATH"}, {"cuda_home", "CUDA_HOME"}}) {
        const json& entry = at(toolkits, key);
        if (!entry.is_object())
            continue;
        observed += "; " + describe(label, entry);
        const std::string release = text(at(entry, "release"));
        any_release = any_release || !release.empty();
        const bool home_broken = std::string(key) == "cuda_home" && release.empty();
        if ((!release.empty() && release != runtime_release) || home_broken)
            differing +=
                std::string(differing.empty() ? "" : " and ") +
                (std::string(key) == "path" ? "nvcc on PATH" : text(at(entry, "variable"), label)) +
                (release.empty() ? " (no nvcc)" : " (CUDA " + release + ")");
    }
    if (!differing.empty())
        out.push_back(toolkit_mismatch.found(
            "the toolkit a rebuild would use differs from the runtime loaded: " + differing +
                ", runtime CUDA " + runtime_release,
            observed));
    else if (any_release)
        out.push_back(toolkit_matches.found(
            "nvcc on PATH and CUDA_HOME match the runtime loaded (CUDA " + runtime_release + ")",
            observed));
}

} // namespace

check toolkit_check() {
    return {check_toolkits, {&toolkit_mismatch, &toolkit_matches}};
}

} // namespace doctor
} // namespace pitfall::runner
