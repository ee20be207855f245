#include "pitfall/memory.hpp"

#include <cctype>
#include <cstdlib>
#include <limits>
#include <sstream>

namespace pitfall {

std::string_view to_string(backend_kind kind) {
    return kind == backend_kind::cpu ? "cpu" : "cuda";
}
std::optional<backend_kind> backend_from_string(std::string_view text) {
    if (text == "cpu")
        return backend_kind::cpu;
    if (text == "cuda")
        return backend_kind::cuda;
    return std::nullopt;
}

namespace {
/// The shift of a size's unit, "" or B to T (KiB and KB alike: powers of 1024), any case;
/// nullopt for any other suffix.
std::optional<unsigned> suffix_shift(std::string_view text) {
    std::string suffix(text);
    for (auto& c : suffix)
        c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (suffix.empty() || suffix == "B")
        return 0;
    if (suffix == "K" || suffix == "KB" || suffix == "KIB")
        return 10;
    if (suffix == "M" || suffix == "MB" || suffix == "MIB")
        return 20;
    if (suffix == "G" || suffix == "GB" || suffix == "GIB")
        return 30;
    if (suffix == "T" || suffix == "TB" || suffix == "TIB")
        return 40;
    return std::nullopt;
}
} // namespace

std::optional<std::uint64_t> parse_byte_size(std::string_view text) {
    std::size_t i = 0;
    std::uint64_t value = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) != 0) {
        const auto digit = static_cast<std::uint64_t>(text[i] - '0');
        if (value > (std::numeric_limits<std::uint64_t>::max() - digit) / 10)
            return std::nullopt;
        value = value * 10 + digit;
        ++i;
    }
    if (i == 0)
        return std::nullopt;
    const std::optional<unsigned> shift = suffix_shift(text.substr(i));
    if (!shift)
        return std::nullopt;
    if (*shift > 0 && value > (std::numeric_limits<std::uint64_t>::max() >> *shift))
        return std::nullopt;
    return value << *shift;
}

status_or<std::optional<std::uint64_t>> device_memory_limit_from_env() {
    const char* text = std::getenv(device_memory_limit_env);
    if (text == nullptr || *text == '\0')
        return std::optional<std::uint64_t>{};
    const auto bytes = parse_byte_size(text);
    if (!bytes)
        return status::error(pitfall_error::bad_environment,
                             std::string(device_memory_limit_env) + "='" + text +
                                 "' is not a byte size (e.g. 1073741824, 512M, 2G)",
                             stage::init);
    return std::optional<std::uint64_t>{*bytes};
}

memory_tracker::memory_tracker(backend_kind kind, std::optional<std::uint64_t> limit)
    : m_kind(kind), m_limit(limit) {}

memory_tracker& memory_tracker::for_backend(backend_kind kind) {
    // scenario_main validates the variable before any case runs, so a malformed value cannot
    // reach here; it would count as "no limit".
    static const auto limit = [] {
        auto parsed = device_memory_limit_from_env();
        return parsed.is_ok() ? parsed.value() : std::optional<std::uint64_t>{};
    }();
    static memory_tracker cpu(backend_kind::cpu, limit);
    static memory_tracker cuda(backend_kind::cuda, limit);
    return kind == backend_kind::cpu ? cpu : cuda;
}

status memory_tracker::reserve(std::uint64_t bytes) {
    // UINT64_MAX stands for a size that overflowed: over any budget, and over the unlimited one.
    if (bytes == UINT64_MAX || (m_limit && (bytes > *m_limit || m_current > *m_limit - bytes))) {
        ++m_failed;
        std::ostringstream message;
        if (bytes == UINT64_MAX)
            message << "out of memory: the requested size overflows 64 bits";
        else
            message << "out of memory: " << bytes << " bytes requested, " << m_current
                    << " held, budget " << *m_limit << " (" << device_memory_limit_env << ")";
        if (m_kind == backend_kind::cuda)
            return status::error(library::cuda_runtime, "cudaErrorMemoryAllocation", message.str(),
                                 stage::alloc, false, __FILE__, __LINE__);
        return status::error(host_error::bad_alloc, message.str(), stage::alloc, __FILE__,
                             __LINE__);
    }
    m_current += bytes;
    ++m_allocations;
    if (m_current > m_peak)
        m_peak = m_current;
    return status::ok();
}

void memory_tracker::release(std::uint64_t bytes) {
    m_current = bytes > m_current ? 0 : m_current - bytes;
}

} // namespace pitfall
