#include "pitfall/status.hpp"

#include <array>
#include <cstring>
#include <sstream>

namespace pitfall {
namespace {
constexpr std::array<std::pair<library, std::string_view>, 9> library_names{{
    {library::none, "none"},
    {library::cuda_runtime, "cuda_runtime"},
    {library::cuda_driver, "cuda_driver"},
    {library::cublas, "cublas"},
    {library::cudnn, "cudnn"},
    {library::nccl, "nccl"},
    {library::openblas, "openblas"},
    {library::host, "host"},
    {library::pitfall, "pitfall"},
}};
constexpr std::array<std::pair<stage, std::string_view>, 9> stage_names{{
    {stage::none, "none"},
    {stage::init, "init"},
    {stage::alloc, "alloc"},
    {stage::copy, "copy"},
    {stage::launch, "launch"},
    {stage::synchronize, "synchronize"},
    {stage::library_call, "library_call"},
    {stage::compute, "compute"},
    {stage::check, "check"},
}};
// docs/cuda-rules.md#sticky-errors (driver_types.h: "the process must be terminated and
// relaunched").
constexpr std::array<std::string_view, 13> sticky_cuda_errors{
    "cudaErrorContained",          "cudaErrorIllegalAddress",
    "cudaErrorLaunchTimeout",      "cudaErrorAssert",
    "cudaErrorHardwareStackError", "cudaErrorIllegalInstruction",
    "cudaErrorMisalignedAddress",  "cudaErrorInvalidAddressSpace",
    "cudaErrorInvalidPc",          "cudaErrorLaunchFailure",
    "cudaErrorTensorMemoryLeak",   "cudaErrorMpsClientTerminated",
    "cudaErrorExternalDevice"};
constexpr std::array<std::pair<host_error, std::string_view>, 19> host_error_names{{
    {host_error::bad_alloc, "std::bad_alloc"},
    {host_error::exception, "std::exception"},
    {host_error::system_error, "std::system_error"},
    {host_error::unreadable_file, "unreadable_file"},
    {host_error::write_failed, "write_failed"},
    {host_error::no_temp_dir, "no_temp_dir"},
    {host_error::symlink_failed, "symlink_failed"},
    {host_error::execve_failed, "execve_failed"},
    {host_error::no_self_exe, "no_self_exe"},
    {host_error::malformed_elf, "malformed_elf"},
    {host_error::child_not_started, "child_not_started"},
    {host_error::child_timed_out, "child_timed_out"},
    {host_error::child_killed, "child_killed"},
    {host_error::child_failed, "child_failed"},
    {host_error::child_wrote_no_result, "child_wrote_no_result"},
    {host_error::child_result_unreadable, "child_result_unreadable"},
    {host_error::device_ordinal_out_of_range, "device_ordinal_out_of_range"},
    {host_error::no_batch_fits, "no_batch_fits"},
    {host_error::library_not_loaded, "library_not_loaded"},
}};
constexpr std::array<std::pair<pitfall_error, std::string_view>, 11> pitfall_error_names{{
    {pitfall_error::bad_parameter, "bad_parameter"},
    {pitfall_error::bad_usage, "bad_usage"},
    {pitfall_error::bad_input, "bad_input"},
    {pitfall_error::bad_manifest, "bad_manifest"},
    {pitfall_error::bad_environment, "bad_environment"},
    {pitfall_error::ok_without_value, "ok_without_value"},
    {pitfall_error::unknown_variant, "unknown_variant"},
    {pitfall_error::unlisted_error_name, "unlisted_error_name"},
    {pitfall_error::cudnn_major_differs, "cudnn_major_differs"},
    {pitfall_error::cudnn_loaded_minor_older, "cudnn_loaded_minor_older"},
    {pitfall_error::cudnn_cudart_major_differs, "cudnn_cudart_major_differs"},
}};

template <class Table, class Key> std::string_view name_in(const Table& table, Key key) {
    for (const auto& [value, text] : table)
        if (value == key)
            return text;
    return "unknown";
}
template <class Table> bool listed_in(const Table& table, std::string_view name) {
    for (const auto& entry : table)
        if (entry.second == name)
            return true;
    return false;
}
// An errno name as the C library spells it (EINVAL, ENOENT...): what from_errno produces.
bool is_errno_name(std::string_view name) {
    if (name.size() < 2 || name[0] != 'E')
        return false;
    for (const char c : name.substr(1))
        if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
            return false;
    return true;
}
} // namespace

std::string_view to_string(host_error code) {
    return name_in(host_error_names, code);
}
std::string_view to_string(pitfall_error code) {
    return name_in(pitfall_error_names, code);
}

bool is_listed_error_name(library lib, std::string_view name) {
    switch (lib) {
    case library::host:
        return listed_in(host_error_names, name) || is_errno_name(name) ||
               name.substr(0, 5) == "std::" || name.substr(0, 6) == "errno ";
    case library::pitfall: return listed_in(pitfall_error_names, name);
    default: return true;
    }
}

std::string errno_name(int errnum) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
    if (const char* name = ::strerrorname_np(errnum))
        return name;
#endif
    return "errno " + std::to_string(errnum);
}

std::string_view to_string(library lib) {
    for (const auto& [value, text] : library_names)
        if (value == lib)
            return text;
    return "unknown";
}
std::string_view to_string(stage st) {
    for (const auto& [value, text] : stage_names)
        if (value == st)
            return text;
    return "unknown";
}
std::optional<library> library_from_string(std::string_view text) {
    for (const auto& [value, name] : library_names)
        if (name == text)
            return value;
    return std::nullopt;
}
std::optional<stage> stage_from_string(std::string_view text) {
    for (const auto& [value, name] : stage_names)
        if (name == text)
            return value;
    return std::nullopt;
}

bool is_sticky_cuda_error(std::string_view error_name) {
    for (const auto sticky : sticky_cuda_errors)
        if (sticky == error_name)
            return true;
    return false;
}

status status::error(library lib, std::string name, std::string message, stage where, bool sticky,
                     const char* file, int line) {
    status s;
    s.m_library = lib == library::none ? library::host : lib;
    if (is_listed_error_name(s.m_library, name)) {
        s.m_name = std::move(name);
        s.m_message = std::move(message);
    } else { // a name outside the closed sets: kept in the message, never as an outcome name
        s.m_library = library::pitfall;
        s.m_name = std::string(to_string(pitfall_error::unlisted_error_name));
        s.m_message = name + ": " + message;
    }
    s.m_stage = where;
    s.m_sticky = sticky;
    s.m_file = file != nullptr ? file : "";
    s.m_line = line;
    return s;
}

status status::as_reported(library lib, std::string name, std::string message, stage where,
                           bool sticky) {
    status s;
    s.m_library = lib == library::none ? library::host : lib;
    s.m_name = std::move(name);
    s.m_message = std::move(message);
    s.m_stage = where;
    s.m_sticky = sticky;
    return s;
}

status status::error(host_error code, std::string message, stage where, const char* file,
                     int line) {
    return error(library::host, std::string(to_string(code)), std::move(message), where, false,
                 file, line);
}
status status::error(pitfall_error code, std::string message, stage where, const char* file,
                     int line) {
    return error(library::pitfall, std::string(to_string(code)), std::move(message), where, false,
                 file, line);
}
status status::from_errno(int errnum, std::string message, stage where, const char* file,
                          int line) {
    message += ": ";
    message += std::strerror(errnum);
    return error(library::host, errno_name(errnum), std::move(message), where, false, file, line);
}

status status::unsupported(std::string reason, const char* file, int line) {
    status s;
    s.m_unsupported = true;
    s.m_name = "unsupported";
    s.m_message = std::move(reason);
    s.m_file = file != nullptr ? file : "";
    s.m_line = line;
    return s;
}

status status::unsupported_because(const status& cause, std::string reason) {
    status s = cause;
    s.m_unsupported = true;
    s.m_message = std::move(reason);
    return s;
}

status status::at_stage(stage where) const {
    status copy = *this;
    copy.m_stage = where;
    return copy;
}

std::string status::describe() const {
    if (is_ok())
        return "ok";
    std::ostringstream out;
    if (m_unsupported) {
        out << "unsupported: " << m_message;
        return out.str();
    }
    out << m_name << " (" << to_string(m_library) << ", " << to_string(m_stage) << ", "
        << (m_sticky ? "sticky" : "not sticky") << ")";
    if (!m_file.empty())
        out << " at " << m_file << ':' << m_line;
    if (!m_message.empty())
        out << ": " << m_message;
    return out.str();
}

} // namespace pitfall
