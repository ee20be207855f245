// run_archive.hpp: the runs a baseline was blessed from, kept compressed beside it, so that an
// observed entry can be checked again against what was measured (`pitfall bless` writes them).
//
//   expected/<profile>/runs/<id>/results.jsonl.gz   the run's records, gzip'd
//   expected/<profile>/runs/<id>/fingerprint.json.gz
//
// Each entry blessed from the run names the folder in provenance.run.archive ("runs/<id>"); a
// kept run that no entry of its profile names any more is removed by the next bless.
#pragma once

#include "pitfall/status.hpp"

#include <string>

namespace pitfall::runner::archive {

/// "<when the run started, digits and letters only>-<fingerprint id>-<8 hex digits of the run
/// folder's absolute path>": 20261127T212002Z-f12efa54d1cd729e-1a2b3c4d. The folder tells apart
/// two runs of one machine started in the same second.
std::string run_id(const std::string& started_at, const std::string& fingerprint_id,
                   const std::string& run_dir);

/// What an entry names: "runs/<id>".
std::string entry_path(const std::string& id);

/// Keeps `run_dir`'s results.jsonl and fingerprint.json (each read as a regular file of bounded
/// size, then gzip'd with the `gzip` program, written whole) under `profile_dir`/runs/<id>/.
status keep_run(const std::string& run_dir, const std::string& profile_dir, const std::string& id,
                const std::string& gzip);

/// Removes the kept runs of `profile_dir` that none of its entries names; how many.
status_or<int> prune(const std::string& profile_dir);

} // namespace pitfall::runner::archive
