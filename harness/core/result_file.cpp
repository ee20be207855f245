#include "pitfall/detail/result_file.hpp"

#include "pitfall/detail/json_file.hpp"
#include "pitfall/detail/json_schema.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace pitfall {

status_or<nlohmann::json> read_result_file(const std::string& path) {
    PITFALL_ASSIGN_OR_RETURN(nlohmann::json doc, detail::read_json_file(path));
    PITFALL_TRY(detail::validate_document("result", doc, path));
    return doc;
}

namespace {
/// The process's umask, read once before main (single-threaded then): umask() both reads and
/// sets it, which threads writing files at the same time must not see.
const mode_t process_umask = [] {
    const mode_t mask = ::umask(0);
    ::umask(mask);
    return mask;
}();
} // namespace

status write_file_atomically(const std::string& path, const std::string& text) {
    return write_file_atomically(path, text, 0644 & ~process_umask);
}

status write_file_atomically(const std::string& path, const std::string& text, unsigned mode) {
    // The temporary is made new (mkostemp: O_CREAT | O_EXCL, a name no one can predict), never
    // opened through a link someone put at a predictable "<file>.tmp.<pid>"; then given its
    // mode (by default the one a plain create would have: 0644 less the umask) and renamed
    // over the file, which replaces a link at `path` itself rather than writing through it.
    std::string tmp = path + ".tmp.XXXXXX";
    const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
    if (fd < 0)
        return PITFALL_HOST_ERROR(stage::none, host_error::write_failed,
                                  "cannot write " + path + ": " + std::strerror(errno));
    if (::fchmod(fd, static_cast<mode_t>(mode)) != 0) {
        const int err = errno;
        ::close(fd);
        ::unlink(tmp.c_str());
        return PITFALL_HOST_ERROR(stage::none, host_error::write_failed,
                                  "cannot write " + path + ": " + std::strerror(err));
    }
    std::size_t done = 0;
    while (done < text.size()) {
        const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            const int err = errno;
            ::close(fd);
            ::unlink(tmp.c_str());
            return PITFALL_HOST_ERROR(stage::none, host_error::write_failed,
                                      "cannot write " + path + ": " + std::strerror(err));
        }
        done += static_cast<std::size_t>(n);
    }
    if (::fsync(fd) != 0 || ::close(fd) != 0 || std::rename(tmp.c_str(), path.c_str()) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        return PITFALL_HOST_ERROR(stage::none, host_error::write_failed,
                                  "cannot write " + path + ": " + std::strerror(err));
    }
    return status::ok();
}

} // namespace pitfall
