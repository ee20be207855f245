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
enum class library { none, cuda_runtime, cuda_driver, cublas, cudnn, nccl, openblas, host, pitfall };

/// Where in a case's life the error happened.
enum class stage { none, init, alloc, copy, launch, synchronize, library_call, compute, check };

std::string_view to_string(library lib);
std::string_view to_string(stage st);
std::optional<library> library_from_string(std::string_view text);
std::optional<stage> stage_from_string(std::string_view text);

/// True for the CUDA runtime errors after which the process must be relaunched
/// (CUDA-FACTS.md, "Sticky"); matched by name so the list works without CUDA headers.
bool is_sticky_cuda_error(std::string_view error_name);

/// An ok value or one observed error. Cheap to copy; compare with `is_ok()`.
class status {
public:
    status() = default;
    static status ok() { return {}; }

    /// An error: `name` is the library's own error name (e.g. "cudaErrorMemoryAllocation").
    static status error(library lib, std::string name, std::string message, stage where,
                        bool sticky = false, const char* file = "", int line = 0);

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
template <class T> class status_or {
public:
    // Both overloads, so `return local;` of a move-only T moves (C++17's implicit move on
    // return needs a constructor taking T&&).
    status_or(const T& value) : m_value(value) {}                     // NOLINT: implicit on purpose
    status_or(T&& value) : m_value(std::move(value)) {}               // NOLINT: implicit on purpose
    // A status_or holds a value or an error: "ok, but no value" would let PITFALL_ASSIGN_OR_RETURN
    // pass an ok status upward as if the value existed, so it becomes an error here.
    status_or(status failure) // NOLINT: implicit on purpose
        : m_status(failure.is_ok() ? status::error(library::pitfall, "ok_without_value",
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
inline const status& as_status(const status& s) { return s; }
template <class T> const status& as_status(const status_or<T>& s) { return s.error(); }
} // namespace detail

} // namespace pitfall

#define PITFALL_CONCAT_INNER(a, b) a##b
#define PITFALL_CONCAT(a, b) PITFALL_CONCAT_INNER(a, b)

/// Return the status from `expr` (a status or status_or) unless it is ok.
#define PITFALL_TRY(expr)                                                                         \
    do {                                                                                          \
        auto&& pitfall_try_result_ = (expr);                                                      \
        if (!pitfall_try_result_.is_ok())                                                         \
            return ::pitfall::detail::as_status(pitfall_try_result_);                             \
    } while (0)

/// `PITFALL_ASSIGN_OR_RETURN(auto buf, backend::allocate<float>(n));`
#define PITFALL_ASSIGN_OR_RETURN(lhs, expr)                                                       \
    PITFALL_ASSIGN_OR_RETURN_IMPL(PITFALL_CONCAT(pitfall_or_, __LINE__), lhs, expr)
#define PITFALL_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr)                                             \
    auto tmp = (expr);                                                                            \
    if (!tmp.is_ok())                                                                             \
        return tmp.error();                                                                       \
    lhs = std::move(tmp).value()

/// An error from host code (a failed check, a host allocation).
#define PITFALL_HOST_ERROR(stage_, name_, message_)                                               \
    ::pitfall::status::error(::pitfall::library::host, (name_), (message_), (stage_), false,      \
                             __FILE__, __LINE__)

#define PITFALL_UNSUPPORTED(reason_) ::pitfall::status::unsupported((reason_), __FILE__, __LINE__)
