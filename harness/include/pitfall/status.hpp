// pitfall/status.hpp: errors as values.
//
// A `status` is either ok or an observed failure: which library said it, the error *name*
// (never the number: numbers moved between CUDA releases), whether the error is sticky (the
// context is dead until the process restarts), the stage it happened at, and file:line.
//
//   pitfall::status copy_in(float* d, const float* h, size_t n) {
//       PITFALL_CUDA_TRY(pitfall::stage::copy, cudaMemcpy(d, h, n * 4, cudaMemcpyHostToDevice));
//       return pitfall::status::ok();
//   }
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace pitfall {

/// The library (or layer) that reported an error.
enum class library {
    none,
    cuda_runtime,
    cuda_driver,
    cublas,
    cudnn,
    nccl,
    openblas,
    host,
    pitfall
};

/// Where in a case's life the error happened.
enum class stage { none, init, alloc, copy, launch, synchronize, library_call, compute, check };

std::string_view to_string(library lib);
std::string_view to_string(stage st);
std::optional<library> library_from_string(std::string_view text);
std::optional<stage> stage_from_string(std::string_view text);

/// The errors pitfall's own code names (library::host). A closed set: every name a baseline
/// can hold for a host error is one of these, a C++ exception's type, or an errno name
/// (status::from_errno). The vendor libraries' names come from the libraries themselves
/// (cudaGetErrorName, cublasGetStatusName, cudnnGetErrorString, ncclGetErrorString).
enum class host_error {
    bad_alloc,                   ///< "std::bad_alloc": a host allocation failed
    exception,                   ///< "std::exception": any other exception a case let escape
    system_error,                ///< "std::system_error": a thread, lock or clock failed
    unreadable_file,             ///< a file could not be opened or read
    write_failed,                ///< a file could not be written
    no_temp_dir,                 ///< mkdtemp failed
    symlink_failed,              ///< a symbolic link could not be made
    execve_failed,               ///< exec of a program failed
    no_self_exe,                 ///< /proc/self/exe is unreadable
    malformed_elf,               ///< a binary's ELF headers make no sense
    child_not_started,           ///< a second process (run_self) could not start
    child_timed_out,             ///< it outlived its timeout
    child_killed,                ///< a signal ended it
    child_failed,                ///< it exited with a code that is not the protocol's
    child_wrote_no_result,       ///< it exited 0 or 77 without a result file
    child_result_unreadable,     ///< its result file is not a result document
    device_ordinal_out_of_range, ///< a device number past the devices there are
    no_batch_fits,               ///< no batch size fits the memory budget
    library_not_loaded,          ///< a library opened on first use (dlopen) could not be, or
                                 ///< lacks a function: the loader's words in the message
};

/// The errors pitfall names in its own right (library::pitfall): bad input to the protocol and
/// the outcomes of the rules pitfall itself applies (cuDNN's compatibility rule). Closed, too.
enum class pitfall_error {
    bad_parameter,              ///< a --param value out of its bounds (exit 2)
    bad_usage,                  ///< a malformed command line (exit 2)
    bad_input,                  ///< a malformed file (exit 2)
    bad_manifest,               ///< a malformed scenario.json (exit 2)
    bad_environment,            ///< a malformed PITFALL_* variable (exit 2)
    ok_without_value,           ///< a status_or built from an ok status (a programming error)
    unknown_variant,            ///< a variant the program has no code for
    unlisted_error_name,        ///< status::error() given a host/pitfall name outside these sets
    cudnn_major_differs,        ///< cuDNN loaded and compiled majors differ
    cudnn_loaded_minor_older,   ///< cuDNN loaded is an older minor than the one compiled against
    cudnn_cudart_major_differs, ///< cuDNN was built for another CUDA major than the runtime
};

std::string_view to_string(host_error code);
std::string_view to_string(pitfall_error code);
/// Whether `name` belongs to the closed set of `lib` (host: host_error, a C++ exception name
/// or an errno name; pitfall: pitfall_error; other libraries: any name, theirs to define).
bool is_listed_error_name(library lib, std::string_view name);
/// "EINVAL" for EINVAL; "errno N" where the C library has no name for it.
std::string errno_name(int errnum);

/// True for the CUDA runtime errors after which the process must be relaunched
/// (docs/cuda-rules.md#sticky-errors); matched by name so the list works without CUDA headers.
bool is_sticky_cuda_error(std::string_view error_name);

/// An ok value or one observed error. Cheap to copy; compare with `is_ok()`. [[nodiscard]]: a
/// status dropped on the floor is an error nobody saw.
class [[nodiscard]] status {
public:
    status() = default;
    static status ok() { return {}; }

    /// An error: `name` is the library's own error name (e.g. "cudaErrorMemoryAllocation").
    /// For library::host and library::pitfall the name must be listed (is_listed_error_name);
    /// an unlisted one becomes pitfall_error::unlisted_error_name, naming it in the message.
    static status error(library lib, std::string name, std::string message, stage where,
                        bool sticky = false, const char* file = "", int line = 0);
    /// An error of pitfall's own code, from the closed sets above.
    static status error(host_error code, std::string message, stage where, const char* file = "",
                        int line = 0);
    static status error(pitfall_error code, std::string message, stage where, const char* file = "",
                        int line = 0);
    /// An error another process reported, or PITFALL_INJECT planted, taken as given: the closed
    /// sets bound what this program's own code names, not what it reads back from elsewhere.
    static status as_reported(library lib, std::string name, std::string message, stage where,
                              bool sticky = false);
    /// A failed system call: library host, the errno name ("EINVAL"), strerror in the message.
    static status from_errno(int errnum, std::string message, stage where, const char* file = "",
                             int line = 0);

    /// "Cannot run here": the reason travels into the result and the case exits 77.
    static status unsupported(std::string reason, const char* file = "", int line = 0);
    /// "Cannot run here" because of an observed error (e.g. cudaErrorInsufficientDriver from
    /// the first CUDA call): keeps the cause's library, name, stage and place.
    static status unsupported_because(const status& cause, std::string reason);

    bool is_ok() const { return m_library == library::none && !m_unsupported; }
    bool is_unsupported() const { return m_unsupported; }

    library lib() const { return m_library; }
    const std::string& name() const { return m_name; }
    const std::string& message() const { return m_message; }
    stage where() const { return m_stage; }
    bool sticky() const { return m_sticky; }
    const std::string& file() const { return m_file; }
    int line() const { return m_line; }

    /// A copy with the stage replaced (a callee knows the error, the caller knows the stage).
    status at_stage(stage where) const;

    /// "cudaErrorMemoryAllocation (cuda_runtime, alloc, not sticky) at x.cu:12: out of memory".
    std::string describe() const;

private:
    library m_library = library::none;
    bool m_unsupported = false;
    bool m_sticky = false;
    stage m_stage = stage::none;
    int m_line = 0;
    std::string m_name;
    std::string m_message;
    std::string m_file;
};

/// A value or the status that says why there is none.
template <class T> class [[nodiscard]] status_or {
public:
    // Both overloads, so `return local;` of a move-only T moves (C++17's implicit move on
    // return needs a constructor taking T&&).
    status_or(const T& value) : m_value(value) {}       // NOLINT: implicit on purpose
    status_or(T&& value) : m_value(std::move(value)) {} // NOLINT: implicit on purpose
    // A status_or holds a value or an error: "ok, but no value" would let PITFALL_ASSIGN_OR_RETURN
    // pass an ok status upward as if the value existed, so it becomes an error here.
    status_or(status failure) // NOLINT: implicit on purpose
        : m_status(failure.is_ok() ? status::error(pitfall_error::ok_without_value,
                                                   "status_or built from an ok status", stage::none)
                                   : std::move(failure)) {}

    bool is_ok() const { return m_value.has_value(); }
    const status& error() const { return m_status; }
    T& value() & { return *m_value; }
    const T& value() const& { return *m_value; }
    T&& value() && { return std::move(*m_value); }
    T* operator->() { return &*m_value; }
    T& operator*() { return *m_value; }

private:
    std::optional<T> m_value;
    status m_status;
};

namespace detail {
inline const status& as_status(const status& s) {
    return s;
}
template <class T> const status& as_status(const status_or<T>& s) {
    return s.error();
}
} // namespace detail

} // namespace pitfall

#define PITFALL_CONCAT_INNER(a, b) a##b
#define PITFALL_CONCAT(a, b) PITFALL_CONCAT_INNER(a, b)

/// Return the status from `expr` (a status or status_or) unless it is ok.
#define PITFALL_TRY(expr)                                                                          \
    do {                                                                                           \
        auto&& pitfall_try_result_ = (expr);                                                       \
        if (!pitfall_try_result_.is_ok())                                                          \
            return ::pitfall::detail::as_status(pitfall_try_result_);                              \
    } while (0)

/// `PITFALL_ASSIGN_OR_RETURN(auto buf, backend::allocate<float>(n));`
#define PITFALL_ASSIGN_OR_RETURN(lhs, expr)                                                        \
    PITFALL_ASSIGN_OR_RETURN_IMPL(PITFALL_CONCAT(pitfall_or_, __LINE__), lhs, expr)
// NOLINTBEGIN(bugprone-macro-parentheses): tmp and lhs name declarations, which parentheses
// would break ("auto (x) = ..." declares nothing usable; "(auto buf) = ..." does not compile).
#define PITFALL_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr)                                              \
    auto tmp = (expr);                                                                             \
    if (!tmp.is_ok())                                                                              \
        return tmp.error();                                                                        \
    lhs = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)

/// An error from host code: `code` is a host_error (`pitfall::host_error::write_failed`).
#define PITFALL_HOST_ERROR(stage_, code_, message_)                                                \
    ::pitfall::status::error((code_), (message_), (stage_), __FILE__, __LINE__)

#define PITFALL_UNSUPPORTED(reason_) ::pitfall::status::unsupported((reason_), __FILE__, __LINE__)
