// What the HTML report's page and its charts share, private to harness/lib/report.
#pragma once

#include "report/report_parts.hpp"

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace pitfall::runner::report_parts {

/// The run's cases as a grid: one row per scenario and variant, one column per backend.
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

case_grid make_grid(const run_data& run);
/// The page anchor of a case ("case-" and its key, made safe for an id).
std::string case_anchor(const std::string& key);
/// A JSON value as text: a string as itself, anything else as its JSON.
std::string text_of(const json& v);
/// The numbers of a JSON array (anything else in it skipped).
std::vector<double> numbers(const json& values);
/// A JSON value, indented, in a <pre>.
std::string pre_json(const json& j);
/// The "Charts" section: sample times, process times, ratios and memory, as inline SVG.
std::string html_charts(const run_data& run, const case_grid& g);

} // namespace pitfall::runner::report_parts
