// The records of a run as types: the one table of verdicts, a case's key, the run header and a
// judged case, each with to_json/from_json. results.jsonl holds one JSON document a line:
//
//   {"record": "run", ...}        run_header: what was asked, the fingerprint, the profile
//   {"record": "started", ...}    a case began (a crash or kill of the harness leaves a trace)
//   {"record": "case", ...}       case_record: a judged case
//   {"record": "interrupted", ...}, {"record": "resumed", ...}
//
// from_json rejects a field of the wrong type with an error naming it ("field 'process.
// wall_seconds': expected a number"); missing optional fields take their defaults, so a record
// written by hand (tests, synthetic runs) needs only what it means to say.
#pragma once

#include "pitfall/status.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pitfall::runner {

/// Bad input about a run's files (exit 2): the message names the file, line and field.
status bad_run_input(const std::string& message);

// ---- verdicts ------------------------------------------------------------------------------

enum class verdict_kind {
    pass,
    fail,
    numeric_mismatch,
    mem_regression,
    perf_regression,
    crash,
    timeout,
    ambiguous,
    no_baseline,
    unsupported
};

/// How a verdict weighs on a run: failures and errors fail it (exit 1; JUnit <failure> and
/// <error>), warnings and skips do not.
enum class verdict_severity { pass, warning, skip, failure, error };

struct verdict_info {
    verdict_kind kind;
    const char* name; ///< as results, reports and baselines spell it: "NUMERIC_MISMATCH"
    verdict_severity severity;
    const char* label; ///< what it means, in one line

    bool failing() const {
        return severity == verdict_severity::failure || severity == verdict_severity::error;
    }
};

/// Every verdict, in the order people read them (PASS first, then failures, warnings, skips).
const std::vector<verdict_info>& verdict_table();
const verdict_info& info(verdict_kind v);
const char* to_string(verdict_kind v);
const char* to_string(verdict_severity s);
/// Whether the verdict fails the run (FAIL, NUMERIC_MISMATCH, MEM_REGRESSION, PERF_REGRESSION,
/// CRASH, TIMEOUT); PASS, AMBIGUOUS, NO_BASELINE and UNSUPPORTED do not.
bool is_failing(verdict_kind v);
/// The verdict of that name; nullopt for any other text.
std::optional<verdict_kind> verdict_named(const std::string& name);
/// The table as report.json carries it: [{"name", "failing", "severity", "label"}].
nlohmann::json verdicts_json();

// ---- records -------------------------------------------------------------------------------

/// One scenario x backend x variant: "cpu.float64_inputs.reproduce".
struct case_key {
    std::string backend;
    std::string scenario;
    std::string variant;

    std::string str() const;                                     ///< "cpu.float64_inputs.reproduce"
    std::string test_name() const { return "pitfall." + str(); } ///< the CTest name
    std::string entry_key() const { return backend + "." + variant; } ///< key in expected/ files
    /// "<backend>.<scenario>.<variant>", each part a lower-case name.
    static status_or<case_key> parse(const std::string& text);

    friend bool operator==(const case_key& a, const case_key& b) { return a.str() == b.str(); }
    friend bool operator<(const case_key& a, const case_key& b) { return a.str() < b.str(); }
};

/// The options a run was started with, kept so that --resume completes it the same way.
struct recorded_options {
    std::optional<int> samples;
    double timeout_scale = 1.0;
    double timing_floor = 0.10;
    double remeasure_pause_seconds = 2.0;
    int jobs = 1;
    bool timed_in_parallel = false;
    bool full = false;       ///< --full: each scenario's full parameter set, not the quick defaults
    bool judge_times = true; ///< --timings judge (false: record)
    std::string correction = "holm"; ///< --timing-correction: holm, bh or none
    double timing_level = 0.05;      ///< --timing-level: the run's false-alarm level
};

/// The record that opens a run ("run") or a later session completing it ("resumed").
struct run_header {
    bool resumed = false;
    std::string at;
    std::string pitfall_version;
    std::vector<std::string> argv;
    std::string index;
    nlohmann::json build = nlohmann::json::object();
    nlohmann::json fingerprint = nlohmann::json::object();
    nlohmann::json fingerprint_summary = nlohmann::json::object();
    std::string fingerprint_id;
    std::optional<std::string> profile; ///< the profile chosen; nullopt: none matched
    std::string profile_reason;
    std::vector<case_key> selection;
    recorded_options options;

    nlohmann::json to_json() const;
    static status_or<run_header> from_json(const nlohmann::json& j);
};

/// How the case's process ended (from wait4).
struct process_facts {
    std::optional<int> exit_code;
    std::optional<std::string> signal; ///< "SIGSEGV"
    bool timed_out = false;
    double wall_seconds = 0;
    std::optional<std::int64_t> peak_rss_bytes;
    /// How peak_rss_bytes was measured: "case" (the case's own VmHWM, from its result) or
    /// "wait4" (ru_maxrss, which counts the image of pitfall it was forked from); absent in
    /// records written before it was recorded, which were all wait4's.
    std::optional<std::string> peak_rss_method;
    /// The BLAS/OpenMP threads the harness gave the process (scenario.json's variant
    /// "threads", else 1); absent in records written before it was recorded.
    std::optional<int> threads;
};

/// A judged case: a "case" line of results.jsonl.
struct case_record {
    case_key key;
    std::string kind; ///< reproduce, remedy, fallback
    /// Why this reproduce case predicts its failure instead of showing it (its variant's
    /// scenario.json "prediction" on this backend); "" for every other case.
    std::string prediction;
    std::vector<std::string> labels;
    verdict_kind verdict = verdict_kind::no_baseline;
    std::string reason;
    /// What was observed, normalised: {"status": ok|error|unsupported|signal|exit|load_error|
    /// timeout|not_started|bad_result, ...}.
    nlohmann::json observed = nlohmann::json::object();
    process_facts process;
    nlohmann::json result;                             ///< the scenario's document, or null
    nlohmann::json timings = nlohmann::json::object(); ///< per timed series
    nlohmann::json attempts = nlohmann::json::array(); ///< processes of a re-measured case
    std::optional<std::string> baseline_profile;       ///< the profile that judged it
    nlohmann::json baseline_entry;                     ///< its entry, or null
    std::string log;                                   ///< "logs/<key>.log"
    std::string output_tail;
    std::string finished_at;

    bool failing() const { return is_failing(verdict); }
    /// Whether the case ran with faults planted by PITFALL_INJECT (not an observation).
    bool injected() const { return result.is_object() && result.contains("injected"); }

    nlohmann::json to_json() const;
    static status_or<case_record> from_json(const nlohmann::json& j);
};

/// A line's record kind: "run", "resumed", "started", "case", "interrupted"; a line without one
/// is bad input (the caller names the line).
status_or<std::string> record_kind(const nlohmann::json& j);

} // namespace pitfall::runner
