// Report rendering from a synthetic run: the Markdown and JUnit output against golden lines
// with placeholders for what changes between renders (google/benchmark's output_test), and the
// HTML's structure: which charts draw which bars, and what a case's details show.
#include "report.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {
using namespace pitfall::runner;
using nlohmann::json;

// ---- golden lines

/// One expected line: literal text but for placeholders, matched against a whole line. By
/// default the first later line that matches; `next`: the line right after the previous match.
struct line_match {
    std::string pattern;
    bool next = false;
};

/// A pattern as a regular expression: %float, %int, %time (ISO 8601, UTC) and %any stand for
/// what a render may change; everything else matches itself.
std::regex compile(const std::string& pattern) {
    static const std::pair<const char*, const char*> placeholders[] = {
        {"%float", "[-+]?(?:[0-9]+\\.?[0-9]*|\\.[0-9]+)(?:[eE][-+]?[0-9]+)?"},
        {"%int", "[-+]?[0-9]+"},
        {"%time", "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z"},
        {"%any", ".*"}};
    std::string re;
    for (std::size_t i = 0; i < pattern.size();) {
        bool placed = false;
        for (const auto& [name, sub] : placeholders)
            if (pattern.compare(i, std::strlen(name), name) == 0) {
                re += sub;
                i += std::strlen(name);
                placed = true;
                break;
            }
        if (placed)
            continue;
        const char c = pattern[i++];
        if (std::strchr("\\^$.|?*+()[]{}", c) != nullptr)
            re += '\\';
        re += c;
    }
    return std::regex(re);
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
        out.push_back(line);
    return out;
}

/// Whether `text` holds the expected lines in order; a miss names the pattern and the line the
/// search began at, and shows the text.
::testing::AssertionResult matches_in_order(const std::string& text,
                                            const std::vector<line_match>& expected) {
    const auto lines = lines_of(text);
    std::size_t at = 0; // the first line not yet matched past
    for (const auto& e : expected) {
        const std::regex re = compile(e.pattern);
        std::size_t i = at;
        if (e.next)
            i = at < lines.size() && std::regex_match(lines[at], re) ? at : lines.size();
        else
            while (i < lines.size() && !std::regex_match(lines[i], re))
                ++i;
        if (i == lines.size())
            return ::testing::AssertionFailure()
                   << "no line " << (e.next ? "right after" : "from") << " line " << at + 1
                   << " matches: " << e.pattern << "\n--- text ---\n"
                   << text;
        at = i + 1;
    }
    return ::testing::AssertionSuccess();
}

TEST(GoldenLines, PlaceholdersMatchNumbersAndNothingElse) {
    EXPECT_TRUE(matches_in_order("took 1.25e-3 s (n=9)", {{"took %float s (n=%int)"}}));
    EXPECT_TRUE(matches_in_order("a\nb\nc", {{"a"}, {"c"}}));
    EXPECT_FALSE(matches_in_order("a\nb\nc", {{"a"}, {"c", true}})); // c is not right after a
    EXPECT_FALSE(matches_in_order("c\na", {{"a"}, {"c"}}));          // out of order
    EXPECT_FALSE(matches_in_order("n=9.5", {{"n=%int"}}));
    EXPECT_FALSE(matches_in_order("took 1x25", {{"took 1.25"}})); // '.' is literal
    EXPECT_TRUE(matches_in_order("at 2026-11-23T12:00:00Z", {{"at %time"}}));
}

// ---- a synthetic run: PASS on the CPU, UNSUPPORTED on CUDA, a FAIL, a declared ratio

json case_record(const std::string& backend, const std::string& scenario,
                 const std::string& variant, const std::string& kind, const std::string& verdict,
                 const json& extra) {
    const std::string key = backend + "." + scenario + "." + variant;
    json r = {
        {"record", "case"},
        {"case", key},
        {"test", "pitfall." + key},
        {"scenario", scenario},
        {"backend", backend},
        {"variant", variant},
        {"kind", kind},
        {"verdict", verdict},
        {"failing", false},
        {"reason", "as expected: ok"},
        {"observed", {{"status", "ok"}}},
        {"process", {{"exit_code", 0}, {"wall_seconds", 1.25}, {"peak_rss_bytes", 64 << 20}}}};
    r.update(extra);
    return r;
}

json timed_result(const std::vector<double>& step_seconds, json extra = json::object()) {
    json r = {{"outcome", {{"status", "ok"}}},
              {"ran_on", "cpu: test"},
              {"samples", {{"step_seconds", {{"unit", "s"}, {"values", step_seconds}}}}},
              {"memory", {{"tracked_peak_bytes", 8 << 20}}}};
    r.update(extra);
    return r;
}

const char* const no_cuda = "built without CUDA (PITFALL_ENABLE_CUDA=OFF)";
const char* const hostile = "<b>out</b> of memory & 'more'";

run_data synthetic_run() {
    run_data run;
    run.dir = "/runs/synthetic";
    run.header = {
        {"record", "run"},
        {"at", "2026-11-23T12:00:00Z"},
        {"pitfall_version", "0.1.0"},
        {"fingerprint_id", "0123456789abcdef"},
        {"fingerprint_summary", {{"cpu_model", "Test CPU"}, {"os", "Debian GNU/Linux 12"}}},
        {"profile", {{"name", "host"}, {"reason", "matches {}"}}}};
    run.cases.push_back(case_record(
        "cpu", "demo", "reproduce", "reproduce", "PASS",
        {{"result",
          timed_result({0.004, 0.005, 0.006},
                       {{"info", {{"dtype", "float64"}, {"gemm", "cblas_dgemm (OpenBLAS)"}}},
                        {"measurements",
                         {{"final_loss", {{"value", 0.125}, {"unit", ""}}},
                          {"input_bytes", {{"value", 1048576}, {"unit", "B"}}}}}})},
         {"baseline",
          {{"profile", "host"},
           {"entry", {{"memory", {{"tracked_peak_bytes", {{"max", 16 << 20}}}}}}}}}}));
    run.cases.push_back(
        case_record("cuda", "demo", "reproduce", "reproduce", "UNSUPPORTED",
                    {{"reason", no_cuda}, {"observed", {{"status", "unsupported"}}}}));
    run.cases.push_back(case_record("cpu", "demo", "remedy", "remedy", "PASS",
                                    {{"result", timed_result({0.001, 0.002, 0.0015})}}));
    run.cases.push_back(
        case_record("cuda", "demo", "remedy", "remedy", "UNSUPPORTED",
                    {{"reason", no_cuda}, {"observed", {{"status", "unsupported"}}}}));
    const json bad_alloc = {{"status", "error"}, {"library", "host"}, {"error", "std::bad_alloc"},
                            {"stage", "alloc"},  {"sticky", false},   {"message", hostile}};
    run.cases.push_back(
        case_record("cpu", "other", "reproduce", "reproduce", "FAIL",
                    {{"failing", true},
                     {"reason", std::string("behaviour changed: ") + hostile},
                     {"observed", bad_alloc},
                     {"result", timed_result({0.01, 0.02}, {{"outcome", bad_alloc}})},
                     {"output_tail", "<script>alert(1)</script>\n"}}));
    // A remedy and a reproduce with times but no declared ratio: no ratio bar.
    run.cases.push_back(case_record("cpu", "other", "remedy", "remedy", "PASS",
                                    {{"result", timed_result({0.005})}}));
    run.ratios.push_back({{"scenario", "demo"},
                          {"backend", "cpu"},
                          {"name", "reproduce_over_remedy"},
                          {"numerator", "reproduce"},
                          {"denominator", "remedy"},
                          {"samples", "step_seconds"},
                          {"median_numerator", 0.005},
                          {"median_denominator", 0.0015},
                          {"ratio", 0.005 / 0.0015},
                          {"bound", {{"min", 2}}},
                          {"profile", "host"},
                          {"verdict", "PASS"},
                          {"failing", false}});
    run.not_finished = {"cpu.demo.slow"};
    return run;
}

// ---- Markdown and JUnit: golden lines

TEST(ReportMarkdown, GoldenLines) {
    const std::string md = render_markdown(synthetic_run());
    EXPECT_TRUE(matches_in_order(
        md,
        {{"## pitfall: failing"},
         {"%int FAIL, %int NOT_RUN, %int PASS, %int UNSUPPORTED (%int of %int cases finished)"},
         {"Profile **host**; cpu_model Test CPU, os Debian GNU/Linux 12."},
         {"| verdict | cases |"},
         {"|---|---:|", true},
         {"| FAIL | 1 |", true},
         {"| NOT_RUN | 1 |", true},
         {"| PASS | 3 |", true},
         {"| UNSUPPORTED | 2 |", true},
         {"### Failing"},
         // The error's markup stays text: < and > as entities, Markdown's own characters escaped.
         {"- `pitfall.cpu.other.reproduce` **FAIL** (std::bad\\_alloc@alloc): behaviour changed: "
          "&lt;b&gt;out&lt;/b&gt; of memory & 'more'"},
         {"### Changed against the baseline"},
         {"Nothing besides the failures above."},
         {"%int selected case(s) have no result; `pitfall run --resume /runs/synthetic` completes "
          "the run."}}));
    EXPECT_EQ(md.find("<b>"), std::string::npos);
}

TEST(ReportMarkdown, AFailingRatioIsListed) {
    run_data run = synthetic_run();
    run.ratios[0]["ratio"] = 1.5;
    run.ratios[0]["verdict"] = "PERF_REGRESSION";
    run.ratios[0]["failing"] = true;
    EXPECT_TRUE(matches_in_order(render_markdown(run),
                                 {{"### Failing"},
                                  {"- `pitfall.cpu.other.reproduce` **FAIL**%any"},
                                  {"- ratio `cpu.demo.reproduce_over_remedy` = %float outside "
                                   "{\"min\":2}"}}));
}

TEST(ReportJunit, GoldenLines) {
    const std::string counts =
        "tests=\"7\" failures=\"1\" errors=\"1\" skipped=\"2\" time=\"%float\"";
    const std::string xml = render_junit(synthetic_run());
    EXPECT_TRUE(matches_in_order(
        xml,
        {{"<?xml version=\"1.0\" encoding=\"UTF-8\"?>"},
         {"<testsuites name=\"pitfall\" " + counts + ">", true},
         {"  <testsuite name=\"pitfall\" " + counts + " timestamp=\"%time\">", true},
         {"    <properties>", true},
         {"      <property name=\"pitfall.version\" value=\"0.1.0\"/>", true},
         {"      <property name=\"fingerprint_id\" value=\"0123456789abcdef\"/>", true},
         {"      <property name=\"profile\" value=\"host\"/>", true},
         {"      <property name=\"fingerprint.cpu_model\" value=\"Test CPU\"/>", true},
         {"      <property name=\"fingerprint.os\" value=\"Debian GNU/Linux 12\"/>", true},
         {"    </properties>", true},
         {"    <testcase classname=\"demo\" name=\"cpu.reproduce\" time=\"%float\">", true},
         {"      <system-out>PASS (ok): as expected: ok</system-out>", true},
         {"    </testcase>", true},
         {"    <testcase classname=\"demo\" name=\"cuda.reproduce\" time=\"%float\">", true},
         {"      <skipped message=\"built without CUDA (PITFALL_ENABLE_CUDA=OFF)\"/>", true},
         {"    <testcase classname=\"other\" name=\"cpu.reproduce\" time=\"%float\">"},
         {"      <failure type=\"FAIL\" message=\"FAIL: behaviour changed: &lt;b&gt;out&lt;/b&gt; "
          "of memory &amp; "
          "&#39;more&#39;\">observed std::bad_alloc@alloc",
          true},
         {"behaviour changed: &lt;b&gt;out&lt;/b&gt; of memory &amp; &#39;more&#39;</failure>",
          true},
         {"      <system-out>FAIL (std::bad_alloc@alloc): %any</system-out>", true},
         {"    <testcase classname=\"other\" name=\"cpu.remedy\" time=\"%float\">"},
         // A case the run never reached is an error, not a pass.
         {"    <testcase classname=\"demo\" name=\"cpu.slow\" time=\"0\">"},
         {"      <error type=\"NOT_RUN\" message=\"not run: the run ended before it\"/>", true},
         {"  </testsuite>"},
         {"</testsuites>", true}}));
}

// ---- HTML: structure

/// The block of one chart (<div id="ID">...</div>); empty when the page has none.
std::string chart_block(const std::string& html, const std::string& id) {
    const auto begin = html.find("<div id=\"" + id + "\"");
    if (begin == std::string::npos)
        return "";
    return html.substr(begin, html.find("</div>", begin) + 6 - begin);
}

/// The expandable details of one case.
std::string case_block(const std::string& html, const std::string& anchor) {
    const auto begin = html.find("<details class=\"case\" id=\"" + anchor + "\"");
    if (begin == std::string::npos)
        return "";
    return html.substr(begin, html.find("</details>", begin) + 10 - begin);
}

std::size_t count(const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size()))
        ++n;
    return n;
}

TEST(ReportHtml, NoGpuBarsWhereNoGpuRan) {
    const std::string page = render_html(synthetic_run());
    const std::string html = page.substr(page.find("</style>")); // the page, not its style sheet
    // Both CUDA cases were unsupported: no GPU series, bar or legend entry, and one line says why.
    EXPECT_EQ(count(html, "b-cuda"), 0u);
    EXPECT_EQ(count(html, "k-cuda"), 0u);
    EXPECT_EQ(count(html, "GPU (CUDA)"), 0u);
    EXPECT_EQ(count(html, "[cuda]"), 0u);
    EXPECT_EQ(count(html, "id=\"no-gpu\""), 1u);
    EXPECT_NE(html.find("No GPU case ran. 2 CUDA case(s) UNSUPPORTED: built without CUDA "
                        "(PITFALL_ENABLE_CUDA=OFF)."),
              std::string::npos);
    const std::string samples = chart_block(html, "chart-sample-times");
    EXPECT_EQ(count(samples, "<rect class=\"b-cpu\""), 4u) << samples;
}

TEST(ReportHtml, GpuBarsOnlyForCudaCasesThatRecordedTiming) {
    run_data run = synthetic_run();
    // The CUDA reproduce ran and timed itself; the CUDA remedy stopped at its first CUDA call.
    run.cases[1] = case_record("cuda", "demo", "reproduce", "reproduce", "PASS",
                               {{"result", timed_result({0.0002, 0.0003, 0.0004})}});
    run.cases[3] = case_record("cuda", "demo", "remedy", "remedy", "FAIL",
                               {{"failing", true},
                                {"observed",
                                 {{"status", "error"},
                                  {"library", "cuda_runtime"},
                                  {"error", "cudaErrorInsufficientDriver"},
                                  {"stage", "init"}}}});
    const std::string html = render_html(run);
    EXPECT_EQ(count(html, "id=\"no-gpu\""), 0u);
    const std::string samples = chart_block(html, "chart-sample-times");
    EXPECT_NE(samples.find("<span class=\"key k-cuda\"></span>GPU (CUDA)"), std::string::npos);
    EXPECT_EQ(count(samples, "<rect class=\"b-cuda\""), 1u);
    EXPECT_NE(samples.find(">demo.reproduce step_seconds [cuda]<"), std::string::npos);
    // Its CPU and GPU bars sit side by side.
    EXPECT_LT(samples.find("demo.reproduce step_seconds [cpu]"),
              samples.find("demo.reproduce step_seconds [cuda]"));
    EXPECT_LT(samples.find("demo.reproduce step_seconds [cuda]"),
              samples.find("demo.remedy step_seconds [cpu]"));
    const std::string process = chart_block(html, "chart-process-times");
    EXPECT_EQ(count(process, "<rect class=\"b-cuda\""), 1u);
    EXPECT_EQ(html.find("demo.remedy [cuda]"), std::string::npos);
    EXPECT_EQ(html.find("cuda.demo.remedy</text>"), std::string::npos); // no memory bar either
}

TEST(ReportHtml, SampleTimesAndProcessTimesHaveTheirOwnAxes) {
    const std::string html = render_html(synthetic_run());
    const std::string samples = chart_block(html, "chart-sample-times");
    const std::string process = chart_block(html, "chart-process-times");
    ASSERT_FALSE(samples.empty());
    ASSERT_FALSE(process.empty());
    // Medians of the series (5 ms, 1.5 ms, 15 ms, 5 ms), not the processes' 1.25 s.
    EXPECT_NE(samples.find(">5.00 ms (n=3)<"), std::string::npos);
    EXPECT_NE(samples.find(">15.00 ms (n=2)<"), std::string::npos);
    EXPECT_EQ(samples.find("1.25 s"), std::string::npos);
    EXPECT_EQ(count(process, ">1.25 s<"), 4u);
    EXPECT_EQ(process.find(" ms (n="), std::string::npos);
    // Each axis says what it measures, and its ticks carry the unit.
    EXPECT_NE(samples.find("class=\"ca\">seconds per sample (median of the series)</text>"),
              std::string::npos);
    EXPECT_NE(samples.find("class=\"tv\">10 ms</text>"), std::string::npos);
    EXPECT_NE(process.find("class=\"ca\">seconds of wall-clock time per case process</text>"),
              std::string::npos);
    EXPECT_NE(process.find("class=\"tv\">1 s</text>"), std::string::npos);
    const std::string memory = chart_block(html, "chart-memory");
    EXPECT_NE(memory.find("class=\"tv\">16 MiB</text>"), std::string::npos);
    EXPECT_NE(memory.find("<title>baseline bound 16 MiB</title>"), std::string::npos);
}

TEST(ReportHtml, RatiosAreTheDeclaredOnes) {
    const std::string ratios = chart_block(render_html(synthetic_run()), "chart-ratios");
    // One bar: demo's declared ratio. "other" has a reproduce and a remedy but declares none.
    EXPECT_EQ(count(ratios, "<rect "), 1u) << ratios;
    EXPECT_NE(ratios.find(">demo.reproduce_over_remedy [cpu]<"), std::string::npos);
    EXPECT_NE(ratios.find(">3.33x = reproduce / remedy<"), std::string::npos);
    EXPECT_NE(ratios.find("<title>bound in the profile 2x</title>"), std::string::npos);
    EXPECT_EQ(ratios.find("other."), std::string::npos);
    EXPECT_NE(
        ratios.find(
            "class=\"ca\">ratio of the medians, numerator / denominator (x), log scale</text>"),
        std::string::npos);
    EXPECT_EQ(ratios.find("b-out"), std::string::npos);

    run_data failing = synthetic_run();
    failing.ratios[0]["ratio"] = 1.5;
    failing.ratios[0]["failing"] = true;
    const std::string out = chart_block(render_html(failing), "chart-ratios");
    EXPECT_EQ(count(out, "<rect class=\"b-out\""), 1u);
    EXPECT_NE(out.find("outside its bound"), std::string::npos);

    run_data none = synthetic_run();
    none.ratios = json::array();
    const std::string empty = chart_block(render_html(none), "chart-ratios");
    EXPECT_EQ(count(empty, "<svg"), 0u);
    EXPECT_NE(empty.find("nothing to draw in this run"), std::string::npos);
}

TEST(ReportHtml, CaseDetailsShowSamplesInfoAndMeasurements) {
    const std::string html = render_html(synthetic_run());
    const std::string demo = case_block(html, "case-cpu-demo-reproduce");
    ASSERT_FALSE(demo.empty());
    EXPECT_TRUE(matches_in_order(
        demo,
        {{"<table class=\"samples\"><tr><th>series</th><th>unit</th><th>n</th><th>median</th>%any"},
         {"<tr><td>step_seconds</td><td>s</td><td>3</td><td>0.005 (5.00 ms)</td><td "
          "class=\"values\">0.004 "
          "0.005 0.006</td></tr>",
          true},
         {"<table class=\"info\"><tr><th>info</th><th>value</th></tr>"},
         {"<tr><td>dtype</td><td>float64</td></tr>", true},
         {"<tr><td>gemm</td><td>cblas_dgemm (OpenBLAS)</td></tr>", true},
         {"<table class=\"measurements\"><tr><th>measurement</th><th>value</th><th>unit</th></tr>"},
         {"<tr><td>final_loss</td><td>%float</td><td></td></tr>", true},
         {"<tr><td>input_bytes</td><td>1048576</td><td>B</td></tr>", true}}));
    // An unsupported case recorded nothing: no empty tables.
    const std::string skipped = case_block(html, "case-cuda-demo-reproduce");
    ASSERT_FALSE(skipped.empty());
    EXPECT_EQ(skipped.find("class=\"samples\""), std::string::npos);
    EXPECT_EQ(skipped.find("class=\"info\""), std::string::npos);
}

TEST(ReportHtml, MarkupInAnErrorStaysText) {
    const std::string html = render_html(synthetic_run());
    EXPECT_EQ(html.find("<script"), std::string::npos);
    EXPECT_EQ(html.find("<b>out"), std::string::npos);
    const std::string failed = case_block(html, "case-cpu-other-reproduce");
    EXPECT_NE(failed.find("<tr><th>message</th><td>&lt;b&gt;out&lt;/b&gt; of memory &amp; "
                          "&#39;more&#39;</td></tr>"),
              std::string::npos)
        << failed;
    EXPECT_NE(failed.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
    // Self-contained: nothing fetched from elsewhere.
    for (const char* remote : {"<link", "@import", "src=\"http", "url("})
        EXPECT_EQ(html.find(remote), std::string::npos) << remote;
}

} // namespace
