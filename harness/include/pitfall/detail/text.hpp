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

/// Whether the UTF-8 sequence `seq` (well formed) is a character no text output should carry
/// raw: a C0 control other than newline and tab, DEL, a C1 control (U+0080-U+009F: U+009B is
/// CSI on a terminal that reads UTF-8), a bidirectional override or isolate, or one of the
/// noncharacters U+FFFE and U+FFFF.
inline bool is_control_character(std::string_view seq) {
    const auto b = [&](std::size_t k) { return static_cast<unsigned char>(seq[k]); };
    if (seq.size() == 1)
        return (b(0) < 0x20 && b(0) != '\n' && b(0) != '\t') || b(0) == 0x7F;
    if (seq.size() == 2)
        return b(0) == 0xC2 && b(1) <= 0x9F;
    if (seq.size() != 3)
        return false;
    // The bidirectional overrides and isolates (U+202A-U+202E, U+2066-U+2069): they reorder
    // what a reader sees ("trojan source").
    if (b(0) == 0xE2 && ((b(1) == 0x80 && b(2) >= 0xAA && b(2) <= 0xAE) ||
                         (b(1) == 0x81 && b(2) >= 0xA6 && b(2) <= 0xA9)))
        return true;
    return b(0) == 0xEF && b(1) == 0xBF && (b(2) == 0xBE || b(2) == 0xBF);
}

/// `s` with every control character made visible, so that text from outside (a case's output,
/// a reason, a check's name, a path) can neither move a terminal's cursor, retitle its window
/// nor forge a line: a C0 control or DEL as \xNN ("\x1b"), a C1 control or noncharacter as
/// \uNNNN ("\u009b": inside a JSON string, the same character), a byte that is not UTF-8 as
/// \xNN. Newlines and tabs stay.
inline std::string visible_controls(std::string_view s) {
    static const char* hex = "0123456789abcdef";
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size();) {
        const std::size_t n = utf8_sequence_length(s, i);
        const std::string_view seq = s.substr(i, n == 0 ? 1 : n);
        if (n == 0 || (n == 1 && is_control_character(seq))) {
            const auto c = static_cast<unsigned char>(s[i]);
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 0xF];
        } else if (is_control_character(seq)) {
            const auto u = [&](std::size_t k) { return static_cast<unsigned char>(seq[k]); };
            const unsigned cp =
                n == 2 ? ((u(0) & 0x1Fu) << 6) | (u(1) & 0x3Fu)
                       : ((u(0) & 0x0Fu) << 12) | ((u(1) & 0x3Fu) << 6) | (u(2) & 0x3Fu);
            out += "\\u";
            for (int shift = 12; shift >= 0; shift -= 4)
                out += hex[(cp >> shift) & 0xF];
        } else {
            out.append(seq);
        }
        i += seq.size();
    }
    return out;
}

} // namespace pitfall::detail
