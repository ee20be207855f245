// `pitfall compare` and `pitfall bless`: two runs case by case, and a run written into expected/.
#include "baseline.hpp"
#include "runner.hpp"
#include "pitfall/detail/process.hpp"
#include "pitfall/detail/result_file.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
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
namespace fs = std::filesystem;

namespace {

/// One run folder as compare and bless need it: its newest header and its newest record of
/// each case, in the order the cases first finished.
struct loaded_run {
    std::string dir;
    json header = json::object();
    std::vector<std::string> order;
    std::map<std::string, json> cases;

    std::string fingerprint_id() const { return header.value("fingerprint_id", ""); }
    json fingerprint_summary() const { return header.value("fingerprint_summary", json::object()); }
};

status_or<loaded_run> load_run(const std::string& dir) {
    const std::string path = dir + "/results.jsonl";
    std::error_code ec;
    if (!fs::is_regular_file(path, ec))
        return status::error(library::pitfall, "bad_input", dir + ": not a run folder (no results.jsonl)", stage::init);
    PITFALL_ASSIGN_OR_RETURN(const auto records, read_results(path));
    loaded_run run;
    run.dir = dir;
    for (const auto& r : records) {
        const std::string kind = r.value("record", "");
        if (kind == "run" || kind == "resumed")
            run.header = r;
        else if (kind == "case") {
            const std::string key = r.value("case", "");
            if (run.cases.count(key) == 0)
                run.order.push_back(key);
            run.cases[key] = r;
        }
    }
    if (run.header.empty())
        return status::error(library::pitfall, "bad_input", path + ": no run record (not written by pitfall run)",
                             stage::init);
    return run;
}

std::string outcome_words(const json& o) {
    const std::string st = o.value("status", "?");
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

double median_of(const json& values) { return median(values.get<std::vector<double>>()); }

std::string find_in_path(const std::string& program) {
    const char* path = std::getenv("PATH");
    std::stringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
    for (std::string dir; std::getline(dirs, dir, ':');)
        if (!dir.empty() && ::access((dir + "/" + program).c_str(), X_OK) == 0)
            return dir + "/" + program;
    return program;
}

bool record_injected(const json& record) {
    const json& result = record.value("result", json());
    return result.is_object() && result.contains("injected");
}
} // namespace

int compare_runs(const compare_options& options) {
    auto a_or = load_run(options.run_a);
    auto b_or = load_run(options.run_b);
    for (const auto* r : {&a_or, &b_or})
        if (!r->is_ok()) {
            std::cerr << "pitfall: error: " << r->error().message() << '\n';
            return exit_bad_input;
        }
    const loaded_run& a = a_or.value();
    const loaded_run& b = b_or.value();
    const bool same_machine = !a.fingerprint_id().empty() && a.fingerprint_id() == b.fingerprint_id();
    judge_context judging;
    judging.fingerprint_id = b.fingerprint_id();
    judging.timing.floor = options.timing_floor;

    std::vector<std::string> keys = a.order;
    for (const auto& k : b.order)
        if (a.cases.count(k) == 0)
            keys.push_back(k);

    json rows = json::array();
    bool any_failing = false;
    std::map<std::string, int> counts;
    for (const auto& key : keys) {
        json row = {{"case", key}};
        const auto ia = a.cases.find(key);
        const auto ib = b.cases.find(key);
        if (ia == a.cases.end() || ib == b.cases.end()) {
            row["verdict"] = ia == a.cases.end() ? "NEW" : "NOT_RUN";
            row["reason"] = ia == a.cases.end() ? "only in " + b.dir : "only in " + a.dir;
            row["failing"] = false;
            ++counts[row["verdict"].get<std::string>()];
            rows.push_back(row);
            continue;
        }
        const json& ra = ia->second;
        const json& rb = ib->second;
        // A's observation becomes the baseline B is judged against, with A's own hand-written
        // bounds (measurements) carried over from the entry that judged A.
        const json previous = ra.value("baseline", json::object()).value("entry", json());
        json entry = entry_from_record(ra, previous.is_object() ? previous : json(), a.fingerprint_summary(),
                                       a.fingerprint_id(), utc_now("%Y-%m-%d"));
        // Where A ran is part of what B must match ("cpu" for a reproduced silent fallback).
        const json& result_a = ra.value("result", json());
        const std::string ran_on_a = result_a.is_object() ? result_a.value("ran_on", "") : "";
        if (const auto colon = ran_on_a.find_first_of(":"); colon != std::string::npos)
            entry["ran_on"] = ran_on_a.substr(0, colon);
        else
            entry.erase("ran_on");
        observation o;
        o.outcome = rb.value("observed", json::object());
        o.result = rb.value("result", json());
        const json process = rb.value("process", json::object());
        if (process.contains("peak_rss_bytes") && process["peak_rss_bytes"].is_number())
            o.peak_rss_bytes = process["peak_rss_bytes"].get<double>();
        const std::string backend = rb.value("backend", "");
        const bool unsupported_both = ra.value("observed", json::object()).value("status", "") == "unsupported" &&
                                      o.outcome.value("status", "") == "unsupported";
        const verdict v = unsupported_both ? verdict{verdict_kind::unsupported, "unsupported in both"}
                                           : judge(o, entry, backend, judging);
        row["verdict"] = to_string(v.kind);
        row["failing"] = is_failing(v.kind);
        row["reason"] = v.reason;
        row["outcome"] = {{"a", outcome_words(ra.value("observed", json::object()))}, {"b", outcome_words(o.outcome)}};
        row["timings"] = v.timings;
        // Medians for the eye, whatever the verdict could judge.
        const json sa = ra.value("result", json()).is_object() ? ra["result"].value("samples", json::object()) : json::object();
        const json sb = o.result.is_object() ? o.result.value("samples", json::object()) : json::object();
        json medians = json::object();
        for (const auto& [name, series] : sa.items())
            if (series.value("unit", "s") == "s" && sb.contains(name) && series.contains("values") &&
                sb[name].contains("values") &&
                !series["values"].empty() && !sb[name]["values"].empty())
                medians[name] = {{"a", median_of(series["values"])}, {"b", median_of(sb[name]["values"])}};
        row["medians"] = medians;
        const auto tracked = [](const json& r) {
            const json& res = r.value("result", json());
            return res.is_object() ? res.value("memory", json::object()).value("tracked_peak_bytes", json()) : json();
        };
        row["tracked_peak_bytes"] = {{"a", tracked(ra)}, {"b", tracked(rb)}};
        row["peak_rss_bytes"] = {{"a", ra.value("process", json::object()).value("peak_rss_bytes", json())},
                                 {"b", process.value("peak_rss_bytes", json())}};
        any_failing = any_failing || is_failing(v.kind);
        ++counts[to_string(v.kind)];
        rows.push_back(row);
    }

    const int code = any_failing ? exit_failed : exit_ok;
    if (options.as_json) {
        std::cout << json{{"schema", "pitfall.compare/1"},
                          {"a", a.dir},
                          {"b", b.dir},
                          {"same_fingerprint", same_machine},
                          {"fingerprint_id", {{"a", a.fingerprint_id()}, {"b", b.fingerprint_id()}}},
                          {"cases", rows},
                          {"counts", counts},
                          {"exit_code", code}}
                         .dump(2)
                  << '\n';
        return code;
    }
    std::cout << "compare: A = " << a.dir << "\n         B = " << b.dir << '\n';
    if (same_machine)
        std::cout << "same fingerprint (" << a.fingerprint_id() << "): times are judged\n";
    else
        std::cout << "different fingerprints (A " << a.fingerprint_id() << ", B " << b.fingerprint_id()
                  << "): times are shown, not judged; outcomes, numerics and memory are\n";
    std::size_t width = 6;
    for (const auto& r : rows)
        width = std::max(width, r["case"].get<std::string>().size() + 2);
    std::cout << '\n' << std::left << std::setw(static_cast<int>(width)) << "CASE" << std::setw(34) << "OUTCOME A -> B"
              << std::setw(30) << "MEDIAN TIME A -> B" << std::setw(17) << "VERDICT" << "DETAIL\n";
    for (const auto& r : rows) {
        std::string outcome = "-", time = "-";
        if (r.contains("outcome")) {
            const std::string oa = r["outcome"]["a"], ob = r["outcome"]["b"];
            outcome = oa == ob ? oa + " (same)" : oa + " -> " + ob;
        }
        if (r.contains("medians") && !r["medians"].empty()) {
            const json& m = r["medians"].begin().value();
            const double ma = m["a"].get<double>(), mb = m["b"].get<double>();
            time = fixed(ma * 1e3, 2) + " -> " + fixed(mb * 1e3, 2) + " ms";
            if (ma > 0)
                time += " (" + fixed(mb / ma, 2) + "x)";
        }
        std::string reason = r.value("reason", "");
        if (reason.size() > 100)
            reason = reason.substr(0, 97) + "...";
        if (outcome.size() > 32)
            outcome = outcome.substr(0, 29) + "...";
        std::cout << std::left << std::setw(static_cast<int>(width)) << r["case"].get<std::string>() << std::setw(34)
                  << outcome << std::setw(30) << time << std::setw(17) << r["verdict"].get<std::string>() << reason
                  << '\n';
    }
    std::cout << '\n' << counts_line(counts) << '\n';
    return code;
}

int bless_run(const bless_options& options) {
    auto fail = [](const std::string& what) {
        std::cerr << "pitfall: error: " << what << '\n';
        return exit_bad_input;
    };
    std::vector<loaded_run> runs;
    for (const auto& dir : options.run_dirs) {
        auto run_or = load_run(dir);
        if (!run_or.is_ok())
            return fail(run_or.error().message());
        runs.push_back(std::move(run_or.value()));
        if (runs.back().fingerprint_id().empty())
            return fail(dir + ": the run records no fingerprint id (made by an older pitfall): run it again");
        if (runs.back().fingerprint_id() != runs.front().fingerprint_id())
            return fail(dir + ": another machine or stack than " + runs.front().dir + " (fingerprint " +
                        runs.back().fingerprint_id() + " vs " + runs.front().fingerprint_id() +
                        "): bless them separately");
    }
    // One run stands for all: each case's record is the one with the lowest median time. On a
    // shared machine interference only ever adds time, so the fastest of several runs is the
    // least disturbed one, not a lucky one.
    loaded_run run = runs.back();
    run.dir = options.run_dirs.size() == 1 ? options.run_dirs[0]
                                           : options.run_dirs[0] + " (+" + std::to_string(runs.size() - 1) + " more)";
    for (const auto& key : run.order) {
        std::vector<const json*> seen;
        for (const auto& r : runs)
            if (const auto it = r.cases.find(key); it != r.cases.end())
                seen.push_back(&it->second);
        std::vector<std::pair<double, const json*>> timed;
        for (const json* rec : seen)
            if (const double m = first_time_median(rec->value("result", json())); std::isfinite(m))
                timed.emplace_back(m, rec);
        if (timed.size() == seen.size() && timed.size() > 1) {
            std::sort(timed.begin(), timed.end(),
                      [](const auto& x, const auto& y) { return x.first < y.first; });
            run.cases[key] = *timed.front().second;
        }
        for (const json* rec : seen) { // an injected or crashed run among them taints the choice
            const std::string v = rec->value("verdict", "");
            if (record_injected(*rec) || v == "CRASH" || v == "TIMEOUT")
                run.cases[key] = *rec;
        }
    }
    auto index_or = load_index(options.common.index_path);
    if (!index_or.is_ok())
        return fail(index_or.error().message());
    const scenario_index& index = index_or.value();

    std::set<std::string> named(options.cases.begin(), options.cases.end());
    for (const auto& key : named)
        if (run.cases.count(key) == 0)
            return fail("--case " + key + ": not in " + run.dir);
    std::set<std::string> scenario_filter(options.scenarios.begin(), options.scenarios.end());

    // What to bless, and what must be refused before anything is written.
    std::vector<const json*> chosen;
    std::vector<std::string> refused;
    for (const auto& key : run.order) {
        const json& r = run.cases.at(key);
        if (!named.empty() && named.count(key) == 0)
            continue;
        if (!scenario_filter.empty() && scenario_filter.count(r.value("scenario", "")) == 0)
            continue;
        if (record_injected(r))
            return fail(key + ": the run was made with " + std::string("PITFALL_INJECT") +
                        " (injected faults are not observations)");
        const std::string v = r.value("verdict", "");
        const std::string st = r.value("observed", json::object()).value("status", "");
        const bool broken = v == "CRASH" || v == "TIMEOUT" || st == "timeout" || st == "not_started" || st == "bad_result";
        if (broken && named.count(key) == 0) {
            refused.push_back(key + " (" + v + ": " + r.value("reason", "") + ")");
            continue;
        }
        chosen.push_back(&r);
    }
    if (!refused.empty()) {
        std::cerr << "pitfall: error: refusing to bless a run whose cases crashed or timed out:\n";
        for (const auto& r : refused)
            std::cerr << "  " << r << '\n';
        std::cerr << "name the ones that are the expected behaviour with --case KEY (each one), or leave\n"
                     "them out with --scenario\n";
        return exit_bad_input;
    }
    if (chosen.empty())
        return fail("nothing to bless in " + run.dir + " with these filters");

    // Group by target file: expected/<profile>/<scenario>.json.
    std::map<std::pair<std::string, std::string>, std::vector<const json*>> by_file;
    const std::string run_profile = run.header.value("profile", json::object()).value("name", json()).is_string()
                                        ? run.header["profile"]["name"].get<std::string>()
                                        : std::string();
    for (const json* r : chosen) {
        std::string target = options.profile;
        if (target.empty()) {
            const json judged_by = r->value("baseline", json::object()).value("profile", json());
            target = judged_by.is_string() ? judged_by.get<std::string>() : run_profile;
        }
        if (target.empty())
            return fail(r->value("case", "") + ": no profile judged it and the run matched none: name one with --profile");
        by_file[{target, r->value("scenario", "")}].push_back(r);
    }

    const std::string date = utc_now("%Y-%m-%d");
    struct pending {
        std::string path, text;
    };
    std::vector<pending> writes;
    for (const auto& [target, records] : by_file) {
        const auto& [profile_name, scenario_name] = target;
        const fs::path profile_dir = fs::path(options.common.expected_dir) / profile_name;
        std::error_code ec;
        if (!fs::is_regular_file(profile_dir / "profile.json", ec))
            return fail("--profile " + profile_name + ": " + profile_dir.string() +
                        "/profile.json does not exist (create the profile first: it says which environments it matches)");
        const auto it = std::find_if(index.scenarios.begin(), index.scenarios.end(),
                                     [&](const scenario_entry& s) { return s.description.name == scenario_name; });
        if (it == index.scenarios.end())
            return fail(scenario_name + ": not a scenario of " + index.path);
        const std::string path = (profile_dir / (scenario_name + ".json")).string();
        json doc = {{"schema", "pitfall.expected/1"}, {"scenario", scenario_name}, {"cases", json::object()}};
        if (fs::exists(path, ec)) {
            std::ifstream in(path);
            try {
                doc = json::parse(in);
            } catch (const json::parse_error& e) {
                return fail(path + ": malformed JSON (" + std::string(e.what()) + "): fix it before blessing into it");
            }
        }
        for (const json* r : records) {
            const std::string case_key = r->value("backend", "") + "." + r->value("variant", "");
            const json previous = doc["cases"].contains(case_key) ? doc["cases"][case_key] : json();
            doc["cases"][case_key] =
                entry_from_record(*r, previous, run.fingerprint_summary(), run.fingerprint_id(), date);
        }
        if (auto valid = validate_expected(path, doc, *it); !valid.is_ok())
            return fail("the blessed file would not be valid: " + valid.message());
        writes.push_back({path, doc.dump(2) + "\n"});
    }

    // The reviewable diff: `diff -u` between each file and what it becomes.
    const std::string scratch = fs::temp_directory_path().string() + "/pitfall-bless-" + std::to_string(::getpid());
    std::error_code ec;
    fs::create_directories(scratch, ec);
    int changed = 0;
    for (std::size_t i = 0; i < writes.size(); ++i) {
        const std::string proposed = scratch + "/" + std::to_string(i) + ".json";
        if (auto w = write_file_atomically(proposed, writes[i].text); !w.is_ok())
            return fail(w.message());
        const bool exists = fs::exists(writes[i].path, ec);
        process_request req;
        req.argv = {find_in_path("diff"), "-u", "--label", "a/" + writes[i].path, "--label", "b/" + writes[i].path,
                    exists ? writes[i].path : "/dev/null", proposed};
        req.output_path = scratch + "/diff.txt";
        req.timeout_seconds = 60;
        const process_outcome p = run_process(req);
        std::ifstream diff_text(req.output_path);
        const std::string text((std::istreambuf_iterator<char>(diff_text)), std::istreambuf_iterator<char>());
        if (!p.started || !p.exit_code || *p.exit_code > 1)
            std::cout << "(diff unavailable: " << (p.started ? text : p.start_error) << ")\n";
        else
            std::cout << text;
        if (p.exit_code && *p.exit_code == 0)
            continue; // unchanged
        ++changed;
        if (!options.dry_run)
            if (auto w = write_file_atomically(writes[i].path, writes[i].text); !w.is_ok())
                return fail(w.message());
    }
    fs::remove_all(scratch, ec);
    std::cout << "bless: " << chosen.size() << " case(s), " << changed << " file(s) "
              << (options.dry_run ? "would change (dry run: nothing written)" : "changed") << "; fingerprint "
              << run.fingerprint_id() << ", " << date << '\n';
    return exit_ok;
}

} // namespace pitfall::runner
