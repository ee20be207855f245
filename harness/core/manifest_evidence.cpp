#include "manifest_parts.hpp"

#include <algorithm>
#include <cstdint>

// scenario.json's "evidence": the public threads (GitHub issues and pull requests) a scenario
// reproduces, each named once.
namespace pitfall::manifest_parts {
namespace {
// owner/name as GitHub spells them: letters, digits, '-', '_' and '.', one slash.
bool is_repo_name(const std::string& text) {
    const auto slash = text.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == text.size() ||
        text.find('/', slash + 1) != std::string::npos || text.size() > 140)
        return false;
    return std::all_of(text.begin(), text.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '-' || c == '_' || c == '.' || c == '/';
    });
}

/// One field of an item: its shape where it is gated_by or seen_on, else a known name.
status check_evidence_field(const reader& r, const std::string& path, const std::string& field,
                            const json& value) {
    if (field == "gated_by") {
        if (!value.is_array() || value.empty() ||
            !std::all_of(value.begin(), value.end(),
                         [](const json& ref) { return ref.is_object(); }))
            return r.fail(path + field, "expected a non-empty array of {variant, check | "
                                        "measurement | event | error | signal | ran_on}");
    } else if (field == "seen_on") {
        if (!value.is_string() || (value != "cuda" && value != "cpu"))
            return r.fail(path + field, "expected \"cuda\" or \"cpu\"");
    } else if (field != "repo" && field != "number" && field != "title" && field != "shows") {
        return r.fail(path + field,
                      "unknown field (repo, number, title, shows, seen_on, gated_by)");
    }
    return status::ok();
}

/// One item of "evidence", {repo, number, title, shows}, added to m.evidence.
status read_evidence_item(const reader& r, const json& item, const std::string& path, manifest& m) {
    if (!item.is_object())
        return r.fail(path.substr(0, path.size() - 1),
                      "expected an object {repo, number, title, shows}");
    // gated_by and seen_on say which baselines hold the thread's effect: their shape is
    // read here, their names against expected/ by ci/evidence.py (catalog --check).
    for (const auto& [field, value] : item.items())
        PITFALL_TRY(check_evidence_field(r, path, field, value));
    evidence_spec e;
    PITFALL_TRY(r.string(item, path, "repo", e.repo, true));
    if (!is_repo_name(e.repo))
        return r.fail(path + "repo", "'" + e.repo + "' is not owner/name");
    if (!item.contains("number") || !item["number"].is_number_unsigned() ||
        item["number"].get<std::uint64_t>() == 0 || item["number"].get<std::uint64_t>() > 100000000)
        return r.fail(path + "number", "expected an issue number in [1, 100000000]");
    e.number = item["number"].get<std::uint64_t>();
    PITFALL_TRY(r.string(item, path, "title", e.title, true));
    PITFALL_TRY(r.string(item, path, "shows", e.shows, true));
    if (e.title.empty() || e.shows.empty())
        return r.fail(path + (e.title.empty() ? "title" : "shows"), "must not be empty");
    for (const auto& seen : m.evidence)
        if (seen.repo == e.repo && seen.number == e.number)
            return r.fail(path + "number",
                          e.repo + "#" + std::to_string(e.number) + " is listed twice");
    m.evidence.push_back(std::move(e));
    return status::ok();
}
} // namespace

status read_evidence(const reader& r, const json& doc, manifest& m) {
    if (!doc.contains("evidence"))
        return status::ok();
    const json& list = doc["evidence"];
    if (!list.is_array())
        return r.fail("evidence", "expected an array of {repo, number, title, shows}");
    for (std::size_t i = 0; i < list.size(); ++i)
        PITFALL_TRY(read_evidence_item(r, list[i], "evidence[" + std::to_string(i) + "].", m));
    return status::ok();
}

} // namespace pitfall::manifest_parts
