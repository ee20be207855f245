#include "pitfall/detail/json_file.hpp"
#include "pitfall/detail/json_schema.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

namespace {
using namespace pitfall::detail;
using nlohmann::json;

class JsonFile : public ::testing::Test {
protected:
    void SetUp() override {
        char templ[] = "/tmp/pitfall-json-file-XXXXXX";
        ASSERT_NE(::mkdtemp(templ), nullptr);
        m_dir = templ;
    }
    void TearDown() override { std::filesystem::remove_all(m_dir); }
    std::string write(const std::string& name, const std::string& text) {
        std::string path = m_dir + "/" + name;
        std::ofstream(path, std::ios::binary) << text;
        return path;
    }
    static std::string error_of(const pitfall::status_or<json>& r) {
        return r.is_ok() ? std::string("(ok)") : r.error().message();
    }
    std::string m_dir;
};

TEST_F(JsonFile, RefusesWhatIsNotARegularFile) {
    EXPECT_EQ(error_of(read_json_file(m_dir)), m_dir + ": is a directory, not a file");
    const std::string fifo = m_dir + "/fifo";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    EXPECT_EQ(error_of(read_json_file(fifo)), fifo + ": is a FIFO, not a file"); // no hang
    const std::string a = m_dir + "/a", b = m_dir + "/b";
    ASSERT_EQ(::symlink(a.c_str(), b.c_str()), 0);
    ASSERT_EQ(::symlink(b.c_str(), a.c_str()), 0);
    EXPECT_NE(error_of(read_json_file(a)).find("symlink loop"), std::string::npos);
    EXPECT_NE(error_of(read_json_file(m_dir + "/none")).find("No such file"), std::string::npos);
}

TEST_F(JsonFile, NamesTheFileLineAndColumnOfEveryParserError) {
    EXPECT_EQ(error_of(read_json_file(write("deep.json", std::string(100000, '[')))),
              m_dir + "/deep.json: malformed JSON at line 1, column 129: nested deeper than 128 "
                      "levels");
    EXPECT_NE(error_of(read_json_file(write("big.json", "{\n \"a\": 1e999}")))
                  .find("big.json: malformed JSON at line 2, column 7: number overflow"),
              std::string::npos);
    const std::string bad_utf8 = error_of(read_json_file(write("u.json", "{\"a\": \"\xff\"}")));
    EXPECT_NE(bad_utf8.find("u.json: malformed JSON at line 1"), std::string::npos);
    EXPECT_EQ(valid_utf8(bad_utf8), bad_utf8) << "the message itself is valid UTF-8";
    EXPECT_NE(error_of(read_json_file(write("cut.json", "{\"a\": [1,"))).find("line 1"),
              std::string::npos);
    // Brackets inside strings are not nesting.
    EXPECT_TRUE(parse_json("[\"" + std::string(1000, '[') + "\"]", "s").is_ok());
}

TEST(JsonText, DumpsAndRepairsInvalidUtf8) {
    EXPECT_EQ(valid_utf8("a\xff"
                         "b\xc3\xa9"),
              "a\xEF\xBF\xBD"
              "b\xc3\xa9");
    EXPECT_EQ(valid_utf8("\xed\xa0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"); // a surrogate
    EXPECT_EQ(dump_safe(json("x\xff")), "\"x\xEF\xBF\xBD\"");
}

TEST(JsonSchema, EveryBuiltInSchemaCompiles) {
    const auto names = schema_names();
    for (const char* want :
         {"expected", "profile", "result", "report", "index", "cell", "fleet-node", "fleet-report"})
        EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
    for (const auto& name : names)
        EXPECT_EQ(schema_named(name).name(), "reports/schema/" + name + ".schema.json");
}

TEST(JsonSchema, RefusesKeywordsItDoesNotKnow) {
    for (const char* schema :
         {R"({"type": "object", "dependentRequired": {}})", R"({"$ref": "other.json#/x"})",
          R"s({"pattern": "(?:a)"})s", R"({"type": "integr"})", R"({"$ref": "#/$defs/none"})"}) {
        auto doc = parse_json(schema, "s.json");
        ASSERT_TRUE(doc.is_ok());
        EXPECT_FALSE(json_schema::compile(doc.value(), "s.json").is_ok()) << schema;
    }
}

TEST(JsonSchema, NamesThePointerOfTheFirstBrokenRule) {
    auto doc = parse_json(R"({
        "type": "object", "required": ["a"], "additionalProperties": false,
        "properties": {"a": {"type": "array", "items": {"$ref": "#/$defs/d"}}, "b~/": {}},
        "$defs": {"d": {"type": "object", "properties": {"date": {"pattern": "^\\d{4}$"}}}}})",
                          "s.json");
    ASSERT_TRUE(doc.is_ok());
    auto s = json_schema::compile(doc.value(), "s.json");
    ASSERT_TRUE(s.is_ok()) << s.error().message();
    const auto why = [&](const char* text) {
        return s.value().first_error(json::parse(text)).value_or("(valid)");
    };
    EXPECT_EQ(why(R"({"a": [{"date": "2026"}], "b~/": 1})"), "(valid)");
    EXPECT_EQ(why(R"({"a": [{}, {"date": "yesterday"}]})"),
              "/a/1/date: \"yesterday\" does not match ^\\d{4}$");
    EXPECT_EQ(why(R"({"a": [5]})"), "/a/0: expected object, got integer");
    EXPECT_EQ(why(R"({})"), "/: missing required property 'a'");
    EXPECT_EQ(why(R"({"a": [], "c": 1})"), "/c: unknown property (known: a, b~/)");
    EXPECT_EQ(why(R"([])"), "/: expected object, got array");
    // A NUL inside a string is part of it (REG_STARTEND), not its end.
    EXPECT_NE(why("{\"a\": [{\"date\": \"2026\\u0000x\"}]}"), "(valid)");
}

} // namespace
