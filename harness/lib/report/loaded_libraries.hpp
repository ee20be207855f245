// The CUDA libraries a run's cases really loaded (each result's "loaded_libraries", read from
// the case's own /proc/self/maps), put together over the run, and held against what the
// probe found installed when the run began: a case that loaded another cuDNN than the doctor
// found is named, with both versions and both files.
#pragma once

#include "report/report.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace pitfall::runner {

/// One library file at one version, and the cases that had it mapped.
struct library_use {
    std::string name;
    std::string version;
    std::string real_path;
    std::vector<std::string> cases; ///< case keys, in run order
};

/// The union over `case_records` (results.jsonl "case" records: "case" and "result" with its
/// "loaded_libraries"; anything malformed is passed over), sorted by name, version, file.
std::vector<library_use> libraries_loaded(const std::vector<nlohmann::json>& case_records);

/// What the probe found when the run began (the fingerprint's
/// libraries.loaded_library_files): each library with its version and file, no cases. Empty
/// for a fingerprint taken before the probe recorded them.
std::vector<library_use> libraries_found_installed(const nlohmann::json& fingerprint);

/// A library some cases loaded from another file or at another version than the probe found.
struct library_mismatch {
    std::string name;
    std::string loaded_version;
    std::string loaded_from;
    std::string found_version;
    std::string found_at;
    std::vector<std::string> cases;
    /// "case X loaded libcudnn 9.1.0 from A; the doctor found 9.19.0 at B" (and N more cases).
    std::string text() const;
};

/// Every library the cases loaded that the probe found too, but at another real path or
/// version; libraries the probe did not load (cuDNN's sub-libraries) are not compared.
std::vector<library_mismatch> library_mismatches(const nlohmann::json& fingerprint,
                                                 const std::vector<nlohmann::json>& case_records);

/// The two above over a loaded run folder: its cases, its header's fingerprint.
std::vector<library_use> libraries_loaded(const run_data& run);
std::vector<library_mismatch> library_mismatches(const run_data& run);

/// [{name, version, real_path, cases: count}]: the report's "loaded_libraries".
nlohmann::json libraries_json(const std::vector<library_use>& uses);
/// The mismatches' text, one string each: the report's "library_warnings".
nlohmann::json mismatches_json(const std::vector<library_mismatch>& mismatches);

/// The (name, version) pairs of a node's run, "libcudnn 9.1.0" each, sorted: what the fleet
/// report compares between nodes.
std::vector<std::string> library_set(const std::vector<nlohmann::json>& case_records);

/// A fleet node whose set of loaded (name, version) is not the one most nodes loaded.
struct library_outlier {
    std::string node;
    std::vector<std::string> loaded;       ///< its library_set
    std::vector<std::string> only_here;    ///< in its set, not the majority's
    std::vector<std::string> missing_here; ///< in the majority's set, not its own
    /// "gpu3 loaded libcudnn 9.1.0 where most nodes loaded libcudnn 9.19.0".
    std::string text() const;
};

/// The fleet's nodes that ran (cases to compare) held against the set most of them loaded.
/// No majority (a tie between the most common sets): every node is named, against nothing.
struct library_outliers {
    bool has_majority = false;
    std::vector<std::string> majority;
    std::size_t nodes_compared = 0;
    std::vector<library_outlier> nodes;
};
library_outliers fleet_library_outliers(const std::vector<run_data>& nodes);
/// {"majority": [...] or null, "nodes_compared", "nodes": [{node, loaded, only_here,
/// missing_here}]}: the fleet report's "loaded_libraries".
nlohmann::json outliers_json(const library_outliers& outliers);

} // namespace pitfall::runner
