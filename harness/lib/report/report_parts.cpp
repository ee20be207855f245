// What every report shares: untrusted-JSON accessors, number and verdict text, escaping.
#include "report/report_parts.hpp"

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
namespace report_parts {

std::string str(const json& j, const char* key, const std::string& fallback) {
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

double num(const json& j, const char* key, double fallback) {
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

/// Text safe in one Markdown table cell or list line: no newlines, pipes or HTML (control
/// characters are made visible once, over the whole document, where it is written).
std::string md_inline(std::string text, std::size_t max) {
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

const char* verdict_class(const std::string& v) {
    if (v == "PASS")
        return "pass";
    if (v == "UNSUPPORTED")
        return "skip";
    if (is_warning(v))
        return "warn";
    return "fail";
}

const char* const html_style = R"CSS(
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
} // namespace report_parts

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

} // namespace pitfall::runner
