// `pitfall bless`: a run written into expected/ (bless.hpp).
#include "judge/bless.hpp"

#include "fingerprint/host_identity.hpp"
#include "judge/baseline.hpp"
#include "judge/stats.hpp"
#include "judge/timing.hpp"
#include "judge/tool_parts.hpp"
#include "pitfall/detail/json_file.hpp"
#include "pitfall/detail/json_schema.hpp"
#include "pitfall/detail/process.hpp"
#include "pitfall/detail/result_file.hpp"
#include "run/run_archive.hpp"
#include "run/runner.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace pitfall::runner {
using nlohmann::json;
using nlohmann::ordered_json;
namespace fs = std::filesystem;
using tool_parts::fixed;
using tool_parts::load_run_folder;
using tool_parts::loaded_run;
using tool_parts::report_error;

namespace {

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
/// run, as `pitfall run` computes it); the median over the runs, which one disturbed run cannot
/// move far, and their span. Nothing when no run has both series.
std::optional<blessed_ratio> ratio_over_runs(const std::vector<loaded_run>& runs,
                                             const std::string& backend,
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
    if (per_run.empty())
        return std::nullopt;
    const auto [lowest, highest] = std::minmax_element(per_run.begin(), per_run.end());
    return blessed_ratio{stats::median_or_nan(per_run), *lowest, *highest};
}

/// The scenario's declared ratios whose two cases are both among `records` (those blessed into
/// this file), as observed entries of doc["ratios"]. A documented bound is a claim about every
/// machine of the profile, not one run's: it stays, and the note says what the runs measured.
void bless_ratios(const bless_options& options, const std::string& profile_name,
                  const scenario_entry& scenario, const std::vector<blessed_record>& records,
                  const std::vector<loaded_run>& runs, const std::string& date, ordered_json& doc,
                  std::vector<std::string>& notes) {
    if (options.memory_only)
        return;
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
            const std::optional<blessed_ratio> measured =
                ratio_over_runs(runs, backend, scenario.description.name, r);
            if (!measured || !std::isfinite(measured->median))
                continue;
            const double ratio = measured->median;
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
            doc["ratios"][key] = ratio_entry_from_runs(
                *measured, options.ratio_tolerance, previous, run.fingerprint_summary(),
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

/// Whether `name` is a profile name: a letter or digit, then letters, digits, '.', '_' and '-'.
bool a_profile_name(const std::string& name) {
    return !name.empty() && name.size() <= 100 &&
           std::isalnum(static_cast<unsigned char>(name[0])) != 0 &&
           std::all_of(name.begin(), name.end(), [](char c) {
               return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '_' ||
                      c == '-';
           });
}

/// expected/<profile_name>: refused unless a profile's folder directly inside expected/.
status_or<fs::path> profile_folder(const bless_options& options, const std::string& profile_name) {
    // The name may come from the run's records (which profile judged a case), and records are
    // data: it must be a name, and its folder one directly inside expected/, links resolved.
    const std::string named_by = options.profile.empty() ? "the run's records" : "--profile";
    if (!a_profile_name(profile_name))
        return bad_run_input("profile '" + profile_name + "' (from " + named_by +
                             "): not a profile name (a letter or digit, then letters, digits, "
                             "'.', '_' and '-')");
    fs::path profile_dir = fs::path(options.common.expected_dir) / profile_name;
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
    return profile_dir;
}

/// The expected/ document at `path` that `records` are blessed into: the file as it is, or a
/// new one (schema, scenario, cases) where there is none.
status_or<ordered_json> document_to_bless_into(const std::string& path,
                                               const std::string& scenario_name,
                                               const std::vector<blessed_record>& records) {
    ordered_json doc = {{"schema", "pitfall.expected/1"},
                        {"scenario", scenario_name},
                        {"cases", ordered_json::object()}};
    std::error_code ec;
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
    return doc;
}

/// The evidence the entry blessed from `r` carries: its run's, what scenario.json says of the
/// series it timed, and the same case in every run blessed together.
observation_origin blessed_origin(const bless_options& options, const scenario_entry& scenario,
                                  const blessed_record& r, const std::vector<loaded_run>& runs,
                                  const std::string& date) {
    observation_origin origin = r.run->origin(date);
    origin.with_timings = !options.no_timings;
    origin.run_archive = archive::entry_path(
        archive::run_id(r.run->log.header.at, r.run->fingerprint_id(), r.run->dir));
    if (const variant_spec* v = scenario.description.find_variant(r.record->key.variant)) {
        origin.memory_per = v->memory_per;
        for (const auto& series : timed_series(*r.record)) {
            const std::string by = scenario.description.bound_by(*v, r.record->key.backend, series);
            if (!by.empty())
                origin.bound_by[series] = by;
            else if (const timing_spec* t = scenario.description.timing_of(*v, series))
                origin.not_timed[series] = t->why;
        }
    }
    // Normalised series pool the case's samples from every run blessed together.
    for (const loaded_run& run : runs)
        if (const case_record* same = run.log.find(r.record->key.str()))
            origin.pooled_results.push_back(&same->result);
    return origin;
}

/// Each record's entry, written into doc["cases"]; the timed series refused go into `notes`.
void bless_entries(const bless_options& options, const scenario_entry& scenario,
                   const std::vector<blessed_record>& records, const std::vector<loaded_run>& runs,
                   const std::string& date, ordered_json& doc, std::vector<std::string>& notes) {
    if (options.ratios_only)
        return;
    for (const blessed_record& r : records) {
        ordered_json& cases = doc["cases"];
        const std::string key = r.record->key.entry_key();
        const ordered_json previous = cases.contains(key) ? cases[key] : ordered_json();
        const observation_origin origin = blessed_origin(options, scenario, r, runs, date);
        if (options.memory_only) {
            std::string why_not;
            if (auto entry = memory_entry_from_record(*r.record, previous, origin, why_not))
                cases[key] = std::move(*entry);
            else
                notes.push_back("bless: " + r.record->key.str() +
                                ": peak RSS not blessed: " + why_not);
            continue;
        }
        if (origin.with_timings && r.record->result.is_object()) {
            std::vector<std::string> refused;
            (void)expected_timings(r.record->result, origin, &refused);
            for (const auto& why : refused)
                notes.push_back("bless: " + r.record->key.str() + ": not blessed: " + why);
        }
        cases[key] = entry_from_record(*r.record, previous, origin);
    }
}

/// expected/<profile>/<scenario>.json with the records blessed into it, in the file's own key
/// order (a new file: schema, scenario, cases), validated as load_profiles would.
status_or<pending_write> blessed_file(const bless_options& options, const scenario_index& index,
                                      const std::string& profile_name,
                                      const std::string& scenario_name,
                                      const std::vector<blessed_record>& records,
                                      const std::vector<loaded_run>& runs,
                                      const std::string& date) {
    PITFALL_ASSIGN_OR_RETURN(const fs::path profile_dir, profile_folder(options, profile_name));
    const auto it =
        std::find_if(index.scenarios.begin(), index.scenarios.end(),
                     [&](const scenario_entry& s) { return s.description.name == scenario_name; });
    if (it == index.scenarios.end())
        return bad_run_input(scenario_name + ": not a scenario of " + index.path);
    const std::string path = (profile_dir / (scenario_name + ".json")).string();
    PITFALL_ASSIGN_OR_RETURN(ordered_json doc,
                             document_to_bless_into(path, scenario_name, records));
    std::vector<std::string> notes;
    bless_entries(options, *it, records, runs, date, doc, notes);
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
              << (options.ratios_only   ? " (their ratios only), "
                  : options.memory_only ? " (their peak RSS only), "
                                        : ", ")
              << changed.value() << " file(s) "
              << (options.dry_run ? "would change (dry run: nothing written)" : "changed")
              << "; fingerprint " << run.fingerprint_id() << ", pitfall "
              << run.log.latest.pitfall_version << ", " << date << '\n';
    return exit_ok;
}

} // namespace pitfall::runner
