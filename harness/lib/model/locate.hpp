// Where the `pitfall` command finds its scenario index, baselines, probe, matrix driver and
// run folders. Nothing of the source tree is compiled in: a build tree and an installed pitfall
// each carry an index beside the executable, and the index names the rest.
#pragma once

#include "pitfall/status.hpp"

#include <string>

namespace pitfall::runner {

/// The paths of one pitfall (a build tree or an install prefix). The index declares them as
///   "paths": {"expected": ..., "probe": ..., "matrix_driver": ..., "fleet_driver": ...,
///             "runs": ...}
/// each absolute or relative to the index file's folder; here they are absolute, or empty
/// where nothing names them.
struct installation {
    std::string index;         ///< the scenario index (pitfall-index.json)
    std::string expected;      ///< the baselines folder (expected/)
    std::string probe;         ///< the environment probe program (pitfall-probe)
    std::string matrix_driver; ///< the container matrix driver (tools/pitfall-matrix)
    std::string fleet_driver;  ///< the cluster fleet driver (tools/pitfall-fleet)
    /// Where a run without --out makes its folder: the index's, else reports/runs under the
    /// working directory (an installed index names none: its prefix is no place for runs).
    std::string runs;
};

/// This executable's own path (/proc/self/exe), empty when unreadable.
std::string self_executable();

/// The index: `index_flag` (--index) when given, else $PITFALL_INDEX, else the first that exists
/// of <exe dir>/../pitfall-index.json (a build tree: build/<preset>/bin/pitfall) and
/// <exe dir>/../share/pitfall/pitfall-index.json (an install). Then its "paths", overridden by
/// `expected_flag` (--expected), $PITFALL_EXPECTED and $PITFALL_MATRIX_DRIVER; the probe is
/// pitfall-probe beside this executable when the index names none, and runs go to
/// reports/runs of the working directory. No index found, or a
/// malformed one: bad input naming every place looked at (or the file and field).
status_or<installation> locate(const std::string& index_flag,
                               const std::string& expected_flag = "");

/// `value` when set, else bad input: "no <what>: the scenario index <index> has no
/// paths.<key>; <otherwise>" (`otherwise`: the other ways to give it).
status_or<std::string> required_path(const installation& at, const std::string& value,
                                     const std::string& what, const std::string& key,
                                     const std::string& otherwise);

/// locate(), for a command that runs cases (`run`, `gate`): its baselines folder and its probe
/// are required, each refused by required_path() with the ways to give it.
status_or<installation> locate_for_cases(const std::string& index_flag,
                                         const std::string& expected_flag);

/// $PITFALL_MATRIX_DRIVER, else the matrix_driver of the index locate("") finds.
status_or<std::string> locate_matrix_driver();

/// $PITFALL_FLEET_DRIVER, else the fleet_driver of the index locate("") finds.
status_or<std::string> locate_fleet_driver();

} // namespace pitfall::runner
