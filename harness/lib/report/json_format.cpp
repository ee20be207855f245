// The JSON report (reports/schema/report.schema.json).
#include "report/loaded_libraries.hpp"
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
using namespace report_parts;
json render_json(const run_data& run) {
    const json& h = run.header;
    json cases = json::array();
    for (const auto& r : run.cases) {
        const json result = obj(r, "result");
        const json process = obj(r, "process");
        const json memory = result.is_object() ? obj(result, "memory") : json::object();
        const double median = first_time_median(result);
        json c = {
            {"case", str(r, "case")},
            {"scenario", str(r, "scenario")},
            {"backend", str(r, "backend")},
            {"variant", str(r, "variant")},
            {"kind", str(r, "kind")},
            {"verdict", str(r, "verdict", "?")},
            {"failing", r.value("failing", false)},
            {"reason", str(r, "reason")},
            {"outcome", obj(r, "observed")},
            {"wall_seconds", num(process, "wall_seconds", 0)},
            {"median_seconds", std::isfinite(median) ? json(median) : json(nullptr)},
            {"peak_rss_bytes", process.value("peak_rss_bytes", json(nullptr))},
            {"tracked_peak_bytes", memory.value("tracked_peak_bytes", json(nullptr))},
            {"measurements", result.is_object() ? obj(result, "measurements") : json::object()},
            {"checks", result.is_object() ? arr(result, "checks") : json::array()},
            {"timings", obj(r, "timings")},
            {"baseline_profile", r.contains("baseline")
                                     ? r["baseline"].value("profile", json(nullptr))
                                     : json(nullptr)},
            {"log", str(r, "log")}};
        c["loaded_libraries"] = json::array(); // its entries as recorded, objects only
        for (const auto& l : result.is_object() ? arr(result, "loaded_libraries") : json::array())
            if (l.is_object())
                c["loaded_libraries"].push_back(l);
        if (const std::string why = str(r, "prediction"); !why.empty())
            c["prediction"] = why;
        if (r.contains("attempts") && r["attempts"].is_array() && !r["attempts"].empty())
            c["attempts"] = r["attempts"];
        cases.push_back(std::move(c));
    }
    const bool failing = run_failing(run);
    json report = {{"schema", report_schema},
                   {"generated_at", utc_now("%Y-%m-%dT%H:%M:%SZ")},
                   {"run",
                    {{"dir", detail::valid_utf8(run.dir)}, // a path is bytes; JSON holds text
                     {"started_at", str(h, "at")},
                     {"pitfall_version", str(h, "pitfall_version")},
                     {"fingerprint_id", str(h, "fingerprint_id")},
                     {"fingerprint_summary", fingerprint_summary(run)},
                     {"profile", obj(h, "profile")},
                     {"complete", run.not_finished.empty()},
                     {"interrupted", run.interrupted},
                     {"resumed", run.resumed}}},
                   {"counts", verdict_counts(run)},
                   {"predictions", predictions(run).size()},
                   {"verdicts", verdicts_json()},
                   {"failing", failing},
                   {"cases", cases},
                   {"not_finished", run.not_finished},
                   {"crashed_mid_way", run.started_unfinished},
                   {"ratios", run.ratios},
                   {"loaded_libraries", libraries_json(libraries_loaded(run))},
                   {"library_warnings", mismatches_json(library_mismatches(run))},
                   {"machine", machine_of(run).to_json()}};
    // Only where the run looked its cases up in a history database (flaky.json).
    if (json flaky = flaky_report_json(run); !flaky.is_null())
        report["flaky"] = std::move(flaky);
    return report;
}

} // namespace pitfall::runner
