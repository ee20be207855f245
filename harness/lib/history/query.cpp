// A case's trend read from the results database, and its two renderings.
#include "history/query.hpp"

#include "report/report_parts.hpp"

#include "pitfall/detail/text.hpp"

#include <algorithm>
#include <cctype>
#include <iomanip>
#include <set>
#include <sstream>

namespace pitfall::history {
using nlohmann::json;

bool valid_since(const std::string& text) {
    // Compared as text with the runs' start times (YYYY-MM-DDTHH:MM:SSZ): only these shapes
    // order the same way.
    static const std::string date = "dddd-dd-dd";
    static const std::string time = "dddd-dd-ddTdd:dd:ddZ";
    auto shaped = [&text](const std::string& shape) {
        if (text.size() != shape.size())
            return false;
        for (std::size_t i = 0; i < shape.size(); ++i)
            if (shape[i] == 'd' ? std::isdigit(static_cast<unsigned char>(text[i])) == 0
                                : text[i] != shape[i])
                return false;
        return true;
    };
    return shaped(date) || shaped(time);
}

namespace {

trend_point point_of(const statement& row, const std::string& series) {
    trend_point p;
    p.at = row.text(0);
    p.run_id = row.text(1);
    p.folder = row.text(2);
    p.host_id = row.text(3);
    p.verdict = row.text(4);
    p.status = row.text(5);
    p.error = row.text(6);
    p.reason = row.text(7);
    if (!row.is_null(8))
        p.peak_rss_bytes = row.integer(8);
    if (!row.is_null(9))
        p.tracked_peak_bytes = row.integer(9);
    if (!row.is_null(10))
        p.wall_seconds = row.real(10);
    // Written by store_run; a row edited by hand into something else is shown without series.
    json all = json::parse(row.text(11), nullptr, false);
    if (!all.is_object())
        all = json::object();
    if (series.empty())
        p.series = std::move(all);
    else if (all.contains(series))
        p.series[series] = all[series];
    return p;
}

} // namespace

const char* case_trend_sql() {
    return "SELECT c.run_at, c.run_id, c.run_folder, c.host_id, c.verdict, c.status, c.error, "
           "c.reason, c.peak_rss_bytes, c.tracked_peak_bytes, c.wall_seconds, "
           "CASE WHEN ?4 IS NULL THEN c.series "
           // SQLite strips the samples, in C, before the row reaches JSON parsing here; what
           // is not a JSON object (a row edited by hand) is left out.
           "WHEN json_valid(c.series) AND json_type(c.series) = 'object' THEN "
           "(SELECT json_group_object(key, json_remove(value, '$.samples')) "
           "FROM json_each(c.series) WHERE type = 'object') ELSE '{}' END "
           "FROM cases c "
           "WHERE c.case_key = ?1 AND (?2 IS NULL OR c.host_id = ?2) "
           "AND (?3 IS NULL OR c.run_at >= ?3) ORDER BY c.run_at, c.run_id";
}

status_or<std::vector<trend_point>> case_trend(const history_db& db, const trend_filter& filter) {
    statement query(db, case_trend_sql());
    PITFALL_TRY(query.prepared("reading the case's trend"));
    query.bind(1, filter.case_key);
    if (filter.host.empty())
        query.bind_null(2);
    else
        query.bind(2, filter.host);
    if (filter.since.empty())
        query.bind_null(3);
    else
        query.bind(3, filter.since);
    if (filter.without_samples)
        query.bind(4, std::int64_t(1));
    else
        query.bind_null(4);
    std::vector<trend_point> points;
    for (;;) {
        PITFALL_ASSIGN_OR_RETURN(const bool row, query.step("reading the case's trend"));
        if (!row)
            break;
        points.push_back(point_of(query, filter.series));
    }
    return points;
}

status_or<std::vector<std::string>> known_cases(const history_db& db) {
    statement query(db, "SELECT DISTINCT case_key FROM cases ORDER BY case_key");
    PITFALL_TRY(query.prepared("listing the cases"));
    std::vector<std::string> keys;
    for (;;) {
        PITFALL_ASSIGN_OR_RETURN(const bool row, query.step("listing the cases"));
        if (!row)
            break;
        keys.push_back(query.text(0));
    }
    return keys;
}

namespace {

std::string outcome_of(const trend_point& p) {
    if (p.status.empty())
        return "-";
    return p.error.empty() ? p.status : p.status + ": " + p.error;
}

std::string median_text(const json& series) {
    const json& median =
        series.is_object() && series.contains("median") ? series["median"] : json();
    if (!median.is_number())
        return "-";
    const std::string unit = series.contains("unit") && series["unit"].is_string()
                                 ? series["unit"].get<std::string>()
                                 : "";
    if (unit == "s")
        return runner::report_parts::human_seconds(median.get<double>());
    std::ostringstream out;
    out << std::setprecision(4) << median.get<double>();
    if (!unit.empty())
        out << ' ' << unit;
    return out.str();
}

std::vector<std::string> series_names(const std::vector<trend_point>& points) {
    std::set<std::string> names;
    for (const auto& p : points)
        for (const auto& item : p.series.items())
            names.insert(item.key());
    return {names.begin(), names.end()};
}

} // namespace

std::string trend_table(const std::vector<trend_point>& points) {
    const std::vector<std::string> names = series_names(points);
    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> head{"time", "run", "host", "verdict", "outcome"};
    for (const auto& name : names)
        head.push_back(name);
    head.emplace_back("memory");
    rows.push_back(head);
    for (const auto& p : points) {
        std::vector<std::string> row{p.at, p.run_id.substr(0, 12),
                                     p.host_id.empty() ? "-" : p.host_id, p.verdict, outcome_of(p)};
        for (const auto& name : names)
            row.push_back(median_text(p.series.contains(name) ? p.series[name] : json()));
        row.push_back(
            p.peak_rss_bytes ? runner::report_parts::human_bytes(double(*p.peak_rss_bytes)) : "-");
        rows.push_back(std::move(row));
    }
    for (auto& row : rows) // text from run folders: never a terminal control sequence
        for (auto& cell : row)
            cell = detail::visible_controls(cell);
    std::vector<std::size_t> width(head.size(), 0);
    for (const auto& row : rows)
        for (std::size_t i = 0; i < row.size(); ++i)
            width[i] = std::max(width[i], row[i].size());
    std::ostringstream out;
    for (const auto& row : rows) {
        std::string line;
        for (std::size_t i = 0; i < row.size(); ++i)
            line += row[i] + (i + 1 < row.size() ? std::string(width[i] - row[i].size() + 2, ' ')
                                                 : std::string());
        out << line << '\n';
    }
    return out.str();
}

json trend_json(const std::string& db_path, const trend_filter& filter,
                const std::vector<trend_point>& points) {
    json list = json::array();
    for (const auto& p : points) {
        auto optional_number = [](const auto& v) { return v ? json(*v) : json(); };
        list.push_back({{"at", p.at},
                        {"run", p.run_id},
                        {"folder", p.folder},
                        {"host_id", p.host_id},
                        {"verdict", p.verdict},
                        {"status", p.status},
                        {"error", p.error},
                        {"reason", p.reason},
                        {"peak_rss_bytes", optional_number(p.peak_rss_bytes)},
                        {"tracked_peak_bytes", optional_number(p.tracked_peak_bytes)},
                        {"wall_seconds", optional_number(p.wall_seconds)},
                        {"series", p.series}});
    }
    return {{"schema", "pitfall.history-trend/1"},
            {"database", db_path},
            {"case", filter.case_key},
            {"filter", {{"series", filter.series}, {"host", filter.host}, {"since", filter.since}}},
            {"points", std::move(list)}};
}

} // namespace pitfall::history
