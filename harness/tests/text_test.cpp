// Text from outside made visible (terminals, Markdown) and kept well-formed (XML).
#include "visible_output.hpp"

#include "pitfall/detail/text.hpp"

#include <gtest/gtest.h>

#include <sstream>

using pitfall::detail::visible_controls;

TEST(VisibleControls, EveryControlShowsAsTextAndTheRestStays) {
    EXPECT_EQ(visible_controls("plain \xC3\xA9t\xC3\xA9\t, two\nlines"),
              "plain \xC3\xA9t\xC3\xA9\t, two\nlines");
    EXPECT_EQ(visible_controls("\x1b[2J\x1b]0;t\x07"), "\\x1b[2J\\x1b]0;t\\x07");
    EXPECT_EQ(visible_controls("a\rPASS\b\x7f"), "a\\x0dPASS\\x08\\x7f");
    EXPECT_EQ(visible_controls(std::string("nul\0!", 5)), "nul\\x00!");
    EXPECT_EQ(visible_controls("\xC2\x9B"
                               "31m"),
              "\\u009b31m");                                      // C1 CSI
    EXPECT_EQ(visible_controls("\xC2\xA0"), "\xC2\xA0");          // NBSP is text
    EXPECT_EQ(visible_controls("\xE2\x80\xAEgnp"), "\\u202egnp"); // bidi override
    EXPECT_EQ(visible_controls("\xE2\x81\xA6x\xE2\x81\xA9"), "\\u2066x\\u2069");
    EXPECT_EQ(visible_controls("\xEF\xBF\xBE\xEF\xBF\xBF"), "\\ufffe\\uffff");
    EXPECT_EQ(visible_controls("\xFF\xC3"), "\\xff\\xc3"); // not UTF-8
}

TEST(VisibleStreambuf, EscapesAcrossWritesAndKeepsACharacterCutInTwo) {
    std::ostringstream sink;
    pitfall::runner::visible_streambuf visible(sink.rdbuf());
    std::ostream out(&visible);
    out << "caf\xC3" << std::flush; // the first byte of é alone: held back, not escaped
    EXPECT_EQ(sink.str(), "caf");
    out << "\xA9 \x1b[31m" << std::flush;
    EXPECT_EQ(sink.str(), "caf\xC3\xA9 \\x1b[31m");
    out << "\xC2"
        << "\x9B"
        << "x\n";
    EXPECT_EQ(sink.str(), "caf\xC3\xA9 \\x1b[31m\\u009bx\n");
}
