#include "model/index.hpp"

#include "util/suggest.hpp"

#include "pitfall/detail/json_file.hpp"
#include "pitfall/detail/json_schema.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace pitfall::runner {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
status bad_input(const std::string& what) {
    return status::error(library::pitfall, "bad_input", what, stage::init);
}
bool contains(const std::vector<std::string>& list, const std::string& item) {
    return std::find(list.begin(), list.end(), item) != list.end();
}
status_or<std::string> read_text(const std::string& path, const char* what) {
    auto text = detail::read_regular_file(path);
    if (!text.is_ok())
        return bad_input(std::string("cannot read ") + what + " " + text.error().message());
    return text;
}
/// An index's program and manifest paths: absolute, or relative to the index's folder (an
/// installed index names its files so, and so may be moved with them).
std::string beside_index(const std::string& index_path, const std::string& path) {
    if (fs::path(path).is_absolute())
        return path;
    std::error_code ec;
    const fs::path folder = fs::absolute(index_path, ec).parent_path();
    return (folder / path).lexically_normal().string();
}
/// Every name given must be known; a typo is named with its nearest known name.
status check_known(const std::vector<std::string>& wanted, const std::set<std::string>& known,
                   const char* what) {
    for (const auto& w : wanted) {
        if (known.count(w) != 0)
            continue;
        const std::vector<std::string> names(known.begin(), known.end());
        std::string choices;
        for (const auto& k : names)
            choices.append(choices.empty() ? "" : ", ").append(k);
        std::string message = std::string("unknown ") + what + " '" + w + "'";
        if (const std::string nearest = nearest_name(w, names); !nearest.empty())
            message.append(": did you mean '").append(nearest).append("'?");
        message.append(" (known: ").append(choices).append(")");
        return status::error(library::pitfall, "bad_usage", message, stage::init);
    }
    return status::ok();
}
} // namespace

std::string case_ref::key() const {
    return backend + "." + scenario->description.name + "." + variant->name;
}

std::vector<std::string> case_ref::labels() const {
    std::vector<std::string> out{backend, scenario->description.name,
                                 scenario->description.failure_class, variant->kind};
    if (backend == "cuda")
        out.emplace_back("gpu");
    if (backend == "cuda" && variant->gate)
        out.emplace_back("gate");
    for (const auto* list : {&scenario->description.labels, &variant->labels})
        for (const auto& l : *list)
            if (!contains(out, l))
                out.push_back(l);
    return out;
}

status_or<scenario_index> load_index(const std::string& path) {
    PITFALL_ASSIGN_OR_RETURN(const std::string text, read_text(path, "scenario index"));
    PITFALL_ASSIGN_OR_RETURN(const json doc, detail::parse_json(text, path));
    if (!doc.is_object() || !doc.contains("scenarios") || !doc["scenarios"].is_array())
        return bad_input(path + ": field 'scenarios': missing (is this a pitfall-index.json?)");
    // reports/schema/index.schema.json: every field below has its type once this holds.
    PITFALL_TRY(detail::validate_document("index", doc, path));
    scenario_index index;
    index.path = path;
    index.built_with_cuda = doc.value("built_with_cuda", false);
    index.cuda_architectures = doc.value("cuda_architectures", "");
    index.build = {{"built_with_cuda", index.built_with_cuda},
                   {"cuda_architectures", index.cuda_architectures},
                   {"cuda_compiler", doc.value("cuda_compiler", "")},
                   {"cxx_compiler", doc.value("cxx_compiler", "")},
                   {"build_type", doc.value("build_type", "")}};
    // The sources' git revision, where the build was configured in a git checkout.
    if (const std::string revision = doc.value("git_revision", ""); !revision.empty())
        index.build["git_revision"] = revision;
    if (const json& paths = doc.value("paths", json::object()); paths.is_object()) {
        if (paths.contains("build"))
            index.tree.directory = beside_index(path, paths["build"].get<std::string>());
        if (paths.contains("cmake"))
            index.tree.cmake = beside_index(path, paths["cmake"].get<std::string>());
    }
    for (std::size_t i = 0; i < doc["scenarios"].size(); ++i) {
        const json& entry = doc["scenarios"][i];
        const std::string field = "scenarios[" + std::to_string(i) + "]";
        if (!entry.is_object() || !entry.contains("program") || !entry["program"].is_string() ||
            !entry.contains("manifest") || !entry["manifest"].is_string()) {
            std::ostringstream what;
            what << path << ": field '" << field << "': needs 'program' and 'manifest' strings";
            return bad_input(what.str());
        }
        scenario_entry scenario;
        scenario.program = beside_index(path, entry["program"].get<std::string>());
        scenario.manifest_path = beside_index(path, entry["manifest"].get<std::string>());
        scenario.target = entry.value("target", "");
        PITFALL_ASSIGN_OR_RETURN(const std::string manifest_text,
                                 read_text(scenario.manifest_path, "scenario manifest"));
        auto parsed = parse_manifest(manifest_text, scenario.manifest_path);
        if (!parsed.is_ok())
            return parsed.error();
        scenario.description = std::move(parsed).value();
        index.scenarios.push_back(std::move(scenario));
    }
    return index;
}

status_or<std::vector<case_ref>> select_cases(const scenario_index& index,
                                              const case_filter& filter) {
    std::set<std::string> names, backends{"cpu", "cuda"}, variants, labels;
    std::vector<case_ref> all;
    for (const auto& s : index.scenarios) {
        names.insert(s.description.name);
        for (const auto& v : s.description.variants) {
            if (v.helper) // started by another case, never on its own
                continue;
            variants.insert(v.name);
            for (const auto& b : s.description.backends_of(v)) {
                case_ref c{&s, &v, b};
                for (const auto& l : c.labels())
                    labels.insert(l);
                all.push_back(std::move(c));
            }
        }
    }
    PITFALL_TRY(check_known(filter.scenarios, names, "scenario"));
    PITFALL_TRY(check_known(filter.backends, backends, "backend"));
    PITFALL_TRY(check_known(filter.variants, variants, "variant"));
    PITFALL_TRY(check_known(filter.labels, labels, "label"));

    std::vector<case_ref> out;
    for (auto& c : all) {
        if (!filter.scenarios.empty() && !contains(filter.scenarios, c.scenario->description.name))
            continue;
        if (!filter.backends.empty() && !contains(filter.backends, c.backend))
            continue;
        if (!filter.variants.empty() && !contains(filter.variants, c.variant->name))
            continue;
        const auto case_labels = c.labels();
        bool has_all = true;
        for (const auto& l : filter.labels)
            has_all = has_all && contains(case_labels, l);
        if (has_all)
            out.push_back(c);
    }
    return out;
}

} // namespace pitfall::runner
