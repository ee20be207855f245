// The flaky cases of a run (flaky.json, written by `pitfall run --history`): read back
// tolerantly, and rendered for the JSON, Markdown, HTML and JUnit reports.
#include "report/html_parts.hpp"
#include "report/report_parts.hpp"

#include "history/run_flaky.hpp"

#include <filesystem>
#include <optional>

namespace pitfall::runner {
using namespace report_parts;

namespace {

/// Bounds of what is read back: a run selects hundreds of cases, a case has a handful of
/// verdicts, and the writer keeps history::run_flaky_flips_kept flips.
constexpr std::size_t flaky_file_max_bytes = std::size_t{8} << 20;
constexpr std::size_t flaky_cases_max = 100000;
constexpr std::size_t flaky_verdicts_max = 64;
constexpr std::size_t flaky_flips_max = 100000;

/// flaky.json checked part by part into a copy of what it holds (every string valid UTF-8);
/// `why` is the first thing wrong, naming where it is.
struct checker {
    std::string why;

    bool fail(const std::string& where, const std::string& what) {
        if (why.empty())
            why = where + ": " + what;
        return false;
    }
    std::optional<std::string> text(const json& j, const char* key, const std::string& where) {
        if (!j.contains(key) || !j[key].is_string()) {
            fail(where + "." + key, "not a string");
            return std::nullopt;
        }
        return detail::valid_utf8(j[key].get<std::string>());
    }
    std::optional<std::uint64_t> count(const json& j, const char* key, const std::string& where) {
        if (!j.contains(key) || !j[key].is_number_unsigned()) {
            fail(where + "." + key, "not a whole number");
            return std::nullopt;
        }
        return j[key].get<std::uint64_t>();
    }
    std::optional<json> flip(const json& f, const std::string& where) {
        if (!f.is_object()) {
            fail(where, "not an object");
            return std::nullopt;
        }
        json out = json::object();
        for (const char* key : {"at", "folder", "from", "to"}) {
            const auto value = text(f, key, where);
            if (!value)
                return std::nullopt;
            out[key] = *value;
        }
        return out;
    }
    std::optional<json> verdicts(const json& v, const std::string& where) {
        if (!v.is_object() || v.empty() || v.size() > flaky_verdicts_max) {
            fail(where,
                 "not an object of 1 to " + std::to_string(flaky_verdicts_max) + " verdict counts");
            return std::nullopt;
        }
        json out = json::object();
        for (const auto& [name, n] : v.items()) {
            if (!n.is_number_unsigned()) {
                fail(where + "." + detail::valid_utf8(name), "not a whole number");
                return std::nullopt;
            }
            out[detail::valid_utf8(name)] = n;
        }
        return out;
    }
    std::optional<json> one_case(const json& c, const std::string& where) {
        if (!c.is_object()) {
            fail(where, "not an object");
            return std::nullopt;
        }
        const auto key = text(c, "case", where);
        const auto runs = count(c, "runs", where);
        const auto passes = count(c, "trailing_passes", where);
        if (!key || !runs || !passes)
            return std::nullopt;
        const auto counts =
            verdicts(c.contains("verdicts") ? c["verdicts"] : json(), where + ".verdicts");
        if (!counts)
            return std::nullopt;
        const json& flips = c.contains("flips") ? c["flips"] : json();
        if (!flips.is_array() || flips.size() > flaky_flips_max) {
            fail(where + ".flips", "not an array of at most " + std::to_string(flaky_flips_max));
            return std::nullopt;
        }
        json kept = json::array();
        const std::size_t first = flips.size() > history::run_flaky_flips_kept
                                      ? flips.size() - history::run_flaky_flips_kept
                                      : 0;
        for (std::size_t i = first; i < flips.size(); ++i) {
            const auto f = flip(flips[i], where + ".flips[" + std::to_string(i) + "]");
            if (!f)
                return std::nullopt;
            kept.push_back(*f);
        }
        std::uint64_t total = flips.size();
        if (c.contains("flips_total")) {
            const auto n = count(c, "flips_total", where);
            if (!n)
                return std::nullopt;
            total = std::max<std::uint64_t>(*n, total);
        }
        return json{{"case", *key},  {"runs", *runs},        {"verdicts", *counts},
                    {"flips", kept}, {"flips_total", total}, {"trailing_passes", *passes}};
    }
    std::optional<json> document(const json& doc) {
        if (!doc.is_object() || !doc.contains("schema") ||
            doc["schema"] != history::run_flaky_schema) {
            fail("schema", std::string("not ") + history::run_flaky_schema);
            return std::nullopt;
        }
        const auto db = text(doc, "db", "flaky");
        const auto release_after = count(doc, "release_after", "flaky");
        if (!db || !release_after)
            return std::nullopt;
        const json& cases = doc.contains("cases") ? doc["cases"] : json();
        if (!cases.is_array() || cases.size() > flaky_cases_max) {
            fail("cases", "not an array of at most " + std::to_string(flaky_cases_max));
            return std::nullopt;
        }
        json out = {{"db", *db}, {"release_after", *release_after}, {"cases", json::array()}};
        for (std::size_t i = 0; i < cases.size(); ++i) {
            const auto c = one_case(cases[i], "cases[" + std::to_string(i) + "]");
            if (!c)
                return std::nullopt;
            out["cases"].push_back(*c);
        }
        return out;
    }
};

/// "FAIL x1, PASS x3"
std::string counts_text(const json& verdicts) {
    std::string out;
    for (const auto& [name, n] : verdicts.items())
        out += (out.empty() ? "" : ", ") + name + " x" + std::to_string(n.get<std::uint64_t>());
    return out;
}

/// This run's verdict of `key`, or "no result".
std::string verdict_here(const run_data& run, const std::string& key) {
    for (const auto& r : run.cases)
        if (str(r, "case") == key)
            return str(r, "verdict", "?");
    return "no result";
}

} // namespace

std::string flaky_summary(const json& c) {
    std::string line = counts_text(c["verdicts"]) + " in " +
                       std::to_string(c["runs"].get<std::uint64_t>()) + " runs";
    if (!c["flips"].empty()) {
        const json& last = c["flips"].back();
        line += "; latest flip " + last["at"].get<std::string>() + " " +
                last["from"].get<std::string>() + " -> " + last["to"].get<std::string>();
    }
    return line;
}

namespace report_parts {

void load_flaky(run_data& run) {
    const std::string path = run.dir + "/" + history::run_flaky_file;
    std::error_code ec;
    if (!std::filesystem::exists(std::filesystem::symlink_status(path, ec)))
        return;
    auto text = detail::read_regular_file(path, flaky_file_max_bytes);
    if (!text.is_ok()) {
        run.flaky_problem = text.error().message();
        return;
    }
    auto doc = detail::parse_json(text.value(), path);
    if (!doc.is_ok()) {
        run.flaky_problem = doc.error().message();
        return;
    }
    checker check;
    if (auto read = check.document(doc.value()))
        run.flaky = std::move(*read);
    else
        run.flaky_problem = path + ": " + check.why;
}

json flaky_report_json(const run_data& run) {
    if (!run.flaky_problem.empty())
        return {{"problem", detail::valid_utf8(run.flaky_problem)}};
    return run.flaky; // null when the run has no flaky.json
}

std::string flaky_markdown(const run_data& run) {
    if (run.flaky_problem.empty() && (!run.flaky.is_object() || run.flaky["cases"].empty()))
        return "";
    std::string m = "\n### Flaky cases (per the history database)\n\n";
    if (!run.flaky_problem.empty())
        return m + "flaky.json unreadable: " + md_inline(run.flaky_problem, 400) + "\n";
    const json& f = run.flaky;
    m += cat(std::to_string(f["cases"].size()),
             " case(s) changed verdict across the runs of this build on this fingerprint "
             "(history database `",
             md_code(f["db"].get<std::string>()), "`; released after ",
             std::to_string(f["release_after"].get<std::uint64_t>()),
             " passing runs in a row). Their verdicts here may say more of the case than of "
             "the change.\n\n");
    for (const auto& c : f["cases"]) {
        const std::string key = c["case"].get<std::string>();
        m += cat("- `", md_code(key), "` (here ", md_inline(verdict_here(run, key), 40),
                 "): ", md_inline(counts_text(c["verdicts"]), 200), " in ",
                 std::to_string(c["runs"].get<std::uint64_t>()), " runs, ",
                 std::to_string(c["trailing_passes"].get<std::uint64_t>()), " passing in a row; ",
                 std::to_string(c["flips_total"].get<std::uint64_t>()), " flip(s)",
                 c["flips"].empty() ? "" : ", latest:", "\n");
        const json& flips = c["flips"];
        for (std::size_t i = flips.size() > 3 ? flips.size() - 3 : 0; i < flips.size(); ++i)
            m += cat("  - ", md_inline(flips[i]["at"].get<std::string>(), 40), " ",
                     md_inline(flips[i]["from"].get<std::string>(), 40), " -> ",
                     md_inline(flips[i]["to"].get<std::string>(), 40), " in `",
                     md_code(flips[i]["folder"].get<std::string>()), "`\n");
    }
    return m;
}

std::string flaky_html(const run_data& run) {
    if (run.flaky_problem.empty() && (!run.flaky.is_object() || run.flaky["cases"].empty()))
        return "";
    std::string h = "<section id=\"flaky\"><h2>Flaky cases (per the history database)</h2>\n";
    if (!run.flaky_problem.empty())
        return h +
               "<p class=\"v warn\">flaky.json unreadable: " + escape_markup(run.flaky_problem) +
               "</p></section>\n";
    const json& f = run.flaky;
    h += cat("<p>", std::to_string(f["cases"].size()),
             " case(s) changed verdict across the runs of this build on this fingerprint "
             "(history database <code>",
             escape_markup(f["db"].get<std::string>()), "</code>; released after ",
             std::to_string(f["release_after"].get<std::uint64_t>()),
             " passing runs in a row).</p>\n<table><tr><th>case</th><th>here</th><th>verdicts"
             "</th><th>runs</th><th>passing in a row</th><th>flips, latest last</th></tr>\n");
    for (const auto& c : f["cases"]) {
        const std::string key = c["case"].get<std::string>();
        const std::string here = verdict_here(run, key);
        std::string flips;
        for (const auto& flip : c["flips"])
            flips += cat(flips.empty() ? "" : "<br>", escape_markup(flip["at"].get<std::string>()),
                         " ", escape_markup(flip["from"].get<std::string>()), " &rarr; ",
                         escape_markup(flip["to"].get<std::string>()), " <code>",
                         escape_markup(flip["folder"].get<std::string>()), "</code>");
        const auto total = c["flips_total"].get<std::uint64_t>();
        if (total > c["flips"].size())
            flips += cat("<br>(", std::to_string(total - c["flips"].size()), " earlier)");
        h += cat("<tr><td><a href=\"#", case_anchor(key), "\"><code>", escape_markup(key),
                 "</code></a></td><td><span class=\"v ", verdict_class(here), "\">",
                 escape_markup(here), "</span></td><td>", escape_markup(counts_text(c["verdicts"])),
                 "</td><td>", std::to_string(c["runs"].get<std::uint64_t>()), "</td><td>",
                 std::to_string(c["trailing_passes"].get<std::uint64_t>()), "</td><td>", flips,
                 "</td></tr>\n");
    }
    return h + "</table></section>\n";
}

const json* flaky_entry(const run_data& run, const std::string& key) {
    if (!run.flaky.is_object())
        return nullptr;
    for (const auto& c : run.flaky["cases"])
        if (c["case"] == key)
            return &c;
    return nullptr;
}

} // namespace report_parts
} // namespace pitfall::runner
