// Text from outside made visible (terminals, Markdown) and kept well-formed (XML).
#include "util/visible_output.hpp"

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

#include "util/sha256.hpp"

TEST(Sha256, KnownAnswers) {
    using pitfall::runner::sha256_hex;
    // FIPS 180-4's examples, and the lengths at the padding's edges (55, 56, 64 bytes).
    EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(sha256_hex("abc"),
              "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
              "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, EveryPaddingEdge) {
    using pitfall::runner::sha256_hex;
    EXPECT_EQ(sha256_hex(std::string(55, 'x')),
              "d5e285683cd4efc02d021a5c62014694958901005d6f71e89e0989fac77e4072");
    EXPECT_EQ(sha256_hex(std::string(56, 'x')),
              "04c26261370ee7541549d16dee320c723e3fd14671e66a099afe0a377c16888e");
    EXPECT_EQ(sha256_hex(std::string(63, 'x')),
              "75220b47218278e656f2013bb8f0c455a25eaf01e86c64924e9d48d89776d6f2");
    EXPECT_EQ(sha256_hex(std::string(64, 'x')),
              "7ce100971f64e7001e8fe5a51973ecdfe1ced42befe7ee8d5fd6219506b5393c");
    EXPECT_EQ(sha256_hex(std::string(65, 'x')),
              "9537c5fdf120482f7d58d25e9ed583f52c02b4e304ea814db1633ad565aed7e9");
    EXPECT_EQ(sha256_hex(std::string(119, 'x')),
              "000b48d4edf0fa7bee3c6236ecd2785baa5db4eeb8bb54341b029e0d9fa5fb0c");
    EXPECT_EQ(sha256_hex(std::string(120, 'x')),
              "13f05a0b594787f5ecd315edc96141bd3243203d1b7d4f0836f37308b276ba98");
}
