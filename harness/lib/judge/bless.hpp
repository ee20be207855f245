// `pitfall bless`: a run's observations written into expected/ (bless.cpp).
#pragma once

#include "run/runner.hpp"

#include <string>
#include <vector>

namespace pitfall::runner {

struct bless_options {
    common_options common;
    /// One run, or several runs of the same cases on the same machine: each case is blessed
    /// from the run with the lowest median time (interference only adds time, so that is the
    /// least disturbed run; a baseline from one unlucky process would make every later run
    /// look fast).
    std::vector<std::string> run_dirs;
    std::vector<std::string> scenarios; ///< empty: every scenario in the run
    std::vector<std::string> cases; ///< named cases: only these, and crashed/timed-out ones allowed
    std::string profile;            ///< empty: the profile that judged each case
    bool dry_run = false;           ///< print the diff, write nothing
    /// A blessed ratio r gets the bound [r / tolerance, r x tolerance]: wide, since separate
    /// processes on a shared machine differ by 10% or more with nothing changed.
    double ratio_tolerance = 2.0;
    /// Write the measured ratios alone, each case's entry left as it is (re-bless ratio bounds
    /// without touching outcomes, numerics and times that were reviewed).
    bool ratios_only = false;
    /// Write each case's peak RSS bound alone (memory_entry_from_record), the rest of its
    /// entry left as it is: re-bless the memory measured another way without re-blessing
    /// outcomes and times.
    bool memory_only = false;
    /// Write no timed series (and drop an entry's old ones): for a machine whose absolute
    /// times must not gate later runs under its fingerprint (a shared, loaded CI host).
    bool no_timings = false;
};

/// `pitfall bless RUN`: exit 0 written (or nothing to write), 2 refused or bad input.
int bless_run(const bless_options& options);

} // namespace pitfall::runner
