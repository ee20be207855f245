#include "pitfall/status.hpp"

#include <array>
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
// CUDA-FACTS.md "Sticky" (driver_types.h: "the process must be terminated and relaunched").
constexpr std::array<std::string_view, 13> sticky_cuda_errors{
    "cudaErrorContained",          "cudaErrorIllegalAddress",     "cudaErrorLaunchTimeout",
    "cudaErrorAssert",             "cudaErrorHardwareStackError", "cudaErrorIllegalInstruction",
    "cudaErrorMisalignedAddress",  "cudaErrorInvalidAddressSpace", "cudaErrorInvalidPc",
    "cudaErrorLaunchFailure",      "cudaErrorTensorMemoryLeak",   "cudaErrorMpsClientTerminated",
    "cudaErrorExternalDevice"};
} // namespace

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

status status::error(library lib, std::string name, std::string message, stage where,
                     bool sticky, const char* file, int line) {
    status s;
    s.m_library = lib == library::none ? library::host : lib;
    s.m_name = std::move(name);
    s.m_message = std::move(message);
    s.m_stage = where;
    s.m_sticky = sticky;
    s.m_file = file != nullptr ? file : "";
    s.m_line = line;
    return s;
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
