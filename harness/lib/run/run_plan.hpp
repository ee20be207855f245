// What planning, executing and summarising a run share, private to harness/lib/run: the plan
// every step reads (run_plan) and the helpers more than one step calls. runner.cpp holds the
// commands (`pitfall list`, `pitfall run`) and the helpers; plan.cpp, execute.cpp and summary.cpp
// one step each.
#pragma once

#include "run/runner.hpp"

#include "doctor/doctor.hpp"
#include "fingerprint/fingerprint.hpp"
#include "fingerprint/host_identity.hpp"
#include "judge/baseline.hpp"
#include "judge/stats.hpp"
#include "model/model.hpp"
#include "pitfall/detail/inject.hpp"
#include "pitfall/detail/json_file.hpp"
#include "pitfall/detail/json_schema.hpp"
#include "pitfall/detail/mutate.hpp"
#include "pitfall/detail/process.hpp"
#include "pitfall/detail/result_file.hpp"
#include "pitfall/detail/text.hpp"
#include "pitfall/memory.hpp"
#include "report/formats.hpp"
#include "run/run_folder.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <limits>
#include <list>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <sys/file.h>
#include <sys/stat.h>
#include <thread>

namespace pitfall::runner::run_parts {
using nlohmann::json;

/// The variables through which BLAS and OpenMP libraries take their thread count.
inline constexpr const char* case_thread_variables[] = {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                                        "MKL_NUM_THREADS", "BLIS_NUM_THREADS"};

/// Everything a run needs, made before its first case: what to run, where, judged how. Built
/// in place and never moved: the cases point into the index, the choice into the profiles.
struct run_plan {
    run_options options; ///< with a resumed run's own samples and timeout scale
    scenario_index index;
    std::vector<profile> profiles;
    std::vector<case_ref> cases;
    std::optional<run_folder> folder;
    bool resuming = false;
    std::map<std::string, case_record> finished; ///< key -> record; resumed: the earlier ones
    profile_choice choice;
    run_header header;
    judge_context judging;
    diagnosis machine;           ///< `pitfall doctor`'s findings over this session's fingerprint
    std::string visible_devices; ///< CUDA_VISIBLE_DEVICES for the cases ("": leave it)
    std::string run_token;       ///< the first part of each case's PITFALL_CASE_TOKEN
    std::string case_lock;       ///< the machine-wide case lock's file ("": none to hold)
    /// The run's timed series judged together (correct_run_timings), for summary.json.
    json timing_family;
    /// The scenarios whose programs this session has built (--build).
    std::set<std::string> programs_built;
    double build_seconds = 0; ///< what building them took
    /// results.jsonl's seal (run_folder::seal), summary.json's "records".
    json records_seal;
};

int report_error(const status& s);

void warn(const status& s);

std::string now_iso8601();

case_key key_of(const case_ref& c);

/// The most samples any timed series (unit "s") of a result holds; 0 when none.
std::size_t samples_taken(const json& result);

/// The request for measuring a case again after an AMBIGUOUS or PERF_REGRESSION timing: three
/// times the samples of the first attempt (odd), so that an episode of interference a few
/// samples long moves the median less and the interval narrows, and twice the time allowed.
process_request remeasure_request(process_request req, const json& first_result);

/// Waits `seconds` in short steps; false when Ctrl-C (or TERM) came meanwhile.
bool pause_unless_interrupted(double seconds);

std::string format_duration(double seconds);

/// `limit`, or less where the run has a deadline: the seconds left until it (at least 0.5 s,
/// so that a process started just before it still gets to start).
double seconds_left(const run_options& options, double limit);
/// Whether the run's deadline (if any) has passed.
bool past_deadline(const run_options& options);

observation observe(const case_ref& c, const process_outcome& p, const std::string& result_path,
                    const std::string& log_text, double timeout);

json compute_ratios(const scenario_index& index, const std::map<std::string, case_record>& finished,
                    const profile_choice& choice, const judge_context& judging);

std::string child_cuda_visible_devices();

status plan_run(const run_options& requested, run_plan& plan);

/// Fingerprints the environment, chooses the profiles, appends the header and says so.
status start_session(run_plan& plan);

/// Runs every case not finished yet, then measures again those whose timing was uncertain;
/// true when interrupted; an error (the run ends, exit 2) when a record could not be written.
status_or<bool> execute(run_plan& plan);

/// All timed series of the run judged together: a PERF_REGRESSION that does not survive the
/// correction for their number becomes AMBIGUOUS, and its case's record is appended again (the
/// newest record of a case is the one every reader keeps).
status correct_timings(run_plan& plan);

int summarise(const run_plan& plan, bool interrupted);

/// The median of `result`'s series `name` in seconds; NaN when it has none.
double time_median(const json& result, const std::string& name);

} // namespace pitfall::runner::run_parts
