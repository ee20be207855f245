// What the readers of scenario.json share, private to harness/core: the reader that names the
// file and the field in each error, the name rules, and the readers one file calls from another.
// manifest.cpp reads the top level and parse_manifest puts it all together; manifest_params.cpp
// the parameters, manifest_variants.cpp the variants and their timings, manifest_evidence.cpp the
// public threads a scenario reproduces.
#pragma once

#include "pitfall/detail/manifest.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace pitfall::manifest_parts {

using nlohmann::json;

struct reader {
    const std::string& origin;

    status fail(const std::string& field, const std::string& what) const {
        return status::error(pitfall_error::bad_manifest,
                             origin + ": field '" + field + "': " + what, stage::init);
    }
    status string(const json& obj, const std::string& path, const char* key, std::string& out,
                  bool required) const {
        if (!obj.contains(key))
            return required ? fail(path + key, "missing (a string is required)") : status::ok();
        if (!obj[key].is_string())
            return fail(path + key, "expected a string, got " + std::string(obj[key].type_name()));
        out = obj[key].get<std::string>();
        return status::ok();
    }
    status strings(const json& obj, const std::string& path, const char* key,
                   std::vector<std::string>& out) const {
        if (!obj.contains(key))
            return status::ok();
        if (!obj[key].is_array())
            return fail(path + key, "expected an array of strings");
        for (std::size_t i = 0; i < obj[key].size(); ++i) {
            if (!obj[key][i].is_string())
                return fail(path + key + "[" + std::to_string(i) + "]", "expected a string");
            out.push_back(obj[key][i].get<std::string>());
        }
        return status::ok();
    }
};

// [a-z][a-z0-9_]*: names become file names, CTest names and CMake target names.
bool is_identifier(const std::string& text);

// A case's files are named from its key, "<backend>.<scenario>.<variant>" plus ".json" or
// ".log" and a temporary's ".tmp.XXXXXX": bounded so that every such name fits NAME_MAX (255)
// whatever the backend ("cuda": 4) - 5 + 64 + 1 + 100 + 5 + 16 = 191.
inline constexpr std::size_t max_scenario_name = 64;
inline constexpr std::size_t max_variant_name = 100;
inline constexpr const char* name_length_why =
    " (a case's result and log files are named after it, and must fit a file name)";

// ---- manifest_params.cpp -------------------------------------------------------------------

status read_params(const reader& r, const json& doc, manifest& m);

// A variant's "params": values of the scenario's own parameters (declared above it), each of the
// default's type and within its bounds, so that a bad set is refused when scenario.json is read,
// not when its case runs. The built-in ones (samples, warmup) belong to a run, not a variant.
status read_variant_params(const reader& r, const json& v, const std::string& path,
                           const manifest& m, variant_spec& spec);

// ---- manifest_variants.cpp -----------------------------------------------------------------

// "timings": {"<series>": {"bound_by": {"<backend>": "<control>"}, "why": "..."}}: each series
// names the control it is normalised by on each backend it runs on (a GPU control only on cuda),
// and why that resource is what bounds it.
status read_timings(const reader& r, const json& doc, const std::string& path,
                    const std::vector<std::string>& backends, std::vector<timing_spec>& out);

status read_variant(const reader& r, const json& v, const std::string& path, manifest& m);

// ---- manifest_evidence.cpp -----------------------------------------------------------------

// "evidence": the public threads a scenario reproduces (the catalog's own rule, at least one
// seed or two threads per scenario, is checked over scenarios/ by ci/catalog.py --check).
status read_evidence(const reader& r, const json& doc, manifest& m);

} // namespace pitfall::manifest_parts
