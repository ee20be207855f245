// Report rendering from a synthetic run: the Markdown and JUnit output against golden lines
// with placeholders for what changes between renders (google/benchmark's output_test), and the
// HTML's structure: which charts draw which bars, and what a case's details show. Then fleet
// node folders on disk (node.json, doctor.json, run/) merged into the fleet report.
#include "report/report.hpp"
#include "run/run_folder.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
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

json timed_result(const std::vector<double>& step_seconds, const json& extra = json::object()) {
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

TEST(ReportMarkdown, MachineFactsAreTheFingerprintSummarys) {
    // The summary's own names: a GPU run says which GPU, driver, runtime and cuDNN it had, and
    // runs merged side by side are named by their GPU, not "no GPU".
    run_data run = synthetic_run();
    run.header["fingerprint_summary"] = {
        {"device_name", "NVIDIA H200"}, {"compute_capability", "9.0"},
        {"driver_branch", 580},         {"cuda_runtime_version", 13000},
        {"cudnn_version", 91400},       {"os", "Ubuntu 24.04.3 LTS"}};
    EXPECT_TRUE(matches_in_order(
        render_markdown(run),
        {{"Profile **host**; device_name NVIDIA H200, compute_capability 9.0, driver_branch 580, "
          "cuda_runtime_version 13000, cudnn_version 91400, os Ubuntu 24.04.3 LTS."}}));
    run_data other = synthetic_run();
    other.dir = "/runs/other";
    const std::string merged = render_matrix_markdown({run, other});
    EXPECT_NE(merged.find("| NVIDIA H200, CUDA 13.0, cuDNN 9.14 (synthetic) |"), std::string::npos)
        << merged;
    EXPECT_NE(merged.find("| no GPU, CUDA ?, cuDNN ? (other) |"), std::string::npos) << merged;
}

TEST(ReportMarkdown, GoldenLines) {
    const std::string md = render_markdown(synthetic_run());
    EXPECT_TRUE(matches_in_order(
        md,
        {{"## pitfall: failing"},
         {"%int PASS, %int FAIL, %int UNSUPPORTED, %int NOT_RUN (%int of %int cases finished)"},
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

TEST(Report, APredictionIsCountedApartInEveryFormat) {
    run_data run = synthetic_run();
    const char* const why = "the table's rule applied, no older driver to refuse it";
    run.cases.push_back(case_record("cuda", "ptx", "reproduce_build", "reproduce", "PASS",
                                    {{"prediction", why}, {"result", timed_result({0.001})}}));
    const json doc = render_json(run);
    EXPECT_EQ(doc["predictions"], 1);
    EXPECT_EQ(doc["cases"].back()["prediction"], why);
    EXPECT_FALSE(doc["cases"].front().contains("prediction")); // a reproduction says nothing
    EXPECT_TRUE(matches_in_order(
        render_markdown(run),
        {{"### Predictions"},
         {"1 reproduce case(s) apply a rule or table instead of showing the failure: their "
          "verdict judges the rule, and they are not counted as reproductions."},
         {"- `pitfall.cuda.ptx.reproduce_build` PASS: the table's rule applied, no older "
          "driver to refuse it"}}));
    EXPECT_TRUE(matches_in_order(
        render_junit(run),
        {{"      <property name=\"predictions\" value=\"1\"/>"},
         {"    <testcase classname=\"ptx\" name=\"cuda.reproduce_build\" time=\"%float\">"},
         {"prediction, not a reproduction: the table&#39;s rule applied, no older driver to "
          "refuse it</system-out>"}}));
    const std::string html = render_html(run);
    EXPECT_NE(html.find("<p id=\"predictions\">1 reproduce case(s) predicted, not reproduced"),
              std::string::npos);
    EXPECT_NE(html.find("<code>cuda.ptx.reproduce_build</code>"), std::string::npos);
    EXPECT_EQ(render_markdown(synthetic_run()).find("### Predictions"), std::string::npos);
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
         {"      <property name=\"predictions\" value=\"0\"/>", true},
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

// A tracked-bytes bound per a measurement (a fraction of the device's memory) is drawn in
// bytes: the fraction times the case's value of that measurement.
TEST(ReportHtml, AMemoryBoundPerAMeasurementIsDrawnInBytes) {
    run_data run = synthetic_run();
    run.cases[0]["result"]["measurements"]["budget_bytes"] = {{"value", 32 << 20}, {"unit", "B"}};
    run.cases[0]["baseline"]["entry"]["memory"]["tracked_peak_bytes"] = {{"per", "budget_bytes"},
                                                                         {"max", 0.5}};
    const std::string memory = chart_block(render_html(run), "chart-memory");
    EXPECT_NE(memory.find("<title>baseline bound 16 MiB</title>"), std::string::npos) << memory;
    // Without the measurement there is no byte count to draw.
    run.cases[0]["result"]["measurements"].erase("budget_bytes");
    EXPECT_EQ(chart_block(render_html(run), "chart-memory").find("<title>baseline bound"),
              std::string::npos);
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

// A bar drawn past its bound marks that did not fail says why it was not judged.
TEST(ReportHtml, ABarNotJudgedSaysWhy) {
    run_data unjudged = synthetic_run();
    unjudged.ratios[0]["ratio"] = 1.5;
    unjudged.ratios[0]["verdict"] = "NOT_COMPARED";
    unjudged.ratios[0]["reason"] = "observed bound of fingerprint 0ea745cb00664714";
    const std::string out = chart_block(render_html(unjudged), "chart-ratios");
    EXPECT_NE(out.find("1.5x = reproduce / remedy (not judged: observed bound of fingerprint "
                       "0ea745cb00664714)"),
              std::string::npos)
        << out;
    EXPECT_EQ(count(out, "b-out"), 0u);
    const std::string judged = chart_block(render_html(synthetic_run()), "chart-ratios");
    EXPECT_EQ(judged.find("not judged"), std::string::npos);
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

// ---- fleet node folders: node.json, doctor.json and run/ on disk, merged

namespace fs = std::filesystem;

/// The fingerprint facts the fleet report groups nodes by (what the probe records on an H100
/// with driver 580 / CUDA 13.0 and cuDNN 9.10.2, or an A100 with CUDA 12.4).
const json h100 = {{"device_name", "NVIDIA H100 80GB HBM3"},
                   {"cuda_driver_version", 13000},
                   {"cuda_runtime_version", 13000},
                   {"cudnn_version", 91002},
                   {"os", "Rocky Linux 9"}};
const json a100 = {{"device_name", "NVIDIA A100-SXM4-80GB"},
                   {"cuda_driver_version", 12040},
                   {"cuda_runtime_version", 12040},
                   {"cudnn_version", 8902}};
const std::string h100_group = "NVIDIA H100 80GB HBM3, driver 13.0, CUDA 13.0, cuDNN 9.10.2";
const std::string a100_group = "NVIDIA A100-SXM4-80GB, driver 12.4, CUDA 12.4, cuDNN 8.9.2";

const json launch_failure = {{"status", "error"},
                             {"library", "cuda"},
                             {"error", "cudaErrorLaunchFailure"},
                             {"stage", "compute"}};

class FleetReport : public ::testing::Test {
protected:
    void SetUp() override {
        std::string pattern = (fs::temp_directory_path() / "pitfall-fleet-XXXXXX").string();
        ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
        m_tmp = pattern;
    }
    void TearDown() override {
        std::error_code ec;
        fs::remove_all(m_tmp, ec);
    }

    /// DIR/nodes/<name>/ with node.json, and, when `keys` is not empty, the node's run folder
    /// (run/: a run header with `facts` as its fingerprint summary, then each case: PASS with
    /// outcome ok unless `failed` names it, then FAIL with cudaErrorLaunchFailure).
    std::string node(const std::string& name, const json& facts,
                     const std::vector<std::string>& keys, const std::set<std::string>& failed = {},
                     json record = json::object(), const json& fingerprint = json::object()) {
        std::string dir = m_tmp + "/nodes/" + name;
        fs::create_directories(dir);
        if (!keys.empty()) {
            auto created = run_folder::create(dir + "/run", false);
            EXPECT_TRUE(created.is_ok()) << created.error().message();
            run_folder folder = std::move(created).value();
            run_header h;
            h.at = "2026-11-26T03:40:00Z";
            h.fingerprint_id = "0123456789abcdef";
            h.fingerprint_summary = facts;
            h.fingerprint = fingerprint;
            h.profile = "any";
            for (const auto& k : keys)
                h.selection.push_back(case_key::parse(k).value());
            EXPECT_TRUE(folder.append(h).is_ok());
            for (const auto& k : keys) {
                pitfall::runner::case_record r;
                r.key = case_key::parse(k).value();
                r.kind = "reproduce";
                const bool fails = failed.count(k) != 0;
                r.verdict = fails ? verdict_kind::fail : verdict_kind::pass;
                r.reason = fails ? "behaviour changed" : "as expected: ok";
                r.observed = fails ? launch_failure : json{{"status", "ok"}};
                r.process.wall_seconds = 0.5;
                r.log = run_folder::log_name(r.key);
                EXPECT_TRUE(folder.append(r).is_ok());
            }
        }
        if (!record.contains("schema"))
            record["schema"] = "pitfall.fleet-node/1";
        if (!record.contains("node"))
            record["node"] = name;
        if (!record.contains("outcome"))
            record["outcome"] = "ran";
        write(dir + "/node.json", record.dump());
        return dir;
    }
    void write(const std::string& path, const std::string& text) const {
        std::ofstream out(path, std::ios::trunc);
        out << text;
    }
    static std::vector<run_data> load(const std::vector<std::string>& dirs) {
        std::vector<run_data> out;
        for (const auto& d : dirs) {
            auto one = load_cell_or_run(d);
            EXPECT_TRUE(one.is_ok()) << one.error().message();
            if (one.is_ok())
                out.push_back(std::move(one).value());
        }
        return out;
    }
    /// The lines of `text` after the line `heading` up to the next heading of its level or above.
    static std::vector<std::string> section(const std::string& text, const std::string& heading) {
        std::vector<std::string> out;
        bool in = false;
        for (const auto& line : lines_of(text)) {
            if (in && line.rfind("### ", 0) == 0)
                break;
            if (in && !line.empty())
                out.push_back(line);
            if (line == heading)
                in = true;
        }
        return out;
    }

    const std::vector<std::string> cases = {"cpu.s.a", "cpu.s.b", "cuda.s.a", "cuda.s.b",
                                            "cuda.s.c"};
    /// Three H100 nodes, gpu2 failing two cases the others pass; gpu4 down (never ran); gpu5, an
    /// A100, failing cuda.s.c.
    std::vector<std::string> fleet() {
        return {node("gpu1", h100, cases), node("gpu2", h100, cases, {"cuda.s.a", "cuda.s.c"}),
                node("gpu3", h100, cases),
                node("gpu4", json(), {}, {},
                     {{"outcome", "node_down"},
                      {"slurm_state", "NODE_FAIL"},
                      {"reason", "Not responding"},
                      {"message", "the node went down before the task started"},
                      {"job_id", "1234_4"},
                      {"array_task", 4}}),
                node("gpu5", a100, cases, {"cuda.s.c"})};
    }

    std::string m_tmp;
};

TEST_F(FleetReport, NamesTheOddNodeAndExactlyTheCasesItDiffersIn) {
    const auto dirs = fleet();
    write(dirs[1] + "/doctor.json",
          R"({"schema": "pitfall.doctor/1", "cuda_usable": false,
              "headline": "an Xid 79 error: the GPU has fallen off the bus", "counts": {}})");
    write(dirs[0] + "/doctor.json", R"({"cuda_usable": true, "headline": ""})");
    const std::string md = render_fleet_markdown(load(dirs));
    EXPECT_TRUE(matches_in_order(
        md, {{"## pitfall fleet: 5 nodes (4 ran), 2 fingerprint groups, 2 cases differ within a "
              "group"},
             {"### Which node differs"},
             {"#### " + h100_group + ": 3 nodes (`gpu1`, `gpu2`, `gpu3`)"},
             {"`gpu2` differs from the other 2 nodes of its group in 2 cases:"},
             {"- `cuda.s.a`: **FAIL (cudaErrorLaunchFailure@compute)** here, **PASS (ok)** on "
              "most of the group"},
             {"- `cuda.s.c`: **FAIL (cudaErrorLaunchFailure@compute)** here, **PASS (ok)** on "
              "most of the group",
              true},
             {"Each case that differs in this group, by value:"},
             {"`gpu5` differs by its fingerprint: " + a100_group + ", where most nodes (3) have " +
              h100_group + "; 1 case has another verdict or outcome than theirs."},
             {"### Nodes"},
             {"| `gpu1` | ran | " + h100_group + " | CUDA work can run here | 5 PASS |"},
             {"| `gpu2` | ran | " + h100_group +
              " | an Xid 79 error: the GPU has fallen off the bus | 2 FAIL, 3 PASS |"},
             {"| `gpu3` | ran | " + h100_group + " | - | 5 PASS |"},
             {"| `gpu4` | node\\_down (NODE\\_FAIL, reason: Not responding): the node went down "
              "before the task started | - | - | - |"},
             {"| `gpu5` | ran | " + a100_group + " | - | 1 FAIL, 4 PASS |"},
             {"### Between groups"},
             {"### Cases"},
             {"| case | gpu1 | gpu2 | gpu3 | gpu5 |"}}))
        << md;
    // Exactly gpu2's two cases, each once in its list and once by value; no other node is odd.
    const auto which = section(md, "### Which node differs");
    std::vector<std::string> by_value;
    for (auto it = std::find(which.begin(), which.end(),
                             "Each case that differs in this group, by value:");
         it != which.end() && ++it != which.end() && it->rfind("- ", 0) == 0;)
        by_value.push_back(*it);
    EXPECT_EQ(by_value, (std::vector<std::string>{"- `cuda.s.a`: **PASS (ok)**: gpu1, gpu3; **FAIL "
                                                  "(cudaErrorLaunchFailure@compute)**: gpu2",
                                                  "- `cuda.s.c`: **PASS (ok)**: gpu1, gpu3; **FAIL "
                                                  "(cudaErrorLaunchFailure@compute)**: gpu2"}));
    EXPECT_EQ(std::count_if(which.begin(), which.end(),
                            [](const std::string& l) {
                                return l.find(" differs from ") != std::string::npos;
                            }),
              1);
    // Between the groups: cuda.s.c only (the H100 group's majority passes it, the A100 fails).
    EXPECT_EQ(
        section(md, "### Between groups"),
        (std::vector<std::string>{"- `cuda.s.c`: **PASS (ok)**: " + h100_group +
                                  "; **FAIL (cudaErrorLaunchFailure@compute)**: " + a100_group}));
    // The node that never ran is in no comparison.
    EXPECT_EQ(md.find("gpu4", md.find("### Cases")), std::string::npos);
    EXPECT_EQ(which.end(), std::find_if(which.begin(), which.end(), [](const std::string& l) {
                  return l.find("gpu4") != std::string::npos;
              }));
}

TEST_F(FleetReport, JsonSaysTheSame) {
    const auto dirs = fleet();
    write(dirs[1] + "/doctor.json",
          R"({"schema": "pitfall.doctor/1", "cuda_usable": false,
              "headline": "an Xid 79 error: the GPU has fallen off the bus", "counts": {}})");
    const nlohmann::json doc = render_fleet_json(load(dirs));
    EXPECT_EQ(doc["schema"], "pitfall.fleet-report/1");
    EXPECT_EQ(doc["title"], "5 nodes (4 ran), 2 fingerprint groups, 2 cases differ within a group");
    EXPECT_EQ(doc["differing_within_groups"], 2);
    EXPECT_EQ(doc["ran_count"], 4);
    ASSERT_EQ(doc["nodes"].size(), 5u);
    EXPECT_EQ(doc["nodes"][1]["doctor"], "an Xid 79 error: the GPU has fallen off the bus");
    EXPECT_EQ(doc["nodes"][1]["verdicts"], (nlohmann::json{{"FAIL", 2}, {"PASS", 3}}));
    EXPECT_EQ(doc["nodes"][3]["outcome"], "node_down");
    EXPECT_EQ(doc["nodes"][3]["outcome_text"],
              "node_down (NODE_FAIL, reason: Not responding): the node went down before the task "
              "started");
    EXPECT_TRUE(doc["nodes"][3]["fingerprint"].is_null());
    ASSERT_EQ(doc["groups"].size(), 2u);
    const nlohmann::json& h100s = doc["groups"][0];
    EXPECT_EQ(h100s["fingerprint"], h100_group);
    EXPECT_EQ(h100s["nodes"], (nlohmann::json{"gpu1", "gpu2", "gpu3"}));
    EXPECT_EQ(h100s["differing_cases"], (nlohmann::json{"cuda.s.a", "cuda.s.c"}));
    ASSERT_EQ(h100s["odd_nodes"].size(), 1u);
    EXPECT_EQ(h100s["odd_nodes"][0]["node"], "gpu2");
    EXPECT_EQ(h100s["odd_nodes"][0]["cases"][1],
              (nlohmann::json{{"case", "cuda.s.c"},
                              {"here", "FAIL (cudaErrorLaunchFailure@compute)"},
                              {"majority", "PASS (ok)"},
                              {"tied", nlohmann::json::array()}}));
    EXPECT_EQ(doc["majority_fingerprint"], h100_group);
    EXPECT_EQ(doc["fingerprint_outliers"], (nlohmann::json{{{"node", "gpu5"},
                                                            {"fingerprint", a100_group},
                                                            {"cases_held_otherwise", 1},
                                                            {"doctor", nullptr}}}));
    EXPECT_EQ(doc["between_groups"],
              (nlohmann::json{{{"case", "cuda.s.c"},
                               {"by_group",
                                {{h100_group, "PASS (ok)"},
                                 {a100_group, "FAIL (cudaErrorLaunchFailure@compute)"}}}}}));
    ASSERT_EQ(doc["cases"].size(), 5u);
    EXPECT_EQ(doc["cases"][0]["by_node"].size(), 4u); // gpu4 never ran: in no comparison
    EXPECT_FALSE(doc["cases"][0]["by_node"].contains("gpu4"));
}

TEST_F(FleetReport, HtmlSaysTheSame) {
    const std::string html = render_fleet_html(load(fleet()));
    EXPECT_NE(html.find("5 nodes (4 ran), 2 fingerprint groups, 2 cases differ within a group"),
              std::string::npos);
    EXPECT_NE(html.find("<p class=\"odd\"><code>gpu2</code> differs from the other 2 nodes of "
                        "its group in 2 cases:</p>"),
              std::string::npos)
        << html;
    EXPECT_EQ(html.find(" differs from the other"), html.rfind(" differs from the other"));
    EXPECT_NE(html.find("<table class=\"grid\" id=\"nodes\">"), std::string::npos);
    EXPECT_NE(html.find("node_down</span> (NODE_FAIL, reason: Not responding)"), std::string::npos);
    EXPECT_NE(html.find("<ul id=\"between\">\n<li><code>cuda.s.c</code>"), std::string::npos);
    // Rows of the cases that differ within a group are marked, the others not.
    std::size_t marked = 0;
    for (auto at = html.find("<tr class=\"differs\">"); at != std::string::npos;
         at = html.find("<tr class=\"differs\">", at + 1))
        ++marked;
    EXPECT_EQ(marked, 2u);
    EXPECT_NE(html.find("<tr class=\"differs\"><td><code>cuda.s.a</code>"), std::string::npos);
}

TEST_F(FleetReport, OnATieEveryNodeIsNamedWithTheOthersValues) {
    const std::string md = render_fleet_markdown(
        load({node("n1", h100, cases), node("n2", h100, cases, {"cpu.s.b"})}));
    EXPECT_TRUE(matches_in_order(
        md, {{"## pitfall fleet: 2 nodes (2 ran), 1 fingerprint group, 1 case differs within a "
              "group"},
             {"`n1` differs from the other 1 node of its group in 1 case:"},
             {"- `cpu.s.b`: **PASS (ok)** here, no majority: **FAIL "
              "(cudaErrorLaunchFailure@compute)**: n2"},
             {"`n2` differs from the other 1 node of its group in 1 case:"},
             {"- `cpu.s.b`: **FAIL (cudaErrorLaunchFailure@compute)** here, no majority: **PASS "
              "(ok)**: n1"}}))
        << md;
    EXPECT_EQ(md.find("### Between groups"), std::string::npos); // one group
}

TEST_F(FleetReport, ANodeOutsideTheMajorityGroupDiffersByItsFingerprint) {
    // A node whose driver library is the toolkit's stub enumerates no GPU: a group of its own.
    // Within-group comparison has nothing to say about it, so it is named against the norm.
    const std::string doctor = m_tmp + "/nodes/stub/doctor.json";
    const std::string stub = node("stub", a100, cases, {"cpu.s.b"});
    write(doctor, R"({"headline": "the CUDA toolkit's stub libcuda.so is loaded as the driver"})");
    const std::string md =
        render_fleet_markdown(load({node("g1", h100, cases), stub, node("g2", h100, cases)}));
    EXPECT_TRUE(matches_in_order(
        md, {{"### Which node differs"},
             {"Nothing: in every fingerprint group, every node has the same verdict and outcome "
              "in every case."},
             {"`stub` differs by its fingerprint: " + a100_group + ", where most nodes (2) have " +
              h100_group +
              "; 1 case has another verdict or outcome than theirs; pitfall doctor: the CUDA "
              "toolkit's stub libcuda.so "
              "is loaded as the driver."},
             {"### Nodes"}}))
        << md;
    EXPECT_EQ(md.find("`g1` differs"), std::string::npos) << md;
    // No majority (one node in each of two groups): nobody is the outlier.
    const std::string even =
        render_fleet_markdown(load({node("a", h100, cases), node("b", a100, cases)}));
    EXPECT_EQ(even.find("differs by its fingerprint"), std::string::npos) << even;
}

TEST_F(FleetReport, TwoReleasesOfOneDriverBranchAreTwoGroups) {
    // The summary keeps only the branch; the group names the release NVML (else the kernel
    // module) reports, so a node left on the old fix release stands apart.
    const auto nvml = [](const char* release) {
        return json{{"libraries", {{"nvml", {{"driver_version", release}}}}}};
    };
    const json module = {
        {"libraries", {{"driver", {{"kernel_module", {{"version", "580.95.05"}}}}}}}};
    const std::string md = render_fleet_markdown(
        load({node("new1", h100, cases, {}, json::object(), nvml("580.95.05")),
              node("new2", h100, cases, {}, json::object(), module),
              node("old", h100, cases, {"cpu.s.b"}, json::object(), nvml("580.65.06"))}));
    EXPECT_TRUE(matches_in_order(
        md, {{"## pitfall fleet: 3 nodes (3 ran), 2 fingerprint groups, 0 cases differ within a "
              "group"},
             {"| `new2` | ran | NVIDIA H100 80GB HBM3, driver 580.95.05 (CUDA 13.0), CUDA 13.0, "
              "cuDNN 9.10.2 | %any"},
             {"### Between groups"},
             {"- `cpu.s.b`: **PASS (ok)**: NVIDIA H100 80GB HBM3, driver 580.95.05 (CUDA 13.0), "
              "CUDA 13.0, cuDNN 9.10.2; **FAIL (cudaErrorLaunchFailure@compute)**: NVIDIA H100 "
              "80GB HBM3, driver 580.65.06 (CUDA 13.0), CUDA 13.0, cuDNN 9.10.2"}}))
        << md;
}

TEST_F(FleetReport, NothingDiffersIsOneLineAndLongListsAreCut) {
    const std::string agree =
        render_fleet_markdown(load({node("a", h100, cases), node("b", h100, cases)}));
    EXPECT_EQ(section(agree, "### Which node differs"),
              (std::vector<std::string>{"Nothing: in every fingerprint group, every node has the "
                                        "same verdict and outcome in every case."}));
    std::vector<std::string> many;
    many.reserve(25);
    for (int i = 0; i < 25; ++i)
        many.push_back("cpu.s.v" + std::to_string(i));
    const std::set<std::string> all(many.begin(), many.end());
    const std::string md = render_fleet_markdown(
        load({node("x", h100, many), node("y", h100, many), node("z", h100, many, all)}));
    EXPECT_TRUE(matches_in_order(md, {{"`z` differs from the other 2 nodes of its group in 25 "
                                       "cases:"},
                                      {"- `cpu.s.v19`: %any"},
                                      {"- and 5 more", true}}))
        << md;
}

TEST_F(FleetReport, ADamagedDoctorJsonIsShownNotFatal) {
    const std::string dir = node("gpu1", h100, cases);
    write(dir + "/doctor.json", R"({"headline": )");
    const auto nodes = load({dir});
    ASSERT_EQ(nodes.size(), 1u);
    EXPECT_TRUE(nodes[0].doctor.is_null());
    const std::string md = render_fleet_markdown(nodes);
    EXPECT_NE(md.find("| unreadable: " + dir + "/doctor.json: "), std::string::npos) << md;
}

TEST_F(FleetReport, AMalformedNodeJsonIsBadInputNamingTheFile) {
    const std::string dir = node("gpu1", h100, cases);
    const std::string path = dir + "/node.json";
    for (const char* bad :
         {R"({"schema": "pitfall.fleet-node/1", "node": "gpu1"})",
          R"({"schema": "pitfall.fleet-node/1", "node": "gpu1", "outcome": 0})",
          R"({"schema": "pitfall.fleet-node/1", "node": "gpu1", "outcome": "exploded"})",
          R"({"schema": "pitfall.fleet-node/2", "node": "gpu1", "outcome": "ran"})",
          R"({"schema": "pitfall.fleet-node/1", "node": 7, "outcome": "ran"})",
          R"({"schema": "pitfall.fleet-node/1", "node": "gpu1", "outcome": "ran", "reason": []})",
          R"({"schema": "pitfall.fleet-node/1", "node": "gpu1", "outcome": "ran",
              "message": {"a": 1}})",
          R"(["ran"])", R"({"outcome": "ran")", "1e999", ""}) {
        write(path, bad);
        const auto loaded = load_cell_or_run(dir);
        ASSERT_FALSE(loaded.is_ok()) << bad;
        EXPECT_EQ(loaded.error().name(), "bad_input") << bad;
        EXPECT_NE(loaded.error().message().find(path), std::string::npos)
            << bad << ": " << loaded.error().message();
    }
    // Fields the report does not read, and unknown ones, may hold anything.
    write(path, R"({"schema": "pitfall.fleet-node/1", "node": "gpu1", "outcome": "ran",
                    "run_exit": "zero", "elapsed_s": 1e308, "array_task": [[[]]],
                    "from_a_newer_driver": {"x": 1}})");
    EXPECT_TRUE(load_cell_or_run(dir).is_ok());
}

TEST_F(FleetReport, MergingNodesWithOtherFoldersIsRefused) {
    const std::string gpu1 = node("gpu1", h100, cases);
    const std::string plain = m_tmp + "/plain";
    fs::create_directories(plain);
    fs::copy(gpu1 + "/run", plain, fs::copy_options::recursive);
    report_options options;
    options.merge_dirs = {gpu1, plain};
    options.format = "markdown";
    options.out = m_tmp + "/fleet.md";
    testing::internal::CaptureStderr();
    EXPECT_EQ(report_run(options), 2);
    const std::string said = testing::internal::GetCapturedStderr();
    EXPECT_NE(said.find(gpu1 + " is a fleet node folder (node.json) but " + plain + " is not"),
              std::string::npos)
        << said;
    EXPECT_FALSE(fs::exists(options.out));
    // One node alone is a fleet of one.
    options.merge_dirs = {gpu1};
    testing::internal::CaptureStderr();
    EXPECT_EQ(report_run(options), 0);
    testing::internal::GetCapturedStderr();
    std::ifstream in(options.out);
    std::string first;
    std::getline(in, first);
    EXPECT_EQ(first, "## pitfall fleet: 1 node (1 ran), 1 fingerprint group, 0 cases differ "
                     "within a group");
}

} // namespace
