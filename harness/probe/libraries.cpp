// The math libraries the scenarios load, each opened by name: OpenBLAS (the CPU backend),
// cuBLAS and cuDNN. A missing or broken one is then a recorded fact, not a probe the loader
// will not start.
#include "probe.hpp"

#include "pitfall/detail/text.hpp"
#include "pitfall/process.hpp"

#include <cerrno>
#include <cstddef>
#include <iostream>
#include <string>

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#if PITFALL_HAS_CUDA
#include <cuda_runtime_api.h>
#endif
#if PITFALL_HAS_CUDNN
#include <cudnn.h>
#endif

namespace pitfall::probe {
using nlohmann::json;

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
#endif

#if PITFALL_HAS_CUDNN
// cuDNN is opened at run time, not linked: a missing or broken cuDNN is then a recorded fact,
// not a probe that cannot start (and so a fingerprint without GPU facts).
#define PITFALL_STRINGIFY_INNER(x) #x
#define PITFALL_STRINGIFY(x) PITFALL_STRINGIFY_INNER(x)

namespace {

/// The child's side of isolated_check: its output into `output_fd`, the check's status into
/// `status_fd`, then gone without running the parent's exit handlers.
[[noreturn]] void run_check_in_child(cudnnStatus_t (*check)(), int status_fd, int output_fd) {
    ::dup2(output_fd, STDOUT_FILENO);
    ::dup2(output_fd, STDERR_FILENO);
    const int st = static_cast<int>(check());
    [[maybe_unused]] const auto n = ::write(status_fd, &st, sizeof st);
    ::_exit(0);
}

/// What the check's process printed, read to the end first, so the child never blocks; the
/// first 2000 bytes or so are kept, on one line (newlines as ';', trailing blanks dropped).
std::string printed_by_check(int output_fd) {
    std::string said;
    char buffer[512];
    for (ssize_t n; (n = ::read(output_fd, buffer, sizeof buffer)) != 0;) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            break;
        if (said.size() < 2000)
            said.append(buffer, static_cast<std::size_t>(n));
    }
    while (!said.empty() && (said.back() == '\n' || said.back() == ' '))
        said.pop_back();
    for (char& c : said)
        if (c == '\n')
            c = ';';
    return said;
}

/// The check's answer from how its process ended: the signal that killed it, the exit without
/// a status, or the status by cuDNN's name; what cuDNN printed after it.
std::string check_answer(int wstatus, const int* status, const std::string& said,
                         const char* (*error_name)(cudnnStatus_t)) {
    const std::string printed = said.empty() ? "" : " (cuDNN printed: " + said + ")";
    if (WIFSIGNALED(wstatus))
        return "killed the process: " + pitfall::signal_name(WTERMSIG(wstatus)) + printed;
    if (status == nullptr)
        return "no status: the check's process exited " + std::to_string(WEXITSTATUS(wstatus)) +
               printed;
    const auto named = static_cast<cudnnStatus_t>(*status);
    return (error_name != nullptr ? error_name(named) : std::to_string(*status)) + printed;
}

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
        run_check_in_child(check, status_pipe[1], output_pipe[1]);
    }
    ::close(status_pipe[1]);
    ::close(output_pipe[1]);
    const std::string said = printed_by_check(output_pipe[0]);
    ::close(output_pipe[0]);
    int st = -1;
    const bool got = ::read(status_pipe[0], &st, sizeof st) == static_cast<ssize_t>(sizeof st);
    ::close(status_pipe[0]);
    int wstatus = 0;
    while (::waitpid(child, &wstatus, 0) < 0 && errno == EINTR) {
    }
    return check_answer(wstatus, got ? &st : nullptr, said, error_name);
}

} // namespace

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
    return cudnn; // left loaded: loaded_libraries lists it with the rest
}
#endif

} // namespace pitfall::probe
