#include "run/case_memory.hpp"

#include <algorithm>

namespace pitfall::runner {

namespace {
/// A whole number of bytes in 1..`most` (0: no upper bound), or nullopt.
std::optional<std::int64_t> bytes_within(const nlohmann::json& value, long long most) {
    if (!value.is_number_integer())
        return std::nullopt;
    if (value.is_number_unsigned() &&
        value.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
        return std::nullopt;
    const auto bytes = value.get<std::int64_t>();
    if (bytes <= 0 || (most > 0 && bytes > most))
        return std::nullopt;
    return bytes;
}
} // namespace

case_peak_rss peak_rss_of_case(long long wait4_bytes, const nlohmann::json& result) {
    case_peak_rss peak;
    const nlohmann::json* own = nullptr;
    if (result.is_object()) {
        const auto it = result.find("resident_memory");
        if (it != result.end() && it->is_object())
            own = &*it;
    }
    // The kernel's two counts of one process's peak are not read at the same moment, and its
    // resident counters are per-CPU approximations: a case's own figure may pass wait4's by a
    // few pages. Past 1 MiB (or 2%) it is not the same process's figure.
    const long long most =
        wait4_bytes > 0 ? wait4_bytes + std::max<long long>(1LL << 20, wait4_bytes / 50) : 0;
    if (own != nullptr) {
        const auto self = bytes_within(own->value("peak_rss_bytes", nlohmann::json()), most);
        if (self) {
            peak.bytes = *self;
            const auto children =
                bytes_within(own->value("children_peak_rss_bytes", nlohmann::json()), most);
            if (children && *children > *self)
                peak.bytes = *children;
            peak.method = rss_method_case;
            return peak;
        }
    }
    if (wait4_bytes > 0)
        peak.bytes = static_cast<std::int64_t>(wait4_bytes);
    peak.method = rss_method_wait4;
    return peak;
}

} // namespace pitfall::runner
