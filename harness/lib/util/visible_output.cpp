#include "util/visible_output.hpp"

#include "pitfall/detail/text.hpp"

#include <cstring>
#include <iostream>

namespace pitfall::runner {

namespace {
constexpr std::size_t chunk = 4096;

/// How many bytes at the end of `s` are the start of a UTF-8 character still to be completed.
std::size_t unfinished_character(const std::string& s) {
    for (std::size_t back = 1; back <= 3 && back <= s.size(); ++back) {
        const auto c = static_cast<unsigned char>(s[s.size() - back]);
        if ((c & 0xC0) == 0x80)
            continue; // a continuation byte: its lead is further back
        const std::size_t length = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return length > back ? back : 0;
    }
    return 0;
}
} // namespace

void visible_streambuf::pass_on(bool everything) {
    const std::size_t keep = everything ? 0 : unfinished_character(m_pending);
    const std::string out =
        detail::visible_controls(std::string_view(m_pending).substr(0, m_pending.size() - keep));
    m_target->sputn(out.data(), static_cast<std::streamsize>(out.size()));
    m_pending.erase(0, m_pending.size() - keep);
}

visible_streambuf::int_type visible_streambuf::overflow(int_type ch) {
    if (traits_type::eq_int_type(ch, traits_type::eof()))
        return sync() == 0 ? traits_type::not_eof(ch) : traits_type::eof();
    m_pending.push_back(traits_type::to_char_type(ch));
    if (ch == '\n' || m_pending.size() >= chunk)
        pass_on(false);
    return ch;
}

std::streamsize visible_streambuf::xsputn(const char* s, std::streamsize n) {
    m_pending.append(s, static_cast<std::size_t>(n));
    if (m_pending.size() >= chunk || std::memchr(s, '\n', static_cast<std::size_t>(n)) != nullptr)
        pass_on(false);
    return n;
}

int visible_streambuf::sync() {
    pass_on(false);
    return m_target->pubsync();
}

void make_standard_output_visible() {
    // Allocated once and never freed: std::cout is flushed after every static is destroyed.
    static auto* out =
        new visible_streambuf(std::cout.rdbuf()); // NOLINT(cppcoreguidelines-owning-memory)
    static auto* err =
        new visible_streambuf(std::cerr.rdbuf()); // NOLINT(cppcoreguidelines-owning-memory)
    std::cout.rdbuf(out);
    std::cerr.rdbuf(err);
}

} // namespace pitfall::runner
