#include "history/changes.hpp"

#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <utility>

namespace pitfall::history {
namespace {
using nlohmann::json;

std::string percent(double fraction) {
    char text[32];
    std::snprintf(text, sizeof text, "%+.1f%%", 100 * fraction);
    return text;
}

std::string number(double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%.6g", value);
    return text;
}

/// The series' median in one run, NaN where the run did not time it.
double median_in(const trend_point& p, const std::string& series) {
    if (!p.series.is_object() || !p.series.contains(series))
        return std::nan("");
    const json& s = p.series[series];
    return s.is_object() && s.contains("median") && s["median"].is_number()
               ? s["median"].get<double>()
               : std::nan("");
}

std::string unit_in(const trend_point& p, const std::string& series) {
    const json& s = p.series[series];
    return s.is_object() && s.contains("unit") && s["unit"].is_string()
               ? s["unit"].get<std::string>()
               : std::string();
}

} // namespace

status_or<std::vector<series_changes>> changes_of(const std::vector<trend_point>& points,
                                                  const change_point_options& options) {
    // (series, host) -> the runs that timed it, in the trend's order (oldest first).
    std::map<std::pair<std::string, std::string>, series_changes> groups;
    for (const auto& p : points) {
        if (!p.series.is_object())
            continue;
        for (const auto& item : p.series.items()) {
            if (std::isnan(median_in(p, item.key())))
                continue;
            auto& g = groups[{item.key(), p.host_id}];
            g.series = item.key();
            g.host_id = p.host_id;
            if (g.unit.empty())
                g.unit = unit_in(p, item.key());
            g.runs.push_back(&p);
        }
    }
    std::vector<series_changes> out;
    for (auto& [key, g] : groups) {
        std::vector<series_point> values;
        for (std::size_t i = 0; i < g.runs.size(); ++i)
            values.push_back({static_cast<std::int64_t>(i), median_in(*g.runs[i], g.series)});
        PITFALL_ASSIGN_OR_RETURN(g.analysis, find_change_points(values, options));
        out.push_back(std::move(g));
    }
    return out;
}

std::string changes_table(const std::string& case_key, const std::vector<series_changes>& found) {
    std::ostringstream out;
    if (found.empty())
        out << case_key << ": no series with a median in the runs recorded\n";
    for (const auto& g : found) {
        out << case_key << " " << g.series << (g.unit.empty() ? "" : " (" + g.unit + ")")
            << " on host " << (g.host_id.empty() ? "(unknown)" : g.host_id) << ": " << g.runs.size()
            << " runs, " << to_string(g.analysis.shape);
        if (g.analysis.shape == series_shape::drift)
            out << " (" << percent(g.analysis.trend_change) << " over the runs)";
        out << '\n';
        for (const auto& cp : g.analysis.change_points) {
            const trend_point& first = *g.runs[static_cast<std::size_t>(cp.run_index)];
            out << "  from run " << first.at << " (" << first.folder
                << "): " << number(cp.median_before) << " -> " << number(cp.median_after) << ", "
                << percent(cp.step) << ", confidence " << number(cp.confidence) << '\n';
        }
    }
    return out.str();
}

json changes_json(const std::string& case_key, const std::vector<series_changes>& found) {
    json series = json::array();
    for (const auto& g : found) {
        json points = json::array();
        for (const auto& cp : g.analysis.change_points) {
            const trend_point& first = *g.runs[static_cast<std::size_t>(cp.run_index)];
            points.push_back({{"first_run", first.run_id},
                              {"at", first.at},
                              {"folder", first.folder},
                              {"median_before", cp.median_before},
                              {"median_after", cp.median_after},
                              {"step", cp.step},
                              {"confidence", cp.confidence},
                              {"p_value", cp.p_value}});
        }
        series.push_back({{"series", g.series},
                          {"unit", g.unit},
                          {"host_id", g.host_id},
                          {"runs", g.runs.size()},
                          {"shape", std::string(to_string(g.analysis.shape))},
                          {"trend_change", g.analysis.trend_change},
                          {"change_points", points}});
    }
    return {{"schema", "pitfall.history-changes/1"}, {"case", case_key}, {"series", series}};
}

} // namespace pitfall::history
