// The scenario index the build writes (pitfall-index.json) and the cases it yields.
#pragma once

#include "pitfall/detail/manifest.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace pitfall::runner {

struct scenario_entry {
    std::string program;       ///< path of the built scenario program
    std::string manifest_path; ///< its scenario.json
    manifest description;
    /// The build-tree target that makes `program` ("" in an installed index): `pitfall run
    /// --build` builds it just before the scenario's first case.
    std::string target;
};

/// The build tree an index was written for (empty in an installed index): where `pitfall run
/// --build` runs `<cmake> --build <directory> --target <a scenario's target>`.
struct build_tree {
    std::string cmake;     ///< the index's paths.cmake
    std::string directory; ///< the index's paths.build
};

// NOLINTNEXTLINE(bugprone-exception-escape): the implicit members of its nlohmann::json field
struct scenario_index {
    std::string path;
    bool built_with_cuda = false;
    std::string cuda_architectures;
    nlohmann::json build; ///< how the scenarios were built: compilers, architectures, build type
    build_tree tree;      ///< how to build the programs again (build-tree indexes only)
    std::vector<scenario_entry> scenarios;
};

/// One scenario x backend x variant.
struct case_ref {
    const scenario_entry* scenario;
    const variant_spec* variant;
    std::string backend;

    std::string key() const; ///< "cpu.float64_inputs.reproduce"
    std::string test_name() const { return "pitfall." + key(); }
    std::vector<std::string> labels() const;
};

/// Reads the index and every scenario.json it names; errors name the file (and the field).
status_or<scenario_index> load_index(const std::string& path);

struct case_filter {
    std::vector<std::string> scenarios; ///< empty: all
    std::vector<std::string> backends;
    std::vector<std::string> variants;
    std::vector<std::string> labels; ///< a case needs every label given
};

/// The cases the filter selects, in index order; an unknown scenario/backend/variant/label in
/// the filter is an error naming it (a typo must not select nothing silently).
status_or<std::vector<case_ref>> select_cases(const scenario_index& index,
                                              const case_filter& filter);

} // namespace pitfall::runner
