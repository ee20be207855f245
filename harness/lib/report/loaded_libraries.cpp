#include "report/loaded_libraries.hpp"

#include <algorithm>
#include <iterator>
#include <map>
#include <set>
#include <tuple>

namespace pitfall::runner {
using nlohmann::json;

namespace {
std::string text_of(const json& j, const char* key) {
    return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>()
                                                                  : std::string();
}

/// The well-formed {name, version, real_path} entries of one "loaded_libraries" array.
std::vector<library_use> entries_of(const json& list) {
    std::vector<library_use> out;
    if (!list.is_array())
        return out;
    for (const auto& item : list) {
        library_use use{
            text_of(item, "name"), text_of(item, "version"), text_of(item, "real_path"), {}};
        if (!use.name.empty())
            out.push_back(std::move(use));
    }
    return out;
}

json result_libraries(const json& record) {
    if (!record.is_object() || !record.contains("result") || !record["result"].is_object())
        return json();
    const json& result = record["result"];
    return result.contains("loaded_libraries") ? result["loaded_libraries"] : json();
}
} // namespace

std::vector<library_use> libraries_loaded(const std::vector<json>& case_records) {
    using key = std::tuple<std::string, std::string, std::string>;
    std::map<key, library_use> by_file;
    for (const auto& record : case_records) {
        const std::string case_key = text_of(record, "case");
        std::set<key> in_this_case; // a case counts once per file
        for (auto& use : entries_of(result_libraries(record))) {
            const key k{use.name, use.version, use.real_path};
            if (!in_this_case.insert(k).second)
                continue;
            auto [it, added] = by_file.emplace(k, use);
            it->second.cases.push_back(case_key);
        }
    }
    std::vector<library_use> out;
    out.reserve(by_file.size());
    for (auto& [k, use] : by_file)
        out.push_back(std::move(use));
    return out;
}

std::vector<library_use> libraries_found_installed(const json& fingerprint) {
    const json& libraries = fingerprint.is_object() && fingerprint.contains("libraries")
                                ? fingerprint["libraries"]
                                : json();
    if (!libraries.is_object() || !libraries.contains("loaded_library_files"))
        return {};
    return entries_of(libraries["loaded_library_files"]);
}

std::string library_mismatch::text() const {
    std::string out = "case " + (cases.empty() ? std::string("?") : cases.front());
    if (cases.size() > 1)
        out += " (and " + std::to_string(cases.size() - 1) + " more)";
    const auto version = [](const std::string& v) { return v.empty() ? std::string("?") : v; };
    return out + " loaded " + name + " " + version(loaded_version) + " from " + loaded_from +
           "; the doctor found " + version(found_version) + " at " + found_at;
}

std::vector<library_mismatch> library_mismatches(const json& fingerprint,
                                                 const std::vector<json>& case_records) {
    const std::vector<library_use> found = libraries_found_installed(fingerprint);
    std::vector<library_mismatch> out;
    for (const auto& use : libraries_loaded(case_records)) {
        const library_use* same_name = nullptr;
        bool same_file = false;
        for (const auto& f : found)
            if (f.name == use.name) {
                same_name = same_name != nullptr ? same_name : &f;
                same_file = same_file || (f.real_path == use.real_path && f.version == use.version);
            }
        if (same_name == nullptr || same_file)
            continue;
        out.push_back({use.name, use.version, use.real_path, same_name->version,
                       same_name->real_path, use.cases});
    }
    return out;
}

std::vector<library_use> libraries_loaded(const run_data& run) {
    return libraries_loaded(run.cases);
}

std::vector<library_mismatch> library_mismatches(const run_data& run) {
    const json fingerprint = run.header.is_object() && run.header.contains("fingerprint")
                                 ? run.header["fingerprint"]
                                 : json();
    return library_mismatches(fingerprint, run.cases);
}

json libraries_json(const std::vector<library_use>& uses) {
    json out = json::array();
    for (const auto& u : uses)
        out.push_back({{"name", u.name},
                       {"version", u.version},
                       {"real_path", u.real_path},
                       {"cases", u.cases.size()}});
    return out;
}

json mismatches_json(const std::vector<library_mismatch>& mismatches) {
    json out = json::array();
    for (const auto& m : mismatches)
        out.push_back(m.text());
    return out;
}

std::vector<std::string> library_set(const std::vector<json>& case_records) {
    std::set<std::string> pairs;
    for (const auto& use : libraries_loaded(case_records))
        pairs.insert(use.name + " " + (use.version.empty() ? "?" : use.version));
    return {pairs.begin(), pairs.end()};
}

namespace {
std::string joined(const std::vector<std::string>& items) {
    std::string out;
    for (const auto& item : items)
        out += (out.empty() ? "" : ", ") + item;
    return out.empty() ? "none" : out;
}

std::vector<std::string> minus(const std::vector<std::string>& a,
                               const std::vector<std::string>& b) {
    std::vector<std::string> out;
    std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
    return out;
}
} // namespace

std::string library_outlier::text() const {
    if (only_here.empty() && missing_here.empty()) // no majority to hold it against
        return node + " loaded " + joined(loaded);
    std::string out = node;
    if (!only_here.empty())
        out += " loaded " + joined(only_here);
    if (!missing_here.empty())
        out += std::string(only_here.empty() ? " did not load " : " where most nodes loaded ") +
               joined(missing_here);
    return out;
}

library_outliers fleet_library_outliers(const std::vector<run_data>& nodes) {
    std::vector<std::pair<std::string, std::vector<std::string>>> sets;
    for (const auto& node : nodes)
        if (!node.cases.empty()) {
            const std::string name = text_of(node.node, "node");
            sets.emplace_back(name.empty() ? node.dir : name, library_set(node.cases));
        }
    library_outliers out;
    out.nodes_compared = sets.size();
    std::map<std::vector<std::string>, std::size_t> count;
    for (const auto& [name, set] : sets)
        ++count[set];
    if (count.size() < 2)
        return out; // one node, or every node alike
    std::size_t top = 0;
    std::size_t tied = 0;
    for (const auto& [set, n] : count) {
        tied = n == top ? tied + 1 : n > top ? 1 : tied;
        if (n > top) {
            top = n;
            out.majority = set;
        }
    }
    out.has_majority = tied == 1;
    if (!out.has_majority)
        out.majority.clear();
    for (const auto& [name, set] : sets)
        if (!out.has_majority || set != out.majority)
            out.nodes.push_back({name, set, out.has_majority ? minus(set, out.majority) : set,
                                 minus(out.majority, set)});
    if (!out.has_majority) // against nothing: the whole set is the node's
        for (auto& n : out.nodes)
            n.only_here.clear();
    return out;
}

json outliers_json(const library_outliers& outliers) {
    json nodes = json::array();
    for (const auto& n : outliers.nodes)
        nodes.push_back({{"node", n.node},
                         {"loaded", n.loaded},
                         {"only_here", n.only_here},
                         {"missing_here", n.missing_here},
                         {"text", n.text()}});
    return {{"majority", outliers.has_majority ? json(outliers.majority) : json()},
            {"nodes_compared", outliers.nodes_compared},
            {"nodes", nodes}};
}

} // namespace pitfall::runner
