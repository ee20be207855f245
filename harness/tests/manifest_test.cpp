#include "pitfall/manifest.hpp"

#include <gtest/gtest.h>

namespace {
using namespace pitfall;

const char* good = R"({
  "name": "demo", "summary": "s", "failure_class": "dtype", "backends": ["cpu", "cuda"],
  "timeout_seconds": 30, "params": {"rows": {"default": 100, "doc": "rows"}},
  "variants": [{"name": "reproduce", "kind": "reproduce"},
               {"name": "remedy", "kind": "remedy", "backends": ["cpu"], "needs_device": false}],
  "ratios": [{"name": "r", "numerator": "reproduce", "denominator": "remedy", "samples": "s"}]
})";

TEST(Manifest, ParsesAGoodOne) {
    auto m = parse_manifest(good, "demo.json");
    ASSERT_TRUE(m.is_ok()) << m.error().message();
    EXPECT_EQ(m->name, "demo");
    EXPECT_EQ(m->timeout_seconds, 30);
    ASSERT_EQ(m->variants.size(), 2u);
    EXPECT_EQ(m->backends_of(m->variants[0]), (std::vector<std::string>{"cpu", "cuda"}));
    EXPECT_EQ(m->backends_of(m->variants[1]), (std::vector<std::string>{"cpu"}));
    EXPECT_FALSE(m->variants[1].needs_device);
    EXPECT_EQ(m->find_param("rows")->default_value, 100);
}

std::string error_of(const std::string& text) {
    auto m = parse_manifest(text, "f.json");
    return m.is_ok() ? "" : m.error().message();
}

TEST(Manifest, ErrorsNameTheFileAndField) {
    std::string text = good;
    EXPECT_EQ(error_of(R"({"name": 3})"), "f.json: field 'name': expected a string, got number");
    EXPECT_NE(error_of(std::string(good).replace(text.find("\"dtype\""), 7, "7")).find("field 'failure_class'"),
              std::string::npos);
    EXPECT_NE(error_of(std::string(good).replace(text.find("\"cuda\"]"), 6, "\"rocm\"")).find("unknown backend 'rocm'"),
              std::string::npos);
    EXPECT_NE(error_of(std::string(good).replace(text.find("\"remedy\", \"backends\""), 8, "\"cure\"")).find(
                  "variants[1].kind"),
              std::string::npos);
    EXPECT_NE(error_of(std::string(good).replace(text.find("\"timeout_seconds\""), 17, "\"timeout\"")).find(
                  "field 'timeout': unknown field"),
              std::string::npos);
    EXPECT_NE(error_of(std::string(good).replace(text.find("\"denominator\": \"remedy\""), 23,
                                                 "\"denominator\": \"nope\""))
                  .find("names unknown variant 'nope'"),
              std::string::npos);
}

TEST(Manifest, MalformedJsonGivesLineAndColumn) {
    const std::string msg = error_of("{\n  \"name\": \"x\",\n  oops\n}");
    EXPECT_NE(msg.find("f.json: malformed JSON at line 3, column 3"), std::string::npos) << msg;
}

TEST(Manifest, DuplicateVariantsAndBuiltInParamsAreRejected) {
    EXPECT_NE(error_of(R"({"name":"d","summary":"s","failure_class":"c","backends":["cpu"],
        "variants":[{"name":"a","kind":"probe"},{"name":"a","kind":"probe"}]})")
                  .find("duplicate variant 'a'"),
              std::string::npos);
    EXPECT_NE(error_of(R"({"name":"d","summary":"s","failure_class":"c","backends":["cpu"],
        "params":{"samples":{"default":3}}, "variants":[{"name":"a","kind":"probe"}]})")
                  .find("built in"),
              std::string::npos);
}
} // namespace
