// The trend page of `pitfall history show --html`: line charts as inline SVG. The run report's
// charts (report/html_charts.cpp) are bars, one per case of one run; these are lines over runs,
// so only the text helpers are shared (escape_markup, human_seconds, human_bytes, fmt).
#include "history/trend_html.hpp"

#include "report/report_parts.hpp"

#include "pitfall/detail/result_file.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <limits>
#include <map>
#include <sstream>

namespace pitfall::history {
namespace {
using nlohmann::json;
using runner::escape_markup;
using runner::report_parts::fmt;

/// Seconds since 1970 of a run's start time (YYYY-MM-DDTHH:MM:SS...), NaN when it is not one.
double epoch_of(const std::string& at) {
    std::tm t{};
    char tail = 0;
    if (std::sscanf(at.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%c", &t.tm_year, &t.tm_mon, &t.tm_mday,
                    &t.tm_hour, &t.tm_min, &t.tm_sec, &tail) < 6)
        return std::nan("");
    t.tm_year -= 1900;
    t.tm_mon -= 1;
    return double(timegm(&t));
}

/// Where each run lies across: its start time when every run has one and they differ, else its
/// place in the trend (a database edited by hand).
std::vector<double> x_values(const std::vector<trend_point>& points, bool& by_time) {
    std::vector<double> xs;
    by_time = true;
    for (const auto& p : points) {
        xs.push_back(epoch_of(p.at));
        by_time = by_time && std::isfinite(xs.back());
    }
    by_time = by_time && !xs.empty() && xs.back() > xs.front();
    if (!by_time)
        for (std::size_t i = 0; i < xs.size(); ++i)
            xs[i] = double(i);
    return xs;
}

enum class unit_kind { seconds, bytes, other };

std::string value_text(double v, unit_kind kind, const std::string& unit) {
    if (kind == unit_kind::seconds)
        return runner::report_parts::human_seconds(v);
    if (kind == unit_kind::bytes)
        return runner::report_parts::human_bytes(v);
    return fmt("%.4g", v) + (unit.empty() ? "" : " " + unit);
}

/// A vertical line across the plot at one run, with a label at its top and a hover text.
struct marker {
    std::size_t at = 0; ///< index into the trend's points
    std::string css;    ///< "verdict" or "cp"
    std::string label;
    std::string title;
};

/// One chart: a line per host through the runs that have a value.
struct line_chart {
    std::string id;
    std::string title;
    std::string unit;
    unit_kind kind = unit_kind::other;
    std::map<std::string, std::vector<std::pair<std::size_t, double>>> by_host; // point, value
    std::vector<marker> markers;
};

struct frame {
    double x0 = 80, x1 = 850, top = 24, bottom = 214; ///< the plot's edges, in pixels
    double lo = 0, hi = 1;                            ///< data values at top and bottom
    double first = 0, last = 1;                       ///< x values at the left and right edges
    double x(double v) const { return x0 + (x1 - x0) * (v - first) / (last - first); }
    double y(double v) const { return bottom - (bottom - top) * (v - lo) / (hi - lo); }
};

/// Round steps (1, 2, 5 times a power of ten) between lo and hi, at most about six.
std::vector<double> y_ticks(double lo, double hi) {
    const double raw = (hi - lo) / 5, p = std::pow(10.0, std::floor(std::log10(raw)));
    const double step = raw <= p ? p : raw <= 2 * p ? 2 * p : raw <= 5 * p ? 5 * p : 10 * p;
    std::vector<double> out;
    for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step)
        out.push_back(v);
    return out;
}

std::string date_text(double epoch, bool by_time, double span) {
    if (!by_time)
        return "run " + fmt("%.0f", epoch + 1);
    const std::time_t t = std::time_t(epoch);
    std::tm parts{};
    gmtime_r(&t, &parts);
    char text[32];
    std::strftime(text, sizeof text, span < 2 * 86400 ? "%m-%d %H:%M" : "%Y-%m-%d", &parts);
    return text;
}

/// Past this many runs a chart draws its lines without a dot (and hover text) per run.
constexpr std::size_t max_dots = 400;

/// A value on the vertical axis: bytes in one unit for the whole axis, with as many decimals as
/// its step needs (a few hundred KiB over 44 MiB would otherwise print "44.9 MiB" thrice).
std::string tick_text(double v, const frame& f, const line_chart& c) {
    if (c.kind != unit_kind::bytes)
        return value_text(v, c.kind, c.unit);
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    double scale = 1;
    for (; f.hi / scale >= 1024 && u < 4; ++u)
        scale *= 1024;
    const std::vector<double> ticks = y_ticks(f.lo, f.hi);
    const double step = ticks.size() > 1 ? (ticks[1] - ticks[0]) / scale : 1;
    const int decimals = std::clamp(int(-std::floor(std::log10(step))), 0, 6);
    char text[48];
    std::snprintf(text, sizeof text, "%.*f %s", decimals, v / scale, units[u]);
    return text;
}

void draw_axes(std::ostringstream& s, const line_chart& c, const frame& f, bool by_time) {
    for (double v : y_ticks(f.lo, f.hi)) {
        const std::string y = fmt("%.1f", f.y(v));
        s << "<line class=\"grid\" x1=\"" << f.x0 << "\" x2=\"" << f.x1 << "\" y1=\"" << y
          << "\" y2=\"" << y << "\"/><text class=\"yt\" x=\"" << f.x0 - 6 << "\" y=\"" << y << "\">"
          << escape_markup(tick_text(v, f, c)) << "</text>\n";
    }
    s << "<line class=\"axis\" x1=\"" << f.x0 << "\" x2=\"" << f.x1 << "\" y1=\"" << f.bottom
      << "\" y2=\"" << f.bottom << "\"/>\n";
    constexpr int x_ticks = 6;
    for (int i = 0; i <= x_ticks; ++i) {
        const double v = f.first + (f.last - f.first) * i / x_ticks;
        s << "<text class=\"xt\" x=\"" << fmt("%.1f", f.x(v)) << "\" y=\"" << f.bottom + 16 << "\">"
          << escape_markup(date_text(v, by_time, f.last - f.first)) << "</text>\n";
    }
}

void draw_lines(std::ostringstream& s, const line_chart& c, const frame& f,
                const std::vector<trend_point>& points, const std::vector<double>& xs) {
    std::size_t drawn = 0, host = 0;
    for (const auto& [host_id, values] : c.by_host)
        drawn += values.size();
    for (const auto& [host_id, values] : c.by_host) {
        const std::string css = "h" + std::to_string(host++ % 6);
        s << "<polyline class=\"" << css << "\" points=\"";
        for (const auto& [at, v] : values)
            s << fmt("%.1f", f.x(xs[at])) << ',' << fmt("%.1f", f.y(v)) << ' ';
        s << "\"><title>" << escape_markup("host " + (host_id.empty() ? "(unknown)" : host_id))
          << "</title></polyline>\n";
        if (drawn > max_dots)
            continue;
        for (const auto& [at, v] : values)
            s << "<circle class=\"" << css << "\" cx=\"" << fmt("%.1f", f.x(xs[at])) << "\" cy=\""
              << fmt("%.1f", f.y(v)) << "\" r=\"2.5\"><title>"
              << escape_markup(points[at].at + "  " + value_text(v, c.kind, c.unit) + "  " +
                               points[at].verdict + "  " + points[at].folder)
              << "</title></circle>\n";
    }
}

/// The markers' lines, each with its hover text; a label only where it has room (one within 40 px
/// of an earlier one of its kind would print over it: many verdict flips, one step on 3 hosts).
void draw_markers(std::ostringstream& s, const line_chart& c, const frame& f,
                  const std::vector<double>& xs) {
    // kind -> the spans [left, right] of its labels so far, in pixels
    std::map<std::string, std::vector<std::pair<double, double>>> labelled;
    for (const auto& m : c.markers) {
        const double at = f.x(xs[m.at]);
        const std::string x = fmt("%.1f", at);
        s << "<line class=\"" << m.css << "\" x1=\"" << x << "\" x2=\"" << x << "\" y1=\""
          << f.top - 8 << "\" y2=\"" << f.bottom << "\"><title>" << escape_markup(m.title)
          << "</title></line>\n";
        auto& taken = labelled[m.css];
        const double width = 6.0 * double(m.label.size()) + 8; // 9-11 px text and a gap
        double left = m.css == "cp" ? at - width / 2 : at, right = left + width;
        const bool at_right_edge = right > f.x1 + 40; // drawn ending at its line
        if (at_right_edge) {
            left = at - width;
            right = at;
        }
        if (std::any_of(taken.begin(), taken.end(), [&](const std::pair<double, double>& other) {
                return left < other.second && other.first < right;
            }))
            continue;
        taken.emplace_back(left, right);
        s << "<text class=\"m-" << m.css << (at_right_edge ? " end" : "") << "\" x=\"" << x
          << "\" y=\"" << (m.css == "cp" ? f.top - 10 : f.bottom - 4) << "\">"
          << escape_markup(m.label) << "</text>\n";
    }
}

std::string svg_of(const line_chart& c, const std::vector<trend_point>& points,
                   const std::vector<double>& xs, bool by_time) {
    frame f;
    f.first = xs.front();
    f.last = xs.size() > 1 && xs.back() > xs.front() ? xs.back() : xs.front() + 1;
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (const auto& [host_id, values] : c.by_host)
        for (const auto& [at, v] : values) {
            lo = std::min(lo, v);
            hi = std::max(hi, v);
        }
    // From zero when the values are all of one sign and near it; else around them, so that a
    // step of a few percent is not a flat line at the top -- and then the chart says so in
    // words beside it and with a break on the axis, so that 1.5% never reads as a cliff.
    const double pad = hi > lo ? (hi - lo) * 0.08 : std::max(std::abs(hi) * 0.05, 1e-12);
    f.lo = lo >= 0 && lo < (hi - lo) ? 0 : lo - pad;
    f.hi = hi + pad;
    std::string scale_note;
    if (f.lo != 0 && f.hi > 0 && f.lo > 0)
        scale_note = "vertical axis from " + tick_text(f.lo, f, c) +
                     ", not zero: its whole height is " + fmt("%.3g", 100 * (f.hi - f.lo) / f.hi) +
                     "% of the top value";
    std::ostringstream s;
    s << "<figure class=\"chart\" id=\"" << c.id << "\"><figcaption>" << escape_markup(c.title);
    if (!scale_note.empty())
        s << " <span class=\"scale-note\">(" << escape_markup(scale_note) << ")</span>";
    s << "</figcaption><svg xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" width=\"900\" "
         "height=\"240\" viewBox=\"0 0 900 240\"><title>"
      << escape_markup(c.title) << "</title>\n";
    draw_axes(s, c, f, by_time);
    if (!scale_note.empty()) // an axis break: two short slashes across the foot of the axis
        s << "<path class=\"axis-break\" d=\"M" << f.x0 - 6 << ' ' << f.bottom - 2 << " l12 -6 M"
          << f.x0 - 6 << ' ' << f.bottom + 4 << " l12 -6\"/>\n";
    draw_markers(s, c, f, xs);
    draw_lines(s, c, f, points, xs);
    s << "</svg></figure>\n";
    return s.str();
}

struct verdict_change {
    std::size_t at = 0;
    std::string from, to;
};

std::vector<verdict_change> verdict_changes(const std::vector<trend_point>& points) {
    std::vector<verdict_change> out;
    for (std::size_t i = 1; i < points.size(); ++i)
        if (points[i].verdict != points[i - 1].verdict)
            out.push_back({i, points[i - 1].verdict, points[i].verdict});
    return out;
}

std::vector<marker> verdict_markers(const std::vector<trend_point>& points,
                                    const std::vector<verdict_change>& changes) {
    std::vector<marker> out;
    for (const auto& v : changes) {
        const trend_point& p = points[v.at];
        out.push_back({v.at, "verdict", v.to,
                       "verdict " + v.from + " -> " + v.to + " at " + p.at + " (" + p.folder + ")" +
                           (p.reason.empty() ? "" : ": " + p.reason)});
    }
    return out;
}

std::string percent(double fraction) {
    return fmt("%+.1f", 100 * fraction) + "%";
}

/// One chart per series (all hosts in it, each its own line), with its change points.
std::vector<line_chart> series_charts(const std::vector<trend_point>& points,
                                      const std::vector<series_changes>& changes,
                                      const std::vector<marker>& verdicts) {
    std::map<std::string, line_chart> charts;
    for (const auto& g : changes) {
        line_chart& c = charts[g.series];
        c.title = g.series + " (median per run)";
        c.unit = g.unit;
        c.kind = g.unit == "s" ? unit_kind::seconds : unit_kind::other;
        auto& line = c.by_host[g.host_id];
        for (const trend_point* p : g.runs)
            line.emplace_back(std::size_t(p - points.data()),
                              p->series[g.series]["median"].get<double>());
        for (const auto& cp : g.analysis.change_points) {
            const trend_point* first = g.runs[std::size_t(cp.run_index)];
            c.markers.push_back(
                {std::size_t(first - points.data()), "cp", percent(cp.step),
                 "change point on host " + (g.host_id.empty() ? "(unknown)" : g.host_id) +
                     ", from " + first->at + " (" + first->folder +
                     "): " + value_text(cp.median_before, c.kind, c.unit) + " -> " +
                     value_text(cp.median_after, c.kind, c.unit) + ", " + percent(cp.step) +
                     ", confidence " + fmt("%.3f", cp.confidence)});
        }
    }
    std::vector<line_chart> out;
    for (auto& [name, c] : charts) { // ids by place: a series' name is any text
        c.id = "chart-series-" + std::to_string(out.size());
        c.markers.insert(c.markers.begin(), verdicts.begin(), verdicts.end());
        out.push_back(std::move(c));
    }
    return out;
}

line_chart memory_chart(const std::vector<trend_point>& points,
                        const std::vector<marker>& verdicts) {
    line_chart c{"chart-memory", "peak RSS of the case's process", "", unit_kind::bytes, {},
                 verdicts};
    for (std::size_t i = 0; i < points.size(); ++i)
        if (points[i].peak_rss_bytes)
            c.by_host[points[i].host_id].emplace_back(i, double(*points[i].peak_rss_bytes));
    return c;
}

std::string changes_tables(const std::vector<trend_point>& points,
                           const std::vector<verdict_change>& verdicts,
                           const std::vector<series_changes>& changes) {
    std::ostringstream s;
    s << "<h2>Verdict changes</h2>\n";
    if (verdicts.empty())
        s << "<p class=\"muted\">The verdict is the same in every run.</p>\n";
    else
        s << "<table id=\"verdict-changes\"><tr><th>run</th><th>folder</th><th>verdict</th>"
             "<th>reason</th></tr>\n";
    for (const auto& v : verdicts) {
        const trend_point& p = points[v.at];
        s << "<tr><td>" << escape_markup(p.at) << "</td><td>" << escape_markup(p.folder)
          << "</td><td>" << escape_markup(v.from + " -> " + v.to) << "</td><td>"
          << escape_markup(p.reason) << "</td></tr>\n";
    }
    if (!verdicts.empty())
        s << "</table>\n";
    s << "<h2>Change points</h2>\n<table id=\"change-points\"><tr><th>series</th><th>host</th>"
         "<th>runs</th><th>shape</th><th>from run</th><th>before -> after</th><th>step</th>"
         "<th>confidence</th></tr>\n";
    for (const auto& g : changes) {
        const unit_kind kind = g.unit == "s" ? unit_kind::seconds : unit_kind::other;
        const std::string head = "<tr><td>" + escape_markup(g.series) + "</td><td>" +
                                 escape_markup(g.host_id) + "</td><td>" +
                                 std::to_string(g.runs.size()) + "</td><td>" +
                                 std::string(to_string(g.analysis.shape)) + "</td>";
        if (g.analysis.change_points.empty())
            s << head << "<td colspan=\"4\" class=\"muted\">none</td></tr>\n";
        for (const auto& cp : g.analysis.change_points) {
            const trend_point& first = *g.runs[std::size_t(cp.run_index)];
            s << head << "<td>" << escape_markup(first.at) << "</td><td>"
              << escape_markup(value_text(cp.median_before, kind, g.unit) + " -> " +
                               value_text(cp.median_after, kind, g.unit))
              << "</td><td>" << escape_markup(percent(cp.step)) << "</td><td>"
              << fmt("%.3f", cp.confidence) << "</td></tr>\n";
        }
    }
    s << "</table>\n";
    return s.str();
}

constexpr const char* page_style = R"css(
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.3em;word-break:break-all}.muted{color:#777}
figure.chart{margin:1em 0}figcaption{font-weight:600}
.scale-note{color:#a33;font-weight:normal}.axis-break{stroke:#a33;stroke-width:2}svg text{font-size:11px;fill:#444}.yt{text-anchor:end;dominant-baseline:middle}
.xt{text-anchor:middle}.axis{stroke:#888}.grid{stroke:#eee}
polyline{fill:none;stroke-width:1.5}
.h0{stroke:#1f77b4;fill:#1f77b4}.h1{stroke:#ff7f0e;fill:#ff7f0e}.h2{stroke:#2ca02c;fill:#2ca02c}
.h3{stroke:#9467bd;fill:#9467bd}.h4{stroke:#8c564b;fill:#8c564b}.h5{stroke:#17becf;fill:#17becf}
polyline.h0,polyline.h1,polyline.h2,polyline.h3,polyline.h4,polyline.h5{fill:none}
line.verdict{stroke:#d62728;stroke-width:1;opacity:.5}.m-verdict{fill:#d62728;font-size:9px}
line.cp{stroke:#000;stroke-dasharray:4 3}.m-cp{font-weight:600;text-anchor:middle}
text.end{text-anchor:end}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:2px 6px;
text-align:left;vertical-align:top}
)css";

} // namespace

std::string trend_html(const std::string& db_path, const trend_filter& filter,
                       const std::vector<trend_point>& points,
                       const std::vector<series_changes>& changes) {
    std::ostringstream s;
    s << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>"
      << escape_markup("pitfall history: " + filter.case_key) << "</title><style>" << page_style
      << "</style></head><body>\n<h1>" << escape_markup(filter.case_key) << "</h1>\n<p>"
      << points.size() << (points.size() == 1 ? " run" : " runs");
    if (!points.empty())
        s << ", " << escape_markup(points.front().at) << " to " << escape_markup(points.back().at);
    s << ", from <code>" << escape_markup(db_path) << "</code>";
    if (!filter.series.empty() || !filter.host.empty() || !filter.since.empty())
        s << " (series " << escape_markup(filter.series.empty() ? "all" : filter.series)
          << ", host " << escape_markup(filter.host.empty() ? "all" : filter.host) << ", since "
          << escape_markup(filter.since.empty() ? "the first run" : filter.since) << ")";
    s << ". Each line is one host; red lines mark a verdict change, dashed lines a change point "
         "with its step (docs/change-points.md).</p>\n";
    if (points.empty())
        return s.str() + "<p class=\"muted\">No run to draw.</p></body></html>\n";
    bool by_time = false;
    const std::vector<double> xs = x_values(points, by_time);
    const auto verdicts = verdict_changes(points);
    const auto marks = verdict_markers(points, verdicts);
    for (const auto& c : series_charts(points, changes, marks))
        s << svg_of(c, points, xs, by_time);
    if (const line_chart memory = memory_chart(points, marks); !memory.by_host.empty())
        s << svg_of(memory, points, xs, by_time);
    else
        s << "<p class=\"muted\" id=\"chart-memory\">No run recorded the peak RSS.</p>\n";
    s << changes_tables(points, verdicts, changes) << "</body></html>\n";
    return s.str();
}

status write_trend_html(const std::string& path, const std::string& db_path,
                        const trend_filter& filter, const std::vector<trend_point>& points) {
    PITFALL_ASSIGN_OR_RETURN(const auto changes, changes_of(points));
    return write_file_atomically(path, trend_html(db_path, filter, points, changes));
}

} // namespace pitfall::history
