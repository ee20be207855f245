// The Prometheus export: label values bounded and escaped whatever the input holds, every line
// of a rendering read back by a small parser of the exposition format (one HELP and TYPE per
// family, valid names, no repeated series), a run's and a gate document's families, and the
// inputs refused by content. promtool and node_exporter read the real files in
// cli/test_export.py.
#include "report/openmetrics.hpp"

#include "pitfall/detail/json_file.hpp"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {
using namespace pitfall::runner;
using nlohmann::json;

/// One sample line read back: its family name, labels (values unescaped) and value text.
struct sample_line {
    std::string name;
    std::map<std::string, std::string> labels;
    std::string value;
};

/// Reads one sample line as the format's grammar says (no <regex>: GCC 12 warns inside it
/// under the sanitizer presets): name, then optionally {label="value",...}, a space, a value.
/// Label values come back unescaped; anything out of the grammar fails the test.
class sample_reader {
public:
    explicit sample_reader(const std::string& line) : m_line(line) {}

    bool read(sample_line& s) {
        s.name = word(true);
        if (s.name.empty())
            return false;
        if (peek() == '{') {
            ++m_at;
            while (peek() != '}') {
                const std::string name = word(false);
                EXPECT_TRUE(valid_metrics_label_name(name)) << m_line;
                std::string value;
                if (name.empty() || !take('=') || !take('"') || !quoted(value))
                    return false;
                EXPECT_TRUE(s.labels.emplace(name, value).second) << "label twice: " << m_line;
                if (peek() != '}' && !take(','))
                    return false;
            }
            ++m_at;
        }
        if (!take(' '))
            return false;
        s.value = m_line.substr(m_at);
        char* end = nullptr;
        std::strtod(s.value.c_str(), &end);
        return !s.value.empty() && *end == '\0';
    }

private:
    char peek() const { return m_at < m_line.size() ? m_line[m_at] : '\0'; }
    bool take(char c) {
        if (peek() != c)
            return false;
        ++m_at;
        return true;
    }
    /// [a-zA-Z_][a-zA-Z0-9_]* (':' too in a metric name).
    std::string word(bool metric) {
        const std::size_t from = m_at;
        for (char c = peek();
             std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || (metric && c == ':');
             c = peek())
            ++m_at;
        return m_line.substr(from, m_at - from);
    }
    /// Up to the closing quote; the only escapes are \\, \" and \n.
    bool quoted(std::string& out) {
        for (char c = peek(); c != '"'; c = peek()) {
            if (c == '\0')
                return false;
            ++m_at;
            if (c == '\\') {
                const char next = peek();
                ++m_at;
                if (next != '\\' && next != '"' && next != 'n')
                    return false;
                c = next == 'n' ? '\n' : next;
            }
            out += c;
        }
        ++m_at;
        return true;
    }

    const std::string& m_line;
    std::size_t m_at = 0;
};

/// Every line of `text` as the exposition format allows it; each family opened by its HELP
/// and TYPE before its samples, never twice; no series repeated.
std::vector<sample_line> parse_exposition(const std::string& text) {
    std::vector<sample_line> out;
    std::set<std::string> families, series;
    std::string open; // the family whose HELP came last
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("# HELP ", 0) == 0) {
            open = line.substr(7, line.find(' ', 7) - 7);
            EXPECT_TRUE(families.insert(open).second) << "family twice: " << open;
            continue;
        }
        if (line.rfind("# TYPE ", 0) == 0) {
            EXPECT_EQ(line, "# TYPE " + open + " gauge");
            continue;
        }
        sample_line s;
        EXPECT_TRUE(sample_reader(line).read(s)) << "not a sample line: " << line;
        EXPECT_EQ(s.name, open) << line;
        EXPECT_TRUE(series.insert(line.substr(0, line.rfind(' '))).second) << "repeated: " << line;
        out.push_back(std::move(s));
    }
    return out;
}

/// The samples of one family.
std::vector<sample_line> family(const std::vector<sample_line>& all, const std::string& name) {
    std::vector<sample_line> out;
    for (const auto& s : all)
        if (s.name == name)
            out.push_back(s);
    return out;
}

std::filesystem::path gate_fixture() {
    return std::filesystem::path(PITFALL_SOURCE_DIR) / "harness/tests/fixtures/gate/drain.json";
}

json read_gate_fixture() {
    auto doc = pitfall::detail::read_json_file(gate_fixture().string());
    EXPECT_TRUE(doc.is_ok()) << doc.error().message();
    return doc.is_ok() ? doc.value() : json();
}

TEST(OpenMetricsLabels, QuotesBackslashesAndNewlinesAreEscaped) {
    EXPECT_EQ(metrics_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    const std::string line = "x{l=\"" + metrics_label_value("a\"b\\c\nd") + "\"} 1";
    sample_line s;
    ASSERT_TRUE(sample_reader(line).read(s)) << line;
    EXPECT_EQ(s.labels["l"], "a\"b\\c\nd");
}

TEST(OpenMetricsLabels, InvalidUtf8AndControlsBecomeReplacementCharacters) {
    const std::string fffd = "\xEF\xBF\xBD";
    EXPECT_EQ(metrics_label_value("a\xff"
                                  "b\xc3"),
              "a" + fffd + "b" + fffd);
    EXPECT_EQ(metrics_label_value("x\x1b[2Jy\r"), "x" + fffd + "[2Jy" + fffd);
    EXPECT_EQ(metrics_label_value("\xE2\x80\xAE"
                                  "evil"),
              fffd + "evil"); // a bidi override
    EXPECT_EQ(metrics_label_value("H100 \xC3\xA9\tok"), "H100 \xC3\xA9\tok");
}

TEST(OpenMetricsLabels, ALongValueIsCutOnACharacterAndStaysDistinct) {
    // Three-byte characters: a cut at a fixed byte count would land inside one.
    std::string long_a = "a"; // so that no fixed cut falls between two characters
    for (int i = 0; i < 4000; ++i)
        long_a += "\xE2\x82\xAC"; // the euro sign
    const std::string long_b = long_a + "b";
    const std::string a = metrics_label_value(long_a);
    const std::string b = metrics_label_value(long_b);
    EXPECT_LE(a.size(), metrics_label_max_bytes);
    EXPECT_LE(b.size(), metrics_label_max_bytes);
    EXPECT_NE(a, b);
    EXPECT_EQ(a, metrics_label_value(long_a));
    EXPECT_EQ(pitfall::detail::valid_utf8(a), a);
    const std::size_t tilde = a.size() - 17;
    EXPECT_EQ(a[tilde], '~') << a;
    EXPECT_EQ(a.find_first_not_of("0123456789abcdef", tilde + 1), std::string::npos) << a;
    EXPECT_EQ(metrics_label_value(std::string(metrics_label_max_bytes, 'x')),
              std::string(metrics_label_max_bytes, 'x'));
    // Escaping comes after the cut: 10 kB of quotes is 128 quotes at most, each escaped.
    EXPECT_LE(metrics_label_value(std::string(10000, '"')).size(), 2 * metrics_label_max_bytes);
}

TEST(OpenMetricsLabels, LabelNames) {
    for (const char* good : {"case", "cuda_runtime_version", "_x", "A9"})
        EXPECT_TRUE(valid_metrics_label_name(good)) << good;
    for (const char* bad : {"", "9a", "a-b", "a b", "__name__", "é"})
        EXPECT_FALSE(valid_metrics_label_name(bad)) << bad;
}

run_data synthetic_run() {
    run_data run;
    run.dir = "runs/a";
    run.header = {{"at", "2026-11-28T05:56:19Z"},
                  {"fingerprint_id", "f12efa54d1cd729e"},
                  {"pitfall_version", "0.1.0"},
                  {"profile", {{"name", "host"}}},
                  {"fingerprint_summary",
                   {{"os", "Debian GNU/Linux 12"}, {"device_name", "NVIDIA \"H100\"\n"}}}};
    run.cases.push_back({{"case", "cpu.a.reproduce"},
                         {"verdict", "PASS"},
                         {"observed", {{"status", "error"}, {"error", "E"}, {"stage", "sync"}}}});
    run.cases.push_back({{"case", "cpu.a.remedy"},
                         {"verdict", "CRASH"},
                         {"observed", {{"status", "signal"}, {"signal", "SIGSEGV"}}}});
    run.cases.push_back({{"case", "cpu.a.odd"}, {"verdict", "MADE_UP"}});
    run.not_finished = {"cpu.b.reproduce", "cpu.b.remedy"};
    run.started_unfinished = {"cpu.b.remedy"};
    return run;
}

TEST(OpenMetricsRun, EveryFamilyOfARun) {
    const auto text = render_run_metrics(synthetic_run());
    ASSERT_TRUE(text.is_ok()) << text.error().message();
    const auto all = parse_exposition(text.value());
    std::map<std::string, std::string> counts;
    for (const auto& s : family(all, "pitfall_cases")) {
        EXPECT_EQ(s.labels.at("source"), "run");
        counts[s.labels.at("verdict")] = s.value;
    }
    EXPECT_EQ(counts["PASS"], "1");
    EXPECT_EQ(counts["CRASH"], "1");
    EXPECT_EQ(counts["FAIL"], "0"); // every verdict of the table: a series that never vanishes
    EXPECT_EQ(counts["MADE_UP"], "1");
    EXPECT_EQ(counts["NOT_RUN"], "2");
    ASSERT_EQ(family(all, "pitfall_run_failing").size(), 1U);
    EXPECT_EQ(family(all, "pitfall_run_failing")[0].value, "1"); // CRASH fails a run
    ASSERT_EQ(family(all, "pitfall_run_timestamp_seconds").size(), 1U);
    EXPECT_EQ(family(all, "pitfall_run_timestamp_seconds")[0].value, "1795845379");
    std::map<std::string, std::string> verdicts, outcomes;
    for (const auto& s : family(all, "pitfall_case_verdict"))
        verdicts[s.labels.at("case")] = s.labels.at("verdict");
    for (const auto& s : family(all, "pitfall_case_outcome"))
        outcomes[s.labels.at("case")] = s.labels.at("outcome");
    EXPECT_EQ(verdicts, (std::map<std::string, std::string>{{"cpu.a.reproduce", "PASS"},
                                                            {"cpu.a.remedy", "CRASH"},
                                                            {"cpu.a.odd", "MADE_UP"},
                                                            {"cpu.b.reproduce", "NOT_RUN"},
                                                            {"cpu.b.remedy", "NOT_RUN"}}));
    EXPECT_EQ(outcomes["cpu.a.reproduce"], "E@sync");
    EXPECT_EQ(outcomes["cpu.a.remedy"], "SIGSEGV");
    EXPECT_EQ(outcomes["cpu.b.remedy"], "unfinished");
    EXPECT_EQ(outcomes["cpu.b.reproduce"], "not_run");
    EXPECT_EQ(family(all, "pitfall_doctor_findings").size(), 2U);
    const auto info = family(all, "pitfall_fingerprint_info");
    ASSERT_EQ(info.size(), 1U);
    EXPECT_EQ(info[0].labels.at("fingerprint_id"), "f12efa54d1cd729e");
    EXPECT_EQ(info[0].labels.at("device_name"), "NVIDIA \"H100\"\n");
    EXPECT_EQ(info[0].labels.at("profile"), "host");
    EXPECT_EQ(info[0].value, "1");
}

TEST(OpenMetricsRun, AHeaderOfWrongTypesStillRenders) {
    run_data run = synthetic_run();
    run.header = {{"at", 12},
                  {"profile", "oops"},
                  {"fingerprint", 5},
                  {"fingerprint_id", {1, 2}},
                  {"fingerprint_summary", {{"device_name", {"x"}}, {"gpu_count", 1e308}}}};
    run.cases.push_back({{"case", 7}, {"verdict", nullptr}, {"observed", "ok"}});
    const auto text = render_run_metrics(run);
    ASSERT_TRUE(text.is_ok()) << text.error().message();
    const auto all = parse_exposition(text.value());
    EXPECT_TRUE(family(all, "pitfall_run_timestamp_seconds").empty()); // no time, no sample
    const auto info = family(all, "pitfall_fingerprint_info");
    ASSERT_EQ(info.size(), 1U);
    EXPECT_EQ(info[0].labels.at("device_name"), "[\"x\"]");
    EXPECT_EQ(info[0].labels.at("profile"), "");
    EXPECT_EQ(family(all, "pitfall_case_verdict").size(), 6U);
}

TEST(OpenMetricsRun, CasesCutToOneNameAreOneSeries) {
    run_data run = synthetic_run();
    const std::string stem(200, 'c');
    run.cases = {{{"case", stem}, {"verdict", "PASS"}}, {{"case", stem}, {"verdict", "PASS"}}};
    const auto text = render_run_metrics(run);
    ASSERT_TRUE(text.is_ok());
    // Repeated, the series would fail the whole scrape; the parser fails on a repeat.
    EXPECT_EQ(family(parse_exposition(text.value()), "pitfall_case_verdict").size(), 3U);
}

TEST(OpenMetricsRun, MoreCasesThanTheCapAreRefused) {
    run_data run = synthetic_run();
    run.cases.assign(metrics_max_cases, json{{"case", "x"}, {"verdict", "PASS"}});
    const auto text = render_run_metrics(run);
    ASSERT_FALSE(text.is_ok());
    EXPECT_NE(text.error().message().find("runs/a: 4098 cases, more than the 4096"),
              std::string::npos)
        << text.error().message();
}

TEST(OpenMetricsGate, EveryFamilyOfAGate) {
    const auto text = render_gate_metrics(read_gate_fixture(), "drain.json");
    ASSERT_TRUE(text.is_ok()) << text.error().message();
    const auto all = parse_exposition(text.value());
    std::map<std::string, std::string> node;
    for (const auto& s : family(all, "pitfall_gate_verdict"))
        node[s.labels.at("verdict")] = s.value;
    EXPECT_EQ(node, (std::map<std::string, std::string>{
                        {"admit", "0"}, {"drain", "1"}, {"unjudged", "0"}}));
    std::map<std::string, int> ones;
    for (const auto& s : family(all, "pitfall_gate_gpu_verdict"))
        if (s.value == "1")
            ++ones[s.labels.at("index") + ":" + s.labels.at("verdict")];
    EXPECT_EQ(ones, (std::map<std::string, int>{{"0:admit", 1}, {"1:drain", 1}}));
    EXPECT_EQ(family(all, "pitfall_gate_gpu_verdict").size(), 6U);
    EXPECT_EQ(family(all, "pitfall_gate_case_verdict").size(), 6U);
    EXPECT_EQ(family(all, "pitfall_gate_case_outcome").size(), 6U);
    EXPECT_EQ(family(all, "pitfall_gate_timestamp_seconds").at(0).value, "1795844400");
    EXPECT_EQ(family(all, "pitfall_gate_duration_seconds").at(0).value, "4.25");
    for (const auto& s : family(all, "pitfall_cases")) {
        if (s.labels.at("verdict") == "CRASH") {
            EXPECT_EQ(s.value, "1");
        }
    }
    for (const auto& s : family(all, "pitfall_doctor_findings"))
        EXPECT_EQ(s.value, s.labels.at("severity") == "warning" ? "1" : "0");
    const auto info = family(all, "pitfall_fingerprint_info");
    ASSERT_EQ(info.size(), 1U);
    EXPECT_EQ(info[0].labels.at("source"), "gate");
    EXPECT_EQ(info[0].labels.at("cuda_runtime_version"), "13000");
    EXPECT_EQ(info[0].labels.at("device_name"), "NVIDIA H100 80GB HBM3");
}

TEST(OpenMetricsGate, AHugeCountIsAFloatSample) {
    json gate = read_gate_fixture();
    gate["counts"]["PASS"] = 1e300; // an integer to JSON Schema, past every C++ integer
    gate["seconds"] = 1.5e308;
    const auto text = render_gate_metrics(gate, "drain.json");
    ASSERT_TRUE(text.is_ok()) << text.error().message();
    const auto all = parse_exposition(text.value());
    for (const auto& s : family(all, "pitfall_cases")) {
        if (s.labels.at("verdict") == "PASS") {
            EXPECT_EQ(s.value, "1e+300");
        }
    }
    EXPECT_EQ(family(all, "pitfall_gate_duration_seconds").at(0).value, "1.5e+308");
}

TEST(OpenMetricsGate, HostileTextStaysInsideItsLabels) {
    json gate = read_gate_fixture();
    const std::string hostile = std::string(10000, 'n') + "\"}\n# TYPE x counter\nx 1 \\";
    gate["node"] = hostile;
    gate["gpus"][0]["uuid"] = "GPU-\"\\\n";
    gate["gpus"][1]["cases"][0]["case"] = hostile;
    const auto text = render_gate_metrics(gate, "drain.json");
    ASSERT_TRUE(text.is_ok()) << text.error().message();
    const auto all = parse_exposition(text.value());
    EXPECT_EQ(family(all, "x").size(), 0U);
    for (const auto& s : family(all, "pitfall_gate_verdict"))
        EXPECT_EQ(s.labels.at("node").substr(0, 100), std::string(100, 'n'));
    EXPECT_EQ(family(all, "pitfall_gate_gpu_verdict").at(0).labels.at("uuid"), "GPU-\"\\\n");
}

TEST(OpenMetricsGate, WhatTheSchemaOrTheCapsRefuse) {
    const json good = read_gate_fixture();
    const auto refused = [](const json& gate) {
        const auto text = render_gate_metrics(gate, "g.json");
        return text.is_ok() ? std::string() : text.error().message();
    };
    json wrong_type = good;
    wrong_type["gpus"][0]["index"] = "zero";
    EXPECT_NE(refused(wrong_type).find("g.json: /gpus/0/index"), std::string::npos)
        << refused(wrong_type);
    json bad_verdict = good;
    bad_verdict["verdict"] = "maybe";
    EXPECT_NE(refused(bad_verdict).find("/verdict"), std::string::npos);
    json negative = good;
    negative["counts"]["PASS"] = -1;
    EXPECT_NE(refused(negative).find("/counts/PASS"), std::string::npos) << refused(negative);
    json bad_time = good;
    bad_time["time"] = "yesterday";
    EXPECT_NE(refused(bad_time).find("g.json: /time"), std::string::npos);
    json many = good;
    json cases = json::array();
    for (std::size_t i = 0; i < metrics_max_cases; ++i)
        cases.push_back({{"case", "c" + std::to_string(i)}, {"verdict", "PASS"}});
    many["gpus"][0]["cases"] = cases;
    EXPECT_NE(refused(many).find("more than the 4096"), std::string::npos) << refused(many);
    EXPECT_EQ(refused(good), "");
}

/// A scratch folder, removed at the end.
struct scratch {
    std::filesystem::path dir;
    scratch() {
        std::string name = (std::filesystem::temp_directory_path() / "pitfall-om-XXXXXX").string();
        dir = ::mkdtemp(name.data());
    }
    ~scratch() { std::filesystem::remove_all(dir); }
    std::string write(const std::string& file, const std::string& text) const {
        std::ofstream(dir / file, std::ios::binary) << text;
        return (dir / file).string();
    }
};

TEST(OpenMetricsInput, ToldApartByContent) {
    const scratch s;
    const auto why = [](const std::string& path) {
        const auto text = metrics_of(path);
        return text.is_ok() ? std::string() : text.error().message();
    };
    EXPECT_EQ(why(gate_fixture().string()), "");
    std::filesystem::create_directory(s.dir / "empty");
    EXPECT_NE(why((s.dir / "empty").string()).find("not a run folder"), std::string::npos);
    const std::string report = s.write("report.json", R"({"schema": "pitfall.report/1"})");
    EXPECT_NE(why(report).find(report + ": neither a run folder nor a gate document"),
              std::string::npos);
    const std::string array = s.write("array.json", "[1, 2]");
    EXPECT_NE(why(array).find("nor a gate document"), std::string::npos);
    const std::string bytes = s.write("bytes.json", "{\"schema\": \"pitfall.gate/1\xff\"}");
    EXPECT_NE(why(bytes).find(bytes), std::string::npos) << why(bytes);
    const std::string deep =
        s.write("deep.json", std::string(100000, '[') + std::string(100000, ']'));
    EXPECT_NE(why(deep).find(deep), std::string::npos);
    const std::string fifo = (s.dir / "fifo").string();
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    EXPECT_NE(why(fifo).find(fifo), std::string::npos); // refused at once, never blocking
    EXPECT_NE(why((s.dir / "absent").string()).find("No such file"), std::string::npos);
}

} // namespace
