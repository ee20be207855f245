// `pitfall bundle RUN`: one .tar.gz a person attaches to a bug report. It holds the run folder,
// `pitfall doctor --json` and the fingerprint as of now, the CUDA libraries the cases really
// loaded, the NVIDIA kernel messages of this boot, `nvidia-smi -q` and `nvidia-bug-report.sh`
// where they are installed, and bundle.json / README.txt saying what is there, what is missing
// and why. Secret-named environment values are redacted in every file of the copy (redact.hpp);
// the run folder itself is never changed. The archive appears whole or not at all.
#pragma once

#include "bundle/collect.hpp"

#include "pitfall/status.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace pitfall::runner {

// NOLINTNEXTLINE(bugprone-exception-escape): the implicit members of its nlohmann::json fields
struct bundle_options {
    std::string run_dir;
    std::string out; ///< "": default_bundle_path(run_dir)
    /// `pitfall doctor --json` as of now; null with `doctor_problem` saying why there is none.
    nlohmann::json doctor;
    std::string doctor_problem;
    nlohmann::json fingerprint; ///< the fingerprint the doctor took now; null: none
    double command_timeout_seconds = 20;
    /// nvidia-bug-report.sh gathers for a while: its own bound.
    double bug_report_timeout_seconds = 60;
    std::uint64_t command_cap_bytes = std::uint64_t{8} << 20;
    std::uint64_t bug_report_cap_bytes = std::uint64_t{64} << 20;
    /// A copied file larger than this is left out, saying so.
    std::uint64_t largest_copied_file = std::uint64_t{512} << 20;
};

/// "<run folder name>-bundle.tar.gz" in the working folder: never beside the run, among the
/// runs (the name's characters as the archive's top folder has them).
std::string default_bundle_path(const std::string& run_dir);

/// What `write_bundle` made: the archive's path and every item with its state.
struct bundle_written {
    std::string path;
    std::vector<bundle_item> items;
};

/// Writes the bundle: bad input naming RUN when it is not a run folder, naming --out when the
/// archive cannot be written there (nothing is left behind then).
status_or<bundle_written> write_bundle(const bundle_options& options);

} // namespace pitfall::runner
