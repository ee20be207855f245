// The HTML report: one self-contained page.
#include "report/html_parts.hpp"
#include "report/loaded_libraries.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>

namespace pitfall::runner {
using namespace report_parts;
namespace {
/// A version number as people read it, with the number itself: CUDA's 13000 is "13.0 (13000)",
/// cuDNN's 91900 "9.19.0 (91900)" (its encoding since 9: major * 10000 + minor * 100 + patch;
/// before 9: major * 1000 + minor * 100 + patch). Nothing for other facts, or a 0 (none).
std::optional<std::string> version_text(const std::string& key, const json& v) {
    if (!v.is_number_integer() || v.get<long long>() <= 0)
        return std::nullopt;
    const long long n = v.get<long long>();
    if (key == "cuda_runtime_version" || key == "cuda_driver_version")
        return std::to_string(n / 1000) + "." + std::to_string(n % 1000 / 10) + " (" +
               std::to_string(n) + ")";
    if (key == "cudnn_version") {
        const long long major_unit = n >= 90000 ? 10000 : 1000;
        return std::to_string(n / major_unit) + "." + std::to_string(n % major_unit / 100) + "." +
               std::to_string(n % 100) + " (" + std::to_string(n) + ")";
    }
    return std::nullopt;
}

// ---- the page's parts

std::string html_header(const run_data& run) {
    std::ostringstream h;
    const json profile = obj(run.header, "profile");
    h << "<header id=\"fingerprint\"><h1>pitfall report</h1>\n<p class=\"muted\">run "
      << escape_markup(run.dir) << ", started " << escape_markup(str(run.header, "at"))
      << ", pitfall " << escape_markup(str(run.header, "pitfall_version")) << ", profile <b>"
      << escape_markup(str(profile, "name", "none")) << "</b> ("
      << escape_markup(str(profile, "reason")) << ")</p>\n";
    h << "<table class=\"fp\"><tr><th>fingerprint</th><td>"
      << escape_markup(str(run.header, "fingerprint_id")) << "</td></tr>\n";
    const json facts = fingerprint_summary(run);
    for (const auto& [k, v] : facts.items())
        h << "<tr><th>" << escape_markup(k) << "</th><td>"
          << escape_markup(version_text(k, v).value_or(text_of(v))) << "</td></tr>\n";
    h << "</table>\n<p id=\"counts\">";
    for (const auto& [v, n] : verdict_counts(run))
        h << "<span class=\"v " << verdict_class(v) << "\">" << escape_markup(v) << ' ' << n
          << "</span> ";
    if (run.interrupted)
        h << "<span class=\"v warn\">interrupted</span>";
    if (const auto predicted = predictions(run); !predicted.empty()) {
        h << "</p>\n<p id=\"predictions\">" << predicted.size()
          << " reproduce case(s) predicted, not reproduced (a rule applied, not the failure "
             "seen):";
        for (const json* r : predicted)
            h << " <code>" << escape_markup(str(*r, "case")) << "</code>";
    }
    h << "</p></header>\n";
    return h.str();
}

/// The machine's findings (pitfall doctor's): errors and warnings open, the rest folded.
std::string html_machine(const run_data& run) {
    const diagnosis d = machine_of(run);
    std::ostringstream h;
    h << "<section id=\"machine\"><h2>This machine</h2>\n<p class=\"v "
      << (d.cuda_usable() ? "pass\">CUDA work can run here" : "fail\">Not ready for CUDA work: ")
      << escape_markup(d.headline()) << "</p>\n";
    for (const auto& f : d.findings) {
        h << "<details class=\"finding " << severity_name(f.severity) << "\""
          << (f.severity == finding_severity::ok ? "" : " open") << "><summary><b>"
          << severity_name(f.severity) << "</b> " << escape_markup(f.title) << " <code>"
          << escape_markup(f.id) << "</code></summary>\n<dl>";
        for (const auto& [label, value] :
             {std::pair<const char*, const std::string*>{"observed", &f.observed},
              {"why", &f.why},
              {"fix", &f.fix},
              {"case", &f.reproduced_by},
              {"rule", &f.rule}})
            if (!value->empty())
                h << "<dt>" << label << "</dt><dd>" << escape_markup(*value) << "</dd>";
        h << "</dl></details>\n";
    }
    h << "</section>\n";
    return h.str();
}

std::string html_verdict_grid(const run_data& run, const case_grid& g) {
    std::ostringstream h;
    h << "<h2>Verdicts</h2>\n<table class=\"grid\" "
         "id=\"verdict-grid\"><tr><th>scenario</th><th>variant</th>";
    for (const auto& b : g.backends)
        h << "<th>" << escape_markup(b) << "</th>";
    h << "</tr>\n";
    for (const auto& row : g.rows) {
        h << "<tr><td>" << escape_markup(row.first) << "</td><td>" << escape_markup(row.second)
          << "</td>";
        for (const auto& b : g.backends) {
            const json* r = g.find(row, b);
            if (r == nullptr) {
                h << "<td class=\"cell muted\">-</td>";
                continue;
            }
            const std::string verdict = str(*r, "verdict");
            h << "<td class=\"cell\"><a href=\"#" << case_anchor(str(*r, "case")) << "\" title=\""
              << escape_markup(str(*r, "reason")) << "\"><span class=\"v " << verdict_class(verdict)
              << "\">" << escape_markup(verdict) << "</span></a></td>";
        }
        h << "</tr>\n";
    }
    h << "</table>\n";
    if (!run.not_finished.empty()) {
        h << "<p>No result for: ";
        for (std::size_t i = 0; i < run.not_finished.size(); ++i)
            h << (i ? ", " : "") << "<code>" << escape_markup(run.not_finished[i]) << "</code>";
        h << " (the run ended first; <code>pitfall run --resume</code> completes it).</p>\n";
    }
    return h.str();
}

/// The cases that neither passed nor failed, each group with its cause in the page's own text
/// (the grid's reasons are hover text, which a print or a screenshot loses).
std::string html_quiet(const run_data& run) {
    const auto groups = quiet_groups(run);
    if (groups.empty())
        return "";
    std::ostringstream h;
    h << "<section id=\"skipped\"><h2>Skipped and warnings</h2>\n<ul>\n";
    for (const auto& g : groups) {
        h << "<li><span class=\"v " << verdict_class(g.verdict) << "\">" << escape_markup(g.verdict)
          << "</span> ";
        if (g.cases.size() == 1)
            h << "<code>" << escape_markup(str(*g.cases.front(), "case"))
              << "</code>: " << escape_markup(str(*g.cases.front(), "reason"));
        else
            h << g.cases.size() << (g.backend == "cuda" ? " CUDA" : " CPU")
              << " cases: " << escape_markup(g.cause);
        h << "</li>\n";
    }
    h << "</ul></section>\n";
    return h.str();
}

/// The CUDA libraries the cases had mapped, with a warning for each one the doctor found
/// elsewhere or at another version. Nothing where no case mapped one.
std::string html_libraries(const run_data& run) {
    const auto uses = libraries_loaded(run);
    const auto mismatches = library_mismatches(run);
    if (uses.empty() && mismatches.empty())
        return "";
    std::ostringstream h;
    h << "<section id=\"loaded-libraries\"><h2>Loaded libraries</h2>\n";
    for (const auto& m : mismatches)
        h << "<p class=\"v warn\">warning: " << escape_markup(m.text()) << "</p>\n";
    h << "<table><tr><th>library</th><th>version</th><th>file</th><th>cases</th></tr>\n";
    for (const auto& u : uses)
        h << "<tr><td>" << escape_markup(u.name) << "</td><td>" << escape_markup(u.version)
          << "</td><td><code>" << escape_markup(u.real_path) << "</code></td><td>" << u.cases.size()
          << "</td></tr>\n";
    h << "</table></section>\n";
    return h.str();
}
} // namespace

namespace {
/// The libraries the case's own process had mapped as it wrote its result.
std::string libraries_table(const json& result) {
    const json list = arr(result, "loaded_libraries");
    if (list.empty())
        return "";
    std::ostringstream h;
    h << "<table class=\"libraries\"><tr><th>library</th><th>version</th><th>mapped as</th>"
         "<th>file</th></tr>\n";
    for (const auto& l : list)
        h << "<tr><td>" << escape_markup(str(l, "name")) << "</td><td>"
          << escape_markup(str(l, "version")) << "</td><td><code>" << escape_markup(str(l, "path"))
          << "</code></td><td><code>" << escape_markup(str(l, "real_path"))
          << "</code></td></tr>\n";
    h << "</table>\n";
    return h.str();
}

/// A case's reason, observed outcome and where it ran.
std::string case_facts_table(const json& r) {
    std::ostringstream h;
    const json o = obj(r, "observed");
    h << "<table><tr><th>reason</th><td class=\"reason\">" << escape_markup(str(r, "reason"))
      << "</td></tr>\n";
    for (const char* k : {"status", "library", "error", "stage", "sticky", "signal", "message"})
        if (o.contains(k))
            h << "<tr><th>" << k << "</th><td>" << escape_markup(str(o, k)) << "</td></tr>\n";
    h << "<tr><th>wall time</th><td>" << human_seconds(num(obj(r, "process"), "wall_seconds"))
      << "</td></tr>\n";
    h << "<tr><th>ran on</th><td>" << escape_markup(str(obj(r, "result"), "ran_on", "-"))
      << "</td></tr>\n";
    // The SDK's count behind a GPU claim (CUDA cases that need a device).
    if (const json work = obj(obj(r, "result"), "gpu_work"); !work.empty())
        h << "<tr><th>GPU work</th><td>"
          << escape_markup(work.contains("error")
                               ? "not counted: " + str(work, "error")
                               : fmt("%.0f", num(work, "kernels", 0)) +
                                     " kernels counted by the device, " +
                                     fmt("%.0f", num(work, "library_calls", 0)) + " cuBLAS calls")
          << "</td></tr>\n";
    h << "<tr><th>judged by</th><td>"
      << escape_markup(r.contains("baseline") ? str(r["baseline"], "profile", "no baseline")
                                              : "no baseline")
      << "</td></tr></table>\n";
    return h.str();
}

/// Every series the case recorded: each value, its median and its unit.
std::string samples_table(const json& result) {
    const json samples = obj(result, "samples");
    if (samples.empty())
        return "";
    std::ostringstream h;
    h << "<table "
         "class=\"samples\"><tr><th>series</th><th>unit</th><th>n</th><th>median</th><th>samples, "
         "in "
         "order taken</th></tr>\n";
    for (const auto& [name, series] : samples.items()) {
        const std::vector<double> values = numbers(arr(series, "values"));
        const std::string unit = str(series, "unit", "s");
        const double m = stats::median_or_nan(values);
        std::string listed;
        for (double v : values)
            listed += (listed.empty() ? "" : " ") + fmt("%.6g", v);
        h << "<tr><td>" << escape_markup(name) << "</td><td>" << escape_markup(unit) << "</td><td>"
          << values.size() << "</td><td>" << (std::isfinite(m) ? fmt("%.6g", m) : "-")
          << (unit == "s" && std::isfinite(m) ? " (" + human_seconds(m) + ")" : "")
          << "</td><td class=\"values\">" << escape_markup(listed) << "</td></tr>\n";
    }
    h << "</table>\n";
    return h.str();
}

/// A table of name -> value from `j[key]`, under the heading `what`; nothing when it is empty.
/// Values are numbers or strings; a measurement's {value, unit} gives both columns.
std::string facts_table(const json& result, const char* key, const char* what, bool with_unit) {
    const json facts = obj(result, key);
    if (facts.empty())
        return "";
    std::ostringstream h;
    h << "<table class=\"" << key << "\"><tr><th>" << what << "</th><th>value</th>"
      << (with_unit ? "<th>unit</th>" : "") << "</tr>\n";
    for (const auto& [k, v] : facts.items()) {
        const bool pair = v.is_object() && v.contains("value");
        h << "<tr><td>" << escape_markup(k) << "</td><td>"
          << escape_markup(text_of(pair ? v["value"] : v)) << "</td>";
        if (with_unit)
            h << "<td>" << escape_markup(str(v, "unit")) << "</td>";
        h << "</tr>\n";
    }
    h << "</table>\n";
    return h.str();
}

std::string checks_table(const json& result) {
    if (arr(result, "checks").empty())
        return "";
    std::ostringstream h;
    h << "<table class=\"checks\"><tr><th>check</th><th>passed</th><th>detail</th></tr>\n";
    for (const auto& c : result["checks"])
        h << "<tr><td>" << escape_markup(str(c, "name")) << "</td><td>"
          << (c.value("passed", false) ? "yes" : "<b>no</b>") << "</td><td>"
          << escape_markup(str(c, "detail")) << "</td></tr>\n";
    h << "</table>\n";
    return h.str();
}

/// One case, expandable: its verdict and outcome, then what it recorded and was judged against.
std::string case_details(const json& r) {
    std::ostringstream h;
    const std::string verdict = str(r, "verdict");
    const json result = obj(r, "result");
    h << "<details class=\"case\" id=\"" << case_anchor(str(r, "case"))
      << "\"><summary><span class=\"v " << verdict_class(verdict) << "\">" << escape_markup(verdict)
      << "</span> <code>" << escape_markup(str(r, "test", str(r, "case")))
      << "</code> <span class=\"muted\">" << escape_markup(outcome_line(r))
      << "</span></summary>\n";
    h << case_facts_table(r) << samples_table(result) << facts_table(result, "info", "info", false)
      << facts_table(result, "measurements", "measurement", true) << checks_table(result)
      << libraries_table(result);
    if (!obj(r, "timings").empty())
        h << "<p>timings against the baseline</p>" << pre_json(r["timings"]);
    if (r.contains("baseline"))
        h << "<p>baseline entry</p>" << pre_json(obj(r["baseline"], "entry"));
    if (!str(r, "output_tail").empty())
        h << "<p>output (end)</p><pre>" << escape_markup(str(r, "output_tail")) << "</pre>";
    h << "</details>\n";
    return h.str();
}
} // namespace

std::string render_html(const run_data& run) {
    const case_grid grid = make_grid(run);
    std::ostringstream h;
    h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
      << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      << "<title>pitfall report: " << escape_markup(str(run.header, "at")) << "</title>\n<style>"
      << html_style << "</style></head>\n<body>\n";
    h << html_header(run) << html_machine(run) << html_verdict_grid(run, grid) << html_quiet(run)
      << flaky_html(run) << html_charts(run, grid) << html_libraries(run);
    h << "<h2>Cases</h2>\n<div id=\"cases\">\n";
    for (const auto& r : run.cases)
        h << case_details(r);
    h << "</div>\n<footer class=\"muted\"><p>Rendered from results.jsonl by <code>pitfall "
         "report</code>, "
      << escape_markup(utc_now("%Y-%m-%dT%H:%M:%SZ")) << ".</p></footer>\n</body></html>\n";
    return h.str();
}

} // namespace pitfall::runner
