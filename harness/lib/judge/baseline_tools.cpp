// `pitfall compare` and `pitfall bless`: two runs case by case, and a run written into expected/.
#include "fingerprint/host_identity.hpp"
#include "judge/baseline.hpp"
#include "judge/stats.hpp"
#include "judge/timing.hpp"
#include "pitfall/detail/json_file.hpp"
#include "pitfall/detail/json_schema.hpp"
#include "pitfall/detail/process.hpp"
#include "pitfall/detail/result_file.hpp"
#include "pitfall/detail/text.hpp"
#include "run/run_archive.hpp"
#include "run/run_folder.hpp"
#include "run/runner.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <unistd.h>

namespace pitfall::runner {
using nlohmann::json;
using nlohmann::ordered_json;
namespace fs = std::filesystem;

namespace {

int report_error(const std::string& what) {
    std::cerr << "pitfall: error: " << what << '\n';
    return exit_bad_input;
}

/// One run folder as compare and bless need it.
struct loaded_run {
    std::string dir;
    run_log log;

    /// The last session's: a resumed run was fingerprinted again.
    const std::string& fingerprint_id() const { return log.latest.fingerprint_id; }
    const json& fingerprint_summary() const { return log.latest.fingerprint_summary; }

    /// The evidence an entry blessed from this run carries (`date`: the day it is blessed).
    observation_origin origin(const std::string& date) const {
        observation_origin o;
        o.fingerprint_summary = fingerprint_summary();
        o.fingerprint_id = fingerprint_id();
        o.date = date;
        o.pitfall_version = log.latest.pitfall_version;
        // The folder's own name ("20261125-173408" under reports/runs/), not the path
        // to it, which says nothing on another machine.
        std::error_code ec;
        fs::path folder = fs::absolute(dir, ec).lexically_normal();
        if (folder.filename().empty()) // "/x/runs/a/" (and "." made absolute): its name is "a"
            folder = folder.parent_path();
        o.run_folder = ec ? std::string() : folder.filename().string();
        o.run_started = log.header.at;
        o.host_id = host_id_of(log.latest.fingerprint);
        const json& build = log.latest.build;
        o.build_type =
            build.is_object() && build.contains("build_type") && build["build_type"].is_string()
                ? build["build_type"].get<std::string>()
                : "";
        return o;
    }
};

status_or<loaded_run> load_run_folder(const std::string& dir) {
    PITFALL_ASSIGN_OR_RETURN(const run_folder folder, run_folder::open(dir));
    PITFALL_ASSIGN_OR_RETURN(run_log log, folder.read());
    return loaded_run{dir, std::move(log)};
}

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

std::string fixed(double x, int digits) {
    std::ostringstream out;
    out << std::fixed << std::setprecision(digits) << x;
    return out.str();
}

std::string find_in_path(const std::string& program) {
    const char* path = std::getenv("PATH");
    std::stringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
    for (std::string dir; std::getline(dirs, dir, ':');) {
        if (dir.empty())
            continue;
        std::string candidate = std::move(dir);
        candidate += '/';
        candidate += program;
        if (::access(candidate.c_str(), X_OK) == 0)
            return candidate;
        dir.clear();
    }
    return program;
}

json samples_of(const json& result) {
    return result.is_object() ? result.value("samples", json::object()) : json::object();
}

// ---- compare -------------------------------------------------------------------------------

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

// ---- bless ---------------------------------------------------------------------------------

namespace {

/// The runs to bless from, which must share one fingerprint.
status_or<std::vector<loaded_run>> load_bless_runs(const std::vector<std::string>& dirs) {
    std::vector<loaded_run> runs;
    for (const auto& dir : dirs) {
        PITFALL_ASSIGN_OR_RETURN(loaded_run run, load_run_folder(dir));
        runs.push_back(std::move(run));
        const loaded_run& first = runs.front();
        if (runs.back().fingerprint_id().empty())
            return bad_run_input(dir + ": the run records no fingerprint id (made by an older "
                                       "pitfall): run it again");
        if (runs.back().log.latest.pitfall_version.empty())
            return bad_run_input(dir + ": the run records no pitfall version, which an observed "
                                       "baseline must name: run it again");
        if (runs.back().log.header.options.full)
            return bad_run_input(dir + ": the run used --full; baselines hold the quick "
                                       "defaults' observations: bless a run made without --full");
        if (runs.back().fingerprint_id() != first.fingerprint_id())
            return bad_run_input(dir + ": another machine or stack than " + first.dir +
                                 " (fingerprint " + runs.back().fingerprint_id() + " vs " +
                                 first.fingerprint_id() + "): bless them separately");
    }
    return runs;
}

/// A record to bless and the run it comes from (its folder and start are the entry's evidence).
struct blessed_record {
    const case_record* record;
    const loaded_run* run;
};

/// The record each case is blessed from, in the last run's order: the one that ran fastest
/// over every series it timed (relative_slowness). On a shared machine interference only ever
/// adds time, so the fastest of several runs is the least disturbed one, not a lucky one. An
/// injected or crashed record among them taints the choice (and is then refused or blessed by
/// name).
std::vector<blessed_record> least_disturbed(const std::vector<loaded_run>& runs) {
    std::vector<blessed_record> chosen;
    for (const auto& last : runs.back().log.cases) {
        std::vector<blessed_record> seen;
        std::vector<const json*> results;
        for (const auto& r : runs)
            if (const case_record* rec = r.log.find(last.key.str())) {
                seen.push_back({rec, &r});
                results.push_back(&rec->result);
            }
        blessed_record pick{&last, &runs.back()};
        const std::vector<double> slowness = relative_slowness(results);
        // Only where every run timed the same series: else the last run stands.
        if (seen.size() > 1 && std::all_of(slowness.begin(), slowness.end(),
                                           [](double s) { return std::isfinite(s); }))
            pick = seen[static_cast<std::size_t>(
                std::min_element(slowness.begin(), slowness.end()) - slowness.begin())];
        for (const blessed_record& seen_one : seen)
            if (seen_one.record->injected() || seen_one.record->verdict == verdict_kind::crash ||
                seen_one.record->verdict == verdict_kind::timeout)
                pick = seen_one;
        chosen.push_back(pick);
    }
    return chosen;
}

/// Whether a record is no observation to bless unless named: it crashed, timed out or left no
/// valid result.
bool broken(const case_record& r) {
    const std::string st = r.observed.value("status", "");
    return r.verdict == verdict_kind::crash || r.verdict == verdict_kind::timeout ||
           st == "timeout" || st == "not_started" || st == "bad_result";
}

/// The records the filters select; refused: crashed or timed-out ones not named with --case.
status_or<std::vector<blessed_record>> select_for_bless(const bless_options& options,
                                                        const std::vector<blessed_record>& records,
                                                        const std::string& run_name) {
    const std::set<std::string> named(options.cases.begin(), options.cases.end());
    const std::set<std::string> scenarios(options.scenarios.begin(), options.scenarios.end());
    for (const auto& key : named)
        if (std::none_of(records.begin(), records.end(),
                         [&](const blessed_record& r) { return r.record->key.str() == key; }))
            return bad_run_input("--case " + key + (": not in " + run_name));
    std::vector<blessed_record> chosen;
    std::string refused;
    for (const blessed_record& blessed : records) {
        const case_record* r = blessed.record;
        const std::string key = r->key.str();
        if ((!named.empty() && named.count(key) == 0) ||
            (!scenarios.empty() && scenarios.count(r->key.scenario) == 0))
            continue;
        if (r->injected())
            return bad_run_input(key + ": the run was made with PITFALL_INJECT or PITFALL_MUTATE "
                                       "(injected faults and mutated records are not "
                                       "observations)");
        if (broken(*r) && named.count(key) == 0)
            refused += "\n  " + key + " (" + to_string(r->verdict) + ": " + r->reason + ")";
        else
            chosen.push_back(blessed);
    }
    if (!refused.empty())
        return bad_run_input("refusing to bless a run whose cases crashed or timed out:" + refused +
                             "\nname the ones that are the expected behaviour with --case KEY "
                             "(each one), or leave\nthem out with --scenario");
    if (chosen.empty())
        return bad_run_input("nothing to bless in " + run_name + " with these filters");
    return chosen;
}

struct pending_write {
    std::string path;
    std::string text;
    std::vector<std::string> notes; ///< said before the diff (a documented ratio bound kept)
};

/// The median of a record's series `name`; NaN when it has none.
double record_median(const case_record& record, const std::string& name) {
    const json& res = record.result;
    if (!res.is_object() || !res.contains("samples") || !res["samples"].contains(name) ||
        !res["samples"][name].contains("values") || !res["samples"][name]["values"].is_array() ||
        res["samples"][name]["values"].empty())
        return std::nan("");
    return stats::median_or_nan(res["samples"][name]["values"].get<std::vector<double>>());
}

/// A declared ratio as the runs measured it: each run's own ratio of medians (both cases of one
/// run, as `pitfall run` computes it), then the median over the runs, which one disturbed run
/// cannot move far. NaN when no run has both series.
double ratio_over_runs(const std::vector<loaded_run>& runs, const std::string& backend,
                       const std::string& scenario, const ratio_spec& r) {
    std::vector<double> per_run;
    const std::string prefix = backend + "." + scenario + ".";
    for (const auto& run : runs) {
        const case_record* num = run.log.find(prefix + r.numerator);
        const case_record* den = run.log.find(prefix + r.denominator);
        if (num == nullptr || den == nullptr)
            continue;
        const double a = record_median(*num, r.samples);
        const double b = record_median(*den, r.samples);
        if (std::isfinite(a) && std::isfinite(b) && a > 0 && b > 0)
            per_run.push_back(a / b);
    }
    return per_run.empty() ? std::nan("") : stats::median_or_nan(per_run);
}

/// The scenario's declared ratios whose two cases are both among `records` (those blessed into
/// this file), as observed entries of doc["ratios"]. A documented bound is a claim about every
/// machine of the profile, not one run's: it stays, and the note says what the runs measured.
void bless_ratios(const bless_options& options, const std::string& profile_name,
                  const scenario_entry& scenario, const std::vector<blessed_record>& records,
                  const std::vector<loaded_run>& runs, const std::string& date, ordered_json& doc,
                  std::vector<std::string>& notes) {
    const auto blessed = [&](const std::string& backend, const std::string& variant) {
        return std::any_of(records.begin(), records.end(), [&](const blessed_record& r) {
            return r.record->key.backend == backend && r.record->key.variant == variant;
        });
    };
    const loaded_run& run = runs.back(); // its header stands for all (one fingerprint)
    for (const auto& r : scenario.description.ratios) {
        for (const std::string backend : {"cpu", "cuda"}) {
            if (!blessed(backend, r.numerator) || !blessed(backend, r.denominator))
                continue;
            const double ratio = ratio_over_runs(runs, backend, scenario.description.name, r);
            if (!std::isfinite(ratio))
                continue;
            std::string key = backend;
            key += '.';
            key += r.name;
            const ordered_json& ratios =
                doc.contains("ratios") ? doc["ratios"] : ordered_json::object();
            const ordered_json previous = ratios.contains(key) ? ratios[key] : ordered_json();
            if (previous.is_object() && previous.contains("provenance") &&
                previous["provenance"].value("kind", "") == "documented") {
                std::string note = "ratio " + key;
                note += " of " + scenario.description.name;
                note += " = " + fixed(ratio, 3);
                note += ": its documented bound in " + profile_name;
                note += " is kept (edit it by hand to replace it)";
                notes.push_back(std::move(note));
                continue;
            }
            doc["ratios"][key] = ratio_entry_from_run(
                ratio, options.ratio_tolerance, previous, run.fingerprint_summary(),
                run.fingerprint_id(), run.log.latest.pitfall_version, date,
                host_id_of(run.log.latest.fingerprint));
        }
    }
}

/// An expected/ document without the entries of `records` (those a bless replaces).
json without_entries(const ordered_json& doc, const std::vector<blessed_record>& records) {
    json rest(doc);
    if (rest.is_object() && rest.contains("cases") && rest["cases"].is_object())
        for (const blessed_record& r : records)
            rest["cases"].erase(r.record->key.entry_key());
    return rest;
}

/// The names of the series a record timed in seconds.
std::vector<std::string> timed_series(const case_record& record) {
    std::vector<std::string> names;
    const json samples =
        record.result.is_object() ? record.result.value("samples", json::object()) : json();
    if (samples.is_object())
        for (const auto& [name, series] : samples.items())
            if (series.is_object() && series.value("unit", "") == "s")
                names.push_back(name);
    return names;
}

/// expected/<profile>/<scenario>.json with the records blessed into it, in the file's own key
/// order (a new file: schema, scenario, cases), validated as load_profiles would.
status_or<pending_write> blessed_file(const bless_options& options, const scenario_index& index,
                                      const std::string& profile_name,
                                      const std::string& scenario_name,
                                      const std::vector<blessed_record>& records,
                                      const std::vector<loaded_run>& runs,
                                      const std::string& date) {
    // The name may come from the run's records (which profile judged a case), and records are
    // data: it must be a name, and its folder one directly inside expected/, links resolved.
    const bool a_name = !profile_name.empty() && profile_name.size() <= 100 &&
                        std::isalnum(static_cast<unsigned char>(profile_name[0])) != 0 &&
                        std::all_of(profile_name.begin(), profile_name.end(), [](char c) {
                            return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' ||
                                   c == '_' || c == '-';
                        });
    const std::string named_by = options.profile.empty() ? "the run's records" : "--profile";
    if (!a_name)
        return bad_run_input("profile '" + profile_name + "' (from " + named_by +
                             "): not a profile name (a letter or digit, then letters, digits, "
                             "'.', '_' and '-')");
    const fs::path profile_dir = fs::path(options.common.expected_dir) / profile_name;
    std::error_code ec;
    if (fs::weakly_canonical(profile_dir, ec).parent_path() !=
        fs::weakly_canonical(options.common.expected_dir, ec))
        return bad_run_input("profile '" + profile_name + "' (from " + named_by +
                             "): " + profile_dir.string() + " resolves outside " +
                             options.common.expected_dir);
    if (!fs::is_regular_file(profile_dir / "profile.json", ec))
        return bad_run_input("--profile " + profile_name + ": " + profile_dir.string() +
                             "/profile.json does not exist (create the profile first: it says "
                             "which environments it matches)");
    const auto it =
        std::find_if(index.scenarios.begin(), index.scenarios.end(),
                     [&](const scenario_entry& s) { return s.description.name == scenario_name; });
    if (it == index.scenarios.end())
        return bad_run_input(scenario_name + ": not a scenario of " + index.path);
    const std::string path = (profile_dir / (scenario_name + ".json")).string();
    ordered_json doc = {{"schema", "pitfall.expected/1"},
                        {"scenario", scenario_name},
                        {"cases", ordered_json::object()}};
    if (fs::exists(fs::symlink_status(path, ec))) {
        // Read as load_profiles reads it, by the same schema: bless writes only into a file
        // that is already right (its output is checked again before it is written), or one
        // that is right but for the entries this bless replaces: an observed entry of an older
        // pitfall, without the evidence the format now asks for, is re-blessed, not refused.
        auto text = detail::read_regular_file(path);
        auto parsed = text.is_ok() ? detail::parse_ordered_json(text.value(), path)
                                   : status_or<ordered_json>(text.error());
        if (!parsed.is_ok())
            return bad_run_input(parsed.error().message() + ": fix it before blessing into it");
        if (!detail::validate_document("expected", json(parsed.value()), path).is_ok()) {
            // What is wrong besides the entries being replaced is what to fix.
            const status rest = detail::validate_document(
                "expected", without_entries(parsed.value(), records), path);
            if (!rest.is_ok())
                return bad_run_input(rest.message() + ": fix it before blessing into it");
        }
        doc = std::move(parsed).value();
    }
    if (!doc.is_object() || !doc.contains("cases") || !doc["cases"].is_object())
        return bad_run_input(path + ": field 'cases': expected an object: fix it before blessing");
    std::vector<std::string> notes;
    for (const blessed_record& r : records) {
        if (options.ratios_only)
            break;
        ordered_json& cases = doc["cases"];
        const std::string key = r.record->key.entry_key();
        const ordered_json previous = cases.contains(key) ? cases[key] : ordered_json();
        observation_origin origin = r.run->origin(date);
        origin.with_timings = !options.no_timings;
        origin.run_archive = archive::entry_path(
            archive::run_id(r.run->log.header.at, r.run->fingerprint_id(), r.run->dir));
        if (const variant_spec* v = it->description.find_variant(r.record->key.variant)) {
            origin.memory_per = v->memory_per;
            for (const auto& series : timed_series(*r.record)) {
                const std::string by = it->description.bound_by(*v, r.record->key.backend, series);
                if (!by.empty())
                    origin.bound_by[series] = by;
                else if (const timing_spec* t = it->description.timing_of(*v, series))
                    origin.not_timed[series] = t->why;
            }
        }
        // Normalised series pool the case's samples from every run blessed together.
        for (const loaded_run& run : runs)
            if (const case_record* same = run.log.find(r.record->key.str()))
                origin.pooled_results.push_back(&same->result);
        if (origin.with_timings && r.record->result.is_object()) {
            std::vector<std::string> refused;
            (void)expected_timings(r.record->result, origin, &refused);
            for (const auto& why : refused)
                notes.push_back("bless: " + r.record->key.str() + ": not blessed: " + why);
        }
        cases[key] = entry_from_record(*r.record, previous, origin);
    }
    bless_ratios(options, profile_name, *it, records, runs, date, doc, notes);
    if (auto valid = validate_expected(path, json(doc), *it); !valid.is_ok())
        return bad_run_input("the blessed file would not be valid: " + valid.message());
    return pending_write{path, doc.dump(2) + "\n", std::move(notes)};
}

/// Prints `diff -u` between each file and what it becomes; writes the changed ones unless
/// `dry_run`. Returns how many changed.
status_or<int> show_and_write(const std::vector<pending_write>& writes, bool dry_run) {
    // A folder of its own, made new (mkdtemp: mode 0700, never one that was there already):
    // in a shared $TMPDIR another user could have planted a predictable name with links in it.
    std::error_code ec;
    std::string scratch = fs::temp_directory_path(ec).string() + "/pitfall-bless-XXXXXX";
    if (ec || ::mkdtemp(scratch.data()) == nullptr)
        return bad_run_input("cannot make a scratch folder for the diff in " +
                             fs::temp_directory_path(ec).string() + ": " + std::strerror(errno));
    int changed = 0;
    for (std::size_t i = 0; i < writes.size(); ++i) {
        for (const auto& note : writes[i].notes)
            std::cout << note << '\n';
        const std::string proposed = scratch + "/" + std::to_string(i) + ".json";
        PITFALL_TRY(write_file_atomically(proposed, writes[i].text));
        const bool exists = fs::exists(writes[i].path, ec);
        process_request req;
        req.argv = {find_in_path("diff"),
                    "-u",
                    "--label",
                    "a/" + writes[i].path,
                    "--label",
                    "b/" + writes[i].path,
                    exists ? writes[i].path : "/dev/null",
                    proposed};
        req.output_path = scratch + "/diff.txt";
        req.timeout_seconds = 60;
        const process_outcome p = run_process(req);
        std::ifstream diff_text(req.output_path);
        const std::string text((std::istreambuf_iterator<char>(diff_text)),
                               std::istreambuf_iterator<char>());
        if (!p.started || !p.exit_code || *p.exit_code > 1)
            std::cout << "(diff unavailable: " << (p.started ? text : p.start_error) << ")\n";
        else
            std::cout << text;
        if (p.exit_code && *p.exit_code == 0)
            continue; // unchanged
        ++changed;
        if (!dry_run)
            PITFALL_TRY(write_file_atomically(writes[i].path, writes[i].text));
    }
    fs::remove_all(scratch, ec);
    return changed;
}

/// Groups the records by target file, expected/<profile>/<scenario>.json, and makes each.
status_or<std::vector<pending_write>> bless_writes(const bless_options& options,
                                                   const std::vector<blessed_record>& chosen,
                                                   const std::vector<loaded_run>& runs,
                                                   const std::string& date) {
    const loaded_run& run = runs.back();
    PITFALL_ASSIGN_OR_RETURN(const scenario_index index, load_index(options.common.index_path));
    std::map<std::pair<std::string, std::string>, std::vector<blessed_record>> by_file;
    // Where a case no profile judged yet goes: a CUDA case to the most specific profile of
    // the run's chain (what depends on the GPU, driver and CUDA), a CPU case to the most
    // general (its outcome and numerics hold on every host: "host"), so that a GPU machine,
    // whose chain ends in the same profile, judges it too.
    std::string cpu_home;
    if (options.profile.empty()) {
        auto profiles = load_profiles(options.common.expected_dir, index);
        if (profiles.is_ok()) {
            auto choice = choose_profile(profiles.value(), run.fingerprint_summary(), "");
            if (choice.is_ok() && !choice.value().chain.empty())
                cpu_home = choice.value().chain.back()->name;
        }
    }
    for (const blessed_record& blessed : chosen) {
        const case_record* r = blessed.record;
        std::string target = options.profile;
        if (target.empty() && !r->baseline_profile && r->key.backend == "cpu")
            target = cpu_home;
        if (target.empty())
            target = r->baseline_profile.value_or(run.log.latest.profile.value_or(""));
        if (target.empty())
            return bad_run_input(r->key.str() + ": no profile judged it and the run matched "
                                                "none: name one with --profile");
        by_file[{target, r->key.scenario}].push_back(blessed);
    }
    std::vector<pending_write> writes;
    for (const auto& [target, records] : by_file) {
        PITFALL_ASSIGN_OR_RETURN(pending_write w, blessed_file(options, index, target.first,
                                                               target.second, records, runs, date));
        writes.push_back(std::move(w));
    }
    return writes;
}

/// The profile folders the writes go into.
std::set<std::string> profiles_of(const std::vector<pending_write>& writes) {
    std::set<std::string> profiles;
    for (const pending_write& w : writes)
        profiles.insert(fs::path(w.path).parent_path().string());
    return profiles;
}

/// Keeps every run blessed from beside each profile written (expected/<profile>/runs/<id>/):
/// before the entries naming them are written, so that none names a run that is not there.
status keep_runs(const std::vector<pending_write>& writes, const std::vector<loaded_run>& runs) {
    const std::string gzip = find_in_path("gzip");
    for (const std::string& profile : profiles_of(writes))
        for (const loaded_run& run : runs)
            PITFALL_TRY(archive::keep_run(
                run.dir, profile, archive::run_id(run.log.header.at, run.fingerprint_id(), run.dir),
                gzip));
    return status::ok();
}

/// After the writes: removes the kept runs no entry of each profile names any more.
status prune_runs(const std::vector<pending_write>& writes) {
    for (const std::string& profile : profiles_of(writes)) {
        PITFALL_ASSIGN_OR_RETURN(const int removed, archive::prune(profile));
        std::cout << "bless: runs kept in " << profile << "/runs"
                  << (removed > 0 ? "; " + std::to_string(removed) + " no entry names removed"
                                  : std::string())
                  << '\n';
    }
    return status::ok();
}

} // namespace

int bless_run(const bless_options& options) {
    auto runs = load_bless_runs(options.run_dirs);
    if (!runs.is_ok())
        return report_error(runs.error().message());
    const loaded_run& run = runs.value().back(); // its header stands for all
    const std::string run_name =
        options.run_dirs.size() == 1
            ? options.run_dirs[0]
            : options.run_dirs[0] + " (+" + std::to_string(runs.value().size() - 1) + " more)";
    auto chosen = select_for_bless(options, least_disturbed(runs.value()), run_name);
    if (!chosen.is_ok())
        return report_error(chosen.error().message());
    const std::string date = utc_now("%Y-%m-%d");
    auto writes = bless_writes(options, chosen.value(), runs.value(), date);
    if (!writes.is_ok())
        return report_error(writes.error().message());
    if (!options.dry_run)
        if (const status kept = keep_runs(writes.value(), runs.value()); !kept.is_ok())
            return report_error(kept.message() + " (no baseline was written)");
    auto changed = show_and_write(writes.value(), options.dry_run);
    if (!changed.is_ok())
        return report_error(changed.error().message());
    if (!options.dry_run)
        if (const status pruned = prune_runs(writes.value()); !pruned.is_ok())
            return report_error(pruned.message() + " (the baselines were written)");
    std::cout << "bless: " << chosen.value().size() << " case(s)"
              << (options.ratios_only ? " (their ratios only), " : ", ") << changed.value()
              << " file(s) "
              << (options.dry_run ? "would change (dry run: nothing written)" : "changed")
              << "; fingerprint " << run.fingerprint_id() << ", pitfall "
              << run.log.latest.pitfall_version << ", " << date << '\n';
    return exit_ok;
}

} // namespace pitfall::runner
