// Baselines: environment profiles under expected/, the expected outcome of each case, and the
// verdict that compares an observed case with it.
//
//   expected/<profile>/profile.json      {"schema": "pitfall.profile/1", "name", "description",
//                                         "match": {"gpu_count": 0, ...}}
//   expected/<profile>/<scenario>.json   {"schema": "pitfall.expected/1", "scenario",
//                                         "cases": {"cpu.reproduce": {outcome, events,
//                                         measurements, memory, timings, provenance}},
//                                         "ratios": {"cpu.<ratio>": {min, max, observed,
//                                         note, provenance}}}
// The format is documented by reports/schema/expected.schema.json and profile.schema.json;
// load_profiles() enforces it, naming file and field.
#pragma once

#include "judge/stats.hpp"
#include "model/index.hpp"
#include "model/model.hpp"
#include "pitfall/status.hpp"

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace pitfall::runner {

// NOLINTNEXTLINE(bugprone-exception-escape): the implicit members of its nlohmann::json field
struct profile {
    std::string name;
    std::string dir;
    std::string description;
    nlohmann::json match; ///< key -> value (or array of accepted values) of the fingerprint summary
    /// An overlay holds only the entries a condition changes (pageable memory access, a compute
    /// mode): where it matches it is searched before every other profile, but never chosen.
    bool overlay = false;
    /// scenario name -> its "cases" object, validated against the index.
    std::map<std::string, nlohmann::json> cases;
    /// scenario name -> its "ratios" object ("<backend>.<ratio>" -> {min, max, provenance}).
    std::map<std::string, nlohmann::json> ratios;
};

/// Reads every profile under `expected_dir`, validating each file against the index: an unknown
/// case, outcome status or bound is an error naming the file and field. With `only`, a profile's
/// baselines are read for those scenarios alone (every profile.json still is): a run of one case
/// reads what can judge it, not the ~190 files of every scenario (`pitfall bless` and `compare`
/// read them all, and so check them all).
status_or<std::vector<profile>> load_profiles(const std::string& expected_dir,
                                              const scenario_index& index,
                                              const std::set<std::string>* only = nullptr);

/// Checks one expected/<profile>/<scenario>.json document (what load_profiles checks), naming
/// file and field.
status validate_expected(const std::string& file, const nlohmann::json& doc,
                         const scenario_entry& scenario);

struct profile_choice {
    const profile* chosen = nullptr; ///< the most specific match; null: none (NO_BASELINE)
    /// Every matching profile: matching overlays first, then the chosen one, then the rest, most
    /// specific first: a case without an entry in one is judged by the next that has one (CPU
    /// baselines in a profile that matches every host).
    std::vector<const profile*> chain;
    std::vector<const profile*> overlays; ///< the matching overlays (also at the chain's front)
    std::string reason;

    /// The entry for "<backend>.<variant>" of a scenario and the profile it came from.
    std::pair<const nlohmann::json*, const profile*> entry_for(const std::string& scenario,
                                                               const std::string& case_key) const;
    /// The bounds of "<backend>.<ratio>" of a scenario, most specific profile first.
    std::pair<const nlohmann::json*, const profile*> ratio_bounds_for(const std::string& scenario,
                                                                      const std::string& key) const;
};

/// The matching profiles, most specific (most keys) first; ties go by name and the reason says
/// so. `--profile` names the one profile to use, alone.
status_or<profile_choice> choose_profile(const std::vector<profile>& profiles,
                                         const nlohmann::json& summary,
                                         const std::string& override_name);

struct verdict {
    verdict_kind kind = verdict_kind::no_baseline;
    std::string reason;
    /// Per timed series: {"verdict": SAME|FASTER|PERF_REGRESSION|AMBIGUOUS|NOT_COMPARED,
    /// "reason", "ratio": {point, low, high}, "tolerance", "p"}; empty when nothing was timed.
    nlohmann::json timings = nlohmann::json::object();
};

/// What judging needs besides the two documents.
struct judge_context {
    /// The run's fingerprint id (see fingerprint_id()): absolute times are compared only with a
    /// baseline blessed under the same one.
    std::string fingerprint_id;
    /// The run's host id (host_identity.hpp) and build type: absolute times are compared only
    /// with a baseline blessed on the same host; any time only from the same build type.
    std::string host_id;
    std::string build_type;
    /// false (`pitfall run --timings record`): every timed series is recorded, none judged.
    bool judge_times = true;
    /// The BLAS the run's CPU cases load and the kernel type it chose ("OpenBLAS 0.3.21 /
    /// Haswell", blas_kernels()): a series normalised by host_blas is judged only where they are
    /// those it was blessed with, since another kernel type is other code, not another speed.
    std::string blas;
    stats::timing_options timing;
    /// The run's fingerprint's gpu_count, where the probe learned it: a CUDA case that says it
    /// ran on a device where this is 0 is FAIL, never PASS.
    std::optional<int> gpu_count;
    /// Where `pitfall doctor`'s rules find that CUDA work cannot run here: their headline and
    /// the CUDA errors that finding explains. A CUDA case that would FAIL or NUMERIC_MISMATCH
    /// with one of those errors in its outcome or events is UNSUPPORTED by that environment
    /// (a stub libcuda on the path is not the code's regression); another error still fails.
    std::string environment_fault;
    std::vector<std::string> environment_errors;
    /// Every error the diagnosis explains: a PASS that reproduced one says "(this machine: ...)".
    std::vector<std::string> explained_errors;
    /// The run used each scenario's full parameter set (`pitfall run --full`): baselines hold
    /// the quick defaults' measurements, memory and times, so only outcomes, events and checks
    /// are judged (the rest NOT_COMPARED, saying why).
    bool full_sizes = false;
};

/// "<blas_library> / <blas_core>" of a fingerprint summary ("" where the probe learned neither).
std::string blas_kernels(const nlohmann::json& fingerprint_summary);

/// Why a --full run compares no measurement, memory, time or ratio with a baseline.
inline constexpr const char* full_sizes_reason =
    "this run used --full (each scenario's full parameter set); baselines are blessed at the "
    "quick defaults";

/// What was observed of one case, normalised: {"status": ok|error|unsupported|signal|exit|
/// load_error|timeout|not_started, ...}.
// NOLINTNEXTLINE(bugprone-exception-escape): the implicit members of its nlohmann::json field
struct observation {
    nlohmann::json outcome;
    nlohmann::json result;                ///< the scenario's result document, or null
    std::optional<double> peak_rss_bytes; ///< the case process's own (run/case_memory.hpp)
    std::optional<int> threads;           ///< the BLAS/OpenMP threads it was given
    /// How peak_rss_bytes was measured: "case" (the SDK's VmHWM) or "wait4" (ru_maxrss, which
    /// counts the harness's image too); bounds are compared only with a figure measured alike.
    std::string peak_rss_method = "wait4";
};

/// Compares an observation with the case's baseline entry (null: none): outcome, events,
/// checks, measurements, memory, then timings; an observed entry's peak RSS and times only
/// under the fingerprint id it was blessed under. A failing verdict against a documented entry
/// says so ("documented, not observed: bless it if the hardware is right").
verdict judge(const observation& observed, const nlohmann::json& expected,
              const std::string& backend, const judge_context& context = {});

/// Whether a value meets a bound: {"min", "max"}, {"equals"}, {"value", "rel_tol"/"abs_tol"}.
/// Returns why not ("x = 5 above max 4"), or nullopt.
std::optional<std::string> bound_violation(const std::string& name, const nlohmann::json& bound,
                                           double x);

/// A ratio a run measured against its entry in a profile's "ratios": {"bound" (the bound
/// alone), "provenance", "verdict" (PASS, PERF_REGRESSION or NOT_COMPARED), "failing",
/// "reason"}. A documented bound is judged wherever the profile matches; an observed one only
/// under the fingerprint id it was blessed under, since a ratio measured on one machine (two
/// busy cores) says little of another (sixteen idle ones): elsewhere NOT_COMPARED, not failing.
/// An observed bound that records the host it was blessed on (provenance.host_id) is judged
/// only on that host too.
nlohmann::json judge_ratio(const std::string& name, double ratio, const nlohmann::json& entry,
                           const std::string& fingerprint_id, const std::string& host_id = "");

/// An observed ratio entry from a measured ratio: {min: ratio / tolerance, max: ratio *
/// tolerance} (3 significant digits, rounded outwards), "observed", and provenance {observed,
/// date, fingerprint, fingerprint_id, pitfall_version}. A "note" of `previous` is kept, and
/// its key order.
nlohmann::ordered_json
ratio_entry_from_run(double ratio, double tolerance, const nlohmann::ordered_json& previous,
                     const nlohmann::json& fingerprint_summary, const std::string& fingerprint_id,
                     const std::string& pitfall_version, const std::string& date,
                     const std::string& host_id = "");

/// A declared ratio as several runs blessed together measured it: the median of the runs'
/// ratios, and the lowest and highest of them.
struct blessed_ratio {
    double median = 0;
    double lowest = 0;
    double highest = 0;
};

/// As ratio_entry_from_run, for several runs: {min: lowest / tolerance, max: highest *
/// tolerance}, "observed" the median.
nlohmann::ordered_json ratio_entry_from_runs(
    const blessed_ratio& ratio, double tolerance, const nlohmann::ordered_json& previous,
    const nlohmann::json& fingerprint_summary, const std::string& fingerprint_id,
    const std::string& pitfall_version, const std::string& date, const std::string& host_id = "");

/// Where, when and by what an observation was made: the evidence an observed entry carries.
// NOLINTNEXTLINE(bugprone-exception-escape): the implicit members of its nlohmann::json field
struct observation_origin {
    nlohmann::json fingerprint_summary; ///< the run's (its latest resume's, for a resumed run)
    std::string fingerprint_id;
    std::string date;            ///< YYYY-MM-DD, the day it is blessed
    std::string pitfall_version; ///< the version of the pitfall that ran the case
    std::string run_folder;      ///< the run folder's name ("" when there is none)
    std::string run_started;     ///< when the run began (its header's "at"; "" when unknown)
    std::string run_archive;     ///< "runs/<id>": the run kept beside the baseline ("": none)
    double rss_tolerance = 0.25; ///< of the peak RSS bound
    bool with_timings = true;    ///< false: no timed series (bless --no-timings)
    /// The case's variant's `memory_per` (scenario.json): its tracked peak is blessed as a
    /// fraction of that measurement, within 2%, where the case recorded it; "" = exactly.
    std::string memory_per;
    std::string host_id;    ///< the run's host (absolute times hold only there)
    std::string build_type; ///< the build that ran it (times hold only from the same)
    /// Each timed series' control on this case's backend (scenario.json timings.bound_by): its
    /// samples are blessed normalised by that control too.
    std::map<std::string, std::string> bound_by;
    /// Series scenario.json declares with no control on this case's backend, and why: a time
    /// that says nothing of the code there (a thread per replica on two cores), not blessed.
    std::map<std::string, std::string> not_timed;
    /// The same case in each run blessed together (the chosen one among them): normalised
    /// series pool their samples, so that the baseline holds the spread between processes.
    std::vector<const nlohmann::json*> pooled_results;
    /// Below this many samples a series is refused (the judge could never compare it).
    std::size_t min_samples = 9;
};

/// A case's baseline entry made from a judged run record: outcome, events, where it ran (ran_on:
/// the part of the case's proof before ':', or the entry's own longer ran_on while the proof
/// still starts with it), tracked device bytes exactly (or per the variant's memory_per
/// measurement), peak RSS within the tolerance, the timed
/// series, and provenance {observed, date, fingerprint summary, fingerprint_id, pitfall_version,
/// run {case, folder, started}}. Fields of `previous` it does not produce (hand-written
/// measurement bounds, a note, a source) are kept, and so is the order of its keys, at every
/// level: a blessed file's diff shows what changed.
nlohmann::ordered_json entry_from_record(const case_record& record,
                                         const nlohmann::ordered_json& previous,
                                         const observation_origin& origin);

/// `previous` with only its peak RSS bound blessed again from `record`: memory.peak_rss_bytes
/// (or none, where the case measured none), provenance.rss_method and provenance.rss_run (the
/// run and case it came from, and the fingerprint id the peak is judged under from then on);
/// everything else of the entry, its provenance's evidence included, stays. nullopt with the
/// reason where it cannot: no observed entry to add to, or one of another build type.
std::optional<nlohmann::ordered_json>
memory_entry_from_record(const case_record& record, const nlohmann::ordered_json& previous,
                         const observation_origin& origin, std::string& why_not);

/// `fresh` with the keys of `previous` first, in its order (objects at every level), then the
/// keys only `fresh` has, in its order; values are `fresh`'s.
nlohmann::ordered_json keep_key_order(const nlohmann::ordered_json& previous,
                                      const nlohmann::ordered_json& fresh);

} // namespace pitfall::runner
