// visible_output.hpp: pitfall's standard output and error made safe for a terminal. A case's
// reason, a check's name, a path or a library's message can carry escape sequences; printed
// raw they would clear the screen, retitle the window or overwrite a line with a forged PASS.
// Every byte pitfall prints passes through detail::visible_controls on its way out.
#pragma once

#include <streambuf>
#include <string>

namespace pitfall::runner {

/// A stream buffer that writes to `target` what it is given with every control character made
/// visible (\x1b, \u009b), a line (or 4 KiB) at a time; a UTF-8 character cut between two writes
/// is held until its end arrives.
class visible_streambuf final : public std::streambuf {
public:
    explicit visible_streambuf(std::streambuf* target) : m_target(target) {}

protected:
    int_type overflow(int_type ch) override;
    std::streamsize xsputn(const char* s, std::streamsize n) override;
    int sync() override;

private:
    void pass_on(bool everything);
    std::streambuf* m_target;
    std::string m_pending;
};

/// Puts std::cout and std::cerr behind a visible_streambuf each, for the rest of the process
/// (never undone: the standard streams are flushed at exit, after every static has gone).
void make_standard_output_visible();

} // namespace pitfall::runner
