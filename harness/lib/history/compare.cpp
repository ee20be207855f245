// The upgrade report: the runs of two values of one key read from the results database, the
// cases compared side by side, and the three renderings.
#include "history/compare.hpp"

#include "judge/stats.hpp"
#include "report/report.hpp"
#include "report/report_parts.hpp"
#include "util/suggest.hpp"

#include "pitfall/detail/result_file.hpp"
#include "pitfall/detail/text.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <iomanip>
#include <ostream>
#include <set>
#include <sstream>

namespace pitfall::history {
using nlohmann::json;

status_or<compare_by> parse_compare_by(const std::string& text) {
    const auto eq = text.find('=');
    compare_by by;
    if (eq != std::string::npos) {
        by.key = text.substr(0, eq);
        by.spec = text.substr(eq + 1);
    }
    if (by.key.empty() || by.spec.find(',') == std::string::npos)
        return status::error(pitfall_error::bad_input,
                             "--by " + text + ": expected KEY=A,B (e.g. blas_core=Haswell,Zen)",
                             stage::none);
    return by;
}

bool outside_widened_range(double median_b, double min_a, double max_a) {
    const double low = min_a - compare_widening * std::abs(min_a);
    const double high = max_a + compare_widening * std::abs(max_a);
    return median_b < low || median_b > high;
}

namespace {

/// Every key a run can be compared by, with its value in this run (a key the run lacks is absent).
std::map<std::string, std::string> run_values(const statement& row) {
    std::map<std::string, std::string> values;
    // The fingerprint summary first: the run's own columns win a name they share with it.
    const json summary = json::parse(row.text(1), nullptr, false);
    if (summary.is_object())
        for (const auto& [key, value] : summary.items())
            values[key] = value.is_string()
                              ? value.get<std::string>()
                              : value.dump(-1, ' ', false, json::error_handler_t::replace);
    if (!row.text(2).empty())
        values["host"] = row.text(2);
    if (!row.is_null(3))
        values["profile"] = row.text(3);
    if (!row.is_null(4))
        values["git_revision"] = row.text(4);
    if (!row.text(5).empty())
        values["pitfall_version"] = row.text(5);
    return values;
}

status_or<std::map<std::string, std::map<std::string, std::string>>>
values_by_run(const history_db& db) {
    statement query(db, "SELECT id, fingerprint_summary, host_id, profile, git_revision, "
                        "pitfall_version FROM runs");
    PITFALL_TRY(query.prepared("reading the runs"));
    std::map<std::string, std::map<std::string, std::string>> runs;
    for (;;) {
        PITFALL_ASSIGN_OR_RETURN(const bool row, query.step("reading the runs"));
        if (!row)
            break;
        runs[query.text(0)] = run_values(query);
    }
    return runs;
}

std::string listed(const std::vector<std::string>& values) {
    std::string out;
    for (const auto& v : values)
        out += (out.empty() ? "'" : ", '") + detail::visible_controls(v) + "'";
    return out.empty() ? "none" : out;
}

status refuse(const compare_by& by, const std::string& why) {
    return status::error(pitfall_error::bad_input, "--by " + by.key + "=" + by.spec + ": " + why,
                         stage::none);
}

/// Splits by.spec at the one comma that leaves two values the database has for by.key.
status resolve_values(compare_by& by, const std::vector<std::string>& known) {
    auto has = [&known](const std::string& v) {
        return std::find(known.begin(), known.end(), v) != known.end();
    };
    std::vector<std::size_t> fits, commas;
    for (std::size_t at = by.spec.find(','); at != std::string::npos;
         at = by.spec.find(',', at + 1)) {
        commas.push_back(at);
        if (has(by.spec.substr(0, at)) && has(by.spec.substr(at + 1)))
            fits.push_back(at);
    }
    if (fits.size() != 1) {
        if (fits.size() > 1)
            return refuse(by, "ambiguous: more than one comma splits it into two known values");
        const std::string a = by.spec.substr(0, commas.front());
        const std::string missing = has(a) ? by.spec.substr(commas.front() + 1) : a;
        return refuse(by, "no run has " + by.key + " = '" + detail::visible_controls(missing) +
                              "'" + runner::did_you_mean(missing, known) + "; the database has " +
                              listed(known));
    }
    by.value_a = by.spec.substr(0, fits.front());
    by.value_b = by.spec.substr(fits.front() + 1);
    if (by.value_a == by.value_b)
        return refuse(by, "the same value on both sides");
    return status::ok();
}

/// What one side holds of one case.
struct side_rows {
    std::size_t runs = 0;
    std::map<std::string, std::size_t> verdicts, outcomes;
    std::map<std::string, std::vector<double>> medians; ///< series -> its run medians
    std::map<std::string, std::string> units;
    std::vector<double> rss, tracked;
};

void add_row(side_rows& side, const statement& row) {
    ++side.runs;
    ++side.verdicts[row.text(2)];
    const std::string status_text = row.text(3), error = row.text(4);
    ++side.outcomes[status_text.empty() ? "-"
                    : error.empty()     ? status_text
                                        : status_text + ": " + error];
    if (!row.is_null(5))
        side.rss.push_back(double(row.integer(5)));
    if (!row.is_null(6))
        side.tracked.push_back(double(row.integer(6)));
    const json series = json::parse(row.text(7), nullptr, false);
    if (!series.is_object())
        return; // a row edited into something else: compared without its series
    for (const auto& [name, s] : series.items()) {
        if (!s.is_object() || !s.contains("median") || !s["median"].is_number())
            continue;
        side.medians[name].push_back(s["median"].get<double>());
        if (s.contains("unit") && s["unit"].is_string())
            side.units[name] = s["unit"].get<std::string>();
    }
}

/// Fills what the two sides give; `d.quantities` only when they differ.
void compare_quantity(case_comparison& c, quantity_difference d, const std::vector<double>& a,
                      const std::vector<double>& b) {
    if (a.empty() || b.empty())
        return;
    d.runs_a = a.size();
    d.runs_b = b.size();
    d.median_a = stats::median_or_nan(a);
    d.median_b = stats::median_or_nan(b);
    d.min_a = *std::min_element(a.begin(), a.end());
    d.max_a = *std::max_element(a.begin(), a.end());
    d.min_b = *std::min_element(b.begin(), b.end());
    d.max_b = *std::max_element(b.begin(), b.end());
    if (outside_widened_range(d.median_b, d.min_a, d.max_a))
        c.quantities.push_back(std::move(d));
}

/// The controls whose own code differs between two sides split by `key`: host_blas is an
/// OpenBLAS SGEMM, so across BLAS releases or kernel types its time is another program's, and a
/// series over it would divide out part of the very change compared (the judge refuses the same
/// comparison: docs/timing.md).
std::set<std::string> controls_changed_by(const std::string& key) {
    if (key == "blas_core" || key == "blas_library")
        return {"host_blas"};
    return {};
}

/// The control of a normalised twin `series/control` ("" for a series itself).
std::string control_of(const std::string& name) {
    const auto slash = name.rfind('/');
    return slash == std::string::npos ? "" : name.substr(slash + 1);
}

/// A series is compared normalised where both sides hold its twin `series/control`, unless the
/// sides differ in that control's own code (`changed`).
void compare_series(case_comparison& c, const side_rows& a, const side_rows& b,
                    const std::set<std::string>& changed) {
    auto on_both = [&](const std::string& name) {
        return a.medians.count(name) != 0 && b.medians.count(name) != 0 &&
               changed.count(control_of(name)) == 0;
    };
    for (const auto& [name, medians] : a.medians) {
        if (!on_both(name))
            continue;
        const bool normalised = name.find('/') != std::string::npos;
        if (!normalised) {
            const auto twin = a.medians.lower_bound(name + "/");
            if (twin != a.medians.end() && twin->first.rfind(name + "/", 0) == 0 &&
                on_both(twin->first))
                continue;
        }
        quantity_difference d;
        const auto unit = a.units.find(name);
        d.unit = unit != a.units.end() ? unit->second : "";
        // A normalised twin is a time over its control's time: a time, in no unit.
        d.what = d.unit == "s" || normalised ? "time" : "series";
        d.name = name;
        d.basis = normalised ? "normalised" : "absolute";
        if (normalised)
            d.unit = "";
        compare_quantity(c, d, medians, b.medians.at(name));
    }
}

case_comparison compare_case(const std::string& key, const side_rows& a, const side_rows& b,
                             const std::set<std::string>& changed_controls) {
    case_comparison c;
    c.case_key = key;
    c.runs_a = a.runs;
    c.runs_b = b.runs;
    c.verdicts_a = a.verdicts;
    c.verdicts_b = b.verdicts;
    c.outcomes_a = a.outcomes;
    c.outcomes_b = b.outcomes;
    if (a.runs == 0 || b.runs == 0)
        return c;
    auto keys = [](const std::map<std::string, std::size_t>& m) {
        std::set<std::string> k;
        for (const auto& item : m)
            k.insert(item.first);
        return k;
    };
    c.verdict_differs = keys(a.verdicts) != keys(b.verdicts);
    c.outcome_differs = keys(a.outcomes) != keys(b.outcomes);
    compare_series(c, a, b, changed_controls);
    // The scenario's tracked peak is exact; the process's peak RSS only where it has none.
    const bool tracked = !a.tracked.empty() && !b.tracked.empty();
    quantity_difference memory;
    memory.what = "memory";
    memory.name = tracked ? "tracked_peak_bytes" : "peak_rss_bytes";
    memory.basis = tracked ? "tracked" : "peak RSS";
    memory.unit = "bytes";
    compare_quantity(c, memory, tracked ? a.tracked : a.rss, tracked ? b.tracked : b.rss);
    return c;
}

} // namespace

namespace {

std::map<std::string, std::vector<std::string>>
values_of(const std::map<std::string, std::map<std::string, std::string>>& runs) {
    std::map<std::string, std::set<std::string>> seen;
    for (const auto& run : runs)
        for (const auto& [key, value] : run.second)
            seen[key].insert(value);
    std::map<std::string, std::vector<std::string>> out;
    for (const auto& [key, values] : seen)
        out[key] = {values.begin(), values.end()};
    return out;
}

} // namespace

status_or<std::map<std::string, std::vector<std::string>>> comparable_values(const history_db& db) {
    PITFALL_ASSIGN_OR_RETURN(const auto runs, values_by_run(db));
    return values_of(runs);
}

status_or<compare_report> compare_runs(const history_db& db, compare_by by) {
    PITFALL_ASSIGN_OR_RETURN(const auto runs, values_by_run(db));
    const auto known = values_of(runs);
    const auto values = known.find(by.key);
    if (values == known.end()) {
        std::vector<std::string> keys;
        keys.reserve(known.size());
        for (const auto& item : known)
            keys.push_back(item.first);
        return refuse(by, "no run has the key '" + detail::visible_controls(by.key) + "'" +
                              runner::did_you_mean(by.key, keys) + "; the keys: " + listed(keys));
    }
    PITFALL_TRY(resolve_values(by, values->second));
    compare_report report;
    std::map<std::string, int> side_of; // run id -> 0 (A) or 1 (B)
    for (const auto& [id, run_keys] : runs) {
        const auto v = run_keys.find(by.key);
        if (v != run_keys.end() && (v->second == by.value_a || v->second == by.value_b)) {
            const int side = v->second == by.value_a ? 0 : 1;
            side_of[id] = side;
            ++(side == 0 ? report.runs_a : report.runs_b);
        }
    }
    statement query(db, "SELECT run_id, case_key, verdict, status, error, peak_rss_bytes, "
                        "tracked_peak_bytes, series FROM cases ORDER BY case_key");
    PITFALL_TRY(query.prepared("reading the cases"));
    std::map<std::string, std::array<side_rows, 2>> cases;
    for (;;) {
        PITFALL_ASSIGN_OR_RETURN(const bool row, query.step("reading the cases"));
        if (!row)
            break;
        const auto side = side_of.find(query.text(0));
        if (side != side_of.end())
            add_row(cases[query.text(1)][std::size_t(side->second)], query);
    }
    const std::set<std::string> changed_controls = controls_changed_by(by.key);
    for (const auto& [key, sides] : cases) {
        case_comparison c = compare_case(key, sides[0], sides[1], changed_controls);
        if (c.runs_b == 0)
            report.only_a.push_back(std::move(c));
        else if (c.runs_a == 0)
            report.only_b.push_back(std::move(c));
        else if (c.differs())
            report.differing.push_back(std::move(c));
        else
            ++report.same;
    }
    report.by = std::move(by);
    return report;
}

// ---- renderings ----------------------------------------------------------------------------

namespace {

std::string amount(double value, const std::string& unit) {
    if (unit == "s")
        return runner::report_parts::human_seconds(value);
    if (unit == "bytes")
        return runner::report_parts::human_bytes(value);
    std::ostringstream out;
    out << std::setprecision(4) << value;
    if (!unit.empty())
        out << ' ' << unit;
    return out.str();
}

std::string counts(const std::map<std::string, std::size_t>& m) {
    std::string out;
    for (const auto& [name, n] : m)
        out += (out.empty() ? "" : ", ") + name + " x" + std::to_string(n);
    return out;
}

std::string side_text(const quantity_difference& d, bool a) {
    const double median = a ? d.median_a : d.median_b;
    const double low = a ? d.min_a : d.min_b, high = a ? d.max_a : d.max_b;
    const std::size_t runs = a ? d.runs_a : d.runs_b;
    std::string out = amount(median, d.unit);
    if (runs > 1)
        out += " (" + amount(low, d.unit) + " .. " + amount(high, d.unit) + ")";
    return out;
}

/// A difference as one row: what, the A side, the B side.
std::vector<std::array<std::string, 3>> difference_rows(const case_comparison& c) {
    std::vector<std::array<std::string, 3>> rows;
    if (c.verdict_differs)
        rows.push_back({"verdict", counts(c.verdicts_a), counts(c.verdicts_b)});
    if (c.outcome_differs)
        rows.push_back({"outcome", counts(c.outcomes_a), counts(c.outcomes_b)});
    for (const auto& d : c.quantities) {
        std::ostringstream ratio;
        ratio << std::fixed << std::setprecision(2)
              << (d.median_a != 0 ? d.median_b / d.median_a : 0.0) << "x";
        rows.push_back({d.what + " " + d.name + " (" + d.basis + ")", side_text(d, true),
                        side_text(d, false) + ", " + ratio.str()});
    }
    return rows;
}

/// Text from the database inside a Markdown table cell: visible, one line, no cell break.
std::string md(const std::string& text) {
    std::string out;
    for (const char ch : detail::visible_controls(text)) {
        if (ch == '|')
            out += "\\|";
        else if (ch == '<')
            out += "&lt;";
        else if (ch == '\n' || ch == '\r' || ch == '\t')
            out += ' ';
        else
            out += ch;
    }
    return out;
}

std::string html(const std::string& text) {
    return runner::escape_markup(detail::valid_utf8(text));
}

std::string rule_text() {
    return "A time, series or memory differs when the median of B's run medians lies outside "
           "the range of A's run medians widened by 10% on each side; verdicts and outcomes "
           "differ when the two sides saw different sets of them.";
}

} // namespace

std::string compare_markdown(const std::string& db_path, const compare_report& r) {
    std::ostringstream out;
    const auto& by = r.by;
    out << "# Upgrade report: " << md(by.key) << ' ' << md(by.value_a) << " -> " << md(by.value_b)
        << "\n\nDatabase " << md(db_path) << ". A: " << md(by.key) << " = " << md(by.value_a)
        << " (" << r.runs_a << " runs); B: " << md(by.key) << " = " << md(by.value_b) << " ("
        << r.runs_b << " runs). " << rule_text() << "\n\n## Cases that differ ("
        << r.differing.size() << ")\n\n";
    if (r.differing.empty())
        out << "None: " << r.same << " cases run on both sides alike.\n";
    else
        out << "| case | runs A | runs B | what | A | B |\n|---|---|---|---|---|---|\n";
    for (const auto& c : r.differing)
        for (const auto& row : difference_rows(c))
            out << "| " << md(c.case_key) << " | " << c.runs_a << " | " << c.runs_b << " | "
                << md(row[0]) << " | " << md(row[1]) << " | " << md(row[2]) << " |\n";
    if (!r.differing.empty())
        out << '\n' << r.same << " other cases run on both sides alike.\n";
    const std::array<std::pair<const char*, const std::vector<case_comparison>*>, 2> apart{
        {{"A", &r.only_a}, {"B", &r.only_b}}};
    for (const auto& [side, list] : apart) {
        out << "\n## Cases run only on side " << side << " (" << list->size() << ")\n\n";
        if (list->empty())
            out << "None.\n";
        for (const auto& c : *list)
            out << "- " << md(c.case_key) << ": " << (c.runs_a + c.runs_b) << " runs, "
                << md(counts(side[0] == 'A' ? c.verdicts_a : c.verdicts_b)) << '\n';
    }
    return out.str();
}

std::string compare_html(const std::string& db_path, const compare_report& r) {
    std::ostringstream h;
    const auto& by = r.by;
    const std::string title =
        "Upgrade report: " + html(by.key) + " " + html(by.value_a) + " &#8594; " + html(by.value_b);
    h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" << title
      << "</title>\n<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
         "td,th{border:1px solid #999;padding:.2em .5em;text-align:left}</style></head><body>\n"
      << "<h1>" << title << "</h1>\n<p>Database <code>" << html(db_path)
      << "</code>. A: " << html(by.key) << " = <b>" << html(by.value_a) << "</b> (" << r.runs_a
      << " runs); B: " << html(by.key) << " = <b>" << html(by.value_b) << "</b> (" << r.runs_b
      << " runs). " << html(rule_text()) << "</p>\n<h2>Cases that differ (" << r.differing.size()
      << ")</h2>\n"
      << "<table><tr><th>case</th><th>runs A</th><th>runs B</th><th>what</th><th>A</th>"
         "<th>B</th></tr>\n";
    for (const auto& c : r.differing)
        for (const auto& row : difference_rows(c))
            h << "<tr><td><code>" << html(c.case_key) << "</code></td><td>" << c.runs_a
              << "</td><td>" << c.runs_b << "</td><td>" << html(row[0]) << "</td><td>"
              << html(row[1]) << "</td><td>" << html(row[2]) << "</td></tr>\n";
    h << "</table>\n<p>" << r.same << " other cases run on both sides alike.</p>\n";
    const std::array<std::pair<const char*, const std::vector<case_comparison>*>, 2> apart{
        {{"A", &r.only_a}, {"B", &r.only_b}}};
    for (const auto& [side, list] : apart) {
        h << "<h2>Cases run only on side " << side << " (" << list->size() << ")</h2>\n<ul>\n";
        for (const auto& c : *list)
            h << "<li><code>" << html(c.case_key) << "</code>: " << (c.runs_a + c.runs_b)
              << " runs, " << html(counts(side[0] == 'A' ? c.verdicts_a : c.verdicts_b))
              << "</li>\n";
        h << "</ul>\n";
    }
    h << "</body></html>\n";
    return h.str();
}

json compare_json(const std::string& db_path, const compare_report& r) {
    auto case_json = [](const case_comparison& c) {
        json quantities = json::array();
        for (const auto& d : c.quantities)
            quantities.push_back(
                {{"what", d.what},
                 {"name", d.name},
                 {"basis", d.basis},
                 {"unit", d.unit},
                 {"a",
                  {{"runs", d.runs_a}, {"median", d.median_a}, {"min", d.min_a}, {"max", d.max_a}}},
                 {"b",
                  {{"runs", d.runs_b},
                   {"median", d.median_b},
                   {"min", d.min_b},
                   {"max", d.max_b}}}});
        return json{{"case", c.case_key},
                    {"runs_a", c.runs_a},
                    {"runs_b", c.runs_b},
                    {"verdicts_a", c.verdicts_a},
                    {"verdicts_b", c.verdicts_b},
                    {"outcomes_a", c.outcomes_a},
                    {"outcomes_b", c.outcomes_b},
                    {"verdict_differs", c.verdict_differs},
                    {"outcome_differs", c.outcome_differs},
                    {"differing", quantities}};
    };
    auto list = [&](const std::vector<case_comparison>& cases) {
        json out = json::array();
        for (const auto& c : cases)
            out.push_back(case_json(c));
        return out;
    };
    return {{"schema", "pitfall.history-compare/1"},
            {"database", db_path},
            {"by", r.by.key},
            {"rule", rule_text()},
            {"a", {{"value", r.by.value_a}, {"runs", r.runs_a}}},
            {"b", {{"value", r.by.value_b}, {"runs", r.runs_b}}},
            {"differing", list(r.differing)},
            {"only_a", list(r.only_a)},
            {"only_b", list(r.only_b)},
            {"same", r.same}};
}

status write_compare(const history_db& db, const std::string& by_text, const std::string& format,
                     const std::string& out_path, std::ostream& out) {
    const std::string chosen = format.empty() ? "markdown" : format;
    if (chosen != "markdown" && chosen != "html" && chosen != "json")
        return status::error(pitfall_error::bad_input,
                             "--format " + format + ": expected markdown, html or json",
                             stage::none);
    PITFALL_ASSIGN_OR_RETURN(compare_by by, parse_compare_by(by_text));
    PITFALL_ASSIGN_OR_RETURN(const compare_report report, compare_runs(db, std::move(by)));
    // Text read back from the file: bytes that are not UTF-8 (an edited database) replaced.
    const std::string text =
        chosen == "json"
            ? compare_json(db.path(), report).dump(2, ' ', false, json::error_handler_t::replace) +
                  "\n"
        : chosen == "html" ? compare_html(db.path(), report)
                           : compare_markdown(db.path(), report);
    if (out_path.empty()) {
        out << text;
        return status::ok();
    }
    return write_file_atomically(out_path, text);
}

} // namespace pitfall::history
