#include "bundle/secret_shapes.hpp"

#include <array>
#include <cctype>
#include <cstring>

namespace pitfall::runner {
namespace {

bool is_alnum(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0;
}
bool is_upper_or_digit(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}
bool is_token_char(char c) {
    return is_alnum(c) || c == '_' || c == '-';
}
/// `text` at `at` starts with `word`, letters compared without case where `fold`.
bool starts_with(std::string_view text, std::size_t at, std::string_view word, bool fold) {
    if (text.size() - at < word.size())
        return false;
    for (std::size_t i = 0; i < word.size(); ++i) {
        const char a = text[at + i];
        const char b = word[i];
        if (fold ? std::tolower(static_cast<unsigned char>(a)) !=
                       std::tolower(static_cast<unsigned char>(b))
                 : a != b)
            return false;
    }
    return true;
}

/// A well-known token's prefix and the fewest characters after it that make it one.
struct token_shape {
    std::string_view prefix;
    std::size_t least_body;
    bool upper_body; ///< AWS key ids: [A-Z0-9] only
};
constexpr std::array<token_shape, 13> token_shapes{{{"github_pat_", 20, false},
                                                    {"ghp_", 20, false},
                                                    {"gho_", 20, false},
                                                    {"ghu_", 20, false},
                                                    {"ghs_", 20, false},
                                                    {"ghr_", 20, false},
                                                    {"glpat-", 20, false},
                                                    {"hf_", 20, false},
                                                    {"AKIA", 16, true},
                                                    {"ASIA", 16, true},
                                                    {"xoxa-", 10, false},
                                                    {"xoxb-", 10, false},
                                                    {"xoxp-", 10, false}}};
constexpr std::array<token_shape, 2> more_token_shapes{
    {{"xoxr-", 10, false}, {"xoxs-", 10, false}}};

/// The length of a well-known token starting at `at` (0: none). A token starts a word.
std::size_t token_at(std::string_view text, std::size_t at) {
    if (at > 0 && is_token_char(text[at - 1]))
        return 0;
    auto match = [&](const token_shape& t) -> std::size_t {
        if (!starts_with(text, at, t.prefix, false))
            return 0;
        std::size_t end = at + t.prefix.size();
        while (end < text.size() &&
               (t.upper_body ? is_upper_or_digit(text[end]) : is_token_char(text[end])))
            ++end;
        return end - at - t.prefix.size() >= t.least_body ? end - at : 0;
    };
    for (const auto& t : token_shapes)
        if (const std::size_t n = match(t); n != 0)
            return n;
    for (const auto& t : more_token_shapes)
        if (const std::size_t n = match(t); n != 0)
            return n;
    return 0;
}

/// At "://" (`at` its ':'): the user-info after it, up to its '@', where there is one before
/// the authority ends; {start, end} of what to replace, or {0, 0}.
std::pair<std::size_t, std::size_t> user_info_at(std::string_view text, std::size_t at) {
    if (at == 0 || !is_alnum(text[at - 1]) || !starts_with(text, at, "://", false))
        return {0, 0};
    const std::size_t start = at + 3;
    for (std::size_t i = start; i < text.size() && i - start < 512; ++i) {
        const char c = text[i];
        if (c == '@')
            return i > start ? std::pair{start, i} : std::pair{std::size_t{0}, std::size_t{0}};
        if (c == '/' || c == '?' || c == '#' || std::isspace(static_cast<unsigned char>(c)) ||
            c == '"' || c == '\'' || c == '<' || c == '>')
            break;
    }
    return {0, 0};
}

/// At a header name that starts a line (or follows a quote or a space): the value after
/// "Name:" up to the line's end; {start, end} of the value, or {0, 0}.
std::pair<std::size_t, std::size_t> header_value_at(std::string_view text, std::size_t at) {
    if (at > 0 && is_token_char(text[at - 1]))
        return {0, 0};
    for (std::string_view name :
         {std::string_view("authorization:"), std::string_view("proxy-authorization:"),
          std::string_view("cookie:"), std::string_view("set-cookie:")}) {
        if (!starts_with(text, at, name, true))
            continue;
        std::size_t start = at + name.size();
        while (start < text.size() && text[start] == ' ')
            ++start;
        std::size_t end = start;
        while (end < text.size() && text[end] != '\n' && text[end] != '\r' && text[end] != '"')
            ++end;
        return end > start ? std::pair{start, end} : std::pair{std::size_t{0}, std::size_t{0}};
    }
    return {0, 0};
}

/// At "-----BEGIN ": a private key block's end (past its END line), or 0.
std::size_t private_key_end(std::string_view text, std::size_t at) {
    if (!starts_with(text, at, "-----BEGIN ", false))
        return 0;
    // The BEGIN line's label, looked for only a few bytes on: a line of many BEGINs that are
    // no key is passed over in linear time.
    const std::string_view first = text.substr(at, 96);
    const std::size_t label_end = first.find('\n');
    if (first.substr(0, label_end).find("PRIVATE KEY-----") == std::string_view::npos)
        return 0;
    const std::size_t end = text.find("-----END ", at);
    if (end == std::string_view::npos)
        return text.size(); // cut short: the rest of it is key
    const std::size_t close = text.find("-----", end + 9);
    return close == std::string_view::npos ? text.size() : close + 5;
}

} // namespace

std::string redact_shapes(std::string_view text, std::string_view replacement) {
    std::string out;
    out.reserve(text.size());
    std::size_t copied = 0;
    auto replace = [&](std::size_t start, std::size_t end) {
        out.append(text, copied, start - copied).append(replacement);
        copied = end;
    };
    for (std::size_t i = 0; i < text.size();) {
        const char c = text[i];
        std::size_t next = i + 1;
        switch (c) {
        case ':':
            if (auto [s, e] = user_info_at(text, i); e != 0) {
                replace(s, e);
                next = e;
            }
            break;
        case 'A':
        case 'a':
        case 'C':
        case 'c':
        case 'P':
        case 'p':
        case 'S':
        case 's':
            if (auto [s, e] = header_value_at(text, i); e != 0) {
                replace(s, e);
                next = e;
            } else if (const std::size_t n = token_at(text, i); n != 0) {
                replace(i, i + n);
                next = i + n;
            }
            break;
        case 'g':
        case 'h':
        case 'x':
            if (const std::size_t n = token_at(text, i); n != 0) {
                replace(i, i + n);
                next = i + n;
            }
            break;
        case '-':
            if (const std::size_t end = private_key_end(text, i); end != 0) {
                replace(i, end);
                next = end;
            }
            break;
        default: break;
        }
        i = next;
    }
    out.append(text, copied, std::string_view::npos);
    return out;
}

} // namespace pitfall::runner
