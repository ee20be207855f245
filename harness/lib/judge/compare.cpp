// `pitfall compare`: two runs case by case (compare.hpp).
#include "judge/compare.hpp"

#include "judge/baseline.hpp"
#include "judge/stats.hpp"
#include "judge/timing.hpp"
#include "judge/tool_parts.hpp"
#include "pitfall/detail/text.hpp"
#include "run/runner.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <iomanip>
#include <iostream>
#include <map>
#include <string>
#include <vector>

namespace pitfall::runner {
using nlohmann::json;
using nlohmann::ordered_json;
using tool_parts::fixed;
using tool_parts::load_run_folder;
using tool_parts::loaded_run;
using tool_parts::report_error;

namespace {

std::string outcome_words(const json& o) {
    std::string st = o.value("status", "?");
    if (st == "error")
        return o.value("error", "?") + "@" + o.value("stage", "?");
    if (st == "signal")
        return o.value("signal", "signal");
    if (st == "exit")
        return "exit " + std::to_string(o.value("exit_code", -1));
    return st;
}

json samples_of(const json& result) {
    return result.is_object() ? result.value("samples", json::object()) : json::object();
}

/// A's observation as the baseline B is judged against, with A's own hand-written bounds
/// (measurements) carried over from the entry that judged A.
json entry_from_a(const case_record& ra, const loaded_run& a) {
    const ordered_json previous =
        ra.baseline_entry.is_object() ? ordered_json(ra.baseline_entry) : ordered_json();
    // Where A ran is part of what B must match ("cpu" for a reproduced silent fallback):
    // entry_from_record writes it from A's proof.
    return json(entry_from_record(ra, previous, a.origin(utc_now("%Y-%m-%d"))));
}

/// The row of a case both runs finished.
json compare_case(const case_record& ra, const case_record& rb, const loaded_run& a,
                  const judge_context& judging) {
    observation o;
    o.outcome = rb.observed;
    o.result = rb.result;
    if (rb.process.peak_rss_bytes)
        o.peak_rss_bytes = static_cast<double>(*rb.process.peak_rss_bytes);
    o.peak_rss_method = rb.process.peak_rss_method.value_or("wait4");
    o.threads = rb.process.threads;
    const bool unsupported_both = ra.observed.value("status", "") == "unsupported" &&
                                  o.outcome.value("status", "") == "unsupported";
    const verdict v = unsupported_both ? verdict{verdict_kind::unsupported, "unsupported in both"}
                                       : judge(o, entry_from_a(ra, a), rb.key.backend, judging);
    // Medians for the eye, whatever the verdict could judge.
    const json sa = samples_of(ra.result), sb = samples_of(rb.result);
    json medians = json::object();
    for (const auto& [name, series] : sa.items())
        if (series.value("unit", "s") == "s" && sb.contains(name) && series.contains("values") &&
            sb[name].contains("values") && !series["values"].empty() && !sb[name]["values"].empty())
            medians[name] = {
                {"a", stats::median_or_nan(series["values"].get<std::vector<double>>())},
                {"b", stats::median_or_nan(sb[name]["values"].get<std::vector<double>>())}};
    const auto tracked = [](const case_record& r) {
        return r.result.is_object()
                   ? r.result.value("memory", json::object()).value("tracked_peak_bytes", json())
                   : json();
    };
    const auto rss = [](const case_record& r) {
        return r.process.peak_rss_bytes ? json(*r.process.peak_rss_bytes) : json();
    };
    return {{"case", rb.key.str()},
            {"verdict", to_string(v.kind)},
            {"failing", is_failing(v.kind)},
            {"reason", v.reason},
            {"outcome", {{"a", outcome_words(ra.observed)}, {"b", outcome_words(rb.observed)}}},
            {"timings", v.timings},
            {"medians", medians},
            {"tracked_peak_bytes", {{"a", tracked(ra)}, {"b", tracked(rb)}}},
            {"peak_rss_bytes", {{"a", rss(ra)}, {"b", rss(rb)}}}};
}

/// Every case of either run, A's order first: each one's row.
json compare_rows(const loaded_run& a, const loaded_run& b, const judge_context& judging) {
    std::vector<std::string> keys;
    for (const auto& c : a.log.cases)
        keys.push_back(c.key.str());
    for (const auto& c : b.log.cases)
        if (a.log.find(c.key.str()) == nullptr)
            keys.push_back(c.key.str());
    json rows = json::array();
    for (const auto& key : keys) {
        const case_record* ra = a.log.find(key);
        const case_record* rb = b.log.find(key);
        if (ra != nullptr && rb != nullptr)
            rows.push_back(compare_case(*ra, *rb, a, judging));
        else
            rows.push_back({{"case", key},
                            {"verdict", ra == nullptr ? "NEW" : "NOT_RUN"},
                            {"reason", ra == nullptr ? "only in " + b.dir : "only in " + a.dir},
                            {"failing", false}});
    }
    return rows;
}

std::string compare_time_text(const json& row) {
    if (!row.contains("medians") || row["medians"].empty())
        return "-";
    const json& m = row["medians"].begin().value();
    const double ma = m["a"].get<double>(), mb = m["b"].get<double>();
    std::string time = fixed(ma * 1e3, 2) + " -> " + fixed(mb * 1e3, 2) + " ms";
    if (ma > 0)
        time += " (" + fixed(mb / ma, 2) + "x)";
    return time;
}

void print_comparison(const loaded_run& a, const loaded_run& b, bool same_machine, const json& rows,
                      const std::map<std::string, int>& counts) {
    std::cout << "compare: A = " << a.dir << "\n         B = " << b.dir << '\n';
    if (same_machine)
        std::cout << "same fingerprint (" << a.fingerprint_id() << "): times are judged\n";
    else
        std::cout << "different fingerprints (A " << a.fingerprint_id() << ", B "
                  << b.fingerprint_id()
                  << "): times are shown, not judged; outcomes, numerics and memory are\n";
    std::size_t width = 6;
    for (const auto& r : rows)
        width = std::max(width, r["case"].get<std::string>().size() + 2);
    const int w = static_cast<int>(width);
    std::cout << '\n'
              << std::left << std::setw(w) << "CASE" << std::setw(34) << "OUTCOME A -> B"
              << std::setw(30) << "MEDIAN TIME A -> B" << std::setw(17) << "VERDICT"
              << "DETAIL\n";
    for (const auto& r : rows) {
        std::string outcome = "-";
        if (r.contains("outcome")) {
            const std::string oa = r["outcome"]["a"], ob = r["outcome"]["b"];
            outcome = oa;
            outcome += oa == ob ? " (same)" : " -> " + ob;
        }
        std::string reason = r.value("reason", "");
        if (reason.size() > 100)
            reason = reason.substr(0, 97) + "...";
        if (outcome.size() > 32)
            outcome = outcome.substr(0, 29) + "...";
        std::cout << std::left << std::setw(w) << r["case"].get<std::string>() << std::setw(34)
                  << outcome << std::setw(30) << compare_time_text(r) << std::setw(17)
                  << r["verdict"].get<std::string>() << reason << '\n';
    }
    std::cout << '\n' << counts_line(counts) << '\n';
}

} // namespace

int compare_runs(const compare_options& options) {
    auto a_or = load_run_folder(options.run_a);
    auto b_or = load_run_folder(options.run_b);
    for (const auto* r : {&a_or, &b_or})
        if (!r->is_ok())
            return report_error(r->error().message());
    const loaded_run& a = a_or.value();
    const loaded_run& b = b_or.value();
    const bool same_machine =
        !a.fingerprint_id().empty() && a.fingerprint_id() == b.fingerprint_id();
    judge_context judging;
    judging.fingerprint_id = b.fingerprint_id();
    judging.host_id = b.origin("").host_id;
    judging.build_type = b.origin("").build_type;
    judging.blas = blas_kernels(b.fingerprint_summary());
    judging.timing.floor = options.timing_floor;
    const json rows = compare_rows(a, b, judging);
    std::map<std::string, int> counts;
    bool any_failing = false;
    for (const auto& r : rows) {
        ++counts[r["verdict"].get<std::string>()];
        any_failing = any_failing || r["failing"].get<bool>();
    }
    const int code = any_failing ? exit_failed : exit_ok;
    if (!options.as_json) {
        print_comparison(a, b, same_machine, rows, counts);
        return code;
    }
    std::cout << json{{"schema", "pitfall.compare/1"},
                      {"a", detail::valid_utf8(a.dir)}, // paths are bytes; JSON holds text
                      {"b", detail::valid_utf8(b.dir)},
                      {"same_fingerprint", same_machine},
                      {"fingerprint_id", {{"a", a.fingerprint_id()}, {"b", b.fingerprint_id()}}},
                      {"cases", rows},
                      {"counts", counts},
                      {"exit_code", code}}
                     .dump(2)
              << '\n';
    return code;
}

} // namespace pitfall::runner
