// Fleet node folders side by side, private to harness/lib/report: the nodes that ran grouped
// by fingerprint, and in each group the nodes that differ from the rest and in which cases.
#pragma once

#include "report/matrix_view.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pitfall::runner::report_parts {

/// A case where a node holds another value than most of its group: its value, and the value
/// most of the group holds (`majority`), or, on a tie, every other value with its nodes.
struct odd_case {
    std::string key;
    std::string here;
    bool majority = true;
    value_groups versus;
};
struct odd_node {
    std::size_t column; ///< of the fleet's matrix
    std::vector<odd_case> cases;
};

/// One fingerprint group of the nodes that ran.
struct fleet_group {
    std::string label;
    std::vector<std::size_t> columns;   ///< its nodes, as columns of the fleet's matrix
    std::vector<std::string> differing; ///< cases whose value is not the same on every node
    std::vector<value_groups> by_value; ///< differing[i]'s values, each with its nodes
    std::vector<odd_node> odd;          ///< most odd cases first
};

/// The nodes side by side: every node, and the ones that ran as a matrix grouped by fingerprint.
struct fleet_view {
    std::vector<std::string> names;  ///< every node, in the order given
    std::vector<std::string> groups; ///< every node's group label ("-": never ran)
    std::vector<run_data> ran;       ///< copies of the nodes with cases: the matrix points in
    matrix m;                        ///< cells: the names of `ran`
    std::vector<fleet_group> fingerprint_groups;
    std::size_t differing_within = 0; ///< distinct cases differing within some group
    /// Cases whose group values differ (2+ groups), each with its values and the groups
    /// (labels) holding each.
    std::vector<std::pair<std::string, value_groups>> between;
    /// The group most nodes are in, when one group holds more nodes than any other and at
    /// least two: the fleet's norm, from which a node of another group differs by fingerprint.
    std::optional<std::size_t> majority_group;
};

/// The view of `nodes` (fleet node folders) the three fleet formats render.
fleet_view build_fleet(const std::vector<run_data>& nodes);
/// A node's fingerprint group label (GPU, driver, CUDA runtime, cuDNN).
std::string fingerprint_group(const run_data& run);
/// A group's value of a case, to compare groups: the value most of its nodes hold; on a tie,
/// the tied values ("PASS (ok) or FAIL (...)").
std::string group_value(const matrix& m, const std::string& key,
                        const std::vector<std::size_t>& columns);
/// "1 node", "3 nodes".
std::string counted(std::size_t n, const char* noun);
/// How the node's job ended, in a few words.
std::string node_outcome(const run_data& node);
/// The node's doctor headline, or why there is none.
std::string node_doctor(const run_data& node);
/// "12 PASS, 1 FAIL".
std::string verdict_counts_text(const run_data& run);

} // namespace pitfall::runner::report_parts
