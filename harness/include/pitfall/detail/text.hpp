// pitfall/detail/text.hpp: bytes from outside (a child's output, argv, paths, the environment)
// made into text that a JSON document can hold. nlohmann's dump() throws on invalid UTF-8, so
// everything that enters a record from outside passes through here first.
//
//   record["output_tail"] = pitfall::detail::utf8_tail(log, 2000);
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>

namespace pitfall::detail {

/// The length of the well-formed UTF-8 sequence at `s[i]` (1..4); 0 when it is not one
/// (a stray continuation byte, an overlong form, a surrogate, past U+10FFFF, or cut short).
inline std::size_t utf8_sequence_length(std::string_view s, std::size_t i) {
    const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char b = byte(i);
    if (b < 0x80)
        return 1;
    std::size_t n = 0;
    unsigned char lo = 0x80, hi = 0xBF; // the allowed range of the second byte
    if (b >= 0xC2 && b <= 0xDF) {
        n = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
        n = 3;
        lo = b == 0xE0 ? 0xA0 : 0x80; // no overlong forms
        hi = b == 0xED ? 0x9F : 0xBF; // no surrogates
    } else if (b >= 0xF0 && b <= 0xF4) {
        n = 4;
        lo = b == 0xF0 ? 0x90 : 0x80;
        hi = b == 0xF4 ? 0x8F : 0xBF; // nothing past U+10FFFF
    } else {
        return 0;
    }
    if (i + n > s.size() || byte(i + 1) < lo || byte(i + 1) > hi)
        return 0;
    for (std::size_t k = 2; k < n; ++k)
        if (byte(i + k) < 0x80 || byte(i + k) > 0xBF)
            return 0;
    return n;
}

/// `s` with each byte that is not part of well-formed UTF-8 replaced by U+FFFD.
inline std::string valid_utf8(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size();) {
        const std::size_t n = utf8_sequence_length(s, i);
        if (n == 0) {
            out += "\xEF\xBF\xBD";
            ++i;
        } else {
            out.append(s.data() + i, n);
            i += n;
        }
    }
    return out;
}

/// The last `max_bytes` (or fewer) of `s`, starting at a character boundary, as valid UTF-8.
inline std::string utf8_tail(std::string_view s, std::size_t max_bytes) {
    std::size_t start = s.size() > max_bytes ? s.size() - max_bytes : 0;
    // A cut inside a character: step past its continuation bytes (at most three).
    for (int k = 0; k < 3 && start > 0 && start < s.size() &&
                    (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80;
         ++k)
        ++start;
    return valid_utf8(s.substr(start));
}

/// The first `max_bytes` (or fewer) of `s`, ending at a character boundary, as valid UTF-8.
inline std::string utf8_head(std::string_view s, std::size_t max_bytes) {
    std::size_t end = std::min(s.size(), max_bytes);
    for (int k = 0;
         k < 3 && end > 0 && end < s.size() && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80;
         ++k)
        --end;
    return valid_utf8(s.substr(0, end));
}

} // namespace pitfall::detail
