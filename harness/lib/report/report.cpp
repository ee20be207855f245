#include "report/report.hpp"

#include "doctor/doctor.hpp"
#include "model/model.hpp"
#include "pitfall/detail/json_file.hpp"
#include "pitfall/detail/json_schema.hpp"
#include "pitfall/detail/result_file.hpp"
#include "pitfall/detail/text.hpp"
#include "run/run_folder.hpp"
#include "run/runner.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <unistd.h>

namespace pitfall::runner {
namespace {

/// The parts one after another, built in one string (no temporaries per `+`).
template <class... Parts> std::string cat(const Parts&... parts) {
    std::string out;
    (out += ... += parts);
    return out;
}
using json = nlohmann::json;

constexpr const char* report_schema = "pitfall.report/1";

std::string str(const json& j, const char* key, const std::string& fallback = "") {
    if (!j.is_object() || !j.contains(key))
        return fallback;
    const json& v = j[key];
    if (v.is_string())
        return v.get<std::string>();
    if (v.is_null())
        return fallback;
    return v.dump();
}

/// j[key] when it is an object, else an empty object: records hold null where a crashed case
/// wrote no result or a case had no baseline entry.
json obj(const json& j, const char* key) {
    if (j.is_object() && j.contains(key) && j[key].is_object())
        return j[key];
    return json::object();
}

/// j[key] when it is an array, else an empty array.
json arr(const json& j, const char* key) {
    if (j.is_object() && j.contains(key) && j[key].is_array())
        return j[key];
    return json::array();
}

double num(const json& j, const char* key, double fallback = std::nan("")) {
    if (!j.is_object() || !j.contains(key) || !j[key].is_number())
        return fallback;
    return j[key].get<double>();
}

std::string fmt(const char* format, double x) {
    char buf[64];
    std::snprintf(buf, sizeof buf, format, x);
    return buf;
}

std::string human_bytes(double bytes) {
    if (!std::isfinite(bytes))
        return "-";
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (std::abs(bytes) >= 1024 && u < 4) {
        bytes /= 1024;
        ++u;
    }
    return fmt(u == 0 ? "%.0f" : "%.1f", bytes) + " " + units[u];
}

std::string human_seconds(double s) {
    if (!std::isfinite(s))
        return "-";
    if (s < 1e-6)
        return fmt("%.1f", s * 1e9) + " ns";
    if (s < 1e-3)
        return fmt("%.1f", s * 1e6) + " us";
    if (s < 1)
        return fmt("%.2f", s * 1e3) + " ms";
    return fmt("%.2f", s) + " s";
}

/// The verdict table's severity of a verdict named in a record.
bool has_severity(const std::string& verdict, verdict_severity severity) {
    const auto v = verdict_named(verdict);
    return v && info(*v).severity == severity;
}
bool is_warning(const std::string& verdict) {
    return has_severity(verdict, verdict_severity::warning);
}
bool is_error(const std::string& verdict) {
    return has_severity(verdict, verdict_severity::error);
}

std::map<std::string, int> verdict_counts(const run_data& run) {
    std::map<std::string, int> counts;
    for (const auto& r : run.cases)
        ++counts[str(r, "verdict", "?")];
    if (!run.not_finished.empty())
        counts["NOT_RUN"] = static_cast<int>(run.not_finished.size());
    return counts;
}

/// The reproduce cases that predict their failure from a rule or table instead of showing it
/// (scenario.json "prediction" on their backend): counted apart from the reproductions.
std::vector<const json*> predictions(const run_data& run) {
    std::vector<const json*> out;
    for (const auto& r : run.cases)
        if (!str(r, "prediction").empty())
            out.push_back(&r);
    return out;
}

/// The outcome a case observed, in one line: "ok", "cudaErrorMemoryAllocation@alloc", "SIGSEGV",
/// "unsupported" (or the error that made it so: "cudaErrorInsufficientDriver@init").
std::string outcome_line(const json& record) {
    const json o = obj(record, "observed");
    std::string st = str(o, "status", "?"); // not const: returned by move
    // An UNSUPPORTED case says which error made it so: two machines skipping for different
    // reasons (no driver, a stub driver) are two outcomes, not one.
    if (st == "error" || (st == "unsupported" && o.contains("error")))
        return str(o, "error", "error") + (o.contains("stage") ? "@" + str(o, "stage") : "");
    if (st == "signal")
        return str(o, "signal", "signal");
    if (st == "exit")
        return "exit " + str(o, "exit_code", "?");
    return st;
}

/// Whether some case or ratio has a failing verdict (the verdict table says which): what makes
/// `pitfall run` exit 1.
bool run_failing(const run_data& run) {
    const auto failing = [](const json& r) {
        const auto v = verdict_named(str(r, "verdict"));
        return v && is_failing(*v);
    };
    return std::any_of(run.cases.begin(), run.cases.end(), failing) ||
           std::any_of(run.ratios.begin(), run.ratios.end(), failing);
}

json fingerprint_summary(const run_data& run) {
    return run.header.is_object() ? obj(run.header, "fingerprint_summary") : json::object();
}

/// `pitfall doctor`'s rules over the run's own fingerprint: what was wrong with the machine
/// (a fingerprint of an older run without the newer facts gives fewer findings, never an error).
diagnosis machine_of(const run_data& run) {
    return diagnose(run.header.is_object() ? obj(run.header, "fingerprint") : json::object());
}

} // namespace

std::string escape_markup(const std::string& text) {
    std::string out;
    out.reserve(text.size() + 16);
    for (std::size_t i = 0; i < text.size();) {
        const std::size_t n = detail::utf8_sequence_length(text, i);
        const auto c = static_cast<unsigned char>(text[i]);
        if (n == 0) { // not UTF-8: a document that declares UTF-8 must not carry it
            out += "\xEF\xBF\xBD";
            ++i;
            continue;
        }
        if (n > 1) {
            // XML 1.0's Char excludes U+FFFE and U+FFFF (surrogates cannot be well-formed UTF-8).
            const bool nonchar = n == 3 && c == 0xEF &&
                                 static_cast<unsigned char>(text[i + 1]) == 0xBF &&
                                 static_cast<unsigned char>(text[i + 2]) >= 0xBE;
            out.append(nonchar ? "\xEF\xBF\xBD" : text.substr(i, n));
            i += n;
            continue;
        }
        switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&quot;"; break;
        case '\'': out += "&#39;"; break;
        default:
            // XML 1.0 allows tab, newline and carriage return, nothing else below 0x20.
            if (c < 0x20 && c != '\t' && c != '\n' && c != '\r')
                out += "\xEF\xBF\xBD";
            else
                out += static_cast<char>(c);
        }
        ++i;
    }
    return out;
}

status_or<run_data> load_run(const std::string& dir) {
    PITFALL_ASSIGN_OR_RETURN(const run_folder folder, run_folder::open(dir));
    PITFALL_ASSIGN_OR_RETURN(const run_log log, folder.read());
    run_data run;
    run.dir = dir;
    run.header = log.header.to_json();
    run.resumed = log.resumed;
    run.interrupted = log.interrupted;
    // Run order is the selection's; cases finished but not selected (none today) go last.
    std::set<std::string> placed;
    for (const auto& selected : log.header.selection) {
        const std::string key = selected.str();
        placed.insert(key);
        if (const case_record* r = log.find(key)) {
            run.cases.push_back(r->to_json());
        } else {
            run.not_finished.push_back(key);
            if (log.started.count(key) != 0)
                run.started_unfinished.push_back(key);
        }
    }
    for (const auto& r : log.cases)
        if (placed.count(r.key.str()) == 0)
            run.cases.push_back(r.to_json());
    PITFALL_ASSIGN_OR_RETURN(run.ratios, folder.summary_ratios());
    return run;
}

namespace {
/// Whether `path` names anything, a dangling symlink or a FIFO included: what is there is then
/// read (and refused, naming the file), never silently taken for absent.
bool something_at(const std::string& path) {
    std::error_code ec;
    return std::filesystem::exists(std::filesystem::symlink_status(path, ec));
}

/// A fleet node folder: node.json (bad input when malformed), then doctor.json and run/ where
/// the job got that far.
status_or<run_data> load_node(const std::string& dir) {
    const std::string node_path = dir + "/node.json";
    // reports/schema/fleet-node.schema.json: what the fleet report reads has its type.
    PITFALL_ASSIGN_OR_RETURN(json node, detail::read_json_file(node_path));
    PITFALL_TRY(detail::validate_document("fleet-node", node, node_path));
    run_data run;
    if (run_folder::open(dir + "/run").is_ok()) { // a job that never ran has no run folder
        PITFALL_ASSIGN_OR_RETURN(run, load_run(dir + "/run"));
    }
    run.dir = dir;
    run.node = std::move(node);
    // The doctor's output of a node that broke may be cut short or empty: the node's row says
    // so, and the fleet report still shows every other node.
    const std::string doctor_path = dir + "/doctor.json";
    if (something_at(doctor_path)) {
        auto doctor = detail::read_json_file(doctor_path);
        if (!doctor.is_ok())
            run.doctor_problem = doctor.error().message();
        else if (!doctor.value().is_object() || !doctor.value().contains("headline") ||
                 !doctor.value()["headline"].is_string())
            run.doctor_problem = doctor_path + ": no string field 'headline': not `pitfall "
                                               "doctor --json` output";
        else
            run.doctor = std::move(doctor).value();
    }
    return run;
}
} // namespace

status_or<run_data> load_cell_or_run(const std::string& dir) {
    const std::string cell_path = dir + "/cell.json";
    const bool is_cell = something_at(cell_path);
    if (something_at(dir + "/node.json")) {
        if (is_cell)
            return bad_run_input(dir + ": holds both node.json and cell.json: a fleet node "
                                       "folder or a matrix cell folder, not both");
        return load_node(dir);
    }
    if (!is_cell)
        return load_run(dir);
    // reports/schema/cell.schema.json: what the matrix table reads has its type.
    PITFALL_ASSIGN_OR_RETURN(json cell, detail::read_json_file(cell_path));
    if (!cell.is_object() || !cell.contains("outcome") || !cell["outcome"].is_string())
        return bad_run_input(cell_path + ": no string field 'outcome': not a matrix cell");
    PITFALL_TRY(detail::validate_document("cell", cell, cell_path));
    run_data run;
    if (run_folder::open(dir + "/run").is_ok()) { // a cell that never ran has no run folder
        PITFALL_ASSIGN_OR_RETURN(run, load_run(dir + "/run"));
    }
    run.dir = dir;
    run.cell = std::move(cell);
    return run;
}

json render_json(const run_data& run) {
    const json& h = run.header;
    json cases = json::array();
    for (const auto& r : run.cases) {
        const json result = obj(r, "result");
        const json process = obj(r, "process");
        const json memory = result.is_object() ? obj(result, "memory") : json::object();
        const double median = first_time_median(result);
        json c = {
            {"case", str(r, "case")},
            {"scenario", str(r, "scenario")},
            {"backend", str(r, "backend")},
            {"variant", str(r, "variant")},
            {"kind", str(r, "kind")},
            {"verdict", str(r, "verdict", "?")},
            {"failing", r.value("failing", false)},
            {"reason", str(r, "reason")},
            {"outcome", obj(r, "observed")},
            {"wall_seconds", num(process, "wall_seconds", 0)},
            {"median_seconds", std::isfinite(median) ? json(median) : json(nullptr)},
            {"peak_rss_bytes", process.value("peak_rss_bytes", json(nullptr))},
            {"tracked_peak_bytes", memory.value("tracked_peak_bytes", json(nullptr))},
            {"measurements", result.is_object() ? obj(result, "measurements") : json::object()},
            {"checks", result.is_object() ? arr(result, "checks") : json::array()},
            {"timings", obj(r, "timings")},
            {"baseline_profile", r.contains("baseline")
                                     ? r["baseline"].value("profile", json(nullptr))
                                     : json(nullptr)},
            {"log", str(r, "log")}};
        if (const std::string why = str(r, "prediction"); !why.empty())
            c["prediction"] = why;
        if (r.contains("attempts") && r["attempts"].is_array() && !r["attempts"].empty())
            c["attempts"] = r["attempts"];
        cases.push_back(std::move(c));
    }
    const bool failing = run_failing(run);
    return {{"schema", report_schema},
            {"generated_at", utc_now("%Y-%m-%dT%H:%M:%SZ")},
            {"run",
             {{"dir", detail::valid_utf8(run.dir)}, // a path is bytes; JSON holds text
              {"started_at", str(h, "at")},
              {"pitfall_version", str(h, "pitfall_version")},
              {"fingerprint_id", str(h, "fingerprint_id")},
              {"fingerprint_summary", fingerprint_summary(run)},
              {"profile", obj(h, "profile")},
              {"complete", run.not_finished.empty()},
              {"interrupted", run.interrupted},
              {"resumed", run.resumed}}},
            {"counts", verdict_counts(run)},
            {"predictions", predictions(run).size()},
            {"verdicts", verdicts_json()},
            {"failing", failing},
            {"cases", cases},
            {"not_finished", run.not_finished},
            {"crashed_mid_way", run.started_unfinished},
            {"ratios", run.ratios},
            {"machine", machine_of(run).to_json()}};
}

std::string render_junit(const run_data& run) {
    int failures = 0, errors = 0, skipped = 0;
    double total = 0;
    for (const auto& r : run.cases) {
        const std::string v = str(r, "verdict");
        if (is_error(v))
            ++errors;
        else if (r.value("failing", false))
            ++failures;
        else if (v == "UNSUPPORTED")
            ++skipped;
        total += num(obj(r, "process"), "wall_seconds", 0);
    }
    // Cases the run never finished are errors too: a CI system must not read them as passed.
    errors += static_cast<int>(run.not_finished.size());
    const int tests = static_cast<int>(run.cases.size() + run.not_finished.size());
    std::ostringstream x;
    const auto attr = [](const std::string& s) { return escape_markup(s); };
    const std::string counts = "tests=\"" + std::to_string(tests) + "\" failures=\"" +
                               std::to_string(failures) + "\" errors=\"" + std::to_string(errors) +
                               "\" skipped=\"" + std::to_string(skipped) + "\" time=\"" +
                               fmt("%.3f", total) + "\"";
    x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    x << "<testsuites name=\"pitfall\" " << counts << ">\n";
    x << "  <testsuite name=\"pitfall\" " << counts << " timestamp=\""
      << attr(str(run.header, "at")) << "\">\n";
    x << "    <properties>\n";
    x << "      <property name=\"pitfall.version\" value=\""
      << attr(str(run.header, "pitfall_version")) << "\"/>\n";
    x << "      <property name=\"fingerprint_id\" value=\""
      << attr(str(run.header, "fingerprint_id")) << "\"/>\n";
    x << "      <property name=\"profile\" value=\""
      << attr(str(obj(run.header, "profile"), "name")) << "\"/>\n";
    x << "      <property name=\"predictions\" value=\"" << predictions(run).size() << "\"/>\n";
    const json facts = fingerprint_summary(run);
    for (const auto& [k, v] : facts.items())
        x << "      <property name=\"fingerprint." << attr(k) << "\" value=\""
          << attr(v.is_string() ? v.get<std::string>() : v.dump()) << "\"/>\n";
    x << "    </properties>\n";
    for (const auto& r : run.cases) {
        const std::string v = str(r, "verdict");
        x << "    <testcase classname=\"" << attr(str(r, "scenario")) << "\" name=\""
          << attr(str(r, "backend") + "." + str(r, "variant")) << "\" time=\""
          << fmt("%.3f", num(obj(r, "process"), "wall_seconds", 0)) << "\">\n";
        const std::string message = v + ": " + str(r, "reason");
        if (is_error(v))
            x << "      <error type=\"" << attr(v) << "\" message=\"" << attr(message) << "\">"
              << escape_markup(str(r, "output_tail")) << "</error>\n";
        else if (r.value("failing", false))
            x << "      <failure type=\"" << attr(v) << "\" message=\"" << attr(message) << "\">"
              << escape_markup("observed " + outcome_line(r) + "\n" + str(r, "reason"))
              << "</failure>\n";
        else if (v == "UNSUPPORTED")
            x << "      <skipped message=\"" << attr(str(r, "reason")) << "\"/>\n";
        const std::string why = str(r, "prediction");
        x << "      <system-out>"
          << escape_markup(v + " (" + outcome_line(r) + "): " + str(r, "reason") +
                           (why.empty() ? "" : "\nprediction, not a reproduction: " + why))
          << "</system-out>\n";
        x << "    </testcase>\n";
    }
    const std::set<std::string> crashed(run.started_unfinished.begin(),
                                        run.started_unfinished.end());
    for (const auto& key : run.not_finished) {
        const auto first = key.find('.');
        const auto second = key.find('.', first + 1);
        const std::string scenario = key.substr(first + 1, second - first - 1);
        const std::string name = key.substr(0, first) + "." + key.substr(second + 1);
        const std::string why = crashed.count(key) != 0
                                    ? "the run ended while this case ran (no result recorded)"
                                    : "not run: the run ended before it";
        x << "    <testcase classname=\"" << attr(scenario) << "\" name=\"" << attr(name)
          << "\" time=\"0\">\n"
          << "      <error type=\"NOT_RUN\" message=\"" << attr(why) << "\"/>\n"
          << "    </testcase>\n";
    }
    x << "  </testsuite>\n</testsuites>\n";
    return x.str();
}

namespace {
/// Text safe in one Markdown table cell or list line: no newlines, pipes or HTML (control
/// characters are made visible once, over the whole document, where it is written).
std::string md_inline(std::string text, std::size_t max = 200) {
    for (char& c : text)
        if (c == '\n' || c == '\r' || c == '\t')
            c = ' ';
    if (text.size() > max) { // at a word, never inside one or inside a UTF-8 character
        const std::size_t space = text.rfind(' ', max - 4);
        text = detail::utf8_head(text,
                                 space != std::string::npos && space > max / 2 ? space : max - 4) +
               " ...";
    }
    std::string out;
    for (char c : text) {
        if (c == '|' || c == '`' || c == '*' || c == '_' || c == '[' || c == ']' || c == '\\')
            out += '\\';
        if (c == '<')
            out += "&lt;";
        else if (c == '>')
            out += "&gt;";
        else
            out += c;
    }
    return out;
}
/// Text for inside a `code span`: backslash escapes do not work there, so nothing is escaped;
/// backticks and line breaks, which would end it, are replaced.
std::string md_code(std::string text) {
    for (char& c : text)
        if (c == '`' || c == '\n' || c == '\r')
            c = c == '`' ? '\'' : ' ';
    return text;
}
} // namespace

namespace {
/// "### This machine": the headline, then each error and warning with its fix.
std::string markdown_machine(const run_data& run) {
    const diagnosis d = machine_of(run);
    std::ostringstream m;
    m << "### This machine\n\n"
      << (d.cuda_usable() ? "CUDA work can run here."
                          : "**Not ready for CUDA work: " + md_inline(d.headline(), 200) + "**")
      << "\n\n";
    std::ostringstream rows;
    for (const auto& f : d.findings)
        if (f.severity != finding_severity::ok)
            rows << "| " << severity_name(f.severity) << " | " << md_inline(f.title, 200) << " | "
                 << md_inline(f.fix, 200) << " | `" << f.id << "` |\n";
    if (!rows.str().empty())
        m << "| severity | finding | fix | id |\n|---|---|---|---|\n" << rows.str() << '\n';
    return m.str();
}
} // namespace

std::string render_markdown(const run_data& run) {
    const auto counts = verdict_counts(run);
    std::ostringstream m;
    const bool failing = run_failing(run);
    const json fp = fingerprint_summary(run);
    m << "## pitfall: "
      << (failing                     ? "failing"
          : !run.not_finished.empty() ? "incomplete"
                                      : "passing")
      << "\n\n";
    m << counts_line(counts) << " (" << run.cases.size() << " of "
      << run.cases.size() + run.not_finished.size() << " cases finished";
    if (run.resumed > 0)
        m << ", resumed " << run.resumed << "x";
    m << ")\n\n";
    m << "Profile **" << md_inline(str(obj(run.header, "profile"), "name", "none")) << "**; ";
    std::vector<std::string> facts;
    // The fingerprint summary's own names (fingerprint.cpp, fingerprint_summary).
    for (const char* k :
         {"device_name", "compute_capability", "driver_branch", "cuda_driver_version",
          "cuda_runtime_version", "cudnn_version", "cpu_model", "os"})
        if (fp.contains(k) && !fp[k].is_null())
            facts.push_back(
                std::string(k) + " " +
                md_inline(fp[k].is_string() ? fp[k].get<std::string>() : fp[k].dump(), 60));
    for (std::size_t i = 0; i < facts.size(); ++i)
        m << (i ? ", " : "") << facts[i];
    m << (facts.empty() ? "no fingerprint facts" : "") << ".\n\n";
    m << markdown_machine(run);

    m << "| verdict | cases |\n|---|---:|\n";
    for (const auto& [v, n] : counts)
        m << "| " << v << " | " << n << " |\n";
    if (const auto predicted = predictions(run); !predicted.empty()) {
        m << "\n### Predictions\n\n"
          << predicted.size()
          << " reproduce case(s) apply a rule or table instead of showing the failure: their "
             "verdict judges the rule, and they are not counted as reproductions.\n\n";
        for (const json* r : predicted)
            m << "- `" << md_code(str(*r, "test", str(*r, "case"))) << "` " << str(*r, "verdict")
              << ": " << md_inline(str(*r, "prediction")) << "\n";
    }

    std::vector<const json*> failures, warnings;
    for (const auto& r : run.cases) {
        if (r.value("failing", false))
            failures.push_back(&r);
        else if (is_warning(str(r, "verdict")))
            warnings.push_back(&r);
    }
    m << "\n### Failing\n\n";
    if (failures.empty() && run.started_unfinished.empty())
        m << "None.\n";
    for (const json* r : failures)
        m << "- `" << md_code(str(*r, "test", str(*r, "case"))) << "` **" << str(*r, "verdict")
          << "** (" << md_inline(outcome_line(*r), 60) << "): " << md_inline(str(*r, "reason"))
          << "\n";
    for (const auto& key : run.started_unfinished)
        m << "- `pitfall." << md_code(key)
          << "` **CRASH**: the run ended while it ran (no result recorded)\n";
    for (const auto& r : run.ratios)
        if (r.value("failing", false))
            m << "- ratio `"
              << md_code(str(r, "backend") + "." + str(r, "scenario") + "." + str(r, "name"))
              << "` = " << fmt("%.3g", num(r, "ratio")) << " outside "
              << md_inline(r.value("bound", json()).dump()) << "\n";

    m << "\n### Changed against the baseline\n\n";
    std::size_t changed = 0;
    for (const auto& r : run.cases) {
        const std::string v = str(r, "verdict");
        if (v == "PASS" || v == "UNSUPPORTED" || r.value("failing", false))
            continue;
        ++changed;
        m << "- `" << md_code(str(r, "test", str(r, "case"))) << "` " << v << ": "
          << md_inline(str(r, "reason")) << "\n";
    }
    for (const auto& r : run.cases) {
        const json timings = obj(r, "timings");
        for (const auto& [name, t] : timings.items())
            if (str(t, "verdict") == "FASTER") {
                ++changed;
                m << "- `" << md_code(str(r, "test", str(r, "case"))) << "` " << md_inline(name)
                  << " FASTER: " << md_inline(str(t, "reason")) << "\n";
            }
    }
    if (changed == 0)
        m << (failures.empty()
                  ? "Nothing: every finished case met its baseline or was unsupported here.\n"
                  : "Nothing besides the failures above.\n");
    if (!run.not_finished.empty())
        m << "\n"
          << run.not_finished.size() << " selected case(s) have no result; `pitfall run --resume "
          << md_code(run.dir) << "` completes the run.\n";
    return m.str();
}

// ---- HTML ---------------------------------------------------------------------------------

namespace {
const char* verdict_class(const std::string& v) {
    if (v == "PASS")
        return "pass";
    if (v == "UNSUPPORTED")
        return "skip";
    if (is_warning(v))
        return "warn";
    return "fail";
}

std::string case_anchor(const std::string& key) {
    std::string id = "case-";
    for (char c : key)
        id += (std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_') ? c : '-';
    return id;
}

std::string text_of(const json& v) {
    return v.is_string() ? v.get<std::string>() : v.dump();
}

/// The numbers of a JSON array; anything else in it is skipped.
std::vector<double> numbers(const json& values) {
    std::vector<double> out;
    for (const auto& v : values)
        if (v.is_number())
            out.push_back(v.get<double>());
    return out;
}

using series_list = std::vector<std::pair<std::string, std::vector<double>>>;

/// A result's timed series (unit "s") holding at least one sample, by name.
series_list timed_series(const json& result) {
    series_list out;
    const json samples = obj(result, "samples");
    for (const auto& [name, series] : samples.items())
        if (str(series, "unit", "s") == "s")
            if (auto values = numbers(arr(series, "values")); !values.empty())
                out.emplace_back(name, std::move(values));
    return out;
}

/// What a CUDA case must show before the charts draw it: without it, a bar would put GPU time
/// or memory where no GPU ran (no driver: the case stops at its first CUDA call).
enum class evidence { timing, device_memory };

/// Whether a case's bars belong in a chart: not when it was unsupported here, and for a CUDA
/// case only with the evidence (a timed series; device allocations).
bool charted(const json& r, evidence need) {
    if (str(r, "verdict") == "UNSUPPORTED" || str(obj(r, "observed"), "status") == "unsupported")
        return false;
    if (str(r, "backend") != "cuda")
        return true;
    const json result = obj(r, "result");
    if (need == evidence::timing)
        return !timed_series(result).empty();
    return num(obj(result, "memory"), "tracked_peak_bytes", 0) > 0;
}

/// The verdict grid's layout: scenario x variant rows (by scenario, then run order), one column
/// per backend. The time charts follow it, so a case's CPU and GPU bars sit side by side.
struct case_grid {
    std::vector<std::string> backends;
    std::vector<std::pair<std::string, std::string>> rows; // scenario, variant
    std::map<std::pair<std::string, std::string>, std::map<std::string, const json*>> at;

    const json* find(const std::pair<std::string, std::string>& row,
                     const std::string& backend) const {
        const auto& cells = at.at(row);
        const auto it = cells.find(backend);
        return it == cells.end() ? nullptr : it->second;
    }
};

case_grid make_grid(const run_data& run) {
    case_grid g;
    for (const auto& r : run.cases) {
        const std::string b = str(r, "backend"), s = str(r, "scenario"), v = str(r, "variant");
        if (std::find(g.backends.begin(), g.backends.end(), b) == g.backends.end())
            g.backends.push_back(b);
        if (g.at.count({s, v}) == 0)
            g.rows.emplace_back(s, v);
        g.at[{s, v}][b] = &r;
    }
    std::stable_sort(g.rows.begin(), g.rows.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    return g;
}

// ---- charts: horizontal bars as inline SVG

struct bar {
    std::string label;
    std::string series; ///< its colour and legend entry (series_names)
    double value;
    std::string value_text;         ///< printed after the bar
    std::string title;              ///< hover text
    std::vector<double> marks = {}; ///< bound lines (a baseline's or a profile's bounds)
};

/// What each series means, in legend order.
const std::pair<const char*, const char*> series_names[] = {
    {"cpu", "CPU"},
    {"cuda", "GPU (CUDA)"},
    {"out", "outside its bound (fails the run)"},
    {"tracked", "tracked peak: allocations through the backend (device memory on CUDA)"},
    {"rss", "peak RSS of the case's process (host memory)"},
};

enum class axis_kind { seconds, bytes, ratio };

struct chart {
    std::string id;
    std::string title;
    std::string axis; ///< what the axis measures, with its unit
    axis_kind kind;
    std::vector<bar> bars;
    std::string marks_text = "baseline bound"; ///< what a bound line means, for the legend
};

/// A tick's value as the axis prints it: short, in the axis's unit.
std::string tick_text(double v, axis_kind kind) {
    if (kind == axis_kind::ratio)
        return fmt("%g", v) + "x";
    if (kind == axis_kind::bytes) {
        const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
        int u = 0;
        for (; v >= 1024 && u < 4; ++u)
            v /= 1024;
        return fmt("%g", v) + " " + units[u];
    }
    if (v == 0 || v >= 1)
        return fmt("%g", v) + " s";
    if (v >= 1e-3)
        return fmt("%g", v * 1e3) + " ms";
    if (v >= 1e-6)
        return fmt("%g", v * 1e6) + " us";
    return fmt("%g", v * 1e9) + " ns";
}

/// Where values land: a log scale when they span more than 50x (ratios always: 2x and 0.5x
/// lie equally far from 1), else linear from 0.
struct scale {
    bool log;
    double lo, hi;    ///< the axis's ends: values, or their log10 on a log scale
    double x0, width; ///< pixels

    double x(double v) const {
        const double at = log ? std::log10(std::max(v, std::pow(10.0, lo))) : v;
        return x0 + width * std::clamp((at - lo) / (hi - lo), 0.0, 1.0);
    }
    bool within(double v) const {
        const double at = log ? std::log10(v) : v;
        return v > 0 && at >= lo - 1e-9 && at <= hi + 1e-9;
    }
};

scale make_scale(const chart& c, double x0, double width) {
    double lo = std::numeric_limits<double>::infinity(), hi = 0;
    for (const auto& b : c.bars) {
        std::vector<double> values = b.marks;
        values.push_back(b.value);
        for (double v : values)
            if (std::isfinite(v) && v > 0) {
                lo = std::min(lo, v);
                hi = std::max(hi, v);
            }
    }
    if (c.kind == axis_kind::ratio) {
        lo = std::min(lo, 1.0);
        hi = std::max(hi, 1.0);
    }
    if (!(hi > 0))
        lo = hi = 1;
    if (c.kind == axis_kind::ratio || hi / lo > 50)
        return {true, std::log10(lo) - 0.1, std::log10(hi) + 0.1, x0, width};
    return {false, 0, hi * 1.05, x0, width};
}

/// Tick values: 1, 2, 5 per decade on a log scale (powers of 2 for bytes), thinned to at most
/// 8; a round step on a linear one.
std::vector<double> ticks(const scale& s, axis_kind kind) {
    constexpr std::size_t most = 8;
    std::vector<double> out;
    const bool bytes = kind == axis_kind::bytes;
    if (!s.log) {
        const double raw = s.hi / 5, p = std::pow(10.0, std::floor(std::log10(raw)));
        const double step = bytes          ? std::pow(2.0, std::ceil(std::log2(raw)))
                            : raw <= p     ? p
                            : raw <= 2 * p ? 2 * p
                            : raw <= 5 * p ? 5 * p
                                           : 10 * p;
        for (int i = 0; i * step <= s.hi; ++i)
            out.push_back(i * step);
        return out;
    }
    const double base = bytes ? 2 : 10;
    const double first = std::floor(s.lo / std::log10(base)),
                 last = std::ceil(s.hi / std::log10(base));
    const int strides[] = {1,  1,  2, 5,
                           10, 20, 50}; // in exponents; 2 and 5 too on the first pass only
    for (std::size_t pass = 0; pass < std::size(strides); ++pass) {
        const int stride = strides[pass];
        const bool with_2_5 = !bytes && pass == 0;
        out.clear();
        for (double e = std::ceil(first / stride) * stride; e <= last; e += stride)
            for (const double m : {1.0, 2.0, 5.0})
                if (const double v = m * std::pow(base, e); (m == 1 || with_2_5) && s.within(v))
                    out.push_back(v);
        if (out.size() <= most)
            break;
    }
    return out;
}

/// Past max_bars a chart keeps the most telling (largest; for a ratio, farthest from 1) and
/// says so in its title: a chart of a thousand rows is a wall, not a picture.
std::string keep_most_telling(chart& c) {
    constexpr std::size_t max_bars = 60;
    if (c.bars.size() <= max_bars)
        return "";
    const bool ratio = c.kind == axis_kind::ratio;
    const auto weight = [&](const bar& b) {
        return ratio ? std::abs(std::log(std::max(b.value, 1e-12))) : b.value;
    };
    std::stable_sort(c.bars.begin(), c.bars.end(),
                     [&](const bar& a, const bar& b) { return weight(a) > weight(b); });
    std::string note =
        cat(" (the ", std::to_string(max_bars), " ", ratio ? "farthest from 1" : "largest", " of ",
            std::to_string(c.bars.size()), ")");
    c.bars.resize(max_bars);
    return note;
}

/// The legend: the series this chart draws, and its bound lines when it has any.
std::string legend_html(const chart& c) {
    std::set<std::string> present;
    bool marks = false;
    for (const auto& b : c.bars) {
        present.insert(b.series);
        marks = marks || !b.marks.empty();
    }
    std::string out = "<p class=\"legend\">";
    for (const auto& [series, text] : series_names)
        if (present.count(series) != 0)
            out +=
                "<span class=\"key k-" + std::string(series) + "\"></span>" + escape_markup(text);
    if (marks)
        out += "<span class=\"key k-bound\"></span>" + escape_markup(c.marks_text);
    return out + "</p>\n";
}

/// The axis under the rows: a line, its ticks with their values (and grid lines up through the
/// rows, drawn first so the bars cover them), and what it measures.
void svg_axis(std::ostringstream& s, const chart& c, const scale& sc, int y, int top) {
    s << "<line class=\"axis\" x1=\"" << sc.x0 << "\" x2=\"" << sc.x0 + sc.width << "\" y1=\"" << y
      << "\" y2=\"" << y << "\"/>\n";
    for (double v : ticks(sc, c.kind)) {
        const std::string x = fmt("%.1f", sc.x(v));
        s << "<line class=\"tick\" x1=\"" << x << "\" x2=\"" << x << "\" y1=\"" << top << "\" y2=\""
          << y + 4 << "\"/><text x=\"" << x << "\" y=\"" << y + 15 << "\" class=\"tv\">"
          << escape_markup(tick_text(v, c.kind)) << "</text>\n";
    }
    s << "<text x=\"" << sc.x0 << "\" y=\"" << y + 31 << "\" class=\"ca\">" << escape_markup(c.axis)
      << (sc.log ? ", log scale" : "") << "</text>\n";
}

/// One row: its label, its bar (from 0, or from 1 for a ratio), bound lines, and its value.
void svg_row(std::ostringstream& s, const chart& c, const scale& sc, const bar& b, int y,
             int row_h) {
    const double origin = c.kind == axis_kind::ratio ? sc.x(1) : sc.x0;
    const double x = std::isfinite(b.value) && b.value > 0 ? sc.x(b.value) : sc.x0;
    s << "<text x=\"" << sc.x0 - 6 << "\" y=\"" << y + 12 << "\" class=\"cl\">"
      << escape_markup(b.label) << "</text>";
    s << "<rect class=\"b-" << b.series << "\" x=\"" << fmt("%.1f", std::min(origin, x))
      << "\" y=\"" << y + 2 << "\" width=\"" << fmt("%.1f", std::max(1.0, std::abs(x - origin)))
      << "\" height=\"" << row_h - 4 << "\"><title>" << escape_markup(b.title) << "</title></rect>";
    for (double m : b.marks) {
        const std::string mx = fmt("%.1f", sc.x(m));
        s << "<line class=\"bound\" x1=\"" << mx << "\" x2=\"" << mx << "\" y1=\"" << y
          << "\" y2=\"" << y + row_h << "\"><title>"
          << escape_markup(c.marks_text + " " + tick_text(m, c.kind)) << "</title></line>";
    }
    s << "<text x=\"" << fmt("%.1f", std::max(origin, x) + 4) << "\" y=\"" << y + 12
      << "\" class=\"cv\">" << escape_markup(b.value_text) << "</text>\n";
}

/// A chart in its own block (id `c.id`): legend, then the bars; a line saying so when there is
/// nothing to draw.
std::string svg_chart(chart c) {
    std::ostringstream s;
    s << "<div id=\"" << c.id << "\" class=\"chart-box\">";
    const std::string shown_note = keep_most_telling(c);
    if (c.bars.empty()) {
        s << "<p class=\"muted\">" << escape_markup(c.title)
          << ": nothing to draw in this run.</p></div>\n";
        return s.str();
    }
    // Labels are right-aligned against the plot: 430 px holds about 70 characters at 11 px; a
    // longer one keeps its end (the variant and backend tell cases apart) after an ellipsis.
    constexpr std::size_t max_label = 70;
    std::size_t longest_value = 0;
    for (auto& b : c.bars) {
        if (b.label.size() > max_label)
            b.label = "\xE2\x80\xA6" + b.label.substr(b.label.size() - (max_label - 1));
        longest_value = std::max(longest_value, b.value_text.size());
    }
    const int label_w = 430, plot_w = 420, row_h = 16, top = 4;
    const int width = label_w + plot_w + 12 + static_cast<int>(longest_value) * 7;
    const int axis_y = top + static_cast<int>(c.bars.size()) * row_h + 2;
    const int height = axis_y + 38;
    const scale sc = make_scale(c, label_w, plot_w);
    s << "<p class=\"ct\">" << escape_markup(c.title + shown_note) << "</p>" << legend_html(c)
      << "<figure class=\"chart\"><svg xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" width=\""
      << width << "\" height=\"" << height << "\" viewBox=\"0 0 " << width << ' ' << height
      << "\">\n<title>" << escape_markup(c.title) << "</title>\n";
    svg_axis(s, c, sc, axis_y, top);
    for (std::size_t i = 0; i < c.bars.size(); ++i)
        svg_row(s, c, sc, c.bars[i], top + static_cast<int>(i) * row_h, row_h);
    if (c.kind == axis_kind::ratio) // 1: numerator and denominator alike; bars grow from it
        s << "<line class=\"one\" x1=\"" << fmt("%.1f", sc.x(1)) << "\" x2=\""
          << fmt("%.1f", sc.x(1)) << "\" y1=\"" << top << "\" y2=\"" << axis_y << "\"/>\n";
    s << "</svg></figure></div>\n";
    return s.str();
}

/// The lines a bound draws: its min and max, its value's tolerance band, or the value it equals.
std::vector<double> bound_marks(const json& b) {
    std::vector<double> out;
    if (!b.is_object())
        return out;
    const double v = num(b, "value");
    if (std::isfinite(v)) {
        const double tol =
            b.contains("rel_tol") ? num(b, "rel_tol", 0) * std::abs(v) : num(b, "abs_tol", 0);
        return tol > 0 ? std::vector<double>{v - tol, v + tol} : std::vector<double>{v};
    }
    for (const char* k : {"equals", "min", "max"})
        if (std::isfinite(num(b, k)))
            out.push_back(num(b, k));
    return out;
}

std::string series_of(const std::string& backend) {
    return backend == "cuda" ? "cuda" : "cpu";
}

/// Per-sample times: the median of each timed series of each case, its backends side by side.
chart sample_time_chart(const case_grid& g) {
    chart c{"chart-sample-times",
            "Timed samples: the median of each series, per case",
            "seconds per sample (median of the series)",
            axis_kind::seconds,
            {}};
    for (const auto& row : g.rows) {
        std::vector<std::string> names; // the row's series, in order of first appearance
        std::map<std::string, std::map<std::string, std::vector<double>>>
            values; // series -> backend -> samples
        for (const auto& b : g.backends)
            if (const json* r = g.find(row, b); r != nullptr && charted(*r, evidence::timing))
                for (auto& [name, v] : timed_series(obj(*r, "result"))) {
                    if (values.count(name) == 0)
                        names.push_back(name);
                    values[name][b] = std::move(v);
                }
        for (const auto& name : names)
            for (const auto& [b, v] : values[name]) {
                const double m = median(v);
                const std::string n = std::to_string(v.size());
                c.bars.push_back({cat(row.first, ".", row.second, " ", name, " [", b, "]"),
                                  series_of(b), m, cat(human_seconds(m), " (n=", n, ")"),
                                  cat(b, " ", row.first, ".", row.second, " ", name, ": median ",
                                      human_seconds(m), " of ", n, " samples")});
            }
    }
    return c;
}

/// Whole-process times: every case that ran, start-up to exit.
chart process_time_chart(const case_grid& g) {
    chart c{"chart-process-times",
            "Process wall time per case: start-up, set-up, warm-up and every sample",
            "seconds of wall-clock time per case process",
            axis_kind::seconds,
            {}};
    for (const auto& row : g.rows)
        for (const auto& b : g.backends)
            if (const json* r = g.find(row, b); r != nullptr && charted(*r, evidence::timing)) {
                const double t = num(obj(*r, "process"), "wall_seconds");
                if (std::isfinite(t) && t > 0)
                    c.bars.push_back(
                        {row.first + "." + row.second + " [" + b + "]", series_of(b), t,
                         human_seconds(t),
                         b + " " + row.first + "." + row.second + ": " + human_seconds(t)});
            }
    return c;
}

/// The ratios scenario.json declares, as this run measured them (summary.json): a scenario
/// that declares none has no bar.
chart ratio_chart(const run_data& run) {
    chart c{"chart-ratios",
            "Ratios scenario.json declares: median of one variant's series / another's",
            "ratio of the medians, numerator / denominator (x)",
            axis_kind::ratio,
            {},
            "bound in the profile"};
    for (const auto& r : run.ratios) {
        const double x = num(r, "ratio");
        if (!std::isfinite(x) || x <= 0)
            continue;
        const std::string b = str(r, "backend"), key = cat(str(r, "scenario"), ".", str(r, "name"));
        const std::string pair = cat(str(r, "numerator"), " / ", str(r, "denominator"));
        std::string title = cat(b, " ", key, " = ", pair, ", medians of ", str(r, "samples"), ": ",
                                fmt("%.4g", num(r, "median_numerator")), " / ",
                                fmt("%.4g", num(r, "median_denominator")), " = ", fmt("%.4g", x));
        if (r.contains("bound"))
            title += cat("; bound ", r["bound"].dump(), " (", str(r, "profile"),
                         "): ", str(r, "verdict"));
        c.bars.push_back({cat(key, " [", b, "]"), r.value("failing", false) ? "out" : series_of(b),
                          x, cat(fmt("%.3g", x), "x = ", pair), title,
                          bound_marks(r.value("bound", json()))});
    }
    return c;
}

/// Memory peaks against their baseline bounds: the backend's tracked allocations and the
/// process's peak RSS.
chart memory_chart(const run_data& run) {
    chart c{"chart-memory",
            "Memory peaks against their baseline bounds",
            "bytes at the peak",
            axis_kind::bytes,
            {}};
    for (const auto& r : run.cases) {
        if (!charted(r, evidence::device_memory))
            continue;
        const json expected =
            r.contains("baseline") ? obj(obj(r["baseline"], "entry"), "memory") : json::object();
        const std::string key = str(r, "case");
        const double tracked = num(obj(obj(r, "result"), "memory"), "tracked_peak_bytes");
        if (std::isfinite(tracked) && tracked > 0) {
            // A bound per a measurement (a fraction of the device's memory) is drawn in bytes:
            // the fraction times this case's value of the measurement, when it has one.
            const json bound = expected.value("tracked_peak_bytes", json());
            std::vector<double> marks = bound_marks(bound);
            if (bound.is_object() && bound.contains("per")) {
                const std::string per = str(bound, "per");
                const double by =
                    num(obj(obj(obj(r, "result"), "measurements"), per.c_str()), "value");
                for (double& m : marks)
                    m *= by;
                if (!(std::isfinite(by) && by > 0))
                    marks.clear();
            }
            c.bars.push_back({key, "tracked", tracked, human_bytes(tracked),
                              "tracked peak " + key + ": " + human_bytes(tracked), marks});
        }
        const double rss = num(obj(r, "process"), "peak_rss_bytes");
        if (std::isfinite(rss) && rss > 0)
            c.bars.push_back({key, "rss", rss, human_bytes(rss),
                              "peak RSS " + key + ": " + human_bytes(rss),
                              bound_marks(expected.value("peak_rss_bytes", json()))});
    }
    return c;
}

/// One line when no CUDA case put anything in the charts, saying why (the reason a group of
/// unsupported cases shares, once); empty when a GPU case ran.
std::string no_gpu_line(const run_data& run) {
    int cuda = 0, unsupported = 0;
    std::set<std::string> reasons;
    for (const auto& r : run.cases) {
        if (str(r, "backend") != "cuda")
            continue;
        if (charted(r, evidence::timing) || charted(r, evidence::device_memory))
            return "";
        ++cuda;
        if (str(r, "verdict") == "UNSUPPORTED") {
            ++unsupported;
            reasons.insert(str(r, "reason"));
        }
    }
    std::string text = "No GPU case ran.";
    if (cuda == 0)
        text += " This run selected no CUDA case.";
    if (unsupported > 0)
        text += " " + std::to_string(unsupported) + " CUDA case(s) UNSUPPORTED" +
                (reasons.size() == 1 ? ": " + *reasons.begin() : "") + ".";
    if (cuda > unsupported)
        text += " " + std::to_string(cuda - unsupported) +
                " CUDA case(s) recorded no GPU timing or device memory.";
    return "<p class=\"muted\" id=\"no-gpu\">" + escape_markup(text) +
           " The charts show CPU cases only.</p>\n";
}

std::string pre_json(const json& j) {
    return "<pre>" + escape_markup(j.dump(2)) + "</pre>";
}

const char* html_style = R"CSS(
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5em;color:#1b1f24;
background:#fff}
h1{font-size:1.5em;margin:0 0 .3em}
h2{font-size:1.2em;margin:1.6em 0 .5em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:4px 0}
td,th{border:1px solid #d0d7de;padding:2px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa}.muted{color:#656d76}
.v{display:inline-block;padding:0 6px;border-radius:3px;font-weight:600;font-size:12px}
.pass{background:#dafbe1;color:#116329}.fail{background:#ffebe9;color:#a40e26}
.warn{background:#fff8c5;color:#7d4e00}.skip{background:#eaeef2;color:#57606a}
.grid td.cell{text-align:center}.grid a{text-decoration:none}
details{border:1px solid #d0d7de;border-radius:4px;margin:4px 0;padding:2px 8px}
summary{cursor:pointer}
pre{background:#f6f8fa;padding:6px;overflow:auto;max-height:24em;white-space:pre-wrap}
td.values{font-family:ui-monospace,monospace;font-size:12px}
.chart{margin:0 0 1.2em}.chart text{font:11px system-ui,sans-serif}
.ct{font-weight:600;margin:1em 0 0}
.chart .cl{text-anchor:end}.chart .cv,.chart .ca{fill:#57606a}
.chart .tv{fill:#57606a;text-anchor:middle;font-size:10px}
.b-cpu,.k-cpu{fill:#0969da;background:#0969da}.b-cuda,.k-cuda{fill:#1a7f37;background:#1a7f37}
.b-out,.k-out{fill:#cf222e;background:#cf222e}.b-tracked,.k-tracked{fill:#bf8700;background:#bf8700}
.b-rss,.k-rss{fill:#8c959f;background:#8c959f}.k-bound{background:#a40e26;width:3px!important}
.bound{stroke:#a40e26;stroke-width:2}.axis,.one{stroke:#57606a}.tick{stroke:#eaeef2}
.legend{margin:.2em 0}.legend .key{display:inline-block;width:10px;height:10px;margin:0 4px 0 12px}
.finding{margin:.3em 0}.finding.error summary b{color:#b00020}.finding.warning summary b{color:#8a5a00}
.finding dl{margin:.3em 0 .3em 1.5em}.finding dt{font-weight:bold;float:left;width:6em}.finding dd{margin-left:6.5em}
)CSS";
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

std::string html_charts(const run_data& run, const case_grid& g) {
    return "<h2>Charts</h2>\n" + no_gpu_line(run) + svg_chart(sample_time_chart(g)) +
           svg_chart(process_time_chart(g)) + svg_chart(ratio_chart(run)) +
           svg_chart(memory_chart(run));
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
        const double m = median(values);
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
      << facts_table(result, "measurements", "measurement", true) << checks_table(result);
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
    h << html_header(run) << html_machine(run) << html_verdict_grid(run, grid)
      << html_charts(run, grid);
    h << "<h2>Cases</h2>\n<div id=\"cases\">\n";
    for (const auto& r : run.cases)
        h << case_details(r);
    h << "</div>\n<footer class=\"muted\"><p>Rendered from results.jsonl by <code>pitfall "
         "report</code>, "
      << escape_markup(utc_now("%Y-%m-%dT%H:%M:%SZ")) << ".</p></footer>\n</body></html>\n";
    return h.str();
}

// ---- matrix: several runs side by side ---------------------------------------------------

namespace {
/// A version number as text: 12040 -> "12.4" (CUDA), 91002 -> "9.10.2" (cuDNN, with patch_mod).
std::string cuda_version_text(const json& v, int major_div, int minor_div, int minor_mod,
                              int patch_mod) {
    if (!v.is_number_integer() || v.get<long long>() <= 0)
        return "";
    const long long n = v.get<long long>();
    return std::to_string(n / major_div) + "." + std::to_string(n / minor_div % minor_mod) +
           (patch_mod > 0 ? "." + std::to_string(n % patch_mod) : "");
}

/// A cell's name: a matrix cell's id, else from the run's fingerprint: the GPU (or "no GPU"),
/// CUDA runtime and cuDNN versions, then the run folder's last component, which keeps two cells
/// of one environment apart.
std::string cell_name(const run_data& run) {
    const json fp = fingerprint_summary(run);
    // A matrix cell by its id, and by its GPU where one answered (one cell on several GPUs).
    if (run.cell.is_object())
        return str(run.cell, "id", "?") +
               (fp.contains("device_name") ? " on " + str(fp, "device_name") : "");
    const auto version = [](const json& v, int major_div, int minor_div,
                            int minor_mod) -> std::string {
        const std::string text = cuda_version_text(v, major_div, minor_div, minor_mod, 0);
        return text.empty() ? "?" : text;
    };
    std::string gpu = fp.contains("device_name") && fp["device_name"].is_string()
                          ? fp["device_name"].get<std::string>()
                          : "no GPU";
    std::string dir = run.dir;
    while (dir.size() > 1 && dir.back() == '/')
        dir.pop_back();
    const auto slash = dir.rfind('/');
    return gpu + ", CUDA " + version(fp.value("cuda_runtime_version", json()), 1000, 10, 100) +
           ", cuDNN " + version(fp.value("cudnn_version", json()), 10000, 100, 100) + " (" +
           (slash == std::string::npos ? dir : dir.substr(slash + 1)) + ")";
}

struct matrix {
    std::vector<std::string> cells;
    std::vector<std::string> keys; ///< every case of any run, in order of first appearance
    /// key -> per cell: the record, or null when that run has no result for it
    std::map<std::string, std::vector<const json*>> at;
    std::vector<std::string> differing; ///< keys whose outcome or verdict differs between cells
};

/// A matrix cell's facts, one string each, as the cells table and "what differs" show them.
std::string arch_list(const json& archs) {
    std::string out;
    for (const auto& a : archs)
        if (a.is_string())
            out += (out.empty() ? "sm_" : " sm_") + a.get<std::string>();
    return out.empty() ? "none" : out;
}

using cell_fact = std::pair<const char*, std::string (*)(const run_data&)>;
const cell_fact cell_facts[] = {
    {"CUDA toolkit",
     [](const run_data& r) {
         const std::string v = str(obj(r.cell, "toolkit"), "version");
         const json cuda = obj(obj(r.cell, "cell"), "cuda");
         return (v.empty() ? str(cuda, "version", "?") : v) + " (" + str(cuda, "source", "?") + ")";
     }},
    {"cuDNN built / loaded",
     [](const run_data& r) {
         const std::string built = str(r.cell, "cudnn_compiled");
         const std::string loaded = cuda_version_text(
             fingerprint_summary(r).value("cudnn_version", json()), 10000, 100, 100, 100);
         if (built.empty() && loaded.empty())
             return str(obj(obj(r.cell, "cell"), "cudnn"), "version", "?") + " (not built)";
         return (built.empty() ? "?" : built) + " / " + (loaded.empty() ? "?" : loaded);
     }},
    {"host compiler",
     [](const run_data& r) {
         const json cell = obj(r.cell, "cell");
         std::string text = str(cell, "host_compiler", "?");
         for (const auto& f : arr(cell, "cuda_flags"))
             text += " " + (f.is_string() ? f.get<std::string>() : f.dump());
         return text;
     }},
    {"toolkit refuses",
     [](const run_data& r) {
         const json probed = obj(obj(r.cell, "architectures"), "probed");
         json refused = json::array();
         for (const auto& [arch, probe] : probed.items())
             if (probe.is_object() && !probe.value("accepted", true))
                 refused.push_back(arch);
         return probed.empty() ? std::string("not probed") : arch_list(refused);
     }},
    {"built (SASS; PTX)",
     [](const run_data& r) {
         const json built = obj(r.cell, "archs_built");
         if (built.empty())
             return std::string("nothing");
         if (built.contains("error"))
             return "unknown: " + str(built, "error");
         return arch_list(arr(built, "sass")) + "; PTX " + arch_list(arr(built, "ptx"));
     }},
    {"cell outcome",
     [](const run_data& r) {
         std::string text = str(r.cell, "outcome", "?");
         if (text != "ran" && r.cell.contains("stage"))
             text += " at " + str(r.cell, "stage") +
                     (r.cell.contains("arch") ? " " + str(r.cell, "arch") : "");
         if (text != "ran" && !str(r.cell, "message").empty())
             text += ": " + str(r.cell, "message");
         return text;
     }},
    {"first CUDA call", [](const run_data& r) { return str(r.cell, "cuda_error", "-"); }},
    {"verdicts", [](const run_data& r) { return str(r.cell, "verdicts_text", "-"); }},
    {"as ci/matrix.json expects",
     [](const run_data& r) {
         std::string text;
         for (const auto& p : arr(r.cell, "expectation_problems"))
             text +=
                 (text.empty() ? "no: " : "; ") + (p.is_string() ? p.get<std::string>() : p.dump());
         return text.empty() ? std::string("yes") : text;
     }},
};

bool any_cell(const std::vector<run_data>& runs) {
    return std::any_of(runs.begin(), runs.end(),
                       [](const run_data& r) { return r.cell.is_object(); });
}

/// Facts (not verdicts or expectations: those follow from the rest) whose text differs between
/// cells.
std::vector<const cell_fact*> differing_facts(const std::vector<run_data>& runs) {
    std::vector<const cell_fact*> out;
    for (const auto& fact : cell_facts) {
        if (std::string(fact.first) == "verdicts" ||
            std::string(fact.first) == "as ci/matrix.json expects")
            continue;
        std::set<std::string> seen;
        for (const auto& r : runs)
            seen.insert(fact.second(r));
        if (seen.size() > 1)
            out.push_back(&fact);
    }
    return out;
}

std::string cell_text(const json* r) {
    return r == nullptr ? "-" : str(*r, "verdict") + " (" + outcome_line(*r) + ")";
}

matrix build_matrix(const std::vector<run_data>& runs) {
    matrix m;
    for (const auto& run : runs)
        m.cells.push_back(cell_name(run));
    for (std::size_t c = 0; c < runs.size(); ++c)
        for (const auto& r : runs[c].cases) {
            const std::string key = str(r, "case");
            auto [it, added] =
                m.at.try_emplace(key, std::vector<const json*>(runs.size(), nullptr));
            if (added)
                m.keys.push_back(key);
            it->second[c] = &r;
        }
    for (const auto& key : m.keys) {
        std::set<std::string> seen;
        const auto& row = m.at[key];
        for (std::size_t c = 0; c < row.size(); ++c)
            if (row[c] != nullptr ||
                !runs[c].cases.empty()) // a cell that never ran says why once, in its facts
                seen.insert(cell_text(row[c]));
        if (seen.size() > 1)
            m.differing.push_back(key);
    }
    return m;
}
} // namespace

namespace {
/// One difference, grouped: each value once, with the cells that have it, in order of first
/// appearance ("sm_70: cuda13.0-host, cuda13.2-wheels"); cells `skip` leaves out are not named.
using value_groups = std::vector<std::pair<std::string, std::vector<std::string>>>;
template <class ValueOf>
value_groups group_cells(const std::vector<std::string>& cells, ValueOf value_of,
                         const std::vector<bool>& skip = {}) {
    value_groups groups;
    for (std::size_t c = 0; c < cells.size(); ++c) {
        if (c < skip.size() && skip[c])
            continue;
        const std::string v = value_of(c);
        auto it =
            std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == v; });
        if (it == groups.end())
            groups.push_back({v, {cells[c]}});
        else
            it->second.push_back(cells[c]);
    }
    return groups;
}

/// Cells that never ran (a compile failure): a case row leaves them out.
std::vector<bool> never_ran(const std::vector<run_data>& runs) {
    std::vector<bool> out;
    out.reserve(runs.size());
    for (const auto& r : runs)
        out.push_back(r.cases.empty());
    return out;
}
} // namespace

std::string render_matrix_markdown(const std::vector<run_data>& runs) {
    const matrix m = build_matrix(runs);
    std::ostringstream md;
    md << "## pitfall matrix: " << runs.size() << " cells, " << m.keys.size() << " cases, "
       << m.differing.size() << " differ\n\n";
    if (any_cell(runs)) {
        md << "### Cells\n\n| cell |";
        for (const auto& fact : cell_facts)
            md << ' ' << fact.first << " |";
        md << "\n|---|";
        for (std::size_t i = 0; i < std::size(cell_facts); ++i)
            md << "---|";
        md << '\n';
        for (std::size_t c = 0; c < runs.size(); ++c) {
            md << "| " << md_inline(m.cells[c], 80) << " |";
            for (const auto& fact : cell_facts)
                md << ' ' << md_inline(fact.second(runs[c]), 160) << " |";
            md << '\n';
        }
        md << "\n### Cases\n\n";
    }
    md << "| case |";
    for (const auto& c : m.cells)
        md << ' ' << md_inline(c, 80) << " |";
    md << "\n|---|";
    for (std::size_t i = 0; i < m.cells.size(); ++i)
        md << "---|";
    md << '\n';
    for (const auto& key : m.keys) {
        md << "| `" << md_code(key) << "` |";
        for (const json* r : m.at.at(key))
            md << ' ' << md_inline(cell_text(r), 80) << " |";
        md << '\n';
    }
    md << "\n### What differs between cells\n\n";
    const auto facts = differing_facts(runs);
    const auto markdown_groups = [&](const value_groups& groups) {
        for (std::size_t g = 0; g < groups.size(); ++g) {
            md << (g ? "; " : "") << "**" << md_inline(groups[g].first, 160) << "**: ";
            for (std::size_t i = 0; i < groups[g].second.size(); ++i)
                md << (i ? ", " : "") << md_inline(groups[g].second[i], 80);
        }
        md << '\n';
    };
    for (const cell_fact* fact : facts) {
        md << "- " << fact->first << ": ";
        markdown_groups(group_cells(m.cells, [&](std::size_t c) { return fact->second(runs[c]); }));
    }
    if (m.differing.empty() && facts.empty())
        md << "Nothing: every cell has the same facts, and every case the same verdict and "
              "outcome.\n";
    const std::vector<bool> skip = never_ran(runs);
    for (const auto& key : m.differing) {
        md << "- `" << md_code(key) << "`: ";
        const auto& row = m.at.at(key);
        markdown_groups(group_cells(
            m.cells, [&](std::size_t c) { return cell_text(row[c]); }, skip));
    }
    return md.str();
}

std::string render_matrix_html(const std::vector<run_data>& runs) {
    const matrix m = build_matrix(runs);
    const std::set<std::string> differing(m.differing.begin(), m.differing.end());
    std::ostringstream h;
    h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>pitfall "
         "matrix</title>\n<style>"
      << html_style
      << "tr.differs td:first-child{border-left:4px solid #cf222e}</style></head>\n<body>\n"
      << "<h1>pitfall matrix</h1>\n<p>" << runs.size() << " cells, " << m.keys.size() << " cases; "
      << m.differing.size() << " differ between cells (marked red).</p>\n";
    if (any_cell(runs)) {
        h << "<h2>Cells</h2>\n<table class=\"grid\" id=\"cells\"><tr><th>cell</th>";
        for (const auto& fact : cell_facts)
            h << "<th>" << escape_markup(fact.first) << "</th>";
        h << "</tr>\n";
        for (std::size_t c = 0; c < runs.size(); ++c) {
            const std::string outcome = str(runs[c].cell, "outcome", "?");
            h << "<tr><td title=\"" << escape_markup(str(obj(runs[c].cell, "cell"), "doc"))
              << "\"><code>" << escape_markup(m.cells[c]) << "</code></td>";
            for (const auto& fact : cell_facts) {
                const std::string text = fact.second(runs[c]);
                if (std::string(fact.first) == "cell outcome")
                    h << "<td><span class=\"v "
                      << verdict_class(outcome == "ran"       ? "PASS"
                                       : outcome == "skipped" ? "UNSUPPORTED"
                                                              : "FAIL")
                      << "\">" << escape_markup(outcome) << "</span> "
                      << escape_markup(text.substr(std::min(text.size(), outcome.size())))
                      << "</td>";
                else
                    h << "<td>" << escape_markup(text) << "</td>";
            }
            h << "</tr>\n";
        }
        h << "</table>\n<h2>Cases</h2>\n";
    }
    h << "<table class=\"grid\" id=\"matrix\"><tr><th>case</th>";
    for (std::size_t c = 0; c < m.cells.size(); ++c)
        h << "<th title=\"" << escape_markup(runs[c].dir) << "\">" << escape_markup(m.cells[c])
          << "</th>";
    h << "</tr>\n";
    for (const auto& key : m.keys) {
        h << "<tr" << (differing.count(key) != 0 ? " class=\"differs\"" : "") << "><td><code>"
          << escape_markup(key) << "</code></td>";
        for (const json* r : m.at.at(key)) {
            if (r == nullptr) {
                h << "<td class=\"cell muted\">-</td>";
                continue;
            }
            const std::string verdict = str(*r, "verdict");
            h << "<td class=\"cell\" title=\"" << escape_markup(str(*r, "reason"))
              << "\"><span class=\"v " << verdict_class(verdict) << "\">" << escape_markup(verdict)
              << "</span><br><small>" << escape_markup(outcome_line(*r)) << "</small></td>";
        }
        h << "</tr>\n";
    }
    h << "</table>\n<h2>What differs between cells</h2>\n<ul id=\"differences\">\n";
    const auto facts = differing_facts(runs);
    const auto html_groups = [&](const value_groups& groups) {
        for (std::size_t g = 0; g < groups.size(); ++g) {
            h << (g ? "; " : "") << "<b>" << escape_markup(groups[g].first) << "</b>: ";
            for (std::size_t i = 0; i < groups[g].second.size(); ++i)
                h << (i ? ", " : "") << escape_markup(groups[g].second[i]);
        }
        h << "</li>\n";
    };
    for (const cell_fact* fact : facts) {
        h << "<li>" << escape_markup(fact->first) << ": ";
        html_groups(group_cells(m.cells, [&](std::size_t c) { return fact->second(runs[c]); }));
    }
    const std::vector<bool> skip = never_ran(runs);
    for (const auto& key : m.differing) {
        h << "<li><code>" << escape_markup(key) << "</code>: ";
        const auto& row = m.at.at(key);
        html_groups(group_cells(
            m.cells, [&](std::size_t c) { return cell_text(row[c]); }, skip));
    }
    if (m.differing.empty() && facts.empty())
        h << "<li>Nothing: every cell has the same facts, and every case the same verdict and "
             "outcome.</li>\n";
    h << "</ul>\n</body></html>\n";
    return h.str();
}

// ---- fleet: node folders side by side ------------------------------------------------------

namespace {
/// cuDNN's version number as text: 9.x and later encode major x 10000 (91002 -> 9.10.2), 8.x
/// and earlier major x 1000 (8902 -> 8.9.2).
std::string cudnn_version_text(const json& v) {
    if (v.is_number_integer() && v.get<long long>() > 0 && v.get<long long>() < 9000)
        return cuda_version_text(v, 1000, 100, 10, 100);
    return cuda_version_text(v, 10000, 100, 100, 100);
}

/// What makes two nodes' runs comparable, from the run's fingerprint: the GPU model, the
/// driver (its release, as NVML or the kernel module tell it, and the CUDA version it
/// supports), the CUDA runtime and cuDNN ("NVIDIA H100 80GB HBM3, driver 580.65.06 (CUDA 13.0),
/// CUDA 13.0, cuDNN 9.10.2"). Two releases of one driver branch are two groups: a fix release
/// is exactly the change a fleet run is for.
std::string fingerprint_group(const run_data& run) {
    const json fp = fingerprint_summary(run);
    const std::string gpu = str(fp, "device_name");
    const json libraries = obj(obj(run.header, "fingerprint"), "libraries");
    std::string release = str(obj(libraries, "nvml"), "driver_version");
    if (release.empty())
        release = str(obj(obj(libraries, "driver"), "kernel_module"), "version");
    std::string driver =
        cuda_version_text(fp.value("cuda_driver_version", json()), 1000, 10, 100, 0);
    if (!release.empty())
        driver = release + (driver.empty() ? "" : " (CUDA " + driver + ")");
    const std::string runtime =
        cuda_version_text(fp.value("cuda_runtime_version", json()), 1000, 10, 100, 0);
    const std::string cudnn = cudnn_version_text(fp.value("cudnn_version", json()));
    return cat(gpu.empty() ? "no GPU" : gpu, ", ",
               driver.empty() ? "no driver" : "driver " + driver, ", ",
               runtime.empty() ? "no CUDA runtime" : "CUDA " + runtime, ", ",
               cudnn.empty() ? "no cuDNN" : "cuDNN " + cudnn);
}

/// "1 node", "3 nodes".
std::string counted(std::size_t n, const char* noun) {
    return cat(std::to_string(n), " ", noun, n == 1 ? "" : "s");
}

/// How the node's job ended, in one line: "ran", or the outcome with Slurm's state and reason
/// and the driver's message ("node_down (NODE_FAIL, reason: Not responding): ...").
std::string node_outcome(const run_data& node) {
    std::string text = str(node.node, "outcome", "?");
    if (text == "ran") {
        if (node.cases.empty())
            text += " (no run folder with cases)";
        return text;
    }
    std::string why = str(node.node, "slurm_state");
    if (const std::string reason = str(node.node, "reason"); !reason.empty() && reason != "None")
        why += (why.empty() ? "reason: " : ", reason: ") + reason;
    if (!why.empty())
        text += " (" + why + ")";
    if (const std::string message = str(node.node, "message"); !message.empty())
        text += ": " + message;
    return text;
}

/// The node's doctor headline: the first error's title, "CUDA work can run here", or why there
/// is none.
std::string node_doctor(const run_data& node) {
    if (!node.doctor_problem.empty())
        return "unreadable: " + node.doctor_problem;
    if (node.doctor.is_null())
        return "-";
    std::string headline = str(node.doctor, "headline");
    if (!headline.empty())
        return headline;
    const json usable = node.doctor.value("cuda_usable", json());
    return usable.is_boolean() && usable.get<bool>() ? "CUDA work can run here" : "-";
}

std::string verdict_counts_text(const run_data& run) {
    std::string text;
    for (const auto& [verdict, count] : verdict_counts(run))
        text += cat(text.empty() ? "" : ", ", std::to_string(count), " ", verdict);
    return text.empty() ? "-" : text;
}

/// A case where a node holds another value than most of its group: its value, and the value
/// most of the group holds (`majority`), or, on a tie, every other value with its nodes.
struct odd_case {
    std::string key;
    std::string here;
    bool majority = true;
    value_groups versus;
};
struct odd_node {
    std::size_t column; ///< of the fleet's matrix
    std::vector<odd_case> cases;
};

/// One fingerprint group of the nodes that ran.
struct fleet_group {
    std::string label;
    std::vector<std::size_t> columns;   ///< its nodes, as columns of the fleet's matrix
    std::vector<std::string> differing; ///< cases whose value is not the same on every node
    std::vector<value_groups> by_value; ///< differing[i]'s values, each with its nodes
    std::vector<odd_node> odd;          ///< most odd cases first
};

/// The nodes side by side: every node, and the ones that ran as a matrix grouped by fingerprint.
struct fleet_view {
    std::vector<std::string> names;  ///< every node, in the order given
    std::vector<std::string> groups; ///< every node's group label ("-": never ran)
    std::vector<run_data> ran;       ///< copies of the nodes with cases: the matrix points in
    matrix m;                        ///< cells: the names of `ran`
    std::vector<fleet_group> fingerprint_groups;
    std::size_t differing_within = 0; ///< distinct cases differing within some group
    /// Cases whose group values differ (2+ groups), each with its values and the groups
    /// (labels) holding each.
    std::vector<std::pair<std::string, value_groups>> between;
    /// The group most nodes are in, when one group holds more nodes than any other and at
    /// least two: the fleet's norm, from which a node of another group differs by fingerprint.
    std::optional<std::size_t> majority_group;
};

/// The values of `key` on `columns`, each once with its columns, in order of first appearance.
std::vector<std::pair<std::string, std::vector<std::size_t>>>
values_of(const matrix& m, const std::string& key, const std::vector<std::size_t>& columns) {
    std::vector<std::pair<std::string, std::vector<std::size_t>>> out;
    const auto& row = m.at.at(key);
    for (const std::size_t c : columns) {
        const std::string v = cell_text(row[c]);
        auto it = std::find_if(out.begin(), out.end(), [&](const auto& g) { return g.first == v; });
        if (it == out.end())
            out.emplace_back(v, std::vector<std::size_t>{c});
        else
            it->second.push_back(c);
    }
    return out;
}

std::size_t most_held(const std::vector<std::pair<std::string, std::vector<std::size_t>>>& vs) {
    std::size_t most = 0;
    for (const auto& v : vs)
        most = std::max(most, v.second.size());
    return most;
}

/// A group's value of a case, to compare groups: the value most of its nodes hold; on a tie,
/// the tied values ("PASS (ok) or FAIL (...)").
std::string group_value(const matrix& m, const std::string& key,
                        const std::vector<std::size_t>& columns) {
    const auto values = values_of(m, key, columns);
    const std::size_t most = most_held(values);
    std::string text;
    for (const auto& [v, held] : values)
        if (held.size() == most)
            text += (text.empty() ? "" : " or ") + v;
    return text;
}

void find_odd_nodes(fleet_group& g, const matrix& m) {
    std::map<std::size_t, std::vector<odd_case>> odd;
    for (const auto& key : m.keys) {
        const auto values = values_of(m, key, g.columns);
        if (values.size() < 2)
            continue;
        g.differing.push_back(key);
        value_groups named;
        for (const auto& [value, held] : values) {
            named.push_back({value, {}});
            for (const std::size_t col : held)
                named.back().second.push_back(m.cells[col]);
        }
        g.by_value.push_back(std::move(named));
        const std::size_t most = most_held(values);
        const auto top_count = std::count_if(
            values.begin(), values.end(), [&](const auto& v) { return v.second.size() == most; });
        for (std::size_t i = 0; i < values.size(); ++i) {
            const auto& [value, held] = values[i];
            if (top_count == 1 && held.size() == most)
                continue; // the majority: not odd
            odd_case c{key, value, top_count == 1, {}};
            for (std::size_t j = 0; j < values.size(); ++j) {
                if (j == i || (top_count == 1 && values[j].second.size() != most))
                    continue;
                std::vector<std::string> names;
                for (const std::size_t col : values[j].second)
                    names.push_back(m.cells[col]);
                c.versus.push_back({values[j].first, top_count == 1 ? std::vector<std::string>{}
                                                                    : std::move(names)});
            }
            for (const std::size_t col : held)
                odd[col].push_back(c);
        }
    }
    for (const std::size_t col : g.columns)
        if (auto it = odd.find(col); it != odd.end())
            g.odd.push_back({col, std::move(it->second)});
    std::stable_sort(g.odd.begin(), g.odd.end(), [](const odd_node& a, const odd_node& b) {
        return a.cases.size() > b.cases.size();
    });
}

fleet_view build_fleet(const std::vector<run_data>& nodes) {
    fleet_view f;
    std::vector<std::string> ran_names;
    for (const auto& node : nodes) {
        f.names.push_back(str(node.node, "node", "?"));
        if (node.cases.empty()) { // never ran (or ran nothing): listed, not compared
            f.groups.emplace_back("-");
            continue;
        }
        f.groups.push_back(fingerprint_group(node));
        f.ran.push_back(node);
        ran_names.push_back(f.names.back());
    }
    f.m = build_matrix(f.ran);
    f.m.cells = ran_names;
    for (std::size_t c = 0; c < f.ran.size(); ++c) {
        const std::string label = fingerprint_group(f.ran[c]);
        auto it = std::find_if(f.fingerprint_groups.begin(), f.fingerprint_groups.end(),
                               [&](const fleet_group& g) { return g.label == label; });
        if (it == f.fingerprint_groups.end())
            f.fingerprint_groups.push_back({label, {c}, {}, {}, {}});
        else
            it->columns.push_back(c);
    }
    std::set<std::string> differing;
    for (auto& g : f.fingerprint_groups) {
        find_odd_nodes(g, f.m);
        differing.insert(g.differing.begin(), g.differing.end());
    }
    f.differing_within = differing.size();
    std::size_t largest = 0, holders = 0;
    for (std::size_t g = 0; g < f.fingerprint_groups.size(); ++g) {
        const std::size_t size = f.fingerprint_groups[g].columns.size();
        if (size > largest) {
            largest = size;
            holders = 1;
            f.majority_group = g;
        } else if (size == largest)
            ++holders;
    }
    if (holders != 1 || largest < 2 || f.fingerprint_groups.size() < 2)
        f.majority_group.reset();
    if (f.fingerprint_groups.size() > 1) {
        std::vector<std::string> labels;
        for (const auto& g : f.fingerprint_groups)
            labels.push_back(g.label);
        for (const auto& key : f.m.keys) {
            value_groups values = group_cells(labels, [&](std::size_t g) {
                return group_value(f.m, key, f.fingerprint_groups[g].columns);
            });
            if (values.size() > 1)
                f.between.emplace_back(key, std::move(values));
        }
    }
    return f;
}

/// How many of a node's odd cases a report lists before "and N more".
constexpr std::size_t odd_cases_listed = 20;

std::string fleet_title(const fleet_view& f) {
    return cat(counted(f.names.size(), "node"), " (", std::to_string(f.ran.size()), " ran), ",
               counted(f.fingerprint_groups.size(), "fingerprint group"), ", ",
               std::to_string(f.differing_within),
               f.differing_within == 1 ? " case differs" : " cases differ", " within a group");
}

/// Groups whose nodes agree on every case, and nodes alone in their group, named in one line
/// each (in words; `name` renders a node or group name for the format).
template <class Name> std::vector<std::string> quiet_groups(const fleet_view& f, Name name) {
    std::string agree, alone;
    for (const auto& g : f.fingerprint_groups) {
        if (g.columns.size() > 1 && g.differing.empty())
            agree += cat(agree.empty() ? "" : "; ", name(g.label), " (",
                         counted(g.columns.size(), "node"), ")");
        if (g.columns.size() == 1 && !f.majority_group) // else: named by fingerprint_outliers
            alone += cat(alone.empty() ? "" : "; ", name(f.m.cells[g.columns[0]]), " (",
                         name(g.label), ")");
    }
    std::vector<std::string> out;
    if (!agree.empty())
        out.push_back("Every node agrees with the rest of its group on every case in: " + agree +
                      ".");
    if (!alone.empty())
        out.push_back("Alone in its fingerprint group (nothing to compare it with): " + alone +
                      ".");
    return out;
}
/// How many cases `other` holds another value of (most of its nodes') than `norm`.
std::size_t cases_held_otherwise(const fleet_view& f, const fleet_group& other,
                                 const fleet_group& norm) {
    std::size_t differ = 0;
    for (const auto& key : f.m.keys)
        differ += group_value(f.m, key, other.columns) != group_value(f.m, key, norm.columns);
    return differ;
}

/// The nodes outside the fleet's majority group, one line each: their fingerprint against the
/// majority's, how many cases their group holds otherwise, and `pitfall doctor`'s headline (a
/// stub driver, a missing library: why a node's GPU is not the others'). `name` renders a node
/// name, `text` any other text, for the format.
template <class Name, class Text>
std::vector<std::string> fingerprint_outliers(const fleet_view& f, Name name, Text text) {
    std::vector<std::string> out;
    if (!f.majority_group)
        return out;
    const fleet_group& norm = f.fingerprint_groups[*f.majority_group];
    for (std::size_t g = 0; g < f.fingerprint_groups.size(); ++g) {
        if (g == *f.majority_group)
            continue;
        const fleet_group& other = f.fingerprint_groups[g];
        const std::size_t differ = cases_held_otherwise(f, other, norm);
        for (const std::size_t c : other.columns) {
            std::string line =
                cat(name(f.m.cells[c]), " differs by its fingerprint: ", text(other.label),
                    ", where most nodes (", std::to_string(norm.columns.size()), ") have ",
                    text(norm.label), "; ", counted(differ, "case"), differ == 1 ? " has" : " have",
                    " another verdict or outcome than theirs");
            if (const std::string doctor = node_doctor(f.ran[c]); doctor != "-")
                line += "; pitfall doctor: " + text(doctor);
            out.push_back(line + ".");
        }
    }
    return out;
}
} // namespace

std::string render_fleet_markdown(const std::vector<run_data>& nodes) {
    const fleet_view f = build_fleet(nodes);
    std::ostringstream md;
    const auto node_name = [](const std::string& n) { return "`" + md_code(n) + "`"; };
    const auto names_of = [&](const std::vector<std::string>& names) {
        std::string text;
        for (const auto& n : names)
            text += (text.empty() ? "" : ", ") + md_inline(n, 80);
        return text;
    };
    const auto markdown_groups = [&](const value_groups& groups) {
        for (std::size_t g = 0; g < groups.size(); ++g)
            md << (g ? "; " : "") << "**" << md_inline(groups[g].first, 160)
               << "**: " << names_of(groups[g].second);
        md << '\n';
    };
    md << "## pitfall fleet: " << fleet_title(f) << "\n\n### Which node differs\n\n";
    if (f.differing_within == 0) {
        md << (std::any_of(f.fingerprint_groups.begin(), f.fingerprint_groups.end(),
                           [](const fleet_group& g) { return g.columns.size() > 1; })
                   ? "Nothing: in every fingerprint group, every node has the same verdict and "
                     "outcome in every case.\n"
                   : "Nothing to compare: no fingerprint group has two nodes that ran.\n")
           << '\n';
    }
    for (const auto& g : f.fingerprint_groups) {
        if (g.differing.empty())
            continue;
        md << "#### " << md_inline(g.label, 160) << ": " << counted(g.columns.size(), "node")
           << " (";
        for (std::size_t i = 0; i < g.columns.size(); ++i)
            md << (i ? ", " : "") << node_name(f.m.cells[g.columns[i]]);
        md << ")\n\n";
        for (const auto& odd : g.odd) {
            md << node_name(f.m.cells[odd.column]) << " differs from the other "
               << counted(g.columns.size() - 1, "node") << " of its group in "
               << counted(odd.cases.size(), "case") << ":\n\n";
            for (std::size_t i = 0; i < odd.cases.size() && i < odd_cases_listed; ++i) {
                const odd_case& c = odd.cases[i];
                md << "- `" << md_code(c.key) << "`: **" << md_inline(c.here, 160) << "** here, ";
                if (c.majority)
                    md << "**" << md_inline(c.versus[0].first, 160) << "** on most of the group\n";
                else {
                    md << "no majority: ";
                    markdown_groups(c.versus);
                }
            }
            if (odd.cases.size() > odd_cases_listed)
                md << "- and " << odd.cases.size() - odd_cases_listed << " more\n";
            md << '\n';
        }
        md << "Each case that differs in this group, by value:\n\n";
        for (std::size_t i = 0; i < g.differing.size(); ++i) {
            md << "- `" << md_code(g.differing[i]) << "`: ";
            markdown_groups(g.by_value[i]);
        }
        md << '\n';
    }
    if (f.differing_within != 0)
        for (const auto& line :
             quiet_groups(f, [](const std::string& n) { return md_inline(n, 160); }))
            md << line << "\n\n";
    for (const auto& line :
         fingerprint_outliers(f, node_name, [](const std::string& s) { return md_inline(s, 200); }))
        md << line << "\n\n";

    md << "### Nodes\n\n| node | outcome | fingerprint group | doctor | verdicts |\n"
          "|---|---|---|---|---|\n";
    for (std::size_t n = 0; n < nodes.size(); ++n)
        md << "| " << node_name(f.names[n]) << " | " << md_inline(node_outcome(nodes[n]), 300)
           << " | " << md_inline(f.groups[n], 160) << " | " << md_inline(node_doctor(nodes[n]), 200)
           << " | " << md_inline(verdict_counts_text(nodes[n]), 160) << " |\n";

    if (f.fingerprint_groups.size() > 1) {
        md << "\n### Between groups\n\n";
        if (f.between.empty())
            md << "Nothing: every fingerprint group has the same verdict and outcome (most of "
                  "its nodes') in every case.\n";
        for (const auto& [key, values] : f.between) {
            md << "- `" << md_code(key) << "`: ";
            markdown_groups(values);
        }
    }

    md << "\n### Cases\n\n";
    if (f.ran.empty()) {
        md << "No node ran: no cases to show.\n";
        return md.str();
    }
    md << "| case |";
    for (const auto& c : f.m.cells)
        md << ' ' << md_inline(c, 80) << " |";
    md << "\n|---|";
    for (std::size_t i = 0; i < f.m.cells.size(); ++i)
        md << "---|";
    md << '\n';
    for (const auto& key : f.m.keys) {
        md << "| `" << md_code(key) << "` |";
        for (const json* r : f.m.at.at(key))
            md << ' ' << md_inline(cell_text(r), 80) << " |";
        md << '\n';
    }
    return md.str();
}

json render_fleet_json(const std::vector<run_data>& nodes) {
    const fleet_view f = build_fleet(nodes);
    const auto names_of = [&](const std::vector<std::size_t>& columns) {
        json names = json::array();
        for (const std::size_t c : columns)
            names.push_back(f.m.cells[c]);
        return names;
    };
    const auto optional_text = [](const std::string& text) {
        return text.empty() || text == "-" ? json() : json(text);
    };
    json doc = {{"schema", "pitfall.fleet-report/1"},
                {"title", fleet_title(f)},
                {"node_count", f.names.size()},
                {"ran_count", f.ran.size()},
                {"differing_within_groups", f.differing_within}};
    json node_list = json::array();
    for (std::size_t n = 0; n < nodes.size(); ++n) {
        json verdicts = json::object();
        for (const auto& [verdict, count] : verdict_counts(nodes[n]))
            verdicts[verdict] = count;
        node_list.push_back({{"node", f.names[n]},
                             {"outcome", str(nodes[n].node, "outcome", "?")},
                             {"outcome_text", node_outcome(nodes[n])},
                             {"fingerprint", optional_text(f.groups[n])},
                             {"doctor", optional_text(node_doctor(nodes[n]))},
                             {"verdicts", verdicts}});
    }
    doc["nodes"] = node_list;
    json groups = json::array();
    for (const auto& g : f.fingerprint_groups) {
        json odd_nodes = json::array();
        for (const auto& odd : g.odd) {
            json cases = json::array();
            for (const odd_case& c : odd.cases) {
                json others = json::array();
                if (!c.majority)
                    for (const auto& [value, names] : c.versus)
                        others.push_back({{"value", value}, {"nodes", names}});
                cases.push_back({{"case", c.key},
                                 {"here", c.here},
                                 {"majority", c.majority ? json(c.versus[0].first) : json()},
                                 {"tied", others}});
            }
            odd_nodes.push_back({{"node", f.m.cells[odd.column]}, {"cases", cases}});
        }
        groups.push_back({{"fingerprint", g.label},
                          {"nodes", names_of(g.columns)},
                          {"differing_cases", g.differing},
                          {"odd_nodes", odd_nodes}});
    }
    doc["groups"] = groups;
    json outliers = json::array();
    if (f.majority_group) {
        const fleet_group& norm = f.fingerprint_groups[*f.majority_group];
        doc["majority_fingerprint"] = norm.label;
        for (const auto& other : f.fingerprint_groups) {
            if (&other == &norm)
                continue;
            const std::size_t differ = cases_held_otherwise(f, other, norm);
            for (const std::size_t c : other.columns)
                outliers.push_back({{"node", f.m.cells[c]},
                                    {"fingerprint", other.label},
                                    {"cases_held_otherwise", differ},
                                    {"doctor", optional_text(node_doctor(f.ran[c]))}});
        }
    } else
        doc["majority_fingerprint"] = nullptr;
    doc["fingerprint_outliers"] = outliers;
    json between = json::array();
    for (const auto& [key, values] : f.between) {
        json by_group = json::object();
        for (const auto& [value, labels] : values)
            for (const auto& label : labels)
                by_group[label] = value;
        between.push_back({{"case", key}, {"by_group", by_group}});
    }
    doc["between_groups"] = between;
    json cases = json::array();
    for (const auto& key : f.m.keys) {
        json values = json::object();
        const auto& row = f.m.at.at(key);
        for (std::size_t c = 0; c < f.m.cells.size(); ++c)
            values[f.m.cells[c]] = cell_text(row[c]);
        cases.push_back({{"case", key}, {"by_node", values}});
    }
    doc["cases"] = cases;
    return doc;
}

std::string render_fleet_html(const std::vector<run_data>& nodes) {
    const fleet_view f = build_fleet(nodes);
    std::set<std::string> differing;
    for (const auto& g : f.fingerprint_groups)
        differing.insert(g.differing.begin(), g.differing.end());
    std::ostringstream h;
    const auto names_of = [&](const std::vector<std::string>& names) {
        std::string text;
        for (const auto& n : names)
            text += (text.empty() ? "" : ", ") + escape_markup(n);
        return text;
    };
    const auto html_groups = [&](const value_groups& groups) {
        for (std::size_t g = 0; g < groups.size(); ++g)
            h << (g ? "; " : "") << "<b>" << escape_markup(groups[g].first)
              << "</b>: " << names_of(groups[g].second);
    };
    h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>pitfall "
         "fleet</title>\n<style>"
      << html_style
      << "tr.differs td:first-child{border-left:4px solid #cf222e}</style></head>\n<body>\n"
      << "<h1>pitfall fleet</h1>\n<p id=\"title\">" << escape_markup(fleet_title(f))
      << " (cases differing within a group marked red).</p>\n"
      << "<h2>Which node differs</h2>\n<div id=\"within\">\n";
    if (f.differing_within == 0)
        h << "<p>"
          << (std::any_of(f.fingerprint_groups.begin(), f.fingerprint_groups.end(),
                          [](const fleet_group& g) { return g.columns.size() > 1; })
                  ? "Nothing: in every fingerprint group, every node has the same verdict and "
                    "outcome in every case."
                  : "Nothing to compare: no fingerprint group has two nodes that ran.")
          << "</p>\n";
    for (const auto& g : f.fingerprint_groups) {
        if (g.differing.empty())
            continue;
        h << "<h3>" << escape_markup(g.label) << ": " << counted(g.columns.size(), "node") << " (";
        for (std::size_t i = 0; i < g.columns.size(); ++i)
            h << (i ? ", " : "") << "<code>" << escape_markup(f.m.cells[g.columns[i]]) << "</code>";
        h << ")</h3>\n";
        for (const auto& odd : g.odd) {
            h << "<p class=\"odd\"><code>" << escape_markup(f.m.cells[odd.column])
              << "</code> differs from the other " << counted(g.columns.size() - 1, "node")
              << " of its group in " << counted(odd.cases.size(), "case") << ":</p>\n<ul>\n";
            for (std::size_t i = 0; i < odd.cases.size() && i < odd_cases_listed; ++i) {
                const odd_case& c = odd.cases[i];
                h << "<li><code>" << escape_markup(c.key) << "</code>: <b>" << escape_markup(c.here)
                  << "</b> here, ";
                if (c.majority)
                    h << "<b>" << escape_markup(c.versus[0].first) << "</b> on most of the group";
                else {
                    h << "no majority: ";
                    html_groups(c.versus);
                }
                h << "</li>\n";
            }
            if (odd.cases.size() > odd_cases_listed)
                h << "<li>and " << odd.cases.size() - odd_cases_listed << " more</li>\n";
            h << "</ul>\n";
        }
        h << "<p>Each case that differs in this group, by value:</p>\n<ul class=\"differences\">\n";
        for (std::size_t i = 0; i < g.differing.size(); ++i) {
            h << "<li><code>" << escape_markup(g.differing[i]) << "</code>: ";
            html_groups(g.by_value[i]);
            h << "</li>\n";
        }
        h << "</ul>\n";
    }
    if (f.differing_within != 0)
        for (const auto& line :
             quiet_groups(f, [](const std::string& n) { return escape_markup(n); }))
            h << "<p>" << line << "</p>\n";
    for (const auto& line : fingerprint_outliers(
             f, [](const std::string& n) { return "<code>" + escape_markup(n) + "</code>"; },
             [](const std::string& s) { return escape_markup(s); }))
        h << "<p class=\"outlier\">" << line << "</p>\n";
    h << "</div>\n<h2>Nodes</h2>\n<table class=\"grid\" id=\"nodes\"><tr><th>node</th>"
         "<th>outcome</th><th>fingerprint group</th><th>doctor</th><th>verdicts</th></tr>\n";
    for (std::size_t n = 0; n < nodes.size(); ++n) {
        const std::string outcome = str(nodes[n].node, "outcome", "?");
        const std::string text = node_outcome(nodes[n]);
        h << "<tr><td title=\"" << escape_markup(nodes[n].dir) << "\"><code>"
          << escape_markup(f.names[n]) << "</code></td><td><span class=\"v "
          << verdict_class(outcome == "ran" ? "PASS" : "FAIL") << "\">" << escape_markup(outcome)
          << "</span>" << escape_markup(text.substr(std::min(text.size(), outcome.size())))
          << "</td><td>" << escape_markup(f.groups[n]) << "</td><td>"
          << escape_markup(node_doctor(nodes[n])) << "</td><td>"
          << escape_markup(verdict_counts_text(nodes[n])) << "</td></tr>\n";
    }
    h << "</table>\n";
    if (f.fingerprint_groups.size() > 1) {
        h << "<h2>Between groups</h2>\n<ul id=\"between\">\n";
        if (f.between.empty())
            h << "<li>Nothing: every fingerprint group has the same verdict and outcome (most of "
                 "its nodes') in every case.</li>\n";
        for (const auto& [key, values] : f.between) {
            h << "<li><code>" << escape_markup(key) << "</code>: ";
            html_groups(values);
            h << "</li>\n";
        }
        h << "</ul>\n";
    }
    h << "<h2>Cases</h2>\n";
    if (f.ran.empty()) {
        h << "<p>No node ran: no cases to show.</p>\n</body></html>\n";
        return h.str();
    }
    h << "<table class=\"grid\" id=\"matrix\"><tr><th>case</th>";
    for (std::size_t c = 0; c < f.m.cells.size(); ++c)
        h << "<th title=\"" << escape_markup(fingerprint_group(f.ran[c])) << "\">"
          << escape_markup(f.m.cells[c]) << "</th>";
    h << "</tr>\n";
    for (const auto& key : f.m.keys) {
        h << "<tr" << (differing.count(key) != 0 ? " class=\"differs\"" : "") << "><td><code>"
          << escape_markup(key) << "</code></td>";
        for (const json* r : f.m.at.at(key)) {
            if (r == nullptr) {
                h << "<td class=\"cell muted\">-</td>";
                continue;
            }
            const std::string verdict = str(*r, "verdict");
            h << "<td class=\"cell\" title=\"" << escape_markup(str(*r, "reason"))
              << "\"><span class=\"v " << verdict_class(verdict) << "\">" << escape_markup(verdict)
              << "</span><br><small>" << escape_markup(outcome_line(*r)) << "</small></td>";
        }
        h << "</tr>\n";
    }
    h << "</table>\n</body></html>\n";
    return h.str();
}

status write_reports(const run_data& run) {
    const std::pair<const char*, std::string> files[] = {
        {report_json_name, render_json(run).dump(2) + "\n"},
        {report_junit_name, render_junit(run)},
        {report_markdown_name, detail::visible_controls(render_markdown(run))},
        {report_html_name, render_html(run)}};
    for (const auto& [name, text] : files)
        PITFALL_TRY(write_file_atomically(run.dir + "/" + name, text));
    return status::ok();
}

namespace {
/// A rendered report to standard output ("" or "-") or, whole and atomically, to `out`.
int emit(const std::string& text, const std::string& out) {
    if (out.empty() || out == "-") {
        std::cout << text;
        return exit_ok;
    }
    if (auto written = write_file_atomically(out, text); !written.is_ok()) {
        std::cerr << "pitfall: error: --out " << out << ": " << written.message() << '\n';
        return exit_bad_input;
    }
    std::cerr << "pitfall: wrote " << out << '\n';
    return exit_ok;
}
} // namespace

int report_run(const report_options& options) {
    // A page of HTML is for a browser: poured into a terminal it is a screenful of markup. An
    // explicit "--out -" (or a pipe) still gets it.
    if (options.format == "html" && options.out.empty() && ::isatty(STDOUT_FILENO) == 1) {
        std::cerr << "pitfall: error: the HTML report is not written to a terminal: give --out "
                     "FILE (or --out - to print it), or --format markdown to read it here"
                  << (options.merge_dirs.empty()
                          ? "; the run's own is " + options.run_dir + "/" + report_html_name
                          : std::string())
                  << '\n';
        return exit_bad_input;
    }
    if (!options.merge_dirs.empty()) {
        std::vector<run_data> runs;
        for (const auto& dir : options.merge_dirs) {
            auto one = load_cell_or_run(dir);
            if (!one.is_ok()) {
                std::cerr << "pitfall: error: --merge: " << one.error().message() << '\n';
                return exit_bad_input;
            }
            runs.push_back(std::move(one).value());
        }
        // Fleet node folders make a fleet report, of one node too; mixed with cells or runs
        // they would be compared across unlike things, so a mix is refused.
        const auto is_node = [](const run_data& r) { return r.node.is_object(); };
        if (std::any_of(runs.begin(), runs.end(), is_node)) {
            const auto other = std::find_if_not(runs.begin(), runs.end(), is_node);
            if (other != runs.end()) {
                const auto node = std::find_if(runs.begin(), runs.end(), is_node);
                std::cerr << "pitfall: error: --merge: " << node->dir
                          << " is a fleet node folder (node.json) but " << other->dir
                          << " is not: merge fleet node folders only with each other\n";
                return exit_bad_input;
            }
            return emit(options.format == "markdown"
                            ? detail::visible_controls(render_fleet_markdown(runs))
                        : options.format == "json" ? render_fleet_json(runs).dump(2) + "\n"
                                                   : render_fleet_html(runs),
                        options.out);
        }
        // One matrix cell is a matrix (a one-cell `pitfall matrix run`); one plain run is not.
        if (options.format == "json") {
            std::cerr << "pitfall: error: --format json: a merged report is JSON for fleet node "
                         "folders only; merge runs or matrix cells as html or markdown\n";
            return exit_bad_input;
        }
        if (runs.size() < 2 && !any_cell(runs)) {
            std::cerr << "pitfall: error: --merge needs two or more run folders, or matrix cell "
                         "or fleet node folders (see `pitfall help report`)\n";
            return exit_bad_input;
        }
        return emit(options.format == "markdown"
                        ? detail::visible_controls(render_matrix_markdown(runs))
                        : render_matrix_html(runs),
                    options.out);
    }
    auto run = load_run(options.run_dir);
    if (!run.is_ok()) {
        std::cerr << "pitfall: error: " << run.error().message() << '\n';
        return exit_bad_input;
    }
    std::string text;
    if (options.format == "html")
        text = render_html(run.value());
    else if (options.format == "junit")
        text = render_junit(run.value());
    else if (options.format == "markdown")
        text = detail::visible_controls(render_markdown(run.value()));
    else if (options.format == "json")
        text = render_json(run.value()).dump(2) + "\n";
    else {
        std::cerr << "pitfall: error: --format " << options.format
                  << ": expected html, junit, markdown or json\n";
        return exit_bad_input;
    }
    return emit(text, options.out);
}

} // namespace pitfall::runner
