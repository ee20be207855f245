// Several runs side by side: the matrix report.
#include "report/matrix_view.hpp"
#include "report/report_parts.hpp"

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
/// A version number as text: 12040 -> "12.4" (CUDA), 91002 -> "9.10.2" (cuDNN, with patch_mod).
std::string cuda_version_text(const json& v, int major_div, int minor_div, int minor_mod,
                              int patch_mod) {
    if (!v.is_number_integer() || v.get<long long>() <= 0)
        return "";
    const long long n = v.get<long long>();
    return std::to_string(n / major_div) + "." + std::to_string(n / minor_div % minor_mod) +
           (patch_mod > 0 ? "." + std::to_string(n % patch_mod) : "");
}

/// A cell's name: a matrix cell's id, else from the run's fingerprint: the GPU (or "no GPU"),
/// CUDA runtime and cuDNN versions, then the run folder's last component, which keeps two cells
/// of one environment apart.
std::string cell_name(const run_data& run) {
    const json fp = fingerprint_summary(run);
    // A matrix cell by its id, and by its GPU where one answered (one cell on several GPUs).
    if (run.cell.is_object())
        return str(run.cell, "id", "?") +
               (fp.contains("device_name") ? " on " + str(fp, "device_name") : "");
    const auto version = [](const json& v, int major_div, int minor_div,
                            int minor_mod) -> std::string {
        const std::string text = cuda_version_text(v, major_div, minor_div, minor_mod, 0);
        return text.empty() ? "?" : text;
    };
    std::string gpu = fp.contains("device_name") && fp["device_name"].is_string()
                          ? fp["device_name"].get<std::string>()
                          : "no GPU";
    std::string dir = run.dir;
    while (dir.size() > 1 && dir.back() == '/')
        dir.pop_back();
    const auto slash = dir.rfind('/');
    return gpu + ", CUDA " + version(fp.value("cuda_runtime_version", json()), 1000, 10, 100) +
           ", cuDNN " + version(fp.value("cudnn_version", json()), 10000, 100, 100) + " (" +
           (slash == std::string::npos ? dir : dir.substr(slash + 1)) + ")";
}

/// A matrix cell's facts, one string each, as the cells table and "what differs" show them.
std::string arch_list(const json& archs) {
    std::string out;
    for (const auto& a : archs)
        if (a.is_string())
            out += (out.empty() ? "sm_" : " sm_") + a.get<std::string>();
    return out.empty() ? "none" : out;
}

using cell_fact = std::pair<const char*, std::string (*)(const run_data&)>;
const cell_fact cell_facts[] = {
    {"CUDA toolkit",
     [](const run_data& r) {
         const std::string v = str(obj(r.cell, "toolkit"), "version");
         const json cuda = obj(obj(r.cell, "cell"), "cuda");
         return (v.empty() ? str(cuda, "version", "?") : v) + " (" + str(cuda, "source", "?") + ")";
     }},
    {"cuDNN built / loaded",
     [](const run_data& r) {
         const std::string built = str(r.cell, "cudnn_compiled");
         const std::string loaded = cuda_version_text(
             fingerprint_summary(r).value("cudnn_version", json()), 10000, 100, 100, 100);
         if (built.empty() && loaded.empty())
             return str(obj(obj(r.cell, "cell"), "cudnn"), "version", "?") + " (not built)";
         return (built.empty() ? "?" : built) + " / " + (loaded.empty() ? "?" : loaded);
     }},
    {"host compiler",
     [](const run_data& r) {
         const json cell = obj(r.cell, "cell");
         std::string text = str(cell, "host_compiler", "?");
         for (const auto& f : arr(cell, "cuda_flags"))
             text += " " + (f.is_string() ? f.get<std::string>() : f.dump());
         return text;
     }},
    {"toolkit refuses",
     [](const run_data& r) {
         const json probed = obj(obj(r.cell, "architectures"), "probed");
         json refused = json::array();
         for (const auto& [arch, probe] : probed.items())
             if (probe.is_object() && !probe.value("accepted", true))
                 refused.push_back(arch);
         return probed.empty() ? std::string("not probed") : arch_list(refused);
     }},
    {"built (SASS; PTX)",
     [](const run_data& r) {
         const json built = obj(r.cell, "archs_built");
         if (built.empty())
             return std::string("nothing");
         if (built.contains("error"))
             return "unknown: " + str(built, "error");
         return arch_list(arr(built, "sass")) + "; PTX " + arch_list(arr(built, "ptx"));
     }},
    {"cell outcome",
     [](const run_data& r) {
         std::string text = str(r.cell, "outcome", "?");
         if (text != "ran" && r.cell.contains("stage"))
             text += " at " + str(r.cell, "stage") +
                     (r.cell.contains("arch") ? " " + str(r.cell, "arch") : "");
         if (text != "ran" && !str(r.cell, "message").empty())
             text += ": " + str(r.cell, "message");
         return text;
     }},
    {"first CUDA call", [](const run_data& r) { return str(r.cell, "cuda_error", "-"); }},
    {"verdicts", [](const run_data& r) { return str(r.cell, "verdicts_text", "-"); }},
    {"as ci/matrix.json expects",
     [](const run_data& r) {
         std::string text;
         for (const auto& p : arr(r.cell, "expectation_problems"))
             text +=
                 (text.empty() ? "no: " : "; ") + (p.is_string() ? p.get<std::string>() : p.dump());
         return text.empty() ? std::string("yes") : text;
     }},
};

bool any_cell(const std::vector<run_data>& runs) {
    return std::any_of(runs.begin(), runs.end(),
                       [](const run_data& r) { return r.cell.is_object(); });
}

/// Facts (not verdicts or expectations: those follow from the rest) whose text differs between
/// cells.
std::vector<const cell_fact*> differing_facts(const std::vector<run_data>& runs) {
    std::vector<const cell_fact*> out;
    for (const auto& fact : cell_facts) {
        if (std::string(fact.first) == "verdicts" ||
            std::string(fact.first) == "as ci/matrix.json expects")
            continue;
        std::set<std::string> seen;
        for (const auto& r : runs)
            seen.insert(fact.second(r));
        if (seen.size() > 1)
            out.push_back(&fact);
    }
    return out;
}

std::string cell_text(const json* r) {
    return r == nullptr ? "-" : str(*r, "verdict") + " (" + outcome_line(*r) + ")";
}

matrix build_matrix(const std::vector<run_data>& runs) {
    matrix m;
    for (const auto& run : runs)
        m.cells.push_back(cell_name(run));
    for (std::size_t c = 0; c < runs.size(); ++c)
        for (const auto& r : runs[c].cases) {
            const std::string key = str(r, "case");
            auto [it, added] =
                m.at.try_emplace(key, std::vector<const json*>(runs.size(), nullptr));
            if (added)
                m.keys.push_back(key);
            it->second[c] = &r;
        }
    for (const auto& key : m.keys) {
        std::set<std::string> seen;
        const auto& row = m.at[key];
        for (std::size_t c = 0; c < row.size(); ++c)
            if (row[c] != nullptr ||
                !runs[c].cases.empty()) // a cell that never ran says why once, in its facts
                seen.insert(cell_text(row[c]));
        if (seen.size() > 1)
            m.differing.push_back(key);
    }
    return m;
}

/// The case x column table of the matrix and fleet pages: a row per case (red where columns
/// differ), a cell per column with its verdict and observed outcome; `titles` are the columns'
/// hover texts.
std::string case_grid_html(const matrix& m, const std::vector<std::string>& titles,
                           const std::set<std::string>& differing) {
    std::ostringstream h;
    h << "<table class=\"grid\" id=\"matrix\"><tr><th>case</th>";
    for (std::size_t c = 0; c < m.cells.size(); ++c)
        h << "<th title=\"" << escape_markup(titles[c]) << "\">" << escape_markup(m.cells[c])
          << "</th>";
    h << "</tr>\n";
    for (const auto& key : m.keys) {
        h << "<tr" << (differing.count(key) != 0 ? " class=\"differs\"" : "") << "><td><code>"
          << escape_markup(key) << "</code></td>";
        for (const json* r : m.at.at(key)) {
            if (r == nullptr) {
                h << "<td class=\"cell muted\">-</td>";
                continue;
            }
            const std::string verdict = str(*r, "verdict");
            h << "<td class=\"cell\" title=\"" << escape_markup(str(*r, "reason"))
              << "\"><span class=\"v " << verdict_class(verdict) << "\">" << escape_markup(verdict)
              << "</span><br><small>" << escape_markup(outcome_line(*r)) << "</small></td>";
        }
        h << "</tr>\n";
    }
    h << "</table>\n";
    return h.str();
}

/// The case x column table of the matrix and fleet reports in Markdown: a row per case, a cell
/// per column with its verdict and observed outcome.
std::string case_table_markdown(const matrix& m) {
    std::ostringstream md;
    md << "| case |";
    for (const auto& c : m.cells)
        md << ' ' << md_inline(c, 80) << " |";
    md << "\n|---|";
    for (std::size_t i = 0; i < m.cells.size(); ++i)
        md << "---|";
    md << '\n';
    for (const auto& key : m.keys) {
        md << "| `" << md_code(key) << "` |";
        for (const json* r : m.at.at(key))
            md << ' ' << md_inline(cell_text(r), 80) << " |";
        md << '\n';
    }
    return md.str();
}

std::string grid_page_head(const char* what) {
    return cat("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>pitfall ",
               what, "</title>\n<style>", html_style,
               "tr.differs td:first-child{border-left:4px solid #cf222e}</style></head>\n"
               "<body>\n<h1>pitfall ",
               what, "</h1>\n");
}

std::string value_groups_markdown(const value_groups& groups) {
    std::string text;
    for (std::size_t g = 0; g < groups.size(); ++g) {
        text += cat(g ? "; " : "", "**", md_inline(groups[g].first, 160), "**: ");
        for (std::size_t i = 0; i < groups[g].second.size(); ++i)
            text += cat(i ? ", " : "", md_inline(groups[g].second[i], 80));
    }
    return text;
}

std::string value_groups_html(const value_groups& groups) {
    std::string text;
    for (std::size_t g = 0; g < groups.size(); ++g) {
        text += cat(g ? "; " : "", "<b>", escape_markup(groups[g].first), "</b>: ");
        for (std::size_t i = 0; i < groups[g].second.size(); ++i)
            text += cat(i ? ", " : "", escape_markup(groups[g].second[i]));
    }
    return text;
}

} // namespace report_parts

namespace {
/// Cells that never ran (a compile failure): a case row leaves them out.
std::vector<bool> never_ran(const std::vector<run_data>& runs) {
    std::vector<bool> out;
    out.reserve(runs.size());
    for (const auto& r : runs)
        out.push_back(r.cases.empty());
    return out;
}

/// "### Cells": each matrix cell's facts, a row per cell.
std::string cells_markdown(const std::vector<run_data>& runs, const matrix& m) {
    std::ostringstream md;
    md << "### Cells\n\n| cell |";
    for (const auto& fact : cell_facts)
        md << ' ' << fact.first << " |";
    md << "\n|---|";
    for (std::size_t i = 0; i < std::size(cell_facts); ++i)
        md << "---|";
    md << '\n';
    for (std::size_t c = 0; c < runs.size(); ++c) {
        md << "| " << md_inline(m.cells[c], 80) << " |";
        for (const auto& fact : cell_facts)
            md << ' ' << md_inline(fact.second(runs[c]), 160) << " |";
        md << '\n';
    }
    return md.str();
}

/// "### What differs between cells": the cells' facts first, then the cases.
std::string differences_markdown(const std::vector<run_data>& runs, const matrix& m) {
    std::ostringstream md;
    md << "\n### What differs between cells\n\n";
    const auto facts = differing_facts(runs);
    for (const cell_fact* fact : facts)
        md << "- " << fact->first << ": "
           << value_groups_markdown(
                  group_cells(m.cells, [&](std::size_t c) { return fact->second(runs[c]); }))
           << '\n';
    if (m.differing.empty() && facts.empty())
        md << "Nothing: every cell has the same facts, and every case the same verdict and "
              "outcome.\n";
    const std::vector<bool> skip = never_ran(runs);
    for (const auto& key : m.differing) {
        const auto& row = m.at.at(key);
        md << "- `" << md_code(key) << "`: "
           << value_groups_markdown(group_cells(
                  m.cells, [&](std::size_t c) { return cell_text(row[c]); }, skip))
           << '\n';
    }
    return md.str();
}

/// A cell's own outcome as a table cell: the outcome marked as a verdict, then the rest of
/// its text (`text`: the "cell outcome" fact).
std::string cell_outcome_html(const run_data& run, const std::string& text) {
    const std::string outcome = str(run.cell, "outcome", "?");
    return cat("<td><span class=\"v ",
               verdict_class(outcome == "ran"       ? "PASS"
                             : outcome == "skipped" ? "UNSUPPORTED"
                                                    : "FAIL"),
               "\">", escape_markup(outcome), "</span> ",
               escape_markup(text.substr(std::min(text.size(), outcome.size()))), "</td>");
}

/// "Cells": each matrix cell's facts, a row per cell.
std::string cells_html(const std::vector<run_data>& runs, const matrix& m) {
    std::ostringstream h;
    h << "<h2>Cells</h2>\n<table class=\"grid\" id=\"cells\"><tr><th>cell</th>";
    for (const auto& fact : cell_facts)
        h << "<th>" << escape_markup(fact.first) << "</th>";
    h << "</tr>\n";
    for (std::size_t c = 0; c < runs.size(); ++c) {
        h << "<tr><td title=\"" << escape_markup(str(obj(runs[c].cell, "cell"), "doc"))
          << "\"><code>" << escape_markup(m.cells[c]) << "</code></td>";
        for (const auto& fact : cell_facts) {
            const std::string text = fact.second(runs[c]);
            if (std::string(fact.first) == "cell outcome")
                h << cell_outcome_html(runs[c], text);
            else
                h << "<td>" << escape_markup(text) << "</td>";
        }
        h << "</tr>\n";
    }
    h << "</table>\n";
    return h.str();
}

/// "What differs between cells": the cells' facts first, then the cases.
std::string differences_html(const std::vector<run_data>& runs, const matrix& m) {
    std::ostringstream h;
    h << "<h2>What differs between cells</h2>\n<ul id=\"differences\">\n";
    const auto facts = differing_facts(runs);
    for (const cell_fact* fact : facts)
        h << "<li>" << escape_markup(fact->first) << ": "
          << value_groups_html(
                 group_cells(m.cells, [&](std::size_t c) { return fact->second(runs[c]); }))
          << "</li>\n";
    const std::vector<bool> skip = never_ran(runs);
    for (const auto& key : m.differing) {
        const auto& row = m.at.at(key);
        h << "<li><code>" << escape_markup(key) << "</code>: "
          << value_groups_html(group_cells(
                 m.cells, [&](std::size_t c) { return cell_text(row[c]); }, skip))
          << "</li>\n";
    }
    if (m.differing.empty() && facts.empty())
        h << "<li>Nothing: every cell has the same facts, and every case the same verdict and "
             "outcome.</li>\n";
    h << "</ul>\n";
    return h.str();
}
} // namespace

std::string render_matrix_markdown(const std::vector<run_data>& runs) {
    const matrix m = build_matrix(runs);
    std::ostringstream md;
    md << "## pitfall matrix: " << runs.size() << " cells, " << m.keys.size() << " cases, "
       << m.differing.size() << " differ\n\n";
    if (any_cell(runs))
        md << cells_markdown(runs, m) << "\n### Cases\n\n";
    md << case_table_markdown(m) << differences_markdown(runs, m);
    return md.str();
}

std::string render_matrix_html(const std::vector<run_data>& runs) {
    const matrix m = build_matrix(runs);
    std::ostringstream h;
    h << grid_page_head("matrix") << "<p>" << runs.size() << " cells, " << m.keys.size()
      << " cases; " << m.differing.size() << " differ between cells (marked red).</p>\n";
    if (any_cell(runs))
        h << cells_html(runs, m) << "<h2>Cases</h2>\n";
    std::vector<std::string> titles;
    titles.reserve(runs.size());
    for (const auto& run : runs)
        titles.push_back(run.dir);
    h << case_grid_html(m, titles, std::set<std::string>(m.differing.begin(), m.differing.end()))
      << differences_html(runs, m) << "</body></html>\n";
    return h.str();
}

} // namespace pitfall::runner
