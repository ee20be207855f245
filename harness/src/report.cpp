#include "report.hpp"

#include "model.hpp"
#include "run_folder.hpp"
#include "runner.hpp"
#include "pitfall/result_file.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

namespace pitfall::runner {
namespace {
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
    if (s < 1e-3)
        return fmt("%.1f", s * 1e6) + " us";
    if (s < 1)
        return fmt("%.2f", s * 1e3) + " ms";
    return fmt("%.2f", s) + " s";
}

/// The case's time for charts: the median of its first series in seconds, else the process's
/// wall time (a case that times nothing: the whole process is its cost).
double case_seconds(const json& record) {
    const double m = first_time_median(obj(record, "result"));
    return std::isfinite(m) ? m : num(obj(record, "process"), "wall_seconds");
}

/// The verdict table's severity of a verdict named in a record.
bool has_severity(const std::string& verdict, verdict_severity severity) {
    const auto v = verdict_named(verdict);
    return v && info(*v).severity == severity;
}
bool is_warning(const std::string& verdict) { return has_severity(verdict, verdict_severity::warning); }
bool is_error(const std::string& verdict) { return has_severity(verdict, verdict_severity::error); }

std::map<std::string, int> verdict_counts(const run_data& run) {
    std::map<std::string, int> counts;
    for (const auto& r : run.cases)
        ++counts[str(r, "verdict", "?")];
    if (!run.not_finished.empty())
        counts["NOT_RUN"] = static_cast<int>(run.not_finished.size());
    return counts;
}

/// The outcome a case observed, in one line: "ok", "cudaErrorMemoryAllocation@alloc", "SIGSEGV".
std::string outcome_line(const json& record) {
    const json o = obj(record, "observed");
    const std::string st = str(o, "status", "?");
    if (st == "error")
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

} // namespace

std::string escape_markup(const std::string& text) {
    std::string out;
    out.reserve(text.size() + 16);
    for (std::size_t i = 0; i < text.size(); ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
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
    run.ratios = folder.summary_ratios();
    return run;
}

status_or<run_data> load_cell_or_run(const std::string& dir) {
    const std::string cell_path = dir + "/cell.json";
    std::ifstream in(cell_path);
    if (!in)
        return load_run(dir);
    json cell;
    try {
        cell = json::parse(in);
    } catch (const json::exception& e) {
        return bad_run_input(cell_path + ": not JSON: " + e.what());
    }
    if (!cell.is_object() || !cell.contains("outcome") || !cell["outcome"].is_string())
        return bad_run_input(cell_path + ": no string field 'outcome': not a matrix cell");
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
        json c = {{"case", str(r, "case")},
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
                  {"baseline_profile", r.contains("baseline") ? r["baseline"].value("profile", json(nullptr)) : json(nullptr)},
                  {"log", str(r, "log")}};
        if (r.contains("attempts") && r["attempts"].is_array() && !r["attempts"].empty())
            c["attempts"] = r["attempts"];
        cases.push_back(std::move(c));
    }
    const bool failing = run_failing(run);
    return {{"schema", report_schema},
            {"generated_at", utc_now("%Y-%m-%dT%H:%M:%SZ")},
            {"run",
             {{"dir", run.dir},
              {"started_at", str(h, "at")},
              {"pitfall_version", str(h, "pitfall_version")},
              {"fingerprint_id", str(h, "fingerprint_id")},
              {"fingerprint_summary", fingerprint_summary(run)},
              {"profile", obj(h, "profile")},
              {"complete", run.not_finished.empty()},
              {"interrupted", run.interrupted},
              {"resumed", run.resumed}}},
            {"counts", verdict_counts(run)},
            {"verdicts", verdicts_json()},
            {"failing", failing},
            {"cases", cases},
            {"not_finished", run.not_finished},
            {"crashed_mid_way", run.started_unfinished},
            {"ratios", run.ratios}};
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
    const std::string counts = "tests=\"" + std::to_string(tests) + "\" failures=\"" + std::to_string(failures) +
                               "\" errors=\"" + std::to_string(errors) + "\" skipped=\"" + std::to_string(skipped) +
                               "\" time=\"" + fmt("%.3f", total) + "\"";
    x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    x << "<testsuites name=\"pitfall\" " << counts << ">\n";
    x << "  <testsuite name=\"pitfall\" " << counts << " timestamp=\"" << attr(str(run.header, "at")) << "\">\n";
    x << "    <properties>\n";
    x << "      <property name=\"pitfall.version\" value=\"" << attr(str(run.header, "pitfall_version")) << "\"/>\n";
    x << "      <property name=\"fingerprint_id\" value=\"" << attr(str(run.header, "fingerprint_id")) << "\"/>\n";
    x << "      <property name=\"profile\" value=\"" << attr(str(obj(run.header, "profile"), "name")) << "\"/>\n";
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
              << escape_markup("observed " + outcome_line(r) + "\n" + str(r, "reason")) << "</failure>\n";
        else if (v == "UNSUPPORTED")
            x << "      <skipped message=\"" << attr(str(r, "reason")) << "\"/>\n";
        x << "      <system-out>" << escape_markup(v + " (" + outcome_line(r) + "): " + str(r, "reason")) << "</system-out>\n";
        x << "    </testcase>\n";
    }
    const std::set<std::string> crashed(run.started_unfinished.begin(), run.started_unfinished.end());
    for (const auto& key : run.not_finished) {
        const auto first = key.find('.');
        const auto second = key.find('.', first + 1);
        const std::string scenario = key.substr(first + 1, second - first - 1);
        const std::string name = key.substr(0, first) + "." + key.substr(second + 1);
        const std::string why = crashed.count(key) != 0 ? "the run ended while this case ran (no result recorded)"
                                                        : "not run: the run ended before it";
        x << "    <testcase classname=\"" << attr(scenario) << "\" name=\"" << attr(name) << "\" time=\"0\">\n"
          << "      <error type=\"NOT_RUN\" message=\"" << attr(why) << "\"/>\n"
          << "    </testcase>\n";
    }
    x << "  </testsuite>\n</testsuites>\n";
    return x.str();
}

namespace {
/// Text safe in one Markdown table cell or list line: no newlines, pipes or HTML.
std::string md_inline(std::string text, std::size_t max = 200) {
    for (char& c : text)
        if (c == '\n' || c == '\r' || c == '\t')
            c = ' ';
    if (text.size() > max)
        text = text.substr(0, max - 3) + "...";
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

std::string render_markdown(const run_data& run) {
    const auto counts = verdict_counts(run);
    std::ostringstream m;
    const bool failing = run_failing(run);
    const json fp = fingerprint_summary(run);
    m << "## pitfall: " << (failing ? "failing" : !run.not_finished.empty() ? "incomplete" : "passing") << "\n\n";
    m << counts_line(counts) << " (" << run.cases.size() << " of " << run.cases.size() + run.not_finished.size()
      << " cases finished";
    if (run.resumed > 0)
        m << ", resumed " << run.resumed << "x";
    m << ")\n\n";
    m << "Profile **" << md_inline(str(obj(run.header, "profile"), "name", "none")) << "**; ";
    std::vector<std::string> facts;
    for (const char* k : {"gpu_model", "compute_capability", "driver_version", "cuda_runtime", "cudnn", "cpu_model", "os"})
        if (fp.contains(k) && !fp[k].is_null())
            facts.push_back(std::string(k) + " " + md_inline(fp[k].is_string() ? fp[k].get<std::string>() : fp[k].dump(), 60));
    for (std::size_t i = 0; i < facts.size(); ++i)
        m << (i ? ", " : "") << facts[i];
    m << (facts.empty() ? "no fingerprint facts" : "") << ".\n\n";

    m << "| verdict | cases |\n|---|---:|\n";
    for (const auto& [v, n] : counts)
        m << "| " << v << " | " << n << " |\n";

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
        m << "- `" << md_code(str(*r, "test", str(*r, "case"))) << "` **" << str(*r, "verdict") << "** ("
          << md_inline(outcome_line(*r), 60) << "): " << md_inline(str(*r, "reason")) << "\n";
    for (const auto& key : run.started_unfinished)
        m << "- `pitfall." << md_code(key) << "` **CRASH**: the run ended while it ran (no result recorded)\n";
    for (const auto& r : run.ratios)
        if (r.value("failing", false))
            m << "- ratio `" << md_code(str(r, "backend") + "." + str(r, "scenario") + "." + str(r, "name")) << "` = "
              << fmt("%.3g", num(r, "ratio")) << " outside " << md_inline(r.value("bound", json()).dump()) << "\n";

    m << "\n### Changed against the baseline\n\n";
    std::size_t changed = 0;
    for (const auto& r : run.cases) {
        const std::string v = str(r, "verdict");
        if (v == "PASS" || v == "UNSUPPORTED" || r.value("failing", false))
            continue;
        ++changed;
        m << "- `" << md_code(str(r, "test", str(r, "case"))) << "` " << v << ": " << md_inline(str(r, "reason")) << "\n";
    }
    for (const auto& r : run.cases) {
        const json timings = obj(r, "timings");
        for (const auto& [name, t] : timings.items())
            if (str(t, "verdict") == "FASTER") {
                ++changed;
                m << "- `" << md_code(str(r, "test", str(r, "case"))) << "` " << md_inline(name) << " FASTER: "
                  << md_inline(str(t, "reason")) << "\n";
            }
    }
    if (changed == 0)
        m << (failures.empty() ? "Nothing: every finished case met its baseline or was unsupported here.\n"
                               : "Nothing besides the failures above.\n");
    if (!run.not_finished.empty())
        m << "\n" << run.not_finished.size() << " selected case(s) have no result; `pitfall run --resume "
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

struct bar {
    std::string label;
    std::string series; ///< which colour: "cpu", "cuda", "speedup", "device", "host"
    double value;
    std::string title;  ///< hover text
    double bound = std::nan(""); ///< a marker line (memory bound), NaN for none
};

/// A horizontal bar chart as inline SVG; log scale when the values span more than 50x.
std::string svg_bars(const std::string& title, std::vector<bar> bars, const std::string& unit,
                     bool center_at_one = false) {
    std::ostringstream s;
    // A chart of a thousand rows is a wall, not a picture: past max_bars keep the most telling
    // (largest; for a ratio, farthest from 1) and say so; every case is still in the grid.
    constexpr std::size_t max_bars = 60;
    std::string shown_note;
    if (bars.size() > max_bars) {
        const auto weight = [&](const bar& b) {
            return center_at_one ? std::abs(std::log(std::max(b.value, 1e-12))) : b.value;
        };
        std::stable_sort(bars.begin(), bars.end(), [&](const bar& a, const bar& b) { return weight(a) > weight(b); });
        shown_note = " (the " + std::to_string(max_bars) + " " + (center_at_one ? "farthest from 1" : "largest") +
                     " of " + std::to_string(bars.size()) + ")";
        bars.resize(max_bars);
    }
    if (bars.empty()) {
        s << "<p class=\"muted\">" << escape_markup(title) << ": nothing to draw in this run.</p>\n";
        return s.str();
    }
    double lo = std::numeric_limits<double>::infinity(), hi = 0;
    for (const auto& b : bars)
        for (double x : {b.value, b.bound})
            if (std::isfinite(x) && x > 0) {
                lo = std::min(lo, x);
                hi = std::max(hi, x);
            }
    if (center_at_one) {
        lo = std::min(lo, 1.0);
        hi = std::max(hi, 1.0);
    }
    if (!(hi > 0))
        hi = lo = 1;
    const bool log_scale = hi / lo > 50 || center_at_one;
    const double lmin = log_scale ? std::log10(lo) - 0.1 : 0;
    const double lmax = log_scale ? std::log10(hi) + 0.1 : hi * 1.05;
    // Labels are right-aligned against the plot: 430 px holds about 70 characters at 11 px; a
    // longer one keeps its end (the variant and backend tell cases apart) after an ellipsis.
    const int label_w = 430, plot_w = 420, row_h = 16, top = 26;
    constexpr std::size_t max_label = 70;
    for (auto& b : bars)
        if (b.label.size() > max_label)
            b.label = "\xE2\x80\xA6" + b.label.substr(b.label.size() - (max_label - 1));
    const int height = top + static_cast<int>(bars.size()) * row_h + 24;
    const auto xpos = [&](double v) {
        const double t = log_scale ? (std::log10(std::max(v, lo)) - lmin) / (lmax - lmin) : v / lmax;
        return label_w + plot_w * std::clamp(t, 0.0, 1.0);
    };
    s << "<figure class=\"chart\"><svg xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" width=\"" << label_w + plot_w + 110
      << "\" height=\"" << height << "\" viewBox=\"0 0 " << label_w + plot_w + 110 << ' ' << height << "\">\n";
    s << "<title>" << escape_markup(title) << "</title>\n";
    s << "<text x=\"0\" y=\"16\" class=\"ct\">" << escape_markup(title + shown_note) << (log_scale ? " (log scale)" : "")
      << "</text>\n";
    const double origin = center_at_one ? xpos(1.0) : label_w;
    for (std::size_t i = 0; i < bars.size(); ++i) {
        const auto& b = bars[i];
        const int y = top + static_cast<int>(i) * row_h;
        const double x = std::isfinite(b.value) && b.value > 0 ? xpos(b.value) : label_w;
        s << "<text x=\"" << label_w - 6 << "\" y=\"" << y + 12 << "\" class=\"cl\">" << escape_markup(b.label) << "</text>";
        s << "<rect class=\"b-" << b.series << "\" x=\"" << fmt("%.1f", std::min(origin, x)) << "\" y=\"" << y + 2
          << "\" width=\"" << fmt("%.1f", std::max(1.0, std::abs(x - origin))) << "\" height=\"" << row_h - 4
          << "\"><title>" << escape_markup(b.title) << "</title></rect>";
        if (std::isfinite(b.bound) && b.bound > 0) {
            const double bx = xpos(b.bound);
            s << "<line class=\"bound\" x1=\"" << fmt("%.1f", bx) << "\" x2=\"" << fmt("%.1f", bx) << "\" y1=\"" << y
              << "\" y2=\"" << y + row_h << "\"><title>bound " << escape_markup(human_bytes(b.bound)) << "</title></line>";
        }
        s << "<text x=\"" << fmt("%.1f", std::max(origin, x) + 4) << "\" y=\"" << y + 12 << "\" class=\"cv\">"
          << escape_markup(b.title.substr(b.title.rfind(": ") == std::string::npos ? 0 : b.title.rfind(": ") + 2)) << "</text>\n";
    }
    if (center_at_one)
        s << "<line class=\"axis\" x1=\"" << fmt("%.1f", origin) << "\" x2=\"" << fmt("%.1f", origin) << "\" y1=\"" << top
          << "\" y2=\"" << height - 20 << "\"/>";
    s << "<text x=\"" << label_w << "\" y=\"" << height - 4 << "\" class=\"cv\">" << escape_markup(unit) << "</text>\n";
    s << "</svg></figure>\n";
    return s.str();
}

/// The upper bound a baseline memory entry allows, for the chart's marker.
double memory_bound(const json& bound) {
    if (!bound.is_object())
        return std::nan("");
    if (bound.contains("equals") && bound["equals"].is_number())
        return bound["equals"].get<double>();
    if (bound.contains("max") && bound["max"].is_number())
        return bound["max"].get<double>();
    if (bound.contains("value") && bound["value"].is_number()) {
        const double v = bound["value"].get<double>();
        if (bound.contains("rel_tol") && bound["rel_tol"].is_number())
            return v * (1 + bound["rel_tol"].get<double>());
        if (bound.contains("abs_tol") && bound["abs_tol"].is_number())
            return v + bound["abs_tol"].get<double>();
        return v;
    }
    return std::nan("");
}

std::string pre_json(const json& j) {
    return "<pre>" + escape_markup(j.dump(2)) + "</pre>";
}

const char* html_style = R"CSS(
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5em;color:#1b1f24;background:#fff}
h1{font-size:1.5em;margin:0 0 .3em}h2{font-size:1.2em;margin:1.6em 0 .5em;border-bottom:1px solid #ddd}
table{border-collapse:collapse}td,th{border:1px solid #d0d7de;padding:2px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa}.muted{color:#656d76}
.v{display:inline-block;padding:0 6px;border-radius:3px;font-weight:600;font-size:12px}
.pass{background:#dafbe1;color:#116329}.fail{background:#ffebe9;color:#a40e26}
.warn{background:#fff8c5;color:#7d4e00}.skip{background:#eaeef2;color:#57606a}
.grid td.cell{text-align:center}.grid a{text-decoration:none}
details{border:1px solid #d0d7de;border-radius:4px;margin:4px 0;padding:2px 8px}
summary{cursor:pointer}pre{background:#f6f8fa;padding:6px;overflow:auto;max-height:24em;white-space:pre-wrap}
.chart text{font:11px system-ui,sans-serif}.chart .ct{font-size:13px;font-weight:600}.chart .cl{text-anchor:end}
.chart .cv{fill:#57606a}.b-cpu{fill:#0969da}.b-cuda{fill:#1a7f37}.b-speedup{fill:#8250df}
.b-device{fill:#1a7f37}.b-host{fill:#0969da}.bound{stroke:#cf222e;stroke-width:2}.axis{stroke:#57606a}
.legend span{display:inline-block;width:10px;height:10px;margin:0 4px 0 12px}
)CSS";
} // namespace

std::string render_html(const run_data& run) {
    const auto counts = verdict_counts(run);
    const json fp = fingerprint_summary(run);
    std::ostringstream h;
    h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
      << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      << "<title>pitfall report: " << escape_markup(str(run.header, "at")) << "</title>\n<style>" << html_style
      << "</style></head>\n<body>\n";

    // ---- header: the environment
    h << "<header id=\"fingerprint\"><h1>pitfall report</h1>\n<p class=\"muted\">run " << escape_markup(run.dir)
      << ", started " << escape_markup(str(run.header, "at")) << ", pitfall " << escape_markup(str(run.header, "pitfall_version"))
      << ", profile <b>" << escape_markup(str(obj(run.header, "profile"), "name", "none")) << "</b> ("
      << escape_markup(str(obj(run.header, "profile"), "reason")) << ")</p>\n";
    h << "<table class=\"fp\"><tr><th>fingerprint</th><td>" << escape_markup(str(run.header, "fingerprint_id")) << "</td></tr>\n";
    for (const auto& [k, v] : fp.items())
        h << "<tr><th>" << escape_markup(k) << "</th><td>" << escape_markup(v.is_string() ? v.get<std::string>() : v.dump())
          << "</td></tr>\n";
    h << "</table>\n<p id=\"counts\">";
    for (const auto& [v, n] : counts)
        h << "<span class=\"v " << verdict_class(v) << "\">" << escape_markup(v) << ' ' << n << "</span> ";
    if (run.interrupted)
        h << "<span class=\"v warn\">interrupted</span>";
    h << "</p></header>\n";

    // ---- verdict grid: scenario x variant rows, one column per backend
    std::vector<std::string> backends;
    std::vector<std::pair<std::string, std::string>> rows; // scenario, variant
    std::map<std::pair<std::string, std::string>, std::map<std::string, const json*>> cell;
    for (const auto& r : run.cases) {
        const std::string b = str(r, "backend"), s = str(r, "scenario"), v = str(r, "variant");
        if (std::find(backends.begin(), backends.end(), b) == backends.end())
            backends.push_back(b);
        if (cell.count({s, v}) == 0)
            rows.emplace_back(s, v);
        cell[{s, v}][b] = &r;
    }
    std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    h << "<h2>Verdicts</h2>\n<table class=\"grid\" id=\"verdict-grid\"><tr><th>scenario</th><th>variant</th>";
    for (const auto& b : backends)
        h << "<th>" << escape_markup(b) << "</th>";
    h << "</tr>\n";
    for (const auto& [s, v] : rows) {
        h << "<tr><td>" << escape_markup(s) << "</td><td>" << escape_markup(v) << "</td>";
        for (const auto& b : backends) {
            const auto it = cell[{s, v}].find(b);
            if (it == cell[{s, v}].end()) {
                h << "<td class=\"cell muted\">-</td>";
                continue;
            }
            const std::string verdict = str(*it->second, "verdict");
            h << "<td class=\"cell\"><a href=\"#" << case_anchor(str(*it->second, "case")) << "\" title=\""
              << escape_markup(str(*it->second, "reason")) << "\"><span class=\"v " << verdict_class(verdict) << "\">"
              << escape_markup(verdict) << "</span></a></td>";
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

    // ---- charts
    h << "<h2>Charts</h2>\n<p class=\"legend\"><span class=\"b-cpu\" style=\"background:#0969da\"></span>CPU"
      << "<span style=\"background:#1a7f37\"></span>GPU (CUDA)</p>\n";
    std::vector<bar> times;
    for (const auto& [s, v] : rows)
        for (const auto& b : backends)
            if (const auto it = cell[{s, v}].find(b); it != cell[{s, v}].end()) {
                const std::string verdict = str(*it->second, "verdict");
                if (verdict == "UNSUPPORTED")
                    continue;
                const double t = case_seconds(*it->second);
                if (std::isfinite(t) && t > 0)
                    times.push_back({s + "." + v + " [" + b + "]", b == "cuda" ? "cuda" : "cpu", t,
                                     b + " " + s + "." + v + ": " + human_seconds(t)});
            }
    h << "<div id=\"chart-time\">" << svg_bars("CPU vs GPU time per case (median sample, else process wall time)", times, "seconds") << "</div>\n";

    std::vector<bar> speedups;
    for (const auto& b : backends) {
        std::map<std::string, std::vector<const json*>> by_scenario;
        for (const auto& r : run.cases)
            if (str(r, "backend") == b && str(r, "verdict") != "UNSUPPORTED")
                by_scenario[str(r, "scenario")].push_back(&r);
        for (const auto& [s, list] : by_scenario) {
            const json* reproduce = nullptr;
            for (const json* r : list)
                if (str(*r, "kind") == "reproduce" && std::isfinite(first_time_median(obj(*r, "result")))) {
                    reproduce = r;
                    break;
                }
            if (reproduce == nullptr)
                continue;
            const double base = first_time_median(obj(*reproduce, "result"));
            for (const json* r : list) {
                if (str(*r, "kind") != "remedy")
                    continue;
                const double t = first_time_median(obj(*r, "result"));
                if (std::isfinite(t) && t > 0 && base > 0)
                    speedups.push_back({s + "." + str(*r, "variant") + " [" + b + "]", "speedup", base / t,
                                        b + " " + s + ": " + str(*reproduce, "variant") + " / " + str(*r, "variant") +
                                            ": " + fmt("%.2fx", base / t)});
            }
        }
    }
    h << "<div id=\"chart-speedup\">"
      << svg_bars("Remedy vs reproduce: median time of the first reproduce variant / the remedy's", speedups,
                  "speedup (x); right of the axis: the remedy is faster", true)
      << "</div>\n";

    std::vector<bar> memory;
    for (const auto& r : run.cases) {
        if (str(r, "verdict") == "UNSUPPORTED")
            continue;
        const json expected_memory = r.contains("baseline") ? obj(obj(r["baseline"], "entry"), "memory")
                                                            : json::object();
        const json result = obj(r, "result");
        const double device = result.is_object() ? num(obj(result, "memory"), "tracked_peak_bytes") : std::nan("");
        if (std::isfinite(device) && device > 0)
            memory.push_back({str(r, "case"), "device", device, "device peak " + str(r, "case") + ": " + human_bytes(device),
                              memory_bound(expected_memory.value("tracked_peak_bytes", json()))});
        const double host = num(obj(r, "process"), "peak_rss_bytes");
        if (std::isfinite(host) && host > 0)
            memory.push_back({str(r, "case"), "host", host, "host peak RSS " + str(r, "case") + ": " + human_bytes(host),
                              memory_bound(expected_memory.value("peak_rss_bytes", json()))});
    }
    h << "<p class=\"legend\"><span style=\"background:#1a7f37\"></span>device (tracked peak)"
      << "<span style=\"background:#0969da\"></span>host (peak RSS)<span style=\"background:#cf222e\"></span>baseline bound</p>\n";
    h << "<div id=\"chart-memory\">" << svg_bars("Memory peaks against their baseline bounds", memory, "bytes") << "</div>\n";

    // ---- every case, expandable
    h << "<h2>Cases</h2>\n<div id=\"cases\">\n";
    for (const auto& r : run.cases) {
        const std::string verdict = str(r, "verdict");
        const json o = obj(r, "observed");
        const json result = obj(r, "result");
        h << "<details class=\"case\" id=\"" << case_anchor(str(r, "case")) << "\"><summary><span class=\"v "
          << verdict_class(verdict) << "\">" << escape_markup(verdict) << "</span> <code>" << escape_markup(str(r, "test", str(r, "case")))
          << "</code> <span class=\"muted\">" << escape_markup(outcome_line(r)) << "</span></summary>\n";
        h << "<table><tr><th>reason</th><td class=\"reason\">" << escape_markup(str(r, "reason")) << "</td></tr>\n";
        for (const char* k : {"status", "library", "error", "stage", "sticky", "signal", "message"})
            if (o.contains(k))
                h << "<tr><th>" << k << "</th><td>" << escape_markup(str(o, k)) << "</td></tr>\n";
        h << "<tr><th>wall time</th><td>" << human_seconds(num(obj(r, "process"), "wall_seconds")) << "</td></tr>\n";
        h << "<tr><th>ran on</th><td>" << escape_markup(str(result, "ran_on", "-")) << "</td></tr>\n";
        h << "<tr><th>judged by</th><td>" << escape_markup(r.contains("baseline") ? str(r["baseline"], "profile", "no baseline") : "no baseline")
          << "</td></tr></table>\n";
        if (result.is_object() && !obj(result, "measurements").empty()) {
            h << "<table class=\"measurements\"><tr><th>measurement</th><th>value</th><th>unit</th></tr>\n";
            for (const auto& [k, m] : result["measurements"].items())
                h << "<tr><td>" << escape_markup(k) << "</td><td>" << escape_markup(m.is_object() && m.contains("value") ? m["value"].dump() : m.dump())
                  << "</td><td>" << escape_markup(str(m, "unit")) << "</td></tr>\n";
            h << "</table>\n";
        }
        if (result.is_object() && !arr(result, "checks").empty()) {
            h << "<table class=\"checks\"><tr><th>check</th><th>passed</th><th>detail</th></tr>\n";
            for (const auto& c : result["checks"])
                h << "<tr><td>" << escape_markup(str(c, "name")) << "</td><td>" << (c.value("passed", false) ? "yes" : "<b>no</b>")
                  << "</td><td>" << escape_markup(str(c, "detail")) << "</td></tr>\n";
            h << "</table>\n";
        }
        if (!obj(r, "timings").empty())
            h << "<p>timings</p>" << pre_json(r["timings"]);
        if (r.contains("baseline"))
            h << "<p>baseline entry</p>" << pre_json(obj(r["baseline"], "entry"));
        if (!str(r, "output_tail").empty())
            h << "<p>output (end)</p><pre>" << escape_markup(str(r, "output_tail")) << "</pre>";
        h << "</details>\n";
    }
    h << "</div>\n<footer class=\"muted\"><p>Rendered from results.jsonl by <code>pitfall report</code>, "
      << escape_markup(utc_now("%Y-%m-%dT%H:%M:%SZ")) << ".</p></footer>\n</body></html>\n";
    return h.str();
}

// ---- matrix: several runs side by side ---------------------------------------------------

namespace {
/// A version number as text: 12040 -> "12.4" (CUDA), 91002 -> "9.10.2" (cuDNN, with patch_mod).
std::string cuda_version_text(const json& v, int major_div, int minor_div, int minor_mod, int patch_mod) {
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
        return str(run.cell, "id", "?") + (fp.contains("device_name") ? " on " + str(fp, "device_name") : "");
    const auto version = [](const json& v, int major_div, int minor_div, int minor_mod) -> std::string {
        const std::string text = cuda_version_text(v, major_div, minor_div, minor_mod, 0);
        return text.empty() ? "?" : text;
    };
    std::string gpu = fp.contains("gpu_model") && fp["gpu_model"].is_string() ? fp["gpu_model"].get<std::string>() : "no GPU";
    std::string dir = run.dir;
    while (dir.size() > 1 && dir.back() == '/')
        dir.pop_back();
    const auto slash = dir.rfind('/');
    return gpu + ", CUDA " + version(fp.value("cuda_runtime_version", json()), 1000, 10, 100) + ", cuDNN " +
           version(fp.value("cudnn_version", json()), 10000, 100, 100) + " (" +
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
         const std::string loaded = cuda_version_text(fingerprint_summary(r).value("cudnn_version", json()), 10000, 100, 100, 100);
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
             text += " at " + str(r.cell, "stage") + (r.cell.contains("arch") ? " " + str(r.cell, "arch") : "");
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
             text += (text.empty() ? "no: " : "; ") + (p.is_string() ? p.get<std::string>() : p.dump());
         return text.empty() ? std::string("yes") : text;
     }},
};

bool any_cell(const std::vector<run_data>& runs) {
    return std::any_of(runs.begin(), runs.end(), [](const run_data& r) { return r.cell.is_object(); });
}

/// Facts (not verdicts or expectations: those follow from the rest) whose text differs between cells.
std::vector<const cell_fact*> differing_facts(const std::vector<run_data>& runs) {
    std::vector<const cell_fact*> out;
    for (const auto& fact : cell_facts) {
        if (std::string(fact.first) == "verdicts" || std::string(fact.first) == "as ci/matrix.json expects")
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
            auto [it, added] = m.at.try_emplace(key, std::vector<const json*>(runs.size(), nullptr));
            if (added)
                m.keys.push_back(key);
            it->second[c] = &r;
        }
    for (const auto& key : m.keys) {
        std::set<std::string> seen;
        const auto& row = m.at[key];
        for (std::size_t c = 0; c < row.size(); ++c)
            if (row[c] != nullptr || !runs[c].cases.empty()) // a cell that never ran says why once, in its facts
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
        auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == v; });
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
    for (const auto& r : runs)
        out.push_back(r.cases.empty());
    return out;
}
} // namespace

std::string render_matrix_markdown(const std::vector<run_data>& runs) {
    const matrix m = build_matrix(runs);
    std::ostringstream md;
    md << "## pitfall matrix: " << runs.size() << " cells, " << m.keys.size() << " cases, " << m.differing.size()
       << " differ\n\n";
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
        md << "Nothing: every cell has the same facts, and every case the same verdict and outcome.\n";
    const std::vector<bool> skip = never_ran(runs);
    for (const auto& key : m.differing) {
        md << "- `" << md_code(key) << "`: ";
        const auto& row = m.at.at(key);
        markdown_groups(group_cells(m.cells, [&](std::size_t c) { return cell_text(row[c]); }, skip));
    }
    return md.str();
}

std::string render_matrix_html(const std::vector<run_data>& runs) {
    const matrix m = build_matrix(runs);
    const std::set<std::string> differing(m.differing.begin(), m.differing.end());
    std::ostringstream h;
    h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>pitfall matrix</title>\n<style>"
      << html_style << "tr.differs td:first-child{border-left:4px solid #cf222e}</style></head>\n<body>\n"
      << "<h1>pitfall matrix</h1>\n<p>" << runs.size() << " cells, " << m.keys.size() << " cases; "
      << m.differing.size() << " differ between cells (marked red).</p>\n";
    if (any_cell(runs)) {
        h << "<h2>Cells</h2>\n<table class=\"grid\" id=\"cells\"><tr><th>cell</th>";
        for (const auto& fact : cell_facts)
            h << "<th>" << escape_markup(fact.first) << "</th>";
        h << "</tr>\n";
        for (std::size_t c = 0; c < runs.size(); ++c) {
            const std::string outcome = str(runs[c].cell, "outcome", "?");
            h << "<tr><td title=\"" << escape_markup(str(obj(runs[c].cell, "cell"), "doc")) << "\"><code>"
              << escape_markup(m.cells[c]) << "</code></td>";
            for (const auto& fact : cell_facts) {
                const std::string text = fact.second(runs[c]);
                if (std::string(fact.first) == "cell outcome")
                    h << "<td><span class=\"v " << verdict_class(outcome == "ran" ? "PASS" : outcome == "skipped" ? "UNSUPPORTED" : "FAIL")
                      << "\">" << escape_markup(outcome) << "</span> " << escape_markup(text.substr(std::min(text.size(), outcome.size())))
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
        h << "<th title=\"" << escape_markup(runs[c].dir) << "\">" << escape_markup(m.cells[c]) << "</th>";
    h << "</tr>\n";
    for (const auto& key : m.keys) {
        h << "<tr" << (differing.count(key) != 0 ? " class=\"differs\"" : "") << "><td><code>" << escape_markup(key)
          << "</code></td>";
        for (const json* r : m.at.at(key)) {
            if (r == nullptr) {
                h << "<td class=\"cell muted\">-</td>";
                continue;
            }
            const std::string verdict = str(*r, "verdict");
            h << "<td class=\"cell\" title=\"" << escape_markup(str(*r, "reason")) << "\"><span class=\"v "
              << verdict_class(verdict) << "\">" << escape_markup(verdict) << "</span><br><small>"
              << escape_markup(outcome_line(*r)) << "</small></td>";
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
        html_groups(group_cells(m.cells, [&](std::size_t c) { return cell_text(row[c]); }, skip));
    }
    if (m.differing.empty() && facts.empty())
        h << "<li>Nothing: every cell has the same facts, and every case the same verdict and outcome.</li>\n";
    h << "</ul>\n</body></html>\n";
    return h.str();
}

status write_reports(const run_data& run) {
    const std::pair<const char*, std::string> files[] = {
        {report_json_name, render_json(run).dump(2) + "\n"},
        {report_junit_name, render_junit(run)},
        {report_markdown_name, render_markdown(run)},
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
        // One matrix cell is a matrix (a one-cell `pitfall matrix run`); one plain run is not.
        if (runs.size() < 2 && !any_cell(runs)) {
            std::cerr << "pitfall: error: --merge needs two or more run folders, or matrix cell folders (see `pitfall help`)\n";
            return exit_bad_input;
        }
        return emit(options.format == "markdown" ? render_matrix_markdown(runs) : render_matrix_html(runs), options.out);
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
        text = render_markdown(run.value());
    else if (options.format == "json")
        text = render_json(run.value()).dump(2) + "\n";
    else {
        std::cerr << "pitfall: error: --format " << options.format << ": expected html, junit, markdown or json\n";
        return exit_bad_input;
    }
    return emit(text, options.out);
}

} // namespace pitfall::runner
