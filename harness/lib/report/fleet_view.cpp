// Fleet node folders grouped by fingerprint, and the odd nodes in each group.
#include "report/fleet_view.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>

namespace pitfall::runner {
using namespace report_parts;
namespace report_parts {
/// cuDNN's version number as text: 9.x and later encode major x 10000 (91002 -> 9.10.2), 8.x
/// and earlier major x 1000 (8902 -> 8.9.2).
std::string cudnn_version_text(const json& v) {
    if (v.is_number_integer() && v.get<long long>() > 0 && v.get<long long>() < 9000)
        return cuda_version_text(v, 1000, 100, 10, 100);
    return cuda_version_text(v, 10000, 100, 100, 100);
}

/// What makes two nodes' runs comparable, from the run's fingerprint: the GPU model, the
/// driver (its release, as NVML or the kernel module tell it, and the CUDA version it
/// supports), the CUDA runtime and cuDNN ("NVIDIA H100 80GB HBM3, driver 580.65.06 (CUDA 13.0),
/// CUDA 13.0, cuDNN 9.10.2"). Two releases of one driver branch are two groups: a fix release
/// is exactly the change a fleet run is for.
std::string fingerprint_group(const run_data& run) {
    const json fp = fingerprint_summary(run);
    const std::string gpu = str(fp, "device_name");
    const json libraries = obj(obj(run.header, "fingerprint"), "libraries");
    std::string release = str(obj(libraries, "nvml"), "driver_version");
    if (release.empty())
        release = str(obj(obj(libraries, "driver"), "kernel_module"), "version");
    std::string driver =
        cuda_version_text(fp.value("cuda_driver_version", json()), 1000, 10, 100, 0);
    if (!release.empty())
        driver = release + (driver.empty() ? "" : " (CUDA " + driver + ")");
    const std::string runtime =
        cuda_version_text(fp.value("cuda_runtime_version", json()), 1000, 10, 100, 0);
    const std::string cudnn = cudnn_version_text(fp.value("cudnn_version", json()));
    return cat(gpu.empty() ? "no GPU" : gpu, ", ",
               driver.empty() ? "no driver" : "driver " + driver, ", ",
               runtime.empty() ? "no CUDA runtime" : "CUDA " + runtime, ", ",
               cudnn.empty() ? "no cuDNN" : "cuDNN " + cudnn);
}

/// "1 node", "3 nodes".
std::string counted(std::size_t n, const char* noun) {
    return cat(std::to_string(n), " ", noun, n == 1 ? "" : "s");
}

/// How the node's job ended, in one line: "ran", or the outcome with Slurm's state and reason
/// and the driver's message ("node_down (NODE_FAIL, reason: Not responding): ...").
std::string node_outcome(const run_data& node) {
    std::string text = str(node.node, "outcome", "?");
    if (text == "ran") {
        if (node.cases.empty())
            text += " (no run folder with cases)";
        return text;
    }
    std::string why = str(node.node, "slurm_state");
    if (const std::string reason = str(node.node, "reason"); !reason.empty() && reason != "None")
        why += (why.empty() ? "reason: " : ", reason: ") + reason;
    if (!why.empty())
        text += " (" + why + ")";
    if (const std::string message = str(node.node, "message"); !message.empty())
        text += ": " + message;
    return text;
}

/// The node's doctor headline: the first error's title, "CUDA work can run here", or why there
/// is none.
std::string node_doctor(const run_data& node) {
    if (!node.doctor_problem.empty())
        return "unreadable: " + node.doctor_problem;
    if (node.doctor.is_null())
        return "-";
    std::string headline = str(node.doctor, "headline");
    if (!headline.empty())
        return headline;
    const json usable = node.doctor.value("cuda_usable", json());
    return usable.is_boolean() && usable.get<bool>() ? "CUDA work can run here" : "-";
}

std::string verdict_counts_text(const run_data& run) {
    std::string text;
    for (const auto& [verdict, count] : verdict_counts(run))
        text += cat(text.empty() ? "" : ", ", std::to_string(count), " ", verdict);
    return text.empty() ? "-" : text;
}

/// The values of `key` on `columns`, each once with its columns, in order of first appearance.
std::vector<std::pair<std::string, std::vector<std::size_t>>>
values_of(const matrix& m, const std::string& key, const std::vector<std::size_t>& columns) {
    std::vector<std::pair<std::string, std::vector<std::size_t>>> out;
    const auto& row = m.at.at(key);
    for (const std::size_t c : columns) {
        const std::string v = cell_text(row[c]);
        auto it = std::find_if(out.begin(), out.end(), [&](const auto& g) { return g.first == v; });
        if (it == out.end())
            out.emplace_back(v, std::vector<std::size_t>{c});
        else
            it->second.push_back(c);
    }
    return out;
}

std::size_t most_held(const std::vector<std::pair<std::string, std::vector<std::size_t>>>& vs) {
    std::size_t most = 0;
    for (const auto& v : vs)
        most = std::max(most, v.second.size());
    return most;
}

/// A group's value of a case, to compare groups: the value most of its nodes hold; on a tie,
/// the tied values ("PASS (ok) or FAIL (...)").
std::string group_value(const matrix& m, const std::string& key,
                        const std::vector<std::size_t>& columns) {
    const auto values = values_of(m, key, columns);
    const std::size_t most = most_held(values);
    std::string text;
    for (const auto& [v, held] : values)
        if (held.size() == most)
            text += (text.empty() ? "" : " or ") + v;
    return text;
}

void find_odd_nodes(fleet_group& g, const matrix& m) {
    std::map<std::size_t, std::vector<odd_case>> odd;
    for (const auto& key : m.keys) {
        const auto values = values_of(m, key, g.columns);
        if (values.size() < 2)
            continue;
        g.differing.push_back(key);
        value_groups named;
        for (const auto& [value, held] : values) {
            named.push_back({value, {}});
            for (const std::size_t col : held)
                named.back().second.push_back(m.cells[col]);
        }
        g.by_value.push_back(std::move(named));
        const std::size_t most = most_held(values);
        const auto top_count = std::count_if(
            values.begin(), values.end(), [&](const auto& v) { return v.second.size() == most; });
        for (std::size_t i = 0; i < values.size(); ++i) {
            const auto& [value, held] = values[i];
            if (top_count == 1 && held.size() == most)
                continue; // the majority: not odd
            odd_case c{key, value, top_count == 1, {}};
            for (std::size_t j = 0; j < values.size(); ++j) {
                if (j == i || (top_count == 1 && values[j].second.size() != most))
                    continue;
                std::vector<std::string> names;
                for (const std::size_t col : values[j].second)
                    names.push_back(m.cells[col]);
                c.versus.push_back({values[j].first, top_count == 1 ? std::vector<std::string>{}
                                                                    : std::move(names)});
            }
            for (const std::size_t col : held)
                odd[col].push_back(c);
        }
    }
    for (const std::size_t col : g.columns)
        if (auto it = odd.find(col); it != odd.end())
            g.odd.push_back({col, std::move(it->second)});
    std::stable_sort(g.odd.begin(), g.odd.end(), [](const odd_node& a, const odd_node& b) {
        return a.cases.size() > b.cases.size();
    });
}

fleet_view build_fleet(const std::vector<run_data>& nodes) {
    fleet_view f;
    std::vector<std::string> ran_names;
    for (const auto& node : nodes) {
        f.names.push_back(str(node.node, "node", "?"));
        if (node.cases.empty()) { // never ran (or ran nothing): listed, not compared
            f.groups.emplace_back("-");
            continue;
        }
        f.groups.push_back(fingerprint_group(node));
        f.ran.push_back(node);
        ran_names.push_back(f.names.back());
    }
    f.m = build_matrix(f.ran);
    f.m.cells = ran_names;
    for (std::size_t c = 0; c < f.ran.size(); ++c) {
        const std::string label = fingerprint_group(f.ran[c]);
        auto it = std::find_if(f.fingerprint_groups.begin(), f.fingerprint_groups.end(),
                               [&](const fleet_group& g) { return g.label == label; });
        if (it == f.fingerprint_groups.end())
            f.fingerprint_groups.push_back({label, {c}, {}, {}, {}});
        else
            it->columns.push_back(c);
    }
    std::set<std::string> differing;
    for (auto& g : f.fingerprint_groups) {
        find_odd_nodes(g, f.m);
        differing.insert(g.differing.begin(), g.differing.end());
    }
    f.differing_within = differing.size();
    std::size_t largest = 0, holders = 0;
    for (std::size_t g = 0; g < f.fingerprint_groups.size(); ++g) {
        const std::size_t size = f.fingerprint_groups[g].columns.size();
        if (size > largest) {
            largest = size;
            holders = 1;
            f.majority_group = g;
        } else if (size == largest)
            ++holders;
    }
    if (holders != 1 || largest < 2 || f.fingerprint_groups.size() < 2)
        f.majority_group.reset();
    if (f.fingerprint_groups.size() > 1) {
        std::vector<std::string> labels;
        for (const auto& g : f.fingerprint_groups)
            labels.push_back(g.label);
        for (const auto& key : f.m.keys) {
            value_groups values = group_cells(labels, [&](std::size_t g) {
                return group_value(f.m, key, f.fingerprint_groups[g].columns);
            });
            if (values.size() > 1)
                f.between.emplace_back(key, std::move(values));
        }
    }
    return f;
}

} // namespace report_parts

} // namespace pitfall::runner
