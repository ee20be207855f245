// The case x column table the matrix and fleet reports share, private to harness/lib/report:
// every case of any run, one column per run (a matrix cell or a fleet node), and which cases
// differ between columns.
#pragma once

#include "report/report_parts.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace pitfall::runner::report_parts {

struct matrix {
    std::vector<std::string> cells;
    std::vector<std::string> keys; ///< every case of any run, in order of first appearance
    /// key -> per cell: the record, or null when that run has no result for it
    std::map<std::string, std::vector<const json*>> at;
    std::vector<std::string> differing; ///< keys whose outcome or verdict differs between cells
};

/// The table over `runs`, each a column named by its cell or node.
matrix build_matrix(const std::vector<run_data>& runs);
/// A version number as text: 12040 -> "12.4" (CUDA), 91002 -> "9.10.2" (cuDNN, with patch_mod).
std::string cuda_version_text(const nlohmann::json& v, int major_div, int minor_div, int minor_mod,
                              int patch_mod);
/// One cell of the table: the verdict and the observed outcome, "-" for no record.
std::string cell_text(const nlohmann::json* r);
/// The case x column table of the matrix and fleet pages; `titles` are the columns' hover texts.
std::string case_grid_html(const matrix& m, const std::vector<std::string>& titles,
                           const std::set<std::string>& differing);
/// The case x column table of the matrix and fleet Markdown reports.
std::string case_table_markdown(const matrix& m);
/// The matrix and fleet pages' start, up to their heading ("<h1>pitfall `what`</h1>").
std::string grid_page_head(const char* what);
/// Whether any of `runs` is a matrix cell (cell.json).
bool any_cell(const std::vector<run_data>& runs);

/// One difference, grouped: each value once, with the cells that have it, in order of first
/// appearance ("sm_70: cuda13.0-host, cuda13.2-wheels"); cells `skip` leaves out are not named.
using value_groups = std::vector<std::pair<std::string, std::vector<std::string>>>;
template <class ValueOf>
value_groups group_cells(const std::vector<std::string>& cells, ValueOf value_of,
                         const std::vector<bool>& skip = {}) {
    value_groups groups;
    for (std::size_t c = 0; c < cells.size(); ++c) {
        if (c < skip.size() && skip[c])
            continue;
        const std::string v = value_of(c);
        auto it =
            std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == v; });
        if (it == groups.end())
            groups.push_back({v, {cells[c]}});
        else
            it->second.push_back(cells[c]);
    }
    return groups;
}
/// Grouped values in one line: "**sm_70**: cuda13.0-host, cuda13.2-wheels; **sm_90**: ...".
std::string value_groups_markdown(const value_groups& groups);
/// Grouped values in one line of HTML, each value bold.
std::string value_groups_html(const value_groups& groups);

} // namespace pitfall::runner::report_parts
