#include "pitfall/detail/manifest.hpp"

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
    EXPECT_NE(error_of(std::string(good).replace(text.find("\"dtype\""), 7, "7"))
                  .find("field 'failure_class'"),
              std::string::npos);
    EXPECT_NE(error_of(std::string(good).replace(text.find("\"cuda\"]"), 6, "\"rocm\""))
                  .find("unknown backend 'rocm'"),
              std::string::npos);
    EXPECT_NE(
        error_of(std::string(good).replace(text.find("\"remedy\", \"backends\""), 8, "\"cure\""))
            .find("variants[1].kind"),
        std::string::npos);
    EXPECT_NE(
        error_of(std::string(good).replace(text.find("\"timeout_seconds\""), 17, "\"timeout\""))
            .find("field 'timeout': unknown field"),
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

std::string with_param(const std::string& spec) {
    return R"({"name":"d","summary":"s","failure_class":"c","backends":["cpu"],
        "params":{"n":)" +
           spec + R"(}, "variants":[{"name":"a","kind":"probe"}]})";
}

TEST(Manifest, ParameterBoundsAndChoices) {
    auto m = parse_manifest(with_param(R"({"default": 8, "min": 1, "max": 64})"), "f.json");
    ASSERT_TRUE(m.is_ok()) << m.error().message();
    const param_spec& n = *m->find_param("n");
    EXPECT_TRUE(check_param_value(n, 1).is_ok());
    EXPECT_TRUE(check_param_value(n, 64).is_ok());
    EXPECT_EQ(check_param_value(n, 0).message(), "must be >= 1, got 0");
    EXPECT_EQ(check_param_value(n, 65).name(), "bad_parameter");
    auto c =
        parse_manifest(with_param(R"({"default": "fp16", "choices": ["fp16", "bf16"]})"), "f.json");
    ASSERT_TRUE(c.is_ok()) << c.error().message();
    EXPECT_EQ(check_param_value(*c->find_param("n"), "fp8").message(),
              "must be one of fp16, bf16, got fp8");
}

TEST(Manifest, BadBoundsNameTheField) {
    EXPECT_NE(
        error_of(with_param(R"({"default": 0, "min": 1})")).find("params.n.default': must be >= 1"),
        std::string::npos);
    EXPECT_NE(error_of(with_param(R"({"default": 2, "min": 0.5})")).find("params.n.min"),
              std::string::npos); // an integer parameter takes integer bounds
    EXPECT_NE(error_of(with_param(R"({"default": "x", "max": 3})")).find("no bounds"),
              std::string::npos);
    EXPECT_NE(error_of(with_param(R"({"default": 2, "choices": []})")).find("params.n.choices"),
              std::string::npos);
    EXPECT_NE(error_of(with_param(R"({"default": 2, "choices": [1, "b"]})")).find("choices[1]"),
              std::string::npos);
    EXPECT_NE(
        error_of(with_param(R"({"default": 2, "step": 1})")).find("params.n.step': unknown field"),
        std::string::npos);
    EXPECT_NE(error_of(with_param(R"({"default": 1e999})")).find("f.json: "), std::string::npos);
}
} // namespace
