// A baseline entry written from a run (`pitfall bless`): its outcome, bounds and ratios.
#include "judge/baseline.hpp"

#include "judge/baseline_parts.hpp"
#include "judge/timing.hpp"
#include "pitfall/controls.hpp"
#include "pitfall/detail/json_file.hpp"
#include "pitfall/detail/json_schema.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <set>
#include <sstream>

namespace pitfall::runner {
using nlohmann::json;
namespace fs = std::filesystem;
using namespace baseline_parts;

namespace baseline_parts {
/// x to `digits` significant digits: what a reader of the file needs, not 17.
double to_digits(double x, int digits) {
    std::ostringstream text;
    text << std::setprecision(digits) << x;
    return std::stod(text.str());
}
/// x to 3 significant digits, rounded down (`up` false) or up: a blessed range is never
/// narrower than the tolerance makes it.
double round_outwards(double x, bool up) {
    if (!(x > 0) || !std::isfinite(x))
        return x;
    const double scale = std::pow(10.0, std::floor(std::log10(x)) - 2);
    const double steps = x / scale;
    // A quotient a hair off a whole number (0.615 / 0.001 = 614.9999...) is that number.
    const double whole = std::round(steps);
    const double rounded =
        std::fabs(steps - whole) < 1e-9 ? whole : (up ? std::ceil(steps) : std::floor(steps));
    return to_digits(rounded * scale, 3);
}
} // namespace baseline_parts

nlohmann::ordered_json ratio_entry_from_run(double ratio, double tolerance,
                                            const nlohmann::ordered_json& previous,
                                            const json& fingerprint_summary,
                                            const std::string& fingerprint_id,
                                            const std::string& pitfall_version,
                                            const std::string& date, const std::string& host_id) {
    return ratio_entry_from_runs({ratio, ratio, ratio}, tolerance, previous, fingerprint_summary,
                                 fingerprint_id, pitfall_version, date, host_id);
}

nlohmann::ordered_json ratio_entry_from_runs(const blessed_ratio& ratio, double tolerance,
                                             const nlohmann::ordered_json& previous,
                                             const json& fingerprint_summary,
                                             const std::string& fingerprint_id,
                                             const std::string& pitfall_version,
                                             const std::string& date, const std::string& host_id) {
    nlohmann::ordered_json entry = nlohmann::ordered_json::object();
    // The runs blessed already lay this far apart on one machine with unchanged code; the
    // tolerance is for what one more run adds beyond that, so it widens their span, not their
    // median (launch-bound GPU ratios moved 1.5x between three runs of one H200).
    entry["min"] = round_outwards(std::min(ratio.lowest, ratio.median) / tolerance, false);
    entry["max"] = round_outwards(std::max(ratio.highest, ratio.median) * tolerance, true);
    entry["observed"] = to_digits(ratio.median, 4);
    if (previous.is_object() && previous.contains("note"))
        entry["note"] = previous["note"];
    entry["provenance"] = {{"kind", "observed"},
                           {"date", date},
                           {"fingerprint", fingerprint_summary},
                           {"fingerprint_id", fingerprint_id},
                           {"pitfall_version", pitfall_version}};
    if (!host_id.empty())
        entry["provenance"]["host_id"] = host_id;
    return keep_key_order(previous, entry);
}

namespace baseline_parts {
using ordered_json = nlohmann::ordered_json;

/// The observed events, each as a baseline expects it (outcome fields only).
ordered_json expected_events(const json& result) {
    ordered_json events = ordered_json::object();
    const json observed = result.value("events", json::object());
    for (const auto& [name, ev] : observed.items()) {
        ordered_json e = ordered_json::object();
        for (const char* field : {"status", "library", "error", "stage", "sticky"})
            if (ev.contains(field))
                e[field] = ev[field];
        events[name] = e;
    }
    return events;
}

/// How far a blessed fraction of a device's memory may move: the cases round rows and batches
/// to whole numbers, which moved the fraction by up to 0.3% between an H100 80GB and an H200.
constexpr double memory_per_tolerance = 0.02;

/// Whether the record holds the case's own peak RSS, the one a bound is blessed from. wait4's
/// figure (a case that died before it reported its own) counts the image of pitfall it was
/// forked from, which grows over a run: a bound on it would judge where the case sat.
namespace {
bool own_peak(const case_record& record) {
    return record.process.peak_rss_bytes && *record.process.peak_rss_bytes > 0 &&
           record.process.peak_rss_method.value_or("wait4") == "case";
}
} // namespace

ordered_json expected_memory(const case_record& record, const observation_origin& origin) {
    ordered_json memory = ordered_json::object();
    const json mem = record.result.value("memory", json::object());
    if (mem.contains("tracked_peak_bytes") && mem["tracked_peak_bytes"].is_number()) {
        // A variant sized from the device's memory: its bytes as a fraction of what it sized
        // from, where it recorded that; else the exact bytes (the program's own count).
        const json measurements = record.result.value("measurements", json::object());
        const json item = origin.memory_per.empty() || !measurements.contains(origin.memory_per)
                              ? json()
                              : measurements[origin.memory_per];
        const json by = item.is_object() ? item.value("value", json()) : json();
        if (by.is_number() && by.get<double>() > 0)
            memory["tracked_peak_bytes"] = {
                {"per", origin.memory_per},
                {"value", mem["tracked_peak_bytes"].get<double>() / by.get<double>()},
                {"rel_tol", memory_per_tolerance}};
        else
            memory["tracked_peak_bytes"] = {{"equals", mem["tracked_peak_bytes"]}};
    }
    if (own_peak(record))
        memory["peak_rss_bytes"] = {{"value", *record.process.peak_rss_bytes},
                                    {"rel_tol", origin.rss_tolerance}};
    return memory;
}

/// What the case recorded, by name, for the entry's "records": each must be recorded again.
ordered_json expected_records(const json& result) {
    ordered_json records = ordered_json::object();
    for (const auto& kind : record_kinds) {
        const auto names = recorded_names(result, kind.key);
        if (!names.empty())
            records[kind.key] = names; // sorted: a blessed file's order does not move
    }
    return records;
}

/// Where the case ran, as a baseline expects it: the start of its proof ("cpu" of "cpu: 2
/// threads", "cuda" of "cuda:0 NVIDIA H100 ..."), or the previous entry's ran_on while the proof
/// still starts with it (a hand-pinned "cpu: silent fallback after ..." stays). Empty: no proof.
ordered_json expected_ran_on(const json& result, const std::string& previous) {
    const std::string seen = result.value("ran_on", "");
    if (seen.empty())
        return ordered_json();
    if (!previous.empty() && seen.rfind(previous, 0) == 0)
        return previous;
    const std::string start = seen.substr(0, seen.find(':'));
    return start.empty() ? ordered_json() : ordered_json(start);
}

/// Sets entry[key] to `value`, or removes the key when `value` is empty.
void set_or_erase(ordered_json& entry, const char* key, const ordered_json& value) {
    if (value.empty())
        entry.erase(key);
    else
        entry[key] = value;
}
} // namespace baseline_parts

namespace {
/// The outcome a baseline entry expects: the record's.
ordered_json expected_outcome(const case_record& record) {
    ordered_json outcome = ordered_json::object();
    for (const char* field :
         {"status", "library", "error", "stage", "sticky", "signal", "exit_code"})
        if (record.observed.contains(field) && !record.observed[field].is_null())
            outcome[field] = record.observed[field];
    if (outcome.value("status", "") == "unsupported") // the cause, not the wording of the reason
        outcome.erase("stage");
    return outcome;
}

/// The run an observation came from: the case, the run folder, when it started, where it is kept.
ordered_json run_of(const case_record& record, const observation_origin& origin) {
    ordered_json run = {{"case", record.key.str()}};
    if (!origin.run_folder.empty())
        run["folder"] = origin.run_folder;
    if (!origin.run_started.empty())
        run["started"] = origin.run_started;
    if (!origin.run_archive.empty())
        run["archive"] = origin.run_archive;
    return run;
}

/// An observed entry's provenance: the evidence of `origin`, and the source `previous` named.
ordered_json observed_provenance(const case_record& record, const ordered_json& previous,
                                 const observation_origin& origin) {
    const ordered_json run = run_of(record, origin);
    ordered_json provenance = {{"kind", "observed"},
                               {"date", origin.date},
                               {"fingerprint", origin.fingerprint_summary},
                               {"fingerprint_id", origin.fingerprint_id},
                               {"pitfall_version", origin.pitfall_version},
                               {"run", run}};
    if (record.process.threads)
        provenance["threads"] = *record.process.threads; // times hold only at this count
    // A peak RSS holds only against a figure measured the same way (run/case_memory.hpp).
    if (own_peak(record))
        provenance["rss_method"] = "case";
    if (!origin.host_id.empty())
        provenance["host_id"] = origin.host_id; // absolute times hold only on this host
    if (!origin.build_type.empty())
        provenance["build_type"] = origin.build_type; // and only from this build type
    if (previous.is_object() && previous.contains("provenance") &&
        previous["provenance"].contains("source"))
        provenance["source"] = previous["provenance"]["source"];
    return provenance;
}
} // namespace

ordered_json entry_from_record(const case_record& record, const ordered_json& previous,
                               const observation_origin& origin) {
    ordered_json entry = previous.is_object() ? previous : ordered_json::object();
    entry["outcome"] = expected_outcome(record);
    const bool have_result = record.result.is_object();
    set_or_erase(entry, "events", have_result ? expected_events(record.result) : ordered_json());
    set_or_erase(entry, "memory", have_result ? expected_memory(record, origin) : ordered_json());
    set_or_erase(entry, "records", have_result ? expected_records(record.result) : ordered_json());
    set_or_erase(entry, "timings",
                 have_result && origin.with_timings ? expected_timings(record.result, origin)
                                                    : ordered_json());
    const std::string previous_ran_on =
        previous.is_object() && previous.contains("ran_on") && previous["ran_on"].is_string()
            ? previous["ran_on"].get<std::string>()
            : "";
    set_or_erase(entry, "ran_on",
                 have_result ? expected_ran_on(record.result, previous_ran_on) : ordered_json());
    entry["provenance"] = observed_provenance(record, previous, origin);
    return keep_key_order(previous, entry);
}

std::optional<ordered_json> memory_entry_from_record(const case_record& record,
                                                     const ordered_json& previous,
                                                     const observation_origin& origin,
                                                     std::string& why_not) {
    if (!previous.is_object() || !previous.contains("provenance") ||
        !previous["provenance"].is_object()) {
        why_not = "no entry to bless its peak RSS into (bless the case whole)";
        return std::nullopt;
    }
    const ordered_json& prov = previous["provenance"];
    const auto text = [&](const char* key) {
        return prov.contains(key) && prov[key].is_string() ? prov[key].get<std::string>() : "";
    };
    if (text("kind") != "observed" ||
        (!text("build_type").empty() && text("build_type") != origin.build_type)) {
        why_not = "its entry was not observed from this run's build type " + origin.build_type +
                  " (bless the case whole)";
        return std::nullopt;
    }
    ordered_json entry = previous;
    ordered_json memory = entry.contains("memory") && entry["memory"].is_object()
                              ? entry["memory"]
                              : ordered_json::object();
    memory.erase("peak_rss_bytes");
    if (own_peak(record))
        memory["peak_rss_bytes"] = {{"value", *record.process.peak_rss_bytes},
                                    {"rel_tol", origin.rss_tolerance}};
    set_or_erase(entry, "memory", memory.empty() ? ordered_json() : memory);
    ordered_json run = run_of(record, origin);
    // The peak holds under the fingerprint it was measured under, which may not be the entry's.
    run["fingerprint_id"] = origin.fingerprint_id;
    if (own_peak(record)) {
        entry["provenance"]["rss_method"] = "case";
        entry["provenance"]["rss_run"] = run;
    } else { // no bound: nothing for them to say
        entry["provenance"].erase("rss_method");
        entry["provenance"].erase("rss_run");
    }
    return keep_key_order(previous, entry);
}

ordered_json keep_key_order(const ordered_json& previous, const ordered_json& fresh) {
    if (!previous.is_object() || !fresh.is_object())
        return fresh;
    ordered_json out = ordered_json::object();
    for (const auto& [key, value] : previous.items())
        if (fresh.contains(key))
            out[key] = keep_key_order(value, fresh[key]);
    for (const auto& [key, value] : fresh.items())
        if (!out.contains(key))
            out[key] = value;
    return out;
}

} // namespace pitfall::runner
