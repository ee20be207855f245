// `pitfall list` and `pitfall run`.
#pragma once

#include "index.hpp"

#include <optional>
#include <string>
#include <vector>

namespace pitfall::runner {

/// Documented exit codes of the `pitfall` command.
enum exit_code : int {
    exit_ok = 0,          ///< every case met its baseline (UNSUPPORTED and NO_BASELINE do not fail)
    exit_failed = 1,      ///< some case did not: FAIL, NUMERIC_MISMATCH, MEM_REGRESSION, CRASH, TIMEOUT
    exit_bad_input = 2,   ///< bad usage or bad input (flag, name, malformed file, unwritable folder)
    exit_interrupted = 130 ///< SIGINT/SIGTERM: children's groups ended, finished cases kept
};

struct common_options {
    std::string index_path;
    std::string expected_dir;
    case_filter filter;
};

struct run_options {
    common_options common;
    std::string probe_program;
    std::string out_dir;    ///< empty: reports/runs/<timestamp>
    std::string resume_dir; ///< set: complete this run instead of starting one
    bool replace = false;   ///< --replace: an existing run folder at --out is started afresh
    std::string profile_override;
    std::optional<int> samples;    ///< --samples N passed to every case
    std::optional<int> skip_code;  ///< exit with this when every selected case is UNSUPPORTED
    double timeout_scale = 1.0;
    std::vector<std::string> argv; ///< recorded in the run header
};

int list_cases(const common_options& options, bool as_json);
int run_cases(const run_options& options);

} // namespace pitfall::runner
