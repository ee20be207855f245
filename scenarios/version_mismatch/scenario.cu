// version_mismatch: the versions a GPU program was built against vs the ones it meets.
//
// What
//   Five ways the pieces of a CUDA stack disagree, each observed through the libraries' own
//   calls (never `nvidia-smi`, `nvcc --version` or a file name on PATH, which describe what is
//   installed, not what this process loaded):
//     runtime_vs_driver        cudaRuntimeGetVersion / cudaDriverGetVersion (and NVML's driver
//                              branch, where libnvidia-ml loads) against the minimum-driver table;
//                              the outcome is what the first device call really answers.
//     cudnn_compiled_vs_loaded CUDNN_VERSION (our headers) vs cudnnGetVersion() (the library
//                              loaded), cuDNN's cudart vs ours, the four sub-library version
//                              checks, and cuDNN's major/minor rule.
//     arch_coverage            the SASS and PTX embedded in this very program (its .nv_fatbin,
//                              read from /proc/self/exe) against the device's compute capability:
//                              which devices run it from SASS, which by PTX JIT, which fail.
//     missing_library          the program re-executed through the dynamic loader with cuDNN kept
//                              off the loader's path: its first cuDNN call cannot open it (on
//                              the CPU path OpenBLAS, linked: the loader stops it before main).
//     stub_driver              the toolkit's stub libcuda.so offered as the driver to a child.
//
// Why it fails
//   A CUDA program carries a runtime (libcudart) that needs a driver at least as new as its
//   major release (CUDA Compatibility guide, "Minor Version Compatibility", Table 1: 13.x needs
//   a >= 580 driver, 12.x >= 525, 11.x >= 450); with an older driver, or none, the first device
//   call answers cudaErrorInsufficientDriver. cuDNN is binary compatible only within a major
//   release and only towards newer minors (cuDNN developer guide, "API Compatibility"), and
//   mixed installs (a pip wheel's libcudnn beside the system's sub-libraries) fail its
//   sub-library checks. A kernel runs only where the binary holds SASS of the device's major
//   architecture with a minor no newer than the device's, or PTX no newer than the device that
//   the driver can JIT (CUDA C++ Programming Guide, "Binary Compatibility", "PTX Compatibility");
//   arch-specific targets (sm_90a, compute_90a) serve that one compute capability only, and
//   family-specific ones (sm_100f, compute_100f) only their major ("Feature Availability");
//   otherwise its launch answers cudaErrorNoKernelImageForDevice, or, for PTX of a newer PTX
//   ISA than the driver knows, cudaErrorUnsupportedPtxVersion. A NEEDED library the loader
//   cannot find stops the process before main with exit 127; one opened with dlopen when first
//   needed (as these programs open cuBLAS and cuDNN, and as frameworks do) fails that call,
//   dlerror() saying "cannot open shared object file". And the toolkit ships a stub
//   libcuda.so for linking only: loaded as the driver it answers cudaErrorStubLibrary.
//   On the CPU the same failures exist in their host form: a binary that needs a newer glibc
//   (GLIBC_2.34) than the system has, headers of one OpenBLAS and the library of another, code
//   compiled for an ISA the CPU lacks (SIGILL), a BLAS missing at start-up.
//
// Expected per backend
//   cuda, here (CUDA 13.0 toolkit, cuDNN 9.19, no driver): runtime_vs_driver ends in
//         cudaErrorInsufficientDriver with driver version 0, as predicted; cudnn_compiled_vs_loaded
//         is ok (91900 built and loaded, its cudart 13010 vs our 13000: same major, four checks
//         SUCCESS); arch_coverage is ok with a prediction only (no device; the default build's
//         SASS sm_75/80/86/89/90 + PTX compute_90: 7.0 fails, 7.5..9.0 SASS, 10.0/12.0 PTX JIT);
//         missing_library is the error host library_not_loaded (stage init) of the first cuDNN
//         call: "libcudnn.so.9 could not be loaded: libcudnn.so.9: cannot open shared object
//         file: No such file or directory" (where cuDNN sits in the loader's system directories,
//         as apt installs it in NVIDIA's cuDNN images, cuBLAS is hidden instead and named:
//         libcublas.so.13). Until cuBLAS and cuDNN were opened on first call, the program
//         linked them, and the loader stopped it before main (exit 127, a load_error);
//         stub_driver is cudaErrorStubLibrary (stage init) from the child.
//   cuda, hopper-cuda13 (H100, driver >= 580): runtime_vs_driver ok; arch_coverage launches
//         from sm_90 SASS (with CUDA_FORCE_PTX_JIT=1 from compute_90 PTX; a build without
//         sm_90/compute_90 fails with cudaErrorNoKernelImageForDevice); the rest as here when the
//         suite is built against the image's own cuDNN. On an H100 machine of ours
//         (2026-11-22; driver 580.159.04, cuDNN 9.14 installed
//         in /usr/lib/x86_64-linux-gnu): all of that,
//         cuBLAS hidden instead of cuDNN, and this program built here against cuDNN 9.19 ending
//         in cudnn_loaded_minor_older: the very mismatch this case exists to catch.
//   cuda, ada-ampere-cuda12: this suite as built here (CUDA 13.0 runtime) on that profile's CUDA
//         12 driver (R525..R575, cudaDriverGetVersion 12xxx): the driver's major (12) is older
//         than the runtime's (13) and below 580, so by the guide's Table 1 the first device call
//         answers cudaErrorInsufficientDriver; minor-version compatibility only spans one major
//         and forward compatibility (cuda-compat) is for data-center GPUs, not Ada/Ampere
//         consumer parts. A suite built with a 12.x toolkit would be ok there instead.
//   cpu   runtime_vs_driver: ok (the GLIBC_ versions we need vs gnu_get_libc_version());
//         cudnn_compiled_vs_loaded: ok (OpenBLAS headers vs openblas_get_config());
//         arch_coverage: ok (compiled x86-64 level vs the CPU's, OpenBLAS's run-time core);
//         missing_library: UNSUPPORTED where OpenBLAS sits in the loader's built-in system
//         directories (Debian: /lib/x86_64-linux-gnu), which no library path hides;
//         stub_driver: UNSUPPORTED (the CPU path loads no driver).
//
// Remedy
//   The matching combination, checked from the libraries' own answers: a driver of the branch
//   the runtime's major needs; the cuDNN the program was built against (same major, same or
//   newer minor, every sub-library from the same release); SASS for every architecture the
//   program must run on plus PTX of the newest for the GPUs after it; every NEEDED library on
//   the loader's path (or dlopen with a clear message); the real libcuda.so.1 from the driver,
//   never the toolkit's stub, ahead of LD_LIBRARY_PATH.
//
// Seed
//   002 ("inconsistencies between the TensorFlow runtime environment, the CUDA toolkit, cuDNN
//   libraries, and the GPU hardware"; "incompatible with the CUDA driver version installed"),
//   003 (version alignment of TensorFlow, CUDA and cuDNN before the GPU is used at all), 004
//   (CUDA/cuDNN misconfiguration: the code "runs without error but solely on the CPU").
//   Facts: docs/cuda-rules.md#versions-and-architectures, #loader-and-libraries, #stub-libcuda,
//   #cudnn; PyTorch's collect_env reporting the system cuDNN instead of the loaded one
//   (pytorch/pytorch#78489) is why every version here comes from the loaded library.
// Baselines per backend and profile (generated by ci/catalog.py from expected/; do not edit):
//   cpu   host: observed on AMD EPYC: 2 UNSUPPORTED, 3 probes
//   cuda  no-gpu: observed without a GPU: 2 predicted, 3 probes
//   cuda  hopper-cuda13: documented, never observed: 1 probe
//   cuda  hopper-cuda13: observed on NVIDIA H200 (run not kept): 2 reproduced on the GPU, 2 probes
//   cuda  hopper-cuda11-12: documented, never observed: 2 predicted, 3 probes
//   cuda  ada-ampere-cuda12: documented, never observed: 2 predicted, 3 probes
//   cuda  driver-no-device: observed without a GPU (run not kept): 2 probes
// (end of the generated baselines)
#include "pitfall/cuda/math_libraries.hpp" // cuBLAS and cuDNN are opened on first call
#include "pitfall/cuda/status.hpp"
#include "pitfall/fatbin.hpp"
#include "pitfall/scenario.hpp"
#if PITFALL_HAS_CUDNN
#include "pitfall/cudnn.hpp"
#endif

#include <cblas.h> // OpenBLAS: openblas_get_config() and OPENBLAS_VERSION (openblas_config.h)
#include <nlohmann/json.hpp>

#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <gnu/libc-version.h>
#include <link.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <cpuid.h> // __get_cpuid: the CPU analog reads x86-64 levels itself
#endif

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

extern char** environ; // execve's environment for the missing_library re-execution

namespace version_mismatch {

using pitfall::context;
using pitfall::host_error;
using pitfall::stage;
using pitfall::status;

// =============================================================================================
// Small helpers: lists and dotted versions.
// =============================================================================================

/// "7.0, 7.5" -> {"7.0", "7.5"}: empty parts dropped, spaces too unless `keep_spaces`.
std::vector<std::string> split(const std::string& text, char separator, bool keep_spaces = false) {
    std::vector<std::string> parts;
    std::string part;
    for (const char c : text) {
        if (c == separator) {
            parts.push_back(part);
            part.clear();
        } else if (c != ' ' || keep_spaces) {
            part += c;
        }
    }
    parts.push_back(part);
    parts.erase(std::remove(parts.begin(), parts.end(), std::string()), parts.end());
    return parts;
}

std::string join(const std::vector<std::string>& parts, const std::string& separator) {
    std::string out;
    for (const auto& p : parts)
        out += (out.empty() ? "" : separator) + p;
    return out;
}

/// "2.34" -> {2, 34}, "3.4.30" -> {3, 4, 30}; nullopt unless every part is a number.
std::optional<std::vector<int>> parse_dotted(const std::string& text) {
    std::vector<int> numbers;
    for (const auto& part : split(text, '.')) {
        if (part.empty() || part.size() > 6 ||
            !std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; }))
            return std::nullopt;
        numbers.push_back(std::stoi(part));
    }
    if (numbers.empty())
        return std::nullopt;
    return numbers;
}

// =============================================================================================
// What this process has loaded, asked of the dynamic loader itself (dl_iterate_phdr): the
// libraries actually in use, not the ones a package manager says are installed.
// =============================================================================================

std::vector<std::string> loaded_objects() {
    std::vector<std::string> names;
    dl_iterate_phdr(
        [](struct dl_phdr_info* info, std::size_t, void* data) {
            if (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0')
                static_cast<std::vector<std::string>*>(data)->emplace_back(info->dlpi_name);
            return 0;
        },
        &names);
    return names;
}

std::string base_name(const std::string& path) {
    const auto slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string dir_name(const std::string& path) {
    const auto slash = path.rfind('/');
    return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

/// The file a library path finally names: Debian's alternatives and the toolkit's versioned
/// symlinks (libcudnn.so.9 -> libcudnn.so.9.14.0) hide the release that is really in use.
std::string real_path(const std::string& path) {
    char resolved[PATH_MAX] = {};
    return ::realpath(path.c_str(), resolved) != nullptr ? std::string(resolved) : path;
}

/// The loaded objects whose file name starts with `prefix` ("libcudnn" also matches the
/// sub-libraries libcudnn_graph.so.9 and friends).
std::vector<std::string> loaded_matching(const std::string& prefix) {
    std::vector<std::string> found;
    for (const auto& name : loaded_objects())
        if (base_name(name).rfind(prefix, 0) == 0)
            found.push_back(name);
    return found;
}

/// "path -> real file" for every loaded object matching `prefix`: the evidence a version
/// report should carry, since two installs of one library differ only in where they live.
std::string describe_loaded(const std::string& prefix) {
    const auto found = loaded_matching(prefix);
    if (found.empty())
        return "none loaded";
    std::vector<std::string> shown;
    for (const auto& f : found)
        shown.push_back(f + (real_path(f) != f ? " -> " + real_path(f) : std::string()));
    return join(shown, ", ");
}

/// The program interpreter named in our own PT_INTERP ("/lib64/ld-linux-x86-64.so.2"): the
/// loader the kernel started us with, read from the program headers in memory.
std::optional<std::string> program_interpreter() {
    std::string interpreter;
    dl_iterate_phdr(
        [](struct dl_phdr_info* info, std::size_t, void* data) {
            for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i)
                if (info->dlpi_phdr[i].p_type == PT_INTERP)
                    *static_cast<std::string*>(data) =
                        reinterpret_cast<const char*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
            return 1; // the first object is the program itself
        },
        &interpreter);
    if (interpreter.empty())
        return std::nullopt;
    return interpreter;
}

/// This program's file (/proc/self/exe). Run through the loader explicitly, this names the
/// loader instead: missing_library therefore carries the program's path in its environment.
std::string self_executable() {
    char path[PATH_MAX] = {};
    const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
    return n > 0 ? std::string(path, static_cast<std::size_t>(n)) : std::string();
}

/// Where the symlink folders of missing_library and stub_driver go ($TMPDIR, else /tmp).
std::string temp_root() {
    const char* tmp = std::getenv("TMPDIR");
    return tmp != nullptr && tmp[0] != '\0' ? std::string(tmp) : std::string("/tmp");
}

// =============================================================================================
// This program's own ELF file (pitfall/fatbin.hpp reads it: section headers and the CUDA
// fatbinary, .nv_fatbin) and its version needs (.gnu.version_r), read here. Every read is
// bounds-checked: a malformed file is an error value.
// =============================================================================================

using pitfall::fatbin::cuda_version_text;
using pitfall::fatbin::elf_image;
using pitfall::fatbin::fatbin_image;
using pitfall::fatbin::fatbin_images;
using pitfall::fatbin::image_path;
using pitfall::fatbin::image_prediction;
using pitfall::fatbin::parse_compute_capability;
using pitfall::fatbin::predict_image;
using pitfall::fatbin::read_elf;

status malformed(const std::string& path, const std::string& what) {
    return PITFALL_HOST_ERROR(stage::init, host_error::malformed_elf, path + ": " + what);
}

/// One version a NEEDED library must define ("libc.so.6" needs "GLIBC_2.34"). The loader checks
/// each before main: a missing one stops the program ("version `GLIBC_2.34' not found").
struct version_need {
    std::string file;
    std::string version;
};

pitfall::status_or<std::vector<version_need>> version_needs(const elf_image& elf,
                                                            const std::string& path) {
    std::vector<version_need> needs;
    const Elf64_Shdr* table = elf.find_type(SHT_GNU_verneed);
    if (table == nullptr)
        return needs; // a program with no versioned symbols
    if (table->sh_link >= elf.sections.size())
        return malformed(path, ".gnu.version_r names no string table");
    const std::uint64_t strings = elf.sections[table->sh_link].sh_offset;
    std::uint64_t offset = table->sh_offset;
    for (std::uint64_t i = 0; i < table->sh_info; ++i) { // sh_info: the number of Verneed entries
        Elf64_Verneed need{};
        if (!elf.read_at(offset, need))
            return malformed(path, ".gnu.version_r entry out of the file");
        std::uint64_t aux_offset = offset + need.vn_aux;
        for (std::uint64_t j = 0; j < need.vn_cnt; ++j) {
            Elf64_Vernaux aux{};
            if (!elf.read_at(aux_offset, aux))
                return malformed(path, ".gnu.version_r auxiliary entry out of the file");
            needs.push_back(
                {elf.string_at(strings + need.vn_file), elf.string_at(strings + aux.vna_name)});
            aux_offset += aux.vna_next;
        }
        if (need.vn_next == 0)
            break;
        offset += need.vn_next;
    }
    return needs;
}

// =============================================================================================
// The documented rules, as small pure functions (checked below against hand-derived cases).
// Which image of the fatbinary a device runs is pitfall/fatbin.hpp's predict_image.
// =============================================================================================

/// CUDA Compatibility guide, "Minor Version Compatibility", Table 1: the oldest driver branch
/// a runtime of each major release runs on. 0: a major this table does not know.
int minimum_driver_branch(long long runtime_major) {
    switch (runtime_major) {
    case 13: return 580;
    case 12: return 525;
    case 11: return 450;
    default: return 0;
    }
}

/// cuDNN's version integer: 9.x encodes 10000 * major + 100 * minor + patch (91900 = 9.19.0);
/// 8.x and 7.x encoded 1000 * major + 100 * minor + patch (8907 = 8.9.7).
struct cudnn_version {
    long long major = 0;
    long long minor = 0;
    long long patch = 0;
    std::string text() const {
        return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
    }
};

cudnn_version decode_cudnn_version(long long v) {
    if (v >= 90000)
        return {v / 10000, (v % 10000) / 100, v % 100};
    return {v / 1000, (v % 1000) / 100, v % 100};
}

/// cuDNN developer guide, "API Compatibility": a library x.y runs a program built against
/// x.z when z <= y; no compatibility across majors; patch releases are interchangeable.
std::string cudnn_rule_verdict(long long built, long long loaded) {
    const cudnn_version b = decode_cudnn_version(built);
    const cudnn_version l = decode_cudnn_version(loaded);
    if (l.major != b.major)
        return "major_differs";
    if (l.minor < b.minor)
        return "loaded_minor_older";
    return "ok";
}

/// The error a verdict other than "ok" is reported as: "cudnn_" + the verdict, from the closed
/// set of pitfall's own names.
pitfall::pitfall_error cudnn_rule_error(const std::string& verdict) {
    return verdict == "major_differs" ? pitfall::pitfall_error::cudnn_major_differs
                                      : pitfall::pitfall_error::cudnn_loaded_minor_older;
}

// =============================================================================================
// The dynamic loader, driven on purpose (missing_library). The case re-executes itself through
// its own program interpreter with a library path that holds every library this process loaded
// except the hidden one, with the loader's cache (--inhibit-cache) and the program's RUNPATH
// (--inhibit-rpath "": the main program's link-map name is empty) out of the way. If the
// library is findable nowhere else, the loader says so: for a NEEDED library (OpenBLAS, on the
// CPU path) it stops before main, "error while loading shared libraries: libopenblas.so.0:
// cannot open shared object file", exit 127, which the harness records as a load_error; cuBLAS
// and cuDNN, which the SDK opens on first call, are opened by this case in its next life, and
// the dlopen's failure, in the same words, is the case's error (library_not_loaded). The
// first life opens the library too, so that there is a file to keep off the path (one that
// cannot be opened even then is missing already: that is the answer). If the library opens
// anyway, the loader found it in a directory no option removes (its built-in system directories:
// NVIDIA's cuDNN images install libcudnn there with apt, and so does an H100 machine we ran on).
// Then the next candidate is hidden (cuBLAS, which CUDA images keep under /usr/local/cuda), and
// when none can be hidden the case is UNSUPPORTED, naming where the loader found each.
// =============================================================================================

constexpr const char* hidden_env = "PITFALL_VERSION_MISMATCH_HIDDEN";           // "libcudnn"
constexpr const char* hidden_dir_env = "PITFALL_VERSION_MISMATCH_LIBRARY_PATH"; // its folder
constexpr const char* program_env = "PITFALL_VERSION_MISMATCH_PROGRAM";         // our own path
constexpr const char* found_env = "PITFALL_VERSION_MISMATCH_FOUND"; // "libcudnn=/lib/...;"
constexpr const char* loader_dir_prefix = "pitfall-loader-path-";

/// Removes a folder of symlinks made by an earlier run (only symlinks; anything else stays).
void remove_symlink_folder(const std::string& dir) {
    if (DIR* d = ::opendir(dir.c_str())) {
        while (const dirent* e = ::readdir(d)) {
            const std::string entry = dir + "/" + e->d_name;
            struct stat st {};
            if (::lstat(entry.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
                ::unlink(entry.c_str());
        }
        ::closedir(d);
    }
    ::rmdir(dir.c_str());
}

/// A re-execution that the loader stopped cannot clean up its folder: the next run removes the
/// folders whose process (the pid in the name) no longer exists.
void sweep_stale_loader_folders() {
    const std::string root = temp_root();
    DIR* d = ::opendir(root.c_str());
    if (d == nullptr)
        return;
    std::vector<std::string> stale;
    while (const dirent* e = ::readdir(d)) {
        const std::string name = e->d_name;
        if (name.rfind(loader_dir_prefix, 0) != 0)
            continue;
        const long pid = std::strtol(name.c_str() + std::strlen(loader_dir_prefix), nullptr, 10);
        struct stat st {};
        if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH &&
            ::lstat((root + "/" + name).c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
            st.st_uid == ::getuid())
            stale.push_back(root + "/" + name);
    }
    ::closedir(d);
    for (const auto& dir : stale)
        remove_symlink_folder(dir);
}

/// This process's own argument vector, as the kernel keeps it. Run through the loader, it
/// starts with the loader and its options: the program's own arguments follow `program`.
std::vector<std::string> own_arguments(const std::string& program) {
    std::ifstream in("/proc/self/cmdline", std::ios::binary);
    const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::string> args;
    std::string current;
    for (const char c : all) {
        if (c == '\0') {
            args.push_back(current);
            current.clear();
        } else {
            current += c;
        }
    }
    const auto at = std::find(args.begin(), args.end(), program);
    args.erase(args.begin(), at == args.end() ? args.begin() + (args.empty() ? 0 : 1) : at + 1);
    return args;
}

/// Replaces this process with the loader running this program again, `prefix`* kept off its
/// path. Returns only when that could not even be tried.
status reexecute_without(context& ctx, const std::string& prefix, const std::string& program,
                         const std::string& found, const std::string& previous_dir) {
    const std::optional<std::string> interpreter = program_interpreter();
    if (!interpreter || program.empty())
        return PITFALL_UNSUPPORTED("no program interpreter (PT_INTERP) or /proc/self/exe: a "
                                   "statically linked program has no loader to drive");
    ctx.record_info("program_interpreter", *interpreter);

    // The library path: a symlink, named as loaded, for every library except the hidden ones.
    std::string dir =
        temp_root() + "/" + loader_dir_prefix + std::to_string(::getpid()) + "-XXXXXX";
    if (::mkdtemp(dir.data()) == nullptr)
        return PITFALL_HOST_ERROR(stage::init, host_error::no_temp_dir,
                                  "cannot create " + dir + ": " + std::strerror(errno));
    for (const auto& object : loaded_objects()) {
        if (object.find('/') == std::string::npos || real_path(object) == real_path(*interpreter) ||
            base_name(object).rfind(prefix, 0) == 0)
            continue; // the vDSO, the loader itself, and what we hide
        const std::string link = dir + "/" + base_name(object);
        if (::symlink(real_path(object).c_str(), link.c_str()) != 0 && errno != EEXIST) {
            const int saved = errno;
            remove_symlink_folder(dir);
            return PITFALL_HOST_ERROR(stage::init, host_error::symlink_failed,
                                      link + ": " + std::strerror(saved));
        }
    }

    // argv: the loader, its options, then this program with the arguments the harness gave us
    // (so the loader's message names the program, and the result path is the harness's own).
    std::vector<std::string> args = {
        *interpreter, "--inhibit-cache", "--inhibit-rpath", "", "--library-path", dir, program};
    const std::vector<std::string> original = own_arguments(program);
    args.insert(args.end(), original.begin(), original.end());
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
        const std::string kv = *e;
        bool ours = false;
        for (const char* key : {hidden_env, hidden_dir_env, program_env, found_env})
            ours = ours || kv.rfind(std::string(key) + "=", 0) == 0;
        if (!ours)
            env.push_back(kv);
    }
    env.push_back(std::string(hidden_env) + "=" + prefix);
    env.push_back(std::string(hidden_dir_env) + "=" + dir);
    env.push_back(std::string(program_env) + "=" + program);
    env.push_back(std::string(found_env) + "=" + found);
    // The previous life's folder goes only now: the libraries this process loaded through its
    // symlinks were resolved above.
    if (!previous_dir.empty())
        remove_symlink_folder(previous_dir);
    std::vector<char*> argv_c;
    std::vector<char*> envp_c;
    for (auto& a : args)
        argv_c.push_back(a.data());
    argv_c.push_back(nullptr);
    for (auto& kv : env)
        envp_c.push_back(kv.data());
    envp_c.push_back(nullptr);

    std::fprintf(stderr,
                 "version_mismatch/missing_library: re-executing through %s with %s* kept off "
                 "the loader's path (--library-path %s, --inhibit-cache, --inhibit-rpath \"\")\n",
                 interpreter->c_str(), prefix.c_str(), dir.c_str());
    std::fflush(nullptr);
    // Deliberate: this process becomes the loader running this program again. On success
    // execve does not return; what follows is the loader's outcome (exit 127 before main), or
    // this program's next life in run_without_library() (where a library opened on first call
    // meets the loader's answer).
    ::execve(interpreter->c_str(), argv_c.data(), envp_c.data());
    const int saved = errno;
    remove_symlink_folder(dir);
    return PITFALL_HOST_ERROR(stage::init, host_error::execve_failed,
                              *interpreter + ": " + std::strerror(saved));
}

#if PITFALL_HAS_CUDA
/// cuBLAS and cuDNN are not the loader's to load at start-up: the SDK opens them when first
/// called (pitfall/cuda/math_libraries.hpp). nullopt for a library the program links.
std::optional<pitfall::cuda::math_library> opened_on_first_call(const std::string& prefix) {
    if (prefix == "libcudnn")
        return pitfall::cuda::math_library::cudnn;
    if (prefix == "libcublas")
        return pitfall::cuda::math_library::cublas;
    return std::nullopt;
}
#endif

/// What to hide, in order: cuDNN, else cuBLAS (the GPU build); OpenBLAS (the CPU path).
std::vector<std::string> libraries_to_hide(const std::string& hide, pitfall::backend_kind backend) {
    if (hide != "auto")
        return {"lib" + hide};
    if (backend == pitfall::backend_kind::cuda)
        return {"libcudnn", "libcublas"};
    return {"libopenblas"};
}

/// What an earlier life of this case left in the environment for this one (all empty in the
/// first life, the program then being this executable).
struct earlier_life {
    std::string found;        ///< "libcudnn=/lib/...;": libraries the loader found anyway
    std::string program;      ///< our own path
    std::string previous_dir; ///< the folder of symlinks the earlier life made
    std::string hidden;       ///< the library kept off the loader's path for this life
};

/// Reads the earlier life's variables and removes them from the environment.
earlier_life take_earlier_life() {
    earlier_life life;
    life.found = std::getenv(found_env) != nullptr ? std::getenv(found_env) : "";
    life.program =
        std::getenv(program_env) != nullptr ? std::getenv(program_env) : self_executable();
    life.previous_dir = std::getenv(hidden_dir_env) != nullptr ? std::getenv(hidden_dir_env) : "";
    life.hidden = std::getenv(hidden_env) != nullptr ? std::getenv(hidden_env) : std::string();
    for (const char* key : {hidden_env, hidden_dir_env, program_env, found_env})
        ::unsetenv(key);
    return life;
}

/// A later life: the library hidden from it, opened on first call where it is one of those;
/// its failure is returned. Otherwise notes in `life.found` where the loader found it anyway.
status try_hidden_library(context& ctx, earlier_life& life) {
#if PITFALL_HAS_CUDA
    // The hidden library is opened by its first call, now: the loader's answer to that
    // dlopen, a missing library in its own words, is this case's outcome.
    if (const auto lib = opened_on_first_call(life.hidden)) {
        const status opened = pitfall::cuda::open_library(*lib);
        if (!opened.is_ok()) {
            ctx.record_info("hidden_library", life.hidden);
            if (!life.found.empty())
                ctx.record_info("found_anyway", life.found);
            if (!life.previous_dir.empty())
                remove_symlink_folder(life.previous_dir);
            return opened;
        }
    }
#else
    (void)ctx;
#endif
    const auto where = loaded_matching(life.hidden);
    life.found += life.hidden + "=" + (where.empty() ? std::string("?") : where.front()) + ";";
    return status::ok();
}

#if PITFALL_HAS_CUDA
/// A candidate opened on first call is opened here, as its first call would: a file to keep off
/// the loader's path, or, when even that fails, the missing library this case is about, hidden
/// or not (returned). `skip`: not in this build, nothing to hide.
status open_candidate_first(context& ctx, const std::string& prefix, earlier_life& life,
                            bool& skip) {
    skip = false;
    if (const auto lib = opened_on_first_call(prefix)) {
        const status opened = pitfall::cuda::open_library(*lib);
        if (opened.is_unsupported()) {
            life.found += prefix + "=(not in this build);";
            skip = true;
            return status::ok();
        }
        if (!opened.is_ok()) {
            ctx.record_info("hidden_library", "none: " + prefix + " is missing already");
            if (!life.previous_dir.empty())
                remove_symlink_folder(life.previous_dir);
            return opened;
        }
    }
    return status::ok();
}
#endif

/// Hides the first candidate the loader loaded at start-up and starts this program again
/// without it (the outcome is then the new life's). nullopt: none could be hidden.
std::optional<status> hide_first_candidate(context& ctx, const std::vector<std::string>& candidates,
                                           earlier_life& life) {
    for (const auto& prefix : candidates) {
        if (life.found.find(prefix + "=") != std::string::npos)
            continue; // tried: the loader found it anyway
#if PITFALL_HAS_CUDA
        bool skip = false;
        const status opened = open_candidate_first(ctx, prefix, life, skip);
        if (!opened.is_ok())
            return opened;
        if (skip)
            continue;
#endif
        if (loaded_matching(prefix).empty()) {
            life.found += prefix + "=(not loaded at start-up: nothing to hide);";
            continue;
        }
        sweep_stale_loader_folders();
        ctx.record_info("hidden_library", prefix);
        return reexecute_without(ctx, prefix, life.program, life.found, life.previous_dir);
    }
    return std::nullopt;
}

/// Nothing could be hidden: say where the loader found each one.
status nothing_could_be_hidden(const std::string& found) {
    std::string where;
    for (const auto& entry : split(found, ';', true)) {
        const auto eq = entry.find('=');
        const std::string path = entry.substr(eq + 1);
        where += (where.empty() ? "" : "; ") + entry.substr(0, eq) + " at " + path +
                 (path.rfind('/', 0) == 0 ? " (in " + dir_name(path) + ")" : std::string());
    }
    return PITFALL_UNSUPPORTED(
        "kept off the loader's library path (cache and RUNPATH ignored), the loader still found " +
        where +
        ": built-in system directories, which no option or variable removes from the search; "
        "this case needs the library installed outside them");
}

status run_without_library(context& ctx, pitfall::backend_kind backend) {
    PITFALL_ASSIGN_OR_RETURN(const std::string hide, ctx.param_string("hide_library"));
    const std::vector<std::string> candidates = libraries_to_hide(hide, backend);

    // A later life: the loader started us with `hidden` kept off its path (a library linked
    // at start-up that it found anyway, or one opened on first call, tried below).
    earlier_life life = take_earlier_life();
    if (!life.hidden.empty())
        PITFALL_TRY(try_hidden_library(ctx, life));
    if (!life.found.empty())
        ctx.record_info("found_anyway", life.found);

    if (auto decided = hide_first_candidate(ctx, candidates, life))
        return *decided;
    if (!life.previous_dir.empty())
        remove_symlink_folder(life.previous_dir);
    return nothing_could_be_hidden(life.found);
}

// =============================================================================================
// CPU analogs: glibc (runtime_vs_driver), OpenBLAS (cudnn_compiled_vs_loaded), the x86-64 ISA
// and OpenBLAS's run-time kernel choice (arch_coverage).
// =============================================================================================

/// The glibc the program needs vs the one it runs on. The program's GLIBC_x.y needs are read
/// from its own .gnu.version_r; the loaded glibc answers gnu_get_libc_version(). The loader
/// refuses to start a program whose need the loaded glibc lacks ("version `GLIBC_2.34' not
/// found"), just as an old driver refuses a new runtime.
status glibc_vs_program(context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const std::string releases, ctx.param_string("glibc_versions"));
    const std::string self = self_executable();
    PITFALL_ASSIGN_OR_RETURN(const elf_image elf, read_elf(self));
    PITFALL_ASSIGN_OR_RETURN(const std::vector<version_need> needs, version_needs(elf, self));

    // The newest version needed per version family (GLIBC, GLIBCXX, CXXABI, GCC). Symbol
    // versions only grow, so the newest one the program asks for decides the oldest glibc
    // (libstdc++) it can start on: Debian 12's toolchain binds __libc_start_main@GLIBC_2.34.
    std::map<std::string, std::pair<std::vector<int>, std::string>> newest;
    for (const auto& n : needs) {
        const auto underscore = n.version.find('_');
        if (underscore == std::string::npos)
            continue;
        const std::string family = n.version.substr(0, underscore);
        const auto number = parse_dotted(n.version.substr(underscore + 1));
        if (!number) // GLIBC_PRIVATE and the like
            continue;
        auto& slot = newest[family];
        if (slot.second.empty() || *number > slot.first)
            slot = {*number, n.version};
    }
    for (const auto& [family, need] : newest)
        ctx.record_info("needs." + family, need.second);
    if (newest.count("GLIBC") == 0)
        return PITFALL_UNSUPPORTED(
            "this program has no GLIBC_ version needs (static, or another C library)");
    const std::vector<int>& required = newest["GLIBC"].first;
    const std::string loaded_text = gnu_get_libc_version();
    const auto loaded = parse_dotted(loaded_text);
    ctx.record_info("glibc_loaded", loaded_text + " (gnu_get_libc_version)");
    ctx.record_info("glibc_headers",
                    std::to_string(__GLIBC__) + "." + std::to_string(__GLIBC_MINOR__));
    ctx.record("glibc_required_minor", required.size() > 1 ? required[1] : 0);
    if (loaded)
        ctx.record("glibc_loaded_minor", loaded->size() > 1 ? (*loaded)[1] : 0);

    // Where the program would start: the glibc of each release named in the parameter.
    int starts = 0;
    int refused = 0;
    for (const auto& release : split(releases, ',')) {
        const auto v = parse_dotted(release);
        if (!v)
            return pitfall::bad_parameter("glibc_versions", "'" + release + "' is not a version");
        const bool ok = *v >= required;
        (ok ? starts : refused) += 1;
        ctx.record_info("prediction.glibc_" + release, ok ? "starts"
                                                          : "refused by the loader: version `" +
                                                                newest["GLIBC"].second +
                                                                "' not found");
    }
    ctx.record("predicted_glibc_starts", starts);
    ctx.record("predicted_glibc_refused", refused);
    // This process runs, so the loader found every need satisfied: our reading of the needs
    // and the rule must agree with it.
    ctx.check("loaded_glibc_meets_needs", loaded.has_value() && *loaded >= required,
              "loaded glibc " + loaded_text + " vs needed " + newest["GLIBC"].second +
                  " (the loader already accepted it: a failure means the needs were misread)");
    return status::ok();
}

/// OpenBLAS's header version vs the library loaded (openblas_get_config). OpenBLAS keeps one
/// soname (libopenblas.so.0) across releases, so nothing stops a library older than the headers
/// from loading until a newer function is missing ("undefined symbol"); Debian's alternatives
/// can also put another build (pthread, openmp, serial) behind the same name.
status openblas_compiled_vs_loaded(context& ctx) {
#ifdef OPENBLAS_VERSION
    const std::string compiled_text = OPENBLAS_VERSION; // " OpenBLAS 0.3.21 "
#else
    const std::string compiled_text;
#endif
    const std::string config = openblas_get_config(); // "OpenBLAS 0.3.21 DYNAMIC_ARCH ... Haswell"
    auto version_in = [](const std::string& text) -> std::optional<std::vector<int>> {
        for (const auto& word : split(text, ' '))
            if (auto v = parse_dotted(word); v && v->size() >= 2)
                return v;
        return std::nullopt;
    };
    const auto compiled = version_in(compiled_text);
    const auto loaded = version_in(config);
    ctx.record_info("openblas_headers",
                    compiled_text.empty() ? "(no OPENBLAS_VERSION in the headers)" : compiled_text);
    ctx.record_info("openblas_config", config);
    ctx.record_info("openblas_core", openblas_get_corename());
    ctx.record_info("openblas_library", describe_loaded("libopenblas"));
    const int parallel = openblas_get_parallel(); // 0 sequential, 1 pthreads, 2 OpenMP
    ctx.record_info("openblas_threading", parallel == 0   ? "sequential"
                                          : parallel == 1 ? "pthreads"
                                                          : "OpenMP");
    ctx.record("openblas_threads", openblas_get_num_threads());

    // The rule, against hand-derived cases: newer or equal loads fine, older does not.
    const std::vector<std::pair<std::pair<std::vector<int>, std::vector<int>>, bool>> table = {
        {{{0, 3, 21}, {0, 3, 21}}, true},
        {{{0, 3, 21}, {0, 3, 26}}, true},
        {{{0, 3, 21}, {0, 3, 20}}, false},
        {{{0, 3, 21}, {0, 2, 20}}, false}};
    bool table_ok = true;
    for (const auto& [pair, expected] : table)
        table_ok = table_ok && ((pair.second >= pair.first) == expected);
    ctx.check("rule_table", table_ok, "loaded >= built on 4 hand-derived (built, loaded) pairs");

    if (!compiled || !loaded)
        return PITFALL_UNSUPPORTED("no version in OpenBLAS's headers ('" + compiled_text +
                                   "') or config ('" + config + "')");
    if (*loaded < *compiled)
        return status::error(pitfall::library::openblas, "openblas_older_than_headers",
                             "headers " + compiled_text + ", library " + config, stage::init);
    return status::ok();
}

#if defined(__x86_64__)
/// The x86-64 psABI level this CPU and its OS support, from cpuid itself (as GCC's
/// __builtin_cpu_supports("x86-64-vN") decides it, but the same with every compiler): v2 = SSE3,
/// SSSE3, SSE4.1/4.2, POPCNT, CX16, LAHF; v3 adds AVX, AVX2, BMI1/2, F16C, FMA, LZCNT, MOVBE,
/// XSAVE with the OS saving the YMM state; v4 adds AVX-512 F, BW, CD, DQ, VL with ZMM state.
bool has_bit(unsigned reg, int bit) {
    return ((reg >> bit) & 1U) != 0;
}

/// v2: SSE3, SSSE3, SSE4.1/4.2, POPCNT, CX16 (leaf 1 ECX) and LAHF (leaf 0x80000001 ECX).
bool meets_x86_v2(unsigned leaf1_ecx, unsigned ext_ecx) {
    return has_bit(leaf1_ecx, 0) && has_bit(leaf1_ecx, 9) && has_bit(leaf1_ecx, 19) &&
           has_bit(leaf1_ecx, 20) && has_bit(leaf1_ecx, 23) && has_bit(leaf1_ecx, 13) &&
           has_bit(ext_ecx, 0);
}

/// v3: the YMM state saved, AVX, AVX2, BMI1/2, F16C, FMA, LZCNT, MOVBE, XSAVE.
bool meets_x86_v3(bool ymm, unsigned leaf1_ecx, unsigned leaf7_ebx, unsigned ext_ecx) {
    return ymm && has_bit(leaf1_ecx, 28) && has_bit(leaf7_ebx, 5) && has_bit(leaf7_ebx, 3) &&
           has_bit(leaf7_ebx, 8) && has_bit(leaf1_ecx, 29) && has_bit(leaf1_ecx, 12) &&
           has_bit(ext_ecx, 5) && has_bit(leaf1_ecx, 22) && has_bit(leaf1_ecx, 26);
}

/// v4: the ZMM state saved, AVX-512 F, BW, CD, DQ, VL.
bool meets_x86_v4(bool zmm, unsigned leaf7_ebx) {
    return zmm && has_bit(leaf7_ebx, 16) && has_bit(leaf7_ebx, 30) && has_bit(leaf7_ebx, 28) &&
           has_bit(leaf7_ebx, 17) && has_bit(leaf7_ebx, 31);
}

int cpu_x86_level() {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid(1, &a, &b, &c, &d) == 0)
        return 1;
    const unsigned leaf1_ecx = c;
    unsigned ext_ecx = 0;
    if (__get_cpuid(0x80000001U, &a, &b, &c, &d) != 0)
        ext_ecx = c;
    if (!meets_x86_v2(leaf1_ecx, ext_ecx))
        return 1;
    unsigned long long xcr0 = 0; // which register states the OS saves (OSXSAVE, then XGETBV)
    if (has_bit(leaf1_ecx, 27)) {
        unsigned lo = 0, hi = 0;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        xcr0 = (static_cast<unsigned long long>(hi) << 32) | lo;
    }
    unsigned leaf7_ebx = 0;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d) != 0)
        leaf7_ebx = b;
    const bool ymm = (xcr0 & 0x6) == 0x6;
    if (!meets_x86_v3(ymm, leaf1_ecx, leaf7_ebx, ext_ecx))
        return 2;
    const bool zmm = (xcr0 & 0xe6) == 0xe6;
    if (!meets_x86_v4(zmm, leaf7_ebx))
        return 3;
    return 4;
}
#endif

/// The x86-64 micro-architecture level the program was compiled for (the compiler's predefined
/// macros) vs the CPU's (cpuid): the CPU's "no kernel image" is SIGILL at the first instruction
/// it lacks. OpenBLAS (DYNAMIC_ARCH) picks its kernels for the CPU it finds at run time: the
/// host's PTX JIT.
status x86_levels(context& ctx) {
#if defined(__x86_64__)
    PITFALL_ASSIGN_OR_RETURN(const std::string levels, ctx.param_string("cpu_levels"));
    // x86-64 psABI levels: v2 = SSE3, SSSE3, SSE4.1/4.2, POPCNT, CX16; v3 = AVX, AVX2, BMI1/2,
    // F16C, FMA, LZCNT, MOVBE; v4 = AVX-512 F, BW, CD, DQ, VL.
    int compiled = 1;
#if defined(__SSE3__) && defined(__SSSE3__) && defined(__SSE4_1__) && defined(__SSE4_2__) &&       \
    defined(__POPCNT__)
    compiled = 2;
#if defined(__AVX__) && defined(__AVX2__) && defined(__BMI__) && defined(__BMI2__) &&              \
    defined(__F16C__) && defined(__FMA__) && defined(__LZCNT__) && defined(__MOVBE__)
    compiled = 3;
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512CD__) &&                      \
    defined(__AVX512DQ__) && defined(__AVX512VL__)
    compiled = 4;
#endif
#endif
#endif
    const int cpu = cpu_x86_level();
    auto name = [](int level) {
        return level == 1 ? std::string("x86-64") : "x86-64-v" + std::to_string(level);
    };
    ctx.record("compiled_level", compiled);
    ctx.record("cpu_level", cpu);
    ctx.record_info("compiled_for", name(compiled));
    ctx.record_info("cpu_supports", name(cpu));
    ctx.record_info("openblas_core",
                    std::string(openblas_get_corename()) + " (chosen at run time)");
    int runs = 0;
    int faults = 0;
    for (const auto& level : split(levels, ',')) {
        int l = 0;
        for (int candidate = 1; candidate <= 4; ++candidate)
            if (level == name(candidate))
                l = candidate;
        if (l == 0)
            return pitfall::bad_parameter("cpu_levels",
                                          "'" + level + "' is not x86-64 or x86-64-v2..v4");
        (l >= compiled ? runs : faults) += 1;
        ctx.record_info("prediction." + level,
                        l >= compiled ? "runs" : "SIGILL (compiled for " + name(compiled) + ")");
    }
    ctx.record("predicted_cpu_runs", runs);
    ctx.record("predicted_cpu_sigill", faults);
    ctx.check("cpu_runs_compiled_level", cpu >= compiled,
              "this CPU (" + name(cpu) + ") executes code compiled for " + name(compiled));
    return status::ok();
#else
    (void)ctx;
    return PITFALL_UNSUPPORTED(
        "the CPU analog reads x86-64 levels with cpuid; this is not an x86-64 CPU");
#endif
}

// =============================================================================================
// CUDA cases.
// =============================================================================================
#if PITFALL_HAS_CUDA

/// Writes the __CUDA_ARCH__ of the image the device actually runs: 860 from sm_86 SASS, 900
/// from compute_90 PTX JIT-compiled for a newer GPU.
__global__ void arch_probe_kernel(int* d_arch) {
    pitfall::count_this_kernel(); // the harness's evidence of GPU work
#if defined(__CUDA_ARCH__)
    d_arch[threadIdx.x] = __CUDA_ARCH__;
#endif
}

/// NVML's driver version ("580.95.05"), from libnvidia-ml.so.1 (part of the driver, found by
/// dlopen, not linked: no driver, no NVML). The branch is the part before the first dot.
std::optional<std::string> nvml_driver_version(context& ctx) {
    void* nvml = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (nvml == nullptr) {
        const char* why = ::dlerror();
        ctx.record_info("nvml", std::string("not loadable: ") + (why != nullptr ? why : "?"));
        return std::nullopt;
    }
    using init_fn = int (*)();
    using version_fn = int (*)(char*, unsigned);
    auto init = reinterpret_cast<init_fn>(::dlsym(nvml, "nvmlInit_v2"));
    auto get_version = reinterpret_cast<version_fn>(::dlsym(nvml, "nvmlSystemGetDriverVersion"));
    auto shutdown = reinterpret_cast<init_fn>(::dlsym(nvml, "nvmlShutdown"));
    std::optional<std::string> version;
    char text[96] = {}; // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE is 80
    if (init != nullptr && get_version != nullptr && init() == 0) { // 0 = NVML_SUCCESS
        if (get_version(text, sizeof text) == 0)
            version = text;
        if (shutdown != nullptr)
            (void)shutdown();
    }
    ctx.record_info("nvml", version ? "libnvidia-ml.so.1 answered"
                                    : "libnvidia-ml.so.1 loaded, nvmlInit/version failed");
    ::dlclose(nvml);
    return version;
}

/// runtime_vs_driver: the prediction from the versions, then the runtime's own answer.
status runtime_vs_driver_cuda(context& ctx) {
    int runtime = 0;
    int driver = 0;
    PITFALL_CUDA_TRY(stage::init, cudaRuntimeGetVersion(&runtime));
    PITFALL_CUDA_TRY(stage::init, cudaDriverGetVersion(&driver)); // 0 when no driver is installed
    ctx.record("cuda_runtime_version", runtime);
    ctx.record("cuda_compiled_runtime_version", CUDART_VERSION);
    ctx.record("cuda_driver_version", driver);
    ctx.record_info("cuda_runtime", cuda_version_text(runtime) + " (cudaRuntimeGetVersion)");
    ctx.record_info("cuda_driver", driver == 0 ? std::string("none (cudaDriverGetVersion = 0)")
                                               : "supports CUDA " + cuda_version_text(driver) +
                                                     " (cudaDriverGetVersion)");
    const std::optional<std::string> nvml_version = nvml_driver_version(ctx);
    const int branch = nvml_version ? std::atoi(nvml_version->c_str()) : 0;
    if (nvml_version) {
        ctx.record_info("driver_version", *nvml_version + " (nvmlSystemGetDriverVersion)");
        ctx.record("driver_branch", branch);
    }
    const int needed = minimum_driver_branch(runtime / 1000);
    ctx.record("minimum_driver_branch", needed);

    // The prediction (CUDA Compatibility guide, Table 1). The driver reports the newest CUDA it
    // supports; a runtime of a newer major needs a newer branch. Within a major, minor-version
    // compatibility lets a newer runtime run on an older driver with the features both know.
    bool insufficient = false;
    std::string why;
    if (driver == 0) {
        insufficient = true;
        why = "no CUDA driver answered: runtime " + cuda_version_text(runtime) +
              " needs a >= " + std::to_string(needed) + " driver";
    } else if (driver / 1000 < runtime / 1000) {
        insufficient = true;
        why = "driver supports CUDA " + cuda_version_text(driver) + ", runtime is " +
              cuda_version_text(runtime) + ": a " + std::to_string(runtime / 1000) +
              ".x runtime needs a >= " + std::to_string(needed) + " driver";
    } else if (branch != 0 && needed != 0 && branch < needed) {
        insufficient = true;
        why = "driver branch " + std::to_string(branch) + " is below " + std::to_string(needed);
    } else if (driver < runtime) {
        why = "minor-version compatibility: runtime " + cuda_version_text(runtime) + " on a " +
              cuda_version_text(driver) +
              " driver runs; APIs newer than the driver answer cudaErrorCallRequiresNewerDriver, "
              "PTX newer than it cudaErrorUnsupportedPtxVersion";
    } else {
        why = "driver (CUDA " + cuda_version_text(driver) + ") is as new as the runtime or newer";
    }
    ctx.record_info("prediction",
                    (insufficient ? "cudaErrorInsufficientDriver: " : "compatible: ") + why);

    // The observation: the first device call. Without a driver every device call answers 35;
    // this one is the call frameworks make first (torch.cuda.is_available, tf.config).
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    const status observed = PITFALL_CUDA_STATUS(stage::init, err, "cudaGetDeviceCount(&count)");
    if (err == cudaSuccess)
        ctx.record("device_count", count);
    ctx.record_info("libcuda_loaded", describe_loaded("libcuda.so"));
    const bool observed_insufficient = observed.name() == "cudaErrorInsufficientDriver";
    ctx.check("prediction_matches_runtime", observed_insufficient == insufficient,
              std::string("predicted ") +
                  (insufficient ? "cudaErrorInsufficientDriver" : "a usable driver") +
                  ", cudaGetDeviceCount answered " +
                  (err == cudaSuccess ? "cudaSuccess" : observed.name()));
    return observed;
}

#if PITFALL_HAS_CUDNN
/// cudnn_compiled_vs_loaded: every number from cuDNN's own calls; none needs a GPU.
status cudnn_compiled_vs_loaded_cuda(context& ctx) {
    // cuDNN is opened by its first call: a library that cannot be is the answer, in the loader's
    // words, rather than a loaded version of 0.
    PITFALL_TRY(pitfall::cuda::open_library(pitfall::cuda::math_library::cudnn));
    const long long built = CUDNN_VERSION;
    const long long loaded = static_cast<long long>(cudnnGetVersion());
    const long long cudnn_cudart = static_cast<long long>(cudnnGetCudartVersion());
    int runtime = 0;
    PITFALL_CUDA_TRY(stage::init, cudaRuntimeGetVersion(&runtime));
    ctx.record("cudnn_compiled_version", static_cast<double>(built));
    ctx.record("cudnn_loaded_version", static_cast<double>(loaded));
    ctx.record("cudnn_cudart_version", static_cast<double>(cudnn_cudart));
    ctx.record("cuda_runtime_version", runtime);
    ctx.record_info("cudnn_compiled", decode_cudnn_version(built).text() + " (CUDNN_VERSION)");
    ctx.record_info("cudnn_loaded", decode_cudnn_version(loaded).text() + " (cudnnGetVersion)");
    ctx.record_info("cudnn_cudart", cuda_version_text(cudnn_cudart) +
                                        " (cudnnGetCudartVersion) vs ours " +
                                        cuda_version_text(runtime) + " (cudaRuntimeGetVersion)");
#if CUDNN_MAJOR >= 9
    ctx.record("cudnn_max_device_version", static_cast<double>(cudnnGetMaxDeviceVersion()));
#endif

    // The rule's implementation against hand-derived cases (cuDNN guide, "API Compatibility").
    struct rule_case {
        long long built, loaded;
        const char* expected;
    };
    const rule_case table[] = {{91900, 91900, "ok"},
                               {91900, 91901, "ok"},
                               {91900, 92000, "ok"},
                               {91900, 91800, "loaded_minor_older"},
                               {91900, 100000, "major_differs"},
                               {8907, 91900, "major_differs"},
                               {8907, 8600, "loaded_minor_older"}};
    std::string table_failures;
    for (const auto& c : table)
        if (cudnn_rule_verdict(c.built, c.loaded) != c.expected)
            table_failures +=
                " (" + std::to_string(c.built) + ", " + std::to_string(c.loaded) + ")";
    const bool decode_ok = decode_cudnn_version(91900).text() == "9.19.0" &&
                           decode_cudnn_version(8907).text() == "8.9.7";
    ctx.check("rule_table", table_failures.empty() && decode_ok,
              table_failures.empty() ? "7 (built, loaded) pairs and 2 decodings as derived by hand"
                                     : "wrong verdict for" + table_failures);

    // The sub-library checks: a mixed install (libcudnn.so.9 of one release, libcudnn_ops.so.9
    // of another) answers CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH here. Each is an event.
    status first_failure = status::ok();
#if CUDNN_MAJOR >= 9
    const std::pair<const char*, cudnnStatus_t> checks[] = {
        {"cudnnGraphVersionCheck", cudnnGraphVersionCheck()},
        {"cudnnOpsVersionCheck", cudnnOpsVersionCheck()},
        {"cudnnCnnVersionCheck", cudnnCnnVersionCheck()},
        {"cudnnAdvVersionCheck", cudnnAdvVersionCheck()}};
    for (const auto& [name, result] : checks) {
        const status s = PITFALL_CUDNN_STATUS(result, name);
        ctx.record_event(name, s);
        if (!s.is_ok() && first_failure.is_ok())
            first_failure = s;
    }
#endif
    ctx.record_info("cudnn_libraries", describe_loaded("libcudnn"));
    if (!first_failure.is_ok())
        return first_failure.at_stage(stage::init);

    const std::string verdict = cudnn_rule_verdict(built, loaded);
    ctx.record_info("rule", verdict);
    if (verdict != "ok")
        return status::error(cudnn_rule_error(verdict),
                             "built against cuDNN " + decode_cudnn_version(built).text() +
                                 ", loaded " + decode_cudnn_version(loaded).text(),
                             stage::init);
    // cuDNN is built per CUDA major (the cu12 and cu13 packages): its cudart major must be ours.
    if (cudnn_cudart / 1000 != runtime / 1000)
        return status::error(pitfall::pitfall_error::cudnn_cudart_major_differs,
                             "cuDNN built against CUDA " + cuda_version_text(cudnn_cudart) +
                                 ", runtime " + cuda_version_text(runtime),
                             stage::init);
    return status::ok();
}
#endif

/// What decides between SASS and PTX besides the device: the driver's JIT switches and the
/// newest PTX ISA the driver understands.
struct jit_environment {
    bool force_ptx = false;   // CUDA_FORCE_PTX_JIT=1: SASS ignored
    bool disable_ptx = false; // CUDA_DISABLE_PTX_JIT=1: no JIT
    int driver = 0;           // cudaDriverGetVersion; 0 without a driver: PTX ISA not checked
};

jit_environment read_jit_environment(context& ctx) {
    jit_environment jit;
    const char* force = std::getenv("CUDA_FORCE_PTX_JIT");
    const char* disable = std::getenv("CUDA_DISABLE_PTX_JIT");
    jit.force_ptx = force != nullptr && std::string(force) == "1";
    jit.disable_ptx = disable != nullptr && std::string(disable) == "1";
    ctx.record_info("jit_environment", std::string("CUDA_FORCE_PTX_JIT=") + (force ? force : "") +
                                           " CUDA_DISABLE_PTX_JIT=" + (disable ? disable : ""));
    if (cudaDriverGetVersion(&jit.driver) != cudaSuccess)
        jit.driver = 0;
    const auto max_isa = pitfall::fatbin::max_ptx_isa(jit.driver);
    ctx.record_info("jit_driver", jit.driver == 0
                                      ? "no driver answered (cudaDriverGetVersion: 0): PTX ISA "
                                        "versions not checked"
                                      : "CUDA " + cuda_version_text(jit.driver) + " driver (" +
                                            std::to_string(jit.driver) + "): JITs PTX ISA up to " +
                                            (max_isa ? max_isa->text() : std::string("?")));
    return jit;
}

/// One prediction per compute capability in `capabilities` ("7.0,8.6"), counted by path.
status record_predictions(context& ctx, const std::vector<fatbin_image>& images,
                          const std::string& capabilities, const jit_environment& jit) {
    int by_sass = 0;
    int by_ptx = 0;
    int failing = 0;
    for (const auto& text : split(capabilities, ',')) {
        const auto cc = parse_compute_capability(text);
        if (!cc)
            return pitfall::bad_parameter("compute_capabilities", "'" + text + "' is not X.Y");
        const image_prediction p =
            predict_image(images, *cc, jit.driver, jit.force_ptx, jit.disable_ptx);
        (p.how == image_path::sass      ? by_sass
         : p.how == image_path::ptx_jit ? by_ptx
                                        : failing) += 1;
        ctx.record_info("prediction.cc_" + text, p.describe(*cc));
    }
    ctx.record("predicted_sass", by_sass);
    ctx.record("predicted_ptx_jit", by_ptx);
    ctx.record("predicted_no_kernel_image", failing);
    return status::ok();
}

/// What this program carries: one line per image, counted by kind.
void record_embedded_images(context& ctx, const std::vector<fatbin_image>& images) {
    std::vector<std::string> described;
    int sass = 0;
    int ptx = 0;
    for (const auto& img : images) {
        described.push_back(img.describe());
        (img.is_ptx() ? ptx : sass) += 1;
    }
    ctx.record_info("embedded", images.empty() ? "no device code" : join(described, ", "));
    ctx.record("sass_images", sass);
    ctx.record("ptx_images", ptx);
}

#ifdef __CUDA_ARCH_LIST__
/// Independent of the file: the architectures nvcc was asked for (__CUDA_ARCH_LIST__, one
/// entry per -gencode arch=compute_XY) must be exactly the ones the fatbinary carries.
void check_fatbin_matches_compiler(context& ctx, const std::vector<fatbin_image>& images) {
    constexpr int compiler_list[] = {__CUDA_ARCH_LIST__};
    std::vector<unsigned> from_compiler;
    for (const int a : compiler_list)
        from_compiler.push_back(static_cast<unsigned>(a / 10));
    std::vector<unsigned> from_file;
    for (const auto& img : images)
        from_file.push_back(img.arch);
    std::sort(from_compiler.begin(), from_compiler.end());
    std::sort(from_file.begin(), from_file.end());
    from_file.erase(std::unique(from_file.begin(), from_file.end()), from_file.end());
    std::vector<std::string> compiler_text;
    for (const auto a : from_compiler)
        compiler_text.push_back(std::to_string(a));
    ctx.record_info("compiler_arch_list", join(compiler_text, ","));
    ctx.check("fatbin_matches_compiler", from_compiler == from_file,
              "architectures in .nv_fatbin vs nvcc's __CUDA_ARCH_LIST__ (" +
                  join(compiler_text, ",") + ")");
}
#endif

/// Whether there is a device; without one, its reason is recorded (the device query's error
/// is an event) and the case ends with its predictions.
bool device_present(context& ctx) {
    int count = 0;
    const cudaError_t count_err = cudaGetDeviceCount(&count);
    if (count_err != cudaSuccess || count == 0) {
        const status none =
            count_err != cudaSuccess
                ? PITFALL_CUDA_STATUS(stage::init, count_err, "cudaGetDeviceCount(&count)")
                : status::error(pitfall::library::cuda_runtime, "cudaErrorNoDevice",
                                "cudaGetDeviceCount reported 0 devices", stage::init);
        ctx.record_event("device_query", none);
        ctx.record_info("device", "none (" + none.name() + "): predictions only");
        return false;
    }
    ctx.record_event("device_query", status::ok());
    return true;
}

/// The image that ran (its __CUDA_ARCH__ and binaryVersion), against the prediction.
template <class DeviceBuffer>
status check_image_that_ran(context& ctx, const DeviceBuffer& d_arch, const image_prediction& p,
                            unsigned cc) {
    std::vector<int> h_arch(32, 0);
    PITFALL_TRY(pitfall::cuda_backend::copy_to_host(h_arch.data(), d_arch, h_arch.size()));
    cudaFuncAttributes attributes{};
    PITFALL_CUDA_TRY(stage::launch, cudaFuncGetAttributes(&attributes, arch_probe_kernel));
    ctx.record("kernel_cuda_arch", h_arch[0]);
    ctx.record("kernel_binary_version", attributes.binaryVersion);
    ctx.record("kernel_ptx_version", attributes.ptxVersion);
    // SASS: the image of the predicted sm_XY ran as it is. PTX JIT: the compute_XY source ran,
    // compiled for this device (binaryVersion = the device's own XY).
    const int image_arch = static_cast<int>(p.image.arch);
    const bool image_ok =
        h_arch[0] == image_arch * 10 &&
        attributes.binaryVersion == (p.how == image_path::sass ? image_arch : static_cast<int>(cc));
    ctx.check("image_matches_prediction", image_ok,
              "kernel saw __CUDA_ARCH__ " + std::to_string(h_arch[0]) + ", binaryVersion " +
                  std::to_string(attributes.binaryVersion) + "; predicted '" + p.describe(cc) +
                  "'");
    return status::ok();
}

/// The launch as users meet it: with lazy loading (the default since CUDA 12.2) a missing
/// image surfaces here, at the first launch, as cudaErrorNoKernelImageForDevice (or, for
/// PTX newer than the driver, cudaErrorUnsupportedPtxVersion).
status launch_against_prediction(context& ctx, const image_prediction& p, unsigned cc) {
    PITFALL_ASSIGN_OR_RETURN(auto d_arch, pitfall::cuda_backend::allocate<int>(32));
    arch_probe_kernel<<<1, 32>>>(d_arch.data());
    const cudaError_t launch_err = cudaGetLastError();
    const cudaError_t sync_err = launch_err == cudaSuccess ? cudaDeviceSynchronize() : cudaSuccess;
    const status launched =
        launch_err != cudaSuccess
            ? PITFALL_CUDA_STATUS(stage::launch, launch_err, "arch_probe_kernel<<<1, 32>>>")
        : sync_err != cudaSuccess
            ? PITFALL_CUDA_STATUS(stage::synchronize, sync_err, "cudaDeviceSynchronize()")
            : status::ok();
    ctx.record_event("kernel_launch", launched);
    const bool no_image_error = launched.name() == "cudaErrorNoKernelImageForDevice" ||
                                launched.name() == "cudaErrorUnsupportedPtxVersion";
    ctx.check("launch_matches_prediction",
              p.how == image_path::no_image ? launched.name() == p.error : !no_image_error,
              "predicted '" + p.describe(cc) + "', launch answered " +
                  (launched.is_ok() ? "cudaSuccess" : launched.name()));
    if (!launched.is_ok())
        return launched;
    return check_image_that_ran(ctx, d_arch, p, cc);
}

/// arch_coverage: this program's fatbinary, the predictions, and on a GPU the real launch.
status arch_coverage_cuda(context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const std::string capabilities,
                             ctx.param_string("compute_capabilities"));
    const std::string self = self_executable();
    PITFALL_ASSIGN_OR_RETURN(const elf_image elf, read_elf(self));
    PITFALL_ASSIGN_OR_RETURN(const std::vector<fatbin_image> images, fatbin_images(elf, self));
    // 1. What this program carries: one line per image, counted by kind.
    record_embedded_images(ctx, images);
#ifdef __CUDA_ARCH_LIST__
    check_fatbin_matches_compiler(ctx, images);
#endif

    // 2. The prediction for each compute capability asked for, under the JIT switches and the
    //    driver (its PTX ISA) of this environment.
    const jit_environment jit = read_jit_environment(ctx);
    PITFALL_TRY(record_predictions(ctx, images, capabilities, jit));

    // 3. A device, if there is one: its answer is the confirmation. Without one (no driver
    //    here) the case ends ok with its predictions; the device query's error is an event.
    if (!device_present(ctx))
        return status::ok();
    int device = 0;
    cudaDeviceProp prop{};
    PITFALL_CUDA_TRY(stage::init, cudaGetDevice(&device));
    PITFALL_CUDA_TRY(stage::init, cudaGetDeviceProperties(&prop, device));
    const unsigned cc = static_cast<unsigned>(prop.major * 10 + prop.minor);
    const image_prediction p =
        predict_image(images, cc, jit.driver, jit.force_ptx, jit.disable_ptx);
    ctx.record("device_compute_capability", prop.major + prop.minor / 10.0);
    ctx.record_info("device",
                    std::string(prop.name) + " (sm_" + std::to_string(cc) + "): " + p.describe(cc));

    // 4. The launch as users meet it: a missing image surfaces at the first launch.
    return launch_against_prediction(ctx, p, cc);
}

/// The stub libcuda.so of the toolkit whose runtime we loaded: <its lib dir>/stubs/libcuda.so.
std::optional<std::string> find_stub_driver(const std::string& param) {
    if (param != "auto")
        return ::access(param.c_str(), R_OK) == 0 ? std::optional<std::string>(param)
                                                  : std::nullopt;
    for (const auto& cudart : loaded_matching("libcudart.so"))
        for (const auto& dir : {dir_name(cudart), dir_name(real_path(cudart))})
            for (const char* candidate : {"/stubs/libcuda.so", "/../lib64/stubs/libcuda.so"})
                if (::access((dir + candidate).c_str(), R_OK) == 0)
                    return real_path(dir + candidate);
    return std::nullopt;
}

/// stub_driver: a child of this program started with the stub first on LD_LIBRARY_PATH, so the
/// runtime's dlopen("libcuda.so.1") finds it before any real driver. Its outcome is ours.
status stub_driver(context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const std::string param, ctx.param_string("stub_library"));
    PITFALL_ASSIGN_OR_RETURN(const long long timeout, ctx.param_int("child_timeout_seconds"));
    // The stub of the toolkit whose runtime we loaded (a stub of another release would be a
    // second mismatch on top of the first).
    const std::optional<std::string> stub = find_stub_driver(param);
    if (!stub)
        return PITFALL_UNSUPPORTED("no stub libcuda.so " +
                                   (param == "auto" ? "beside the loaded libcudart (" +
                                                          describe_loaded("libcudart.so") + ")"
                                                    : "at " + param) +
                                   ": pass --param stub_library=PATH");
    ctx.record_info("stub_library", *stub);
    std::string dir = temp_root() + "/pitfall-stub-driver-XXXXXX";
    if (::mkdtemp(dir.data()) == nullptr)
        return PITFALL_HOST_ERROR(stage::init, host_error::no_temp_dir,
                                  "cannot create " + dir + ": " + std::strerror(errno));
    const std::string link = dir + "/libcuda.so.1"; // the name the runtime dlopens
    if (::symlink(stub->c_str(), link.c_str()) != 0) {
        const int saved = errno;
        remove_symlink_folder(dir);
        return PITFALL_HOST_ERROR(stage::init, host_error::symlink_failed,
                                  link + ": " + std::strerror(saved));
    }
    const char* old = std::getenv("LD_LIBRARY_PATH");
    const std::string path =
        dir + (old != nullptr && old[0] != '\0' ? ":" + std::string(old) : std::string());
    ctx.record_info("child_ld_library_path", path);
    auto child = pitfall::run_self(ctx, "stub_driver_child", {{"LD_LIBRARY_PATH", path}}, {},
                                   static_cast<double>(timeout));
    remove_symlink_folder(dir);
    PITFALL_TRY(child);
    // The child's own result document: its outcome becomes ours, its facts are kept with a
    // "child." prefix so a reader sees what the runtime said under the stub. A child that
    // crashed, hung or wrote nothing is an error of its own (read_child).
    PITFALL_ASSIGN_OR_RETURN(const pitfall::child_report report,
                             pitfall::read_child(child.value(), "the child started with the stub "
                                                                "libcuda.so"));
    pitfall::adopt_child_facts(ctx, report.result);
    // Proof that the stub was the driver the child's runtime opened (where the runtime keeps it
    // loaded after refusing it, as CUDA 13's shared libcudart does).
    const nlohmann::json info = report.result.value("info", nlohmann::json::object());
    const std::string opened = info.value("libcuda_loaded_after_call", std::string());
    if (!opened.empty() && opened != "none loaded")
        ctx.check("child_opened_the_stub", opened.find(real_path(*stub)) != std::string::npos,
                  "the child's libcuda.so.1: " + opened);
    // ok: the stub was not used, and the baseline says "behaviour changed".
    return report.outcome;
}

/// stub_driver_child (helper): what the runtime does with the stub as its driver.
status stub_driver_child(context& ctx) {
    const char* path = std::getenv("LD_LIBRARY_PATH");
    ctx.record_info("ld_library_path", path != nullptr ? path : "");
    int driver = 0;
    if (const cudaError_t e = cudaDriverGetVersion(&driver); e == cudaSuccess)
        ctx.record("cuda_driver_version", driver);
    else
        ctx.record_event("cudaDriverGetVersion",
                         PITFALL_CUDA_STATUS(stage::init, e, "cudaDriverGetVersion(&driver)"));
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    // Which libcuda.so.1 the runtime opened: the stub, through the folder on LD_LIBRARY_PATH.
    ctx.record_info("libcuda_loaded_after_call", describe_loaded("libcuda.so"));
    if (err != cudaSuccess)
        return PITFALL_CUDA_STATUS(stage::init, err, "cudaGetDeviceCount(&count)");
    ctx.record("device_count", count);
    return status::ok();
}

#endif // PITFALL_HAS_CUDA

// =============================================================================================
// The variants: each function template is the CPU analog; its specialization for the cuda
// backend is the CUDA case. Every CUDA variant here runs without a device ("needs_device":
// false): what the driver, the loader and the libraries answer without one is the data.
// =============================================================================================

template <class Backend> status runtime_vs_driver(context& ctx) {
    return glibc_vs_program(ctx);
}
template <class Backend> status cudnn_compiled_vs_loaded(context& ctx) {
    return openblas_compiled_vs_loaded(ctx);
}
template <class Backend> status arch_coverage(context& ctx) {
    return x86_levels(ctx);
}
template <class Backend> status missing_library(context& ctx) {
    return run_without_library(ctx, Backend::kind);
}
// stub_driver and its helper stub_driver_child (cuda only in scenario.json) are CUDA variants
// (PITFALL_CUDA_VARIANT answers for the CPU backend).
constexpr const char* stub_is_the_drivers =
    "a stub is the link-time stand-in for the driver's libcuda.so, and the CPU path loads no "
    "driver";
constexpr const char* no_stub_to_start_under = "started by stub_driver, which has none";

#if PITFALL_HAS_CUDA
using pitfall::cuda_backend;
template <> status runtime_vs_driver<cuda_backend>(context& ctx) {
    return runtime_vs_driver_cuda(ctx);
}
template <> status cudnn_compiled_vs_loaded<cuda_backend>([[maybe_unused]] context& ctx) {
#if PITFALL_HAS_CUDNN
    return cudnn_compiled_vs_loaded_cuda(ctx);
#else
    return PITFALL_UNSUPPORTED("built without cuDNN");
#endif
}
template <> status arch_coverage<cuda_backend>(context& ctx) {
    return arch_coverage_cuda(ctx);
}
#endif

} // namespace version_mismatch

using namespace version_mismatch; // PITFALL_VARIANT names each variant after its function

PITFALL_SCENARIO(PITFALL_VARIANT(runtime_vs_driver), PITFALL_VARIANT(cudnn_compiled_vs_loaded),
                 PITFALL_VARIANT(arch_coverage), PITFALL_VARIANT(missing_library),
                 PITFALL_CUDA_VARIANT(stub_driver, stub_is_the_drivers),
                 PITFALL_CUDA_VARIANT(stub_driver_child, no_stub_to_start_under))
