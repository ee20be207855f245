#include "model/locate.hpp"

#include "pitfall/detail/json_file.hpp"
#include "pitfall/detail/manifest.hpp"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include <unistd.h>

namespace pitfall::runner {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
status bad_input(const std::string& what) {
    return status::error(library::pitfall, "bad_input", what, stage::init);
}

std::string env_or_empty(const char* name) {
    const char* value = std::getenv(name);
    return value != nullptr ? value : "";
}

/// The places an index is looked for beside this executable, in order.
std::vector<std::string> beside_executable() {
    const std::string self = self_executable();
    if (self.empty())
        return {};
    const fs::path prefix = fs::path(self).parent_path().parent_path();
    return {(prefix / "pitfall-index.json").lexically_normal().string(),
            (prefix / "share" / "pitfall" / "pitfall-index.json").lexically_normal().string()};
}

status_or<std::string> find_index(const std::string& index_flag) {
    if (!index_flag.empty())
        return index_flag;
    if (std::string from_env = env_or_empty("PITFALL_INDEX"); !from_env.empty()) {
        std::error_code ec;
        if (!fs::is_regular_file(from_env, ec))
            return bad_input("PITFALL_INDEX=" + from_env + ": not a file (the scenario index)");
        return from_env;
    }
    const std::vector<std::string> candidates = beside_executable();
    std::string looked;
    for (const auto& candidate : candidates) {
        std::error_code ec;
        if (fs::is_regular_file(candidate, ec))
            return candidate;
        looked += ", " + candidate;
    }
    if (candidates.empty())
        looked = ", beside this executable (/proc/self/exe unreadable)";
    return bad_input("no scenario index: looked for --index FILE, $PITFALL_INDEX" + looked +
                     " (build pitfall, or give --index FILE or PITFALL_INDEX)");
}

/// The index's "paths" into `at`, relative ones taken from the index's folder.
status read_paths(installation& at) {
    auto text = detail::read_regular_file(at.index);
    if (!text.is_ok())
        return bad_input("cannot read scenario index " + text.error().message());
    PITFALL_ASSIGN_OR_RETURN(const json doc, detail::parse_json(text.value(), at.index));
    if (!doc.is_object() || !doc.contains("paths"))
        return status::ok(); // an index of scenarios only (a test fixture): flags name the rest
    const json& paths = doc["paths"];
    if (!paths.is_object())
        return bad_input(at.index + ": field 'paths': expected an object");
    const fs::path base = fs::path(at.index).parent_path();
    for (auto [key, target] :
         {std::pair{"expected", &at.expected}, std::pair{"probe", &at.probe},
          std::pair{"matrix_driver", &at.matrix_driver},
          std::pair{"fleet_driver", &at.fleet_driver}, std::pair{"runs", &at.runs}}) {
        if (!paths.contains(key))
            continue;
        if (!paths[key].is_string() || paths[key].get<std::string>().empty())
            return bad_input(at.index + ": field 'paths." + key + "': expected a path");
        const fs::path value = paths[key].get<std::string>();
        *target = (value.is_absolute() ? value : base / value).lexically_normal().string();
    }
    return status::ok();
}
} // namespace

std::string self_executable() {
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    return ec ? "" : self.string();
}

status_or<installation> locate(const std::string& index_flag, const std::string& expected_flag) {
    installation at;
    PITFALL_ASSIGN_OR_RETURN(at.index, find_index(index_flag));
    PITFALL_TRY(read_paths(at));
    if (!expected_flag.empty())
        at.expected = expected_flag;
    else if (const std::string from_env = env_or_empty("PITFALL_EXPECTED"); !from_env.empty()) {
        std::error_code ec;
        if (!fs::is_directory(from_env, ec))
            return bad_input("PITFALL_EXPECTED=" + from_env + ": not a folder (the baselines)");
        at.expected = from_env;
    }
    if (const std::string from_env = env_or_empty("PITFALL_MATRIX_DRIVER"); !from_env.empty())
        at.matrix_driver = from_env;
    if (at.probe.empty()) {
        // The probe is installed beside `pitfall` (bin/ of a build tree and of an install).
        const std::string self = self_executable();
        const fs::path beside = fs::path(self).parent_path() / "pitfall-probe";
        if (!self.empty() && ::access(beside.c_str(), X_OK) == 0)
            at.probe = beside.string();
    }
    if (at.runs.empty())
        at.runs = "reports/runs";
    return at;
}

status_or<std::string> required_path(const installation& at, const std::string& value,
                                     const std::string& what, const std::string& key,
                                     const std::string& otherwise) {
    if (!value.empty())
        return value;
    return bad_input("no " + what + ": the scenario index " + at.index + " has no paths." + key +
                     "; " + otherwise);
}

status_or<installation> locate_for_cases(const std::string& index_flag,
                                         const std::string& expected_flag) {
    PITFALL_ASSIGN_OR_RETURN(installation at, locate(index_flag, expected_flag));
    PITFALL_ASSIGN_OR_RETURN(at.expected,
                             required_path(at, at.expected, "baselines folder", "expected",
                                           "give --expected DIR or set PITFALL_EXPECTED"));
    PITFALL_ASSIGN_OR_RETURN(
        at.probe, required_path(at, at.probe, "environment probe", "probe",
                                "and there is no pitfall-probe beside " + self_executable()));
    return at;
}

status_or<std::string> locate_matrix_driver() {
    if (std::string from_env = env_or_empty("PITFALL_MATRIX_DRIVER"); !from_env.empty())
        return from_env;
    PITFALL_ASSIGN_OR_RETURN(const installation at, locate(""));
    return required_path(at, at.matrix_driver, "matrix driver", "matrix_driver",
                         "set PITFALL_MATRIX_DRIVER");
}

status_or<std::string> locate_fleet_driver() {
    if (std::string from_env = env_or_empty("PITFALL_FLEET_DRIVER"); !from_env.empty())
        return from_env;
    PITFALL_ASSIGN_OR_RETURN(const installation at, locate(""));
    return required_path(at, at.fleet_driver, "fleet driver", "fleet_driver",
                         "set PITFALL_FLEET_DRIVER");
}

} // namespace pitfall::runner
