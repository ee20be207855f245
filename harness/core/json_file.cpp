#include "pitfall/detail/json_file.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace pitfall::detail {
using nlohmann::json;

status bad_json_input(const std::string& name, const std::string& what) {
    return status::error(pitfall_error::bad_input, valid_utf8(name + ": " + what), stage::init);
}

namespace {
/// Closes the descriptor on every path out.
struct fd_guard {
    int fd;
    ~fd_guard() {
        if (fd >= 0)
            ::close(fd);
    }
};

std::string what_it_is(mode_t mode) {
    if (S_ISDIR(mode))
        return "is a directory, not a file";
    if (S_ISFIFO(mode))
        return "is a FIFO, not a file";
    if (S_ISSOCK(mode))
        return "is a socket, not a file";
    if (S_ISCHR(mode) || S_ISBLK(mode))
        return "is a device, not a file";
    return "is not a regular file";
}

std::string open_error(int err) {
    if (err == ELOOP)
        return "cannot read: symlink loop (or too many levels of symbolic links)";
    return std::string("cannot read: ") + std::strerror(err);
}
} // namespace

status_or<std::string> read_regular_file(const std::string& path, std::size_t max_bytes) {
    // O_NONBLOCK: open() of a FIFO with no writer would wait forever; fstat then refuses it.
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return bad_json_input(path, open_error(errno));
    const fd_guard guard{fd};
    struct stat st {};
    if (::fstat(fd, &st) != 0)
        return bad_json_input(path, open_error(errno));
    if (!S_ISREG(st.st_mode))
        return bad_json_input(path, what_it_is(st.st_mode));
    if (static_cast<unsigned long long>(st.st_size) > max_bytes)
        return bad_json_input(path, "is " + std::to_string(st.st_size) + " bytes, more than " +
                                        std::to_string(max_bytes >> 20) +
                                        " MiB (the most pitfall reads)");
    std::string text;
    text.resize(static_cast<std::size_t>(st.st_size));
    std::size_t done = 0;
    for (;;) {
        if (done == text.size()) { // a file that grew since fstat: read on, within the cap
            if (text.size() > max_bytes)
                return bad_json_input(path, "grew past " + std::to_string(max_bytes >> 20) +
                                                " MiB while read (the most pitfall reads)");
            text.resize(text.size() + 65536);
        }
        const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return bad_json_input(path, open_error(errno));
        if (n == 0)
            break;
        done += static_cast<std::size_t>(n);
    }
    text.resize(done);
    return text;
}

std::size_t find_too_deep(std::string_view text, int max_depth) {
    int depth = 0;
    bool in_string = false;
    bool escaped = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                in_string = false;
            continue;
        }
        if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > max_depth)
                return i;
        } else if ((c == ']' || c == '}') && depth > 0) {
            --depth;
        }
    }
    return std::string_view::npos;
}

std::string line_column(std::string_view text, std::size_t byte_offset) {
    std::size_t line = 1;
    std::size_t column = 1;
    for (std::size_t i = 0; i < text.size() && i < byte_offset; ++i) {
        if (text[i] == '\n') {
            ++line;
            column = 1;
        } else {
            ++column;
        }
    }
    return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

namespace {
/// nlohmann's message without its "[json.exception.x.N] " tag and its own "parse error at
/// line L, column C: " (the caller names the place).
std::string plain_message(const char* what) {
    std::string m = what;
    if (const auto tag = m.find("] "); m.rfind("[json.exception.", 0) == 0 && tag != m.npos)
        m.erase(0, tag + 2);
    if (m.rfind("parse error", 0) == 0)
        if (const auto colon = m.find(": "); colon != m.npos)
            m.erase(0, colon + 2);
    return m;
}

template <class Json>
status_or<Json> parse_checked(std::string_view text, const std::string& name) {
    if (const auto at = find_too_deep(text); at != std::string_view::npos)
        return bad_json_input(name, "malformed JSON at " + line_column(text, at) +
                                        ": nested deeper than " + std::to_string(json_max_depth) +
                                        " levels");
    try {
        return Json::parse(text.begin(), text.end());
    } catch (const typename Json::parse_error& e) {
        // e.byte is 1-based: the byte after the last one read.
        return bad_json_input(name, "malformed JSON at " +
                                        line_column(text, e.byte > 0 ? e.byte - 1 : 0) + ": " +
                                        plain_message(e.what()));
    } catch (const typename Json::exception& e) {
        // out_of_range 406, a number past double's range (1e999): the message quotes it.
        std::string where;
        const std::string m = e.what();
        const auto open = m.find('\'');
        const auto close = m.rfind('\'');
        if (open != m.npos && close > open + 1)
            if (const auto at = text.find(m.substr(open + 1, close - open - 1)); at != text.npos)
                where = " at " + line_column(text, at);
        return bad_json_input(name, "malformed JSON" + where + ": " + plain_message(e.what()));
    } catch (const std::exception& e) { // std::bad_alloc on a huge document
        return bad_json_input(name, std::string("cannot parse: ") + e.what());
    }
}
} // namespace

status_or<json> parse_json(std::string_view text, const std::string& name) {
    return parse_checked<json>(text, name);
}

status_or<nlohmann::ordered_json> parse_ordered_json(std::string_view text,
                                                     const std::string& name) {
    return parse_checked<nlohmann::ordered_json>(text, name);
}

status_or<json> read_json_file(const std::string& path) {
    PITFALL_ASSIGN_OR_RETURN(const std::string text, read_regular_file(path));
    return parse_json(text, path);
}

std::string dump_safe(const json& value, int indent) {
    return value.dump(indent, ' ', false, json::error_handler_t::replace);
}

std::string valid_utf8(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    const auto* s = reinterpret_cast<const unsigned char*>(text.data());
    const std::size_t n = text.size();
    for (std::size_t i = 0; i < n;) {
        const unsigned char c = s[i];
        std::size_t len = 0;
        unsigned int cp = 0;
        if (c < 0x80) {
            len = 1;
            cp = c;
        } else if (c >= 0xC2 && c <= 0xDF) {
            len = 2;
            cp = c & 0x1Fu;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            cp = c & 0x0Fu;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            cp = c & 0x07u;
        }
        bool ok = len > 0 && i + len <= n;
        for (std::size_t k = 1; ok && k < len; ++k) {
            ok = (s[i + k] & 0xC0u) == 0x80u;
            cp = (cp << 6) | (s[i + k] & 0x3Fu);
        }
        // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8 either.
        ok = ok && !(len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) &&
             !(len == 4 && (cp < 0x10000 || cp > 0x10FFFF));
        if (ok) {
            out.append(text.substr(i, len));
            i += len;
        } else {
            out += "\xEF\xBF\xBD";
            ++i;
        }
    }
    return out;
}

} // namespace pitfall::detail
