#include "bundle/redact.hpp"

#include "bundle/secret_shapes.hpp"
#include "util/sha256.hpp"

#include "pitfall/detail/json_file.hpp"

#include <algorithm>
#include <cctype>
#include <sstream>

extern char** environ; // NOLINT(readability-redundant-declaration): POSIX declares it nowhere

namespace pitfall::runner {
using nlohmann::json;

bool is_secret_name(std::string_view name) {
    std::string upper(name);
    for (char& c : upper)
        c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    for (const char* word : {"TOKEN", "KEY", "SECRET", "PASSWORD", "CREDENTIAL"})
        if (upper.find(word) != std::string::npos)
            return true;
    return false;
}

namespace {
/// As HTML and XML write it in text and attributes (report.html, junit.xml).
std::string html_escaped(const std::string& value, bool apostrophe_as_entity) {
    std::string out;
    for (const char c : value)
        switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&quot;"; break;
        case '\'': out += apostrophe_as_entity ? "&apos;" : "&#39;"; break;
        default: out += c;
        }
    return out;
}
/// As a JSON string holds it (results.jsonl, report.json), without the quotes.
std::string json_escaped(const std::string& value) {
    const std::string quoted = json(value).dump(-1, ' ', false, json::error_handler_t::replace);
    return quoted.substr(1, quoted.size() - 2);
}
/// Percent-encoded as a URL carries it: every byte but the unreserved ones, in upper and in
/// lower case hex.
std::string url_encoded(const std::string& value, bool lower) {
    const char* digits = lower ? "0123456789abcdef" : "0123456789ABCDEF";
    std::string out;
    for (const char ch : value) {
        const auto c = static_cast<unsigned char>(ch);
        if (std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.' || c == '~') {
            out += ch;
        } else {
            out += '%';
            out += digits[c >> 4];
            out += digits[c & 15];
        }
    }
    return out;
}
} // namespace

std::vector<std::string> secret_values(const std::vector<std::string>& environment) {
    constexpr std::size_t shortest = 6;
    std::vector<std::string> values;
    for (const auto& entry : environment) {
        const std::size_t eq = entry.find('=');
        if (eq == std::string::npos || !is_secret_name(std::string_view(entry).substr(0, eq)))
            continue;
        std::string value = entry.substr(eq + 1);
        if (value.size() < shortest)
            continue;
        // Every form a file of the bundle may hold it in: as is, HTML/XML-escaped,
        // JSON-escaped, URL-encoded.
        for (std::string form :
             {html_escaped(value, false), html_escaped(value, true), json_escaped(value),
              url_encoded(value, false), url_encoded(value, true)})
            if (form != value)
                values.push_back(std::move(form));
        values.push_back(std::move(value));
    }
    // Longest first: a value holding another is replaced whole, not around the shorter one.
    std::sort(values.begin(), values.end(),
              [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
    values.erase(std::unique(values.begin(), values.end()), values.end());
    return values;
}

std::vector<std::string> current_environment() {
    std::vector<std::string> out;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e)
        out.emplace_back(*e);
    return out;
}

namespace {
bool is_name_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}
bool ends_value(char c) {
    return std::isspace(static_cast<unsigned char>(c)) != 0 || c == '"' || c == '\'' || c == '&' ||
           c == ';' || c == '\0';
}

/// Each "NAME=value" whose NAME is secret, the value replaced.
std::string redact_assignments(const std::string& text) {
    std::string out;
    out.reserve(text.size());
    std::size_t copied = 0;
    for (std::size_t eq = text.find('='); eq != std::string::npos; eq = text.find('=', eq + 1)) {
        std::size_t start = eq;
        while (start > copied && is_name_char(text[start - 1]))
            --start;
        if (start == eq || !is_secret_name(std::string_view(text).substr(start, eq - start)))
            continue;
        std::size_t end = eq + 1;
        while (end < text.size() && !ends_value(text[end]))
            ++end;
        if (end == eq + 1)
            continue; // "NAME=" holds nothing to hide
        out.append(text, copied, eq + 1 - copied).append(redacted_text);
        copied = end;
        eq = end - 1;
    }
    return out.append(text, copied, std::string::npos);
}
} // namespace

std::string scrub_text(std::string text, const std::vector<std::string>& values) {
    // Each value in one pass that copies forward (never a replace in place, which moves the
    // rest of the text each time: a 16 MiB log of many hits took 39 s that way).
    for (const auto& value : values) {
        if (value.empty())
            continue;
        std::size_t at = text.find(value);
        if (at == std::string::npos)
            continue;
        std::string out;
        out.reserve(text.size());
        std::size_t copied = 0;
        for (; at != std::string::npos; at = text.find(value, copied)) {
            out.append(text, copied, at - copied).append(redacted_text);
            copied = at + value.size();
        }
        out.append(text, copied, std::string::npos);
        text = std::move(out);
    }
    return redact_shapes(redact_assignments(text), redacted_text);
}

namespace {
/// Whether a member name is an environment variable's: any name inside an object that holds
/// an environment, else one written as variables are (MY_API_TOKEN). A record's own fields
/// ("token", "case_key") are data, not secrets.
bool names_a_variable(const std::string& key, bool in_environment) {
    if (in_environment)
        return true;
    return !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
        return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    });
}

json redact_member(const json& doc, const std::vector<std::string>& values, bool in_environment) {
    if (doc.is_string())
        return scrub_text(doc.get<std::string>(), values);
    if (doc.is_array()) {
        json out = json::array();
        for (const auto& item : doc)
            out.push_back(redact_member(item, values, false));
        return out;
    }
    if (!doc.is_object())
        return doc;
    json out = json::object();
    for (const auto& [key, value] : doc.items()) {
        const bool secret = is_secret_name(key) && names_a_variable(key, in_environment) &&
                            !value.is_structured() && !value.is_null();
        out[key] = secret ? json(redacted_text)
                          : redact_member(value, values,
                                          key == "environment" || key == "env" ||
                                              key == "env_set" || key == "environ");
    }
    return out;
}
} // namespace

json redact_json(const json& doc, const std::vector<std::string>& values) {
    return redact_member(doc, values, false);
}

std::string redact_results_lines(const std::string& text, const std::vector<std::string>& values) {
    std::string out;
    std::string previous_line; // as written into the copy
    bool rewritten = false;    // some line before changed: later "prev" must follow
    std::size_t start = 0;
    bool first = true;
    while (start < text.size()) {
        std::size_t end = text.find('\n', start);
        const bool has_newline = end != std::string::npos;
        if (!has_newline)
            end = text.size();
        const std::string line = text.substr(start, end - start);
        if (line.empty()) { // the reader passes over empty lines: they are no link
            out += has_newline ? "\n" : "";
            start = end + 1;
            continue;
        }
        std::string written = line;
        auto parsed = detail::parse_json(line, "results.jsonl");
        if (parsed.is_ok() && parsed.value().is_object()) {
            json record = redact_json(parsed.value(), values);
            const bool changed = record != parsed.value();
            if (record.contains("prev") && (rewritten || changed))
                record["prev"] = first ? std::string() : sha256_hex(previous_line);
            if (changed || (rewritten && record.contains("prev"))) {
                written = detail::dump_safe(record);
                rewritten = true;
            }
        } else {
            written = scrub_text(line, values);
            rewritten = rewritten || written != line;
        }
        out += written;
        if (has_newline)
            out += '\n';
        previous_line = written;
        first = false;
        start = end + 1;
    }
    return out;
}

} // namespace pitfall::runner
