// FNV-1a, 64 bits: the short, stable, non-cryptographic id of a text that fingerprint ids,
// host ids, kept-answer file names and cut metric label values are made of. (Not for secrets:
// util/sha256.hpp is the digest where a collision must not be made on purpose.)
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace pitfall::runner {

inline constexpr std::uint64_t fnv1a_offset = 1469598103934665603ULL;

/// FNV-1a of `text`'s bytes, continuing from `h` (the offset basis by default).
inline std::uint64_t fnv1a(std::string_view text, std::uint64_t h = fnv1a_offset) {
    for (const unsigned char c : text) {
        h ^= c;
        h *= 1099511628211ULL;
    }
    return h;
}

/// A 64-bit value as 16 lower-case hex digits.
inline std::string hex16(std::uint64_t h) {
    char text[17];
    std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(h));
    return text;
}

/// hex16(fnv1a(text)).
inline std::string fnv1a_hex(std::string_view text) {
    return hex16(fnv1a(text));
}

} // namespace pitfall::runner
