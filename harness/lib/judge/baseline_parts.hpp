// What the baseline files share, private to harness/lib/judge: reading expected/ (profiles.cpp),
// checking a file (expected_file.cpp), judging against it (verdict.cpp) and writing an entry
// (baseline_entry.cpp).
#pragma once

#include "judge/baseline.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

namespace pitfall::runner::baseline_parts {

/// The keys of a ratio entry that bound it (the rest say where its numbers come from).
inline const std::set<std::string> ratio_bound_keys{"min",   "max",     "equals",
                                                    "value", "rel_tol", "abs_tol"};

/// The kinds of record a baseline pins by name, and what one of each is called.
struct record_kind {
    const char* key;       ///< in the result and in the entry's "records"
    const char* one;       ///< "check": "check `x` no longer runs"
    const char* many;      ///< "checks": "checks `x` and `y` no longer run"
    const char* lost_one;  ///< what became of one
    const char* lost_many; ///< and of several
};
inline constexpr record_kind record_kinds[] = {
    {"checks", "check", "checks", "no longer runs", "no longer run"},
    {"measurements", "measurement", "measurements", "is no longer recorded",
     "are no longer recorded"},
    {"samples", "timed series", "timed series", "is no longer recorded", "are no longer recorded"}};

/// Bad input naming the file and the field ("" for the whole document).
status bad_input(const std::string& file, const std::string& field, const std::string& what);
/// The entries of a folder, sorted; an unreadable folder is an error naming it.
status_or<std::vector<std::filesystem::path>> list_folder(const std::filesystem::path& dir);
status_or<nlohmann::json> read_json(const std::string& path);
/// A {"min", "max"} range whose min is above its max is refused, naming the pointer.
status check_range_order(const std::string& file, const std::string& pointer,
                         const nlohmann::json& b);
/// An expected file against the schema and the scenario it names (its variants, ratios).
status check_expected_file(const std::string& file, const nlohmann::json& doc,
                           const scenario_entry& scenario);
/// The same, for a document already validated against the schema.
status check_validated_expected_file(const std::string& file, const nlohmann::json& doc,
                                     const scenario_entry& scenario);
/// A profile's match value: a value (equal), an array (any of), or {"min", "max"} (a range).
bool value_matches(const nlohmann::json& want, const nlohmann::json& have);
/// The names of one kind a result recorded: "checks", "measurements" or "samples".
std::set<std::string> recorded_names(const nlohmann::json& result, const std::string& kind);

} // namespace pitfall::runner::baseline_parts
