#include "pitfall/detail/result_file.hpp"

#include "pitfall/detail/json_file.hpp"
#include "pitfall/detail/json_schema.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace pitfall {

status_or<nlohmann::json> read_result_file(const std::string& path) {
    PITFALL_ASSIGN_OR_RETURN(nlohmann::json doc, detail::read_json_file(path));
    PITFALL_TRY(detail::validate_document("result", doc, path));
    return doc;
}

status write_file_atomically(const std::string& path, const std::string& text) {
    const std::string tmp = path + ".tmp." + std::to_string(::getpid());
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return PITFALL_HOST_ERROR(stage::none, host_error::write_failed,
                                  "cannot write " + path + ": " + std::strerror(errno));
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
