// `pitfall compare`: case by case, what changed from one run to another (compare.cpp).
#pragma once

#include <string>
#include <vector>

namespace pitfall::runner {

struct compare_options {
    std::string run_a; ///< the reference run folder
    std::string run_b; ///< the candidate
    bool as_json = false;
    double timing_floor = 0.10;
    std::vector<std::string> argv;
};

/// `pitfall compare A B`: exit 0 when no change would fail, 1 when one would, 2 on bad input.
int compare_runs(const compare_options& options);

} // namespace pitfall::runner
