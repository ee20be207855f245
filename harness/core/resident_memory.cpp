#include "pitfall/detail/resident_memory.hpp"

#include <cerrno>
#include <fcntl.h>
#include <limits>
#include <string>
#include <sys/resource.h>
#include <unistd.h>

namespace pitfall::detail {

std::optional<std::int64_t> vm_hwm_bytes(std::string_view status_text) {
    constexpr std::string_view key = "VmHWM:";
    std::size_t at = 0;
    while (at < status_text.size()) {
        const std::size_t end = std::min(status_text.find('\n', at), status_text.size());
        std::string_view line = status_text.substr(at, end - at);
        at = end + 1;
        if (line.substr(0, key.size()) != key)
            continue;
        line.remove_prefix(key.size());
        while (!line.empty() && (line.front() == ' ' || line.front() == '\t'))
            line.remove_prefix(1);
        std::int64_t kib = 0;
        std::size_t digits = 0;
        constexpr std::int64_t most = std::numeric_limits<std::int64_t>::max() / 1024;
        while (digits < line.size() && line[digits] >= '0' && line[digits] <= '9') {
            const int d = line[digits] - '0';
            if (kib > (most - d) / 10)
                return std::nullopt; // past what bytes can hold
            kib = kib * 10 + d;
            ++digits;
        }
        if (digits == 0 || line.substr(digits) != " kB")
            return std::nullopt;
        return kib * 1024;
    }
    return std::nullopt;
}

own_peak_rss read_own_peak_rss() {
    own_peak_rss peak;
    // /proc/self/status is a few kB; read it whole without allocating more than once.
    const int fd = ::open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        std::string text(16384, '\0');
        std::size_t got = 0;
        for (;;) {
            const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                break;
            got += static_cast<std::size_t>(n);
            if (got == text.size())
                break;
        }
        ::close(fd);
        text.resize(got);
        peak.self_bytes = vm_hwm_bytes(text);
    }
    struct rusage children {};
    if (::getrusage(RUSAGE_CHILDREN, &children) == 0 && children.ru_maxrss > 0)
        peak.children_bytes = static_cast<std::int64_t>(children.ru_maxrss) * 1024;
    return peak;
}

} // namespace pitfall::detail
