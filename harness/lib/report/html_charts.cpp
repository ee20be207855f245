// The HTML report's charts: horizontal bars as inline SVG.
#include "report/html_parts.hpp"

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
using namespace report_parts;
namespace report_parts {
std::string case_anchor(const std::string& key) {
    std::string id = "case-";
    for (char c : key)
        id += (std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_') ? c : '-';
    return id;
}

std::string text_of(const json& v) {
    return v.is_string() ? v.get<std::string>() : v.dump();
}

/// The numbers of a JSON array; anything else in it is skipped.
std::vector<double> numbers(const json& values) {
    std::vector<double> out;
    for (const auto& v : values)
        if (v.is_number())
            out.push_back(v.get<double>());
    return out;
}

using series_list = std::vector<std::pair<std::string, std::vector<double>>>;

/// A result's timed series (unit "s") holding at least one sample, by name.
series_list timed_series(const json& result) {
    series_list out;
    const json samples = obj(result, "samples");
    for (const auto& [name, series] : samples.items())
        if (str(series, "unit", "s") == "s")
            if (auto values = numbers(arr(series, "values")); !values.empty())
                out.emplace_back(name, std::move(values));
    return out;
}

/// What a CUDA case must show before the charts draw it: without it, a bar would put GPU time
/// or memory where no GPU ran (no driver: the case stops at its first CUDA call).
enum class evidence { timing, device_memory };

/// Whether a case's bars belong in a chart: not when it was unsupported here, and for a CUDA
/// case only with the evidence (a timed series; device allocations).
bool charted(const json& r, evidence need) {
    if (str(r, "verdict") == "UNSUPPORTED" || str(obj(r, "observed"), "status") == "unsupported")
        return false;
    if (str(r, "backend") != "cuda")
        return true;
    const json result = obj(r, "result");
    if (need == evidence::timing)
        return !timed_series(result).empty();
    return num(obj(result, "memory"), "tracked_peak_bytes", 0) > 0;
}

/// The verdict grid's layout: scenario x variant rows (by scenario, then run order), one column
/// per backend. The time charts follow it, so a case's CPU and GPU bars sit side by side.

case_grid make_grid(const run_data& run) {
    case_grid g;
    for (const auto& r : run.cases) {
        const std::string b = str(r, "backend"), s = str(r, "scenario"), v = str(r, "variant");
        if (std::find(g.backends.begin(), g.backends.end(), b) == g.backends.end())
            g.backends.push_back(b);
        if (g.at.count({s, v}) == 0)
            g.rows.emplace_back(s, v);
        g.at[{s, v}][b] = &r;
    }
    std::stable_sort(g.rows.begin(), g.rows.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    return g;
}

// ---- charts: horizontal bars as inline SVG

struct bar {
    std::string label;
    std::string series; ///< its colour and legend entry (series_names)
    double value;
    std::string value_text;         ///< printed after the bar
    std::string title;              ///< hover text
    std::vector<double> marks = {}; ///< bound lines (a baseline's or a profile's bounds)
};

/// What each series means, in legend order.
const std::pair<const char*, const char*> series_names[] = {
    {"cpu", "CPU"},
    {"cuda", "GPU (CUDA)"},
    {"out", "outside its bound (fails the run)"},
    {"tracked", "tracked peak: allocations through the backend (device memory on CUDA)"},
    {"rss", "peak RSS of the case's process (host memory)"},
};

enum class axis_kind { seconds, bytes, ratio };

struct chart {
    std::string id;
    std::string title;
    std::string axis; ///< what the axis measures, with its unit
    axis_kind kind;
    std::vector<bar> bars;
    std::string marks_text = "baseline bound"; ///< what a bound line means, for the legend
};

/// A tick's value as the axis prints it: short, in the axis's unit.
std::string tick_text(double v, axis_kind kind) {
    if (kind == axis_kind::ratio)
        return fmt("%g", v) + "x";
    if (kind == axis_kind::bytes) {
        const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
        int u = 0;
        for (; v >= 1024 && u < 4; ++u)
            v /= 1024;
        return fmt("%g", v) + " " + units[u];
    }
    if (v == 0 || v >= 1)
        return fmt("%g", v) + " s";
    if (v >= 1e-3)
        return fmt("%g", v * 1e3) + " ms";
    if (v >= 1e-6)
        return fmt("%g", v * 1e6) + " us";
    return fmt("%g", v * 1e9) + " ns";
}

/// Where values land: a log scale when they span more than 50x (ratios always: 2x and 0.5x
/// lie equally far from 1), else linear from 0.
struct scale {
    bool log;
    double lo, hi;    ///< the axis's ends: values, or their log10 on a log scale
    double x0, width; ///< pixels

    double x(double v) const {
        const double at = log ? std::log10(std::max(v, std::pow(10.0, lo))) : v;
        return x0 + width * std::clamp((at - lo) / (hi - lo), 0.0, 1.0);
    }
    bool within(double v) const {
        const double at = log ? std::log10(v) : v;
        return v > 0 && at >= lo - 1e-9 && at <= hi + 1e-9;
    }
};

scale make_scale(const chart& c, double x0, double width) {
    double lo = std::numeric_limits<double>::infinity(), hi = 0;
    for (const auto& b : c.bars) {
        std::vector<double> values = b.marks;
        values.push_back(b.value);
        for (double v : values)
            if (std::isfinite(v) && v > 0) {
                lo = std::min(lo, v);
                hi = std::max(hi, v);
            }
    }
    if (c.kind == axis_kind::ratio) {
        lo = std::min(lo, 1.0);
        hi = std::max(hi, 1.0);
    }
    if (!(hi > 0))
        lo = hi = 1;
    if (c.kind == axis_kind::ratio || hi / lo > 50)
        return {true, std::log10(lo) - 0.1, std::log10(hi) + 0.1, x0, width};
    return {false, 0, hi * 1.05, x0, width};
}

/// Tick values: 1, 2, 5 per decade on a log scale (powers of 2 for bytes), thinned to at most
/// 8; a round step on a linear one.
std::vector<double> ticks(const scale& s, axis_kind kind) {
    constexpr std::size_t most = 8;
    std::vector<double> out;
    const bool bytes = kind == axis_kind::bytes;
    if (!s.log) {
        const double raw = s.hi / 5, p = std::pow(10.0, std::floor(std::log10(raw)));
        const double step = bytes          ? std::pow(2.0, std::ceil(std::log2(raw)))
                            : raw <= p     ? p
                            : raw <= 2 * p ? 2 * p
                            : raw <= 5 * p ? 5 * p
                                           : 10 * p;
        for (int i = 0; i * step <= s.hi; ++i)
            out.push_back(i * step);
        return out;
    }
    const double base = bytes ? 2 : 10;
    const double first = std::floor(s.lo / std::log10(base)),
                 last = std::ceil(s.hi / std::log10(base));
    const int strides[] = {1,  1,  2, 5,
                           10, 20, 50}; // in exponents; 2 and 5 too on the first pass only
    for (std::size_t pass = 0; pass < std::size(strides); ++pass) {
        const int stride = strides[pass];
        const bool with_2_5 = !bytes && pass == 0;
        out.clear();
        for (double e = std::ceil(first / stride) * stride; e <= last; e += stride)
            for (const double m : {1.0, 2.0, 5.0})
                if (const double v = m * std::pow(base, e); (m == 1 || with_2_5) && s.within(v))
                    out.push_back(v);
        if (out.size() <= most)
            break;
    }
    return out;
}

/// Past max_bars a chart keeps the most telling (largest; for a ratio, farthest from 1) and
/// says so in its title: a chart of a thousand rows is a wall, not a picture.
std::string keep_most_telling(chart& c) {
    constexpr std::size_t max_bars = 60;
    if (c.bars.size() <= max_bars)
        return "";
    const bool ratio = c.kind == axis_kind::ratio;
    const auto weight = [&](const bar& b) {
        return ratio ? std::abs(std::log(std::max(b.value, 1e-12))) : b.value;
    };
    std::stable_sort(c.bars.begin(), c.bars.end(),
                     [&](const bar& a, const bar& b) { return weight(a) > weight(b); });
    std::string note =
        cat(" (the ", std::to_string(max_bars), " ", ratio ? "farthest from 1" : "largest", " of ",
            std::to_string(c.bars.size()), ")");
    c.bars.resize(max_bars);
    return note;
}

/// The legend: the series this chart draws, and its bound lines when it has any.
std::string legend_html(const chart& c) {
    std::set<std::string> present;
    bool marks = false;
    for (const auto& b : c.bars) {
        present.insert(b.series);
        marks = marks || !b.marks.empty();
    }
    std::string out = "<p class=\"legend\">";
    for (const auto& [series, text] : series_names)
        if (present.count(series) != 0)
            out +=
                "<span class=\"key k-" + std::string(series) + "\"></span>" + escape_markup(text);
    if (marks)
        out += "<span class=\"key k-bound\"></span>" + escape_markup(c.marks_text);
    return out + "</p>\n";
}

/// The axis under the rows: a line, its ticks with their values (and grid lines up through the
/// rows, drawn first so the bars cover them), and what it measures.
void svg_axis(std::ostringstream& s, const chart& c, const scale& sc, int y, int top) {
    s << "<line class=\"axis\" x1=\"" << sc.x0 << "\" x2=\"" << sc.x0 + sc.width << "\" y1=\"" << y
      << "\" y2=\"" << y << "\"/>\n";
    for (double v : ticks(sc, c.kind)) {
        const std::string x = fmt("%.1f", sc.x(v));
        s << "<line class=\"tick\" x1=\"" << x << "\" x2=\"" << x << "\" y1=\"" << top << "\" y2=\""
          << y + 4 << "\"/><text x=\"" << x << "\" y=\"" << y + 15 << "\" class=\"tv\">"
          << escape_markup(tick_text(v, c.kind)) << "</text>\n";
    }
    s << "<text x=\"" << sc.x0 << "\" y=\"" << y + 31 << "\" class=\"ca\">" << escape_markup(c.axis)
      << (sc.log ? ", log scale" : "") << "</text>\n";
}

/// One row: its label, its bar (from 0, or from 1 for a ratio), bound lines, and its value.
void svg_row(std::ostringstream& s, const chart& c, const scale& sc, const bar& b, int y,
             int row_h) {
    const double origin = c.kind == axis_kind::ratio ? sc.x(1) : sc.x0;
    const double x = std::isfinite(b.value) && b.value > 0 ? sc.x(b.value) : sc.x0;
    s << "<text x=\"" << sc.x0 - 6 << "\" y=\"" << y + 12 << "\" class=\"cl\">"
      << escape_markup(b.label) << "</text>";
    s << "<rect class=\"b-" << b.series << "\" x=\"" << fmt("%.1f", std::min(origin, x))
      << "\" y=\"" << y + 2 << "\" width=\"" << fmt("%.1f", std::max(1.0, std::abs(x - origin)))
      << "\" height=\"" << row_h - 4 << "\"><title>" << escape_markup(b.title) << "</title></rect>";
    for (double m : b.marks) {
        const std::string mx = fmt("%.1f", sc.x(m));
        s << "<line class=\"bound\" x1=\"" << mx << "\" x2=\"" << mx << "\" y1=\"" << y
          << "\" y2=\"" << y + row_h << "\"><title>"
          << escape_markup(c.marks_text + " " + tick_text(m, c.kind)) << "</title></line>";
    }
    s << "<text x=\"" << fmt("%.1f", std::max(origin, x) + 4) << "\" y=\"" << y + 12
      << "\" class=\"cv\">" << escape_markup(b.value_text) << "</text>\n";
}

/// A chart in its own block (id `c.id`): legend, then the bars; a line saying so when there is
/// nothing to draw.
std::string svg_chart(chart c) {
    std::ostringstream s;
    s << "<div id=\"" << c.id << "\" class=\"chart-box\">";
    const std::string shown_note = keep_most_telling(c);
    if (c.bars.empty()) {
        s << "<p class=\"muted\">" << escape_markup(c.title)
          << ": nothing to draw in this run.</p></div>\n";
        return s.str();
    }
    // Labels are right-aligned against the plot: 430 px holds about 70 characters at 11 px; a
    // longer one keeps its end (the variant and backend tell cases apart) after an ellipsis.
    constexpr std::size_t max_label = 70;
    std::size_t longest_value = 0;
    for (auto& b : c.bars) {
        if (b.label.size() > max_label)
            b.label = "\xE2\x80\xA6" + b.label.substr(b.label.size() - (max_label - 1));
        longest_value = std::max(longest_value, b.value_text.size());
    }
    const int label_w = 430, plot_w = 420, row_h = 16, top = 4;
    const int width = label_w + plot_w + 12 + static_cast<int>(longest_value) * 7;
    const int axis_y = top + static_cast<int>(c.bars.size()) * row_h + 2;
    const int height = axis_y + 38;
    const scale sc = make_scale(c, label_w, plot_w);
    s << "<p class=\"ct\">" << escape_markup(c.title + shown_note) << "</p>" << legend_html(c)
      << "<figure class=\"chart\"><svg xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" width=\""
      << width << "\" height=\"" << height << "\" viewBox=\"0 0 " << width << ' ' << height
      << "\">\n<title>" << escape_markup(c.title) << "</title>\n";
    svg_axis(s, c, sc, axis_y, top);
    for (std::size_t i = 0; i < c.bars.size(); ++i)
        svg_row(s, c, sc, c.bars[i], top + static_cast<int>(i) * row_h, row_h);
    if (c.kind == axis_kind::ratio) // 1: numerator and denominator alike; bars grow from it
        s << "<line class=\"one\" x1=\"" << fmt("%.1f", sc.x(1)) << "\" x2=\""
          << fmt("%.1f", sc.x(1)) << "\" y1=\"" << top << "\" y2=\"" << axis_y << "\"/>\n";
    s << "</svg></figure></div>\n";
    return s.str();
}

/// The lines a bound draws: its min and max, its value's tolerance band, or the value it equals.
std::vector<double> bound_marks(const json& b) {
    std::vector<double> out;
    if (!b.is_object())
        return out;
    const double v = num(b, "value");
    if (std::isfinite(v)) {
        const double tol =
            b.contains("rel_tol") ? num(b, "rel_tol", 0) * std::abs(v) : num(b, "abs_tol", 0);
        return tol > 0 ? std::vector<double>{v - tol, v + tol} : std::vector<double>{v};
    }
    for (const char* k : {"equals", "min", "max"})
        if (std::isfinite(num(b, k)))
            out.push_back(num(b, k));
    return out;
}

std::string series_of(const std::string& backend) {
    return backend == "cuda" ? "cuda" : "cpu";
}

/// Per-sample times: the median of each timed series of each case, its backends side by side.
chart sample_time_chart(const case_grid& g) {
    chart c{"chart-sample-times",
            "Timed samples: the median of each series, per case",
            "seconds per sample (median of the series)",
            axis_kind::seconds,
            {}};
    for (const auto& row : g.rows) {
        std::vector<std::string> names; // the row's series, in order of first appearance
        std::map<std::string, std::map<std::string, std::vector<double>>>
            values; // series -> backend -> samples
        for (const auto& b : g.backends)
            if (const json* r = g.find(row, b); r != nullptr && charted(*r, evidence::timing))
                for (auto& [name, v] : timed_series(obj(*r, "result"))) {
                    if (values.count(name) == 0)
                        names.push_back(name);
                    values[name][b] = std::move(v);
                }
        for (const auto& name : names)
            for (const auto& [b, v] : values[name]) {
                const double m = stats::median_or_nan(v);
                const std::string n = std::to_string(v.size());
                c.bars.push_back({cat(row.first, ".", row.second, " ", name, " [", b, "]"),
                                  series_of(b), m, cat(human_seconds(m), " (n=", n, ")"),
                                  cat(b, " ", row.first, ".", row.second, " ", name, ": median ",
                                      human_seconds(m), " of ", n, " samples")});
            }
    }
    return c;
}

/// Whole-process times: every case that ran, start-up to exit.
chart process_time_chart(const case_grid& g) {
    chart c{"chart-process-times",
            "Process wall time per case: start-up, set-up, warm-up and every sample",
            "seconds of wall-clock time per case process",
            axis_kind::seconds,
            {}};
    for (const auto& row : g.rows)
        for (const auto& b : g.backends)
            if (const json* r = g.find(row, b); r != nullptr && charted(*r, evidence::timing)) {
                const double t = num(obj(*r, "process"), "wall_seconds");
                if (std::isfinite(t) && t > 0)
                    c.bars.push_back(
                        {row.first + "." + row.second + " [" + b + "]", series_of(b), t,
                         human_seconds(t),
                         b + " " + row.first + "." + row.second + ": " + human_seconds(t)});
            }
    return c;
}

/// The ratios scenario.json declares, as this run measured them (summary.json): a scenario
/// that declares none has no bar.
chart ratio_chart(const run_data& run) {
    chart c{"chart-ratios",
            "Ratios scenario.json declares: median of one variant's series / another's",
            "ratio of the medians, numerator / denominator (x)",
            axis_kind::ratio,
            {},
            "bound in the profile"};
    for (const auto& r : run.ratios) {
        const double x = num(r, "ratio");
        if (!std::isfinite(x) || x <= 0)
            continue;
        const std::string b = str(r, "backend"), key = cat(str(r, "scenario"), ".", str(r, "name"));
        const std::string pair = cat(str(r, "numerator"), " / ", str(r, "denominator"));
        std::string title = cat(b, " ", key, " = ", pair, ", medians of ", str(r, "samples"), ": ",
                                fmt("%.4g", num(r, "median_numerator")), " / ",
                                fmt("%.4g", num(r, "median_denominator")), " = ", fmt("%.4g", x));
        if (r.contains("bound"))
            title += cat("; bound ", r["bound"].dump(), " (", str(r, "profile"),
                         "): ", str(r, "verdict"));
        // A bar past its bound marks that did not fail says why it was not judged (a bound
        // blessed on another host or fingerprint, full sizes).
        const std::string not_judged =
            str(r, "verdict") == "NOT_COMPARED" ? cat(" (not judged: ", str(r, "reason"), ")") : "";
        c.bars.push_back({cat(key, " [", b, "]"), r.value("failing", false) ? "out" : series_of(b),
                          x, cat(fmt("%.3g", x), "x = ", pair, not_judged), title + not_judged,
                          bound_marks(r.value("bound", json()))});
    }
    return c;
}

/// Why a peak-RSS bound is drawn but was not judged, as the judge decides it (judge_memory): a
/// bound observed under another fingerprint or build type is a fact of that machine and build.
/// Empty where it was judged.
std::string rss_bound_not_judged(const run_data& run, const json& entry) {
    const json prov = obj(entry, "provenance");
    if (str(prov, "kind") != "observed")
        return "";
    const std::string blessed_build = str(prov, "build_type"),
                      build = str(obj(run.header, "build"), "build_type");
    if (str(prov, "fingerprint_id") != str(run.header, "fingerprint_id"))
        return " (bound not judged: blessed under fingerprint " + str(prov, "fingerprint_id") + ")";
    if (!blessed_build.empty() && !build.empty() && blessed_build != build)
        return " (bound not judged: blessed from a " + blessed_build + " build)";
    return "";
}

/// Memory peaks against their baseline bounds: the backend's tracked allocations and the
/// process's peak RSS.
chart memory_chart(const run_data& run) {
    chart c{"chart-memory",
            "Memory peaks against their baseline bounds",
            "bytes at the peak",
            axis_kind::bytes,
            {}};
    for (const auto& r : run.cases) {
        if (!charted(r, evidence::device_memory))
            continue;
        const json expected =
            r.contains("baseline") ? obj(obj(r["baseline"], "entry"), "memory") : json::object();
        const std::string key = str(r, "case");
        const double tracked = num(obj(obj(r, "result"), "memory"), "tracked_peak_bytes");
        if (std::isfinite(tracked) && tracked > 0) {
            // A bound per a measurement (a fraction of the device's memory) is drawn in bytes:
            // the fraction times this case's value of the measurement, when it has one.
            const json bound = expected.value("tracked_peak_bytes", json());
            std::vector<double> marks = bound_marks(bound);
            if (bound.is_object() && bound.contains("per")) {
                const std::string per = str(bound, "per");
                const double by =
                    num(obj(obj(obj(r, "result"), "measurements"), per.c_str()), "value");
                for (double& m : marks)
                    m *= by;
                if (!(std::isfinite(by) && by > 0))
                    marks.clear();
            }
            c.bars.push_back({key, "tracked", tracked, human_bytes(tracked),
                              "tracked peak " + key + ": " + human_bytes(tracked), marks});
        }
        const double rss = num(obj(r, "process"), "peak_rss_bytes");
        if (std::isfinite(rss) && rss > 0) {
            const std::vector<double> marks = bound_marks(expected.value("peak_rss_bytes", json()));
            const std::string not_judged =
                marks.empty() ? "" : rss_bound_not_judged(run, obj(r["baseline"], "entry"));
            c.bars.push_back({key, "rss", rss, human_bytes(rss) + not_judged,
                              cat("peak RSS ", key, ": ", human_bytes(rss), not_judged), marks});
        }
    }
    return c;
}

/// One line when no CUDA case put anything in the charts, saying why (the reason a group of
/// unsupported cases shares, once); empty when a GPU case ran.
std::string no_gpu_line(const run_data& run) {
    int cuda = 0, unsupported = 0;
    std::set<std::string> reasons;
    for (const auto& r : run.cases) {
        if (str(r, "backend") != "cuda")
            continue;
        if (charted(r, evidence::timing) || charted(r, evidence::device_memory))
            return "";
        ++cuda;
        if (str(r, "verdict") == "UNSUPPORTED") {
            ++unsupported;
            reasons.insert(str(r, "reason"));
        }
    }
    std::string text = "No GPU case ran.";
    if (cuda == 0)
        text += " This run selected no CUDA case.";
    if (unsupported > 0)
        text += " " + std::to_string(unsupported) + " CUDA case(s) UNSUPPORTED" +
                (reasons.size() == 1 ? ": " + *reasons.begin() : "") + ".";
    if (cuda > unsupported)
        text += " " + std::to_string(cuda - unsupported) +
                " CUDA case(s) recorded no GPU timing or device memory.";
    return "<p class=\"muted\" id=\"no-gpu\">" + escape_markup(text) +
           " The charts show CPU cases only.</p>\n";
}

std::string pre_json(const json& j) {
    return "<pre>" + escape_markup(j.dump(2)) + "</pre>";
}

} // namespace report_parts

namespace report_parts {
std::string html_charts(const run_data& run, const case_grid& g) {
    return "<h2>Charts</h2>\n" + no_gpu_line(run) + svg_chart(sample_time_chart(g)) +
           svg_chart(process_time_chart(g)) + svg_chart(ratio_chart(run)) +
           svg_chart(memory_chart(run));
}

} // namespace report_parts

} // namespace pitfall::runner
