// The fleet report as Markdown, JSON and HTML.
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

namespace {
/// How many of a node's odd cases a report lists before "and N more".
constexpr std::size_t odd_cases_listed = 20;

std::string fleet_title(const fleet_view& f) {
    return cat(counted(f.names.size(), "node"), " (", std::to_string(f.ran.size()), " ran), ",
               counted(f.fingerprint_groups.size(), "fingerprint group"), ", ",
               std::to_string(f.differing_within),
               f.differing_within == 1 ? " case differs" : " cases differ", " within a group");
}

/// Groups whose nodes agree on every case, and nodes alone in their group, named in one line
/// each (in words; `name` renders a node or group name for the format).
template <class Name> std::vector<std::string> quiet_groups(const fleet_view& f, Name name) {
    std::string agree, alone;
    for (const auto& g : f.fingerprint_groups) {
        if (g.columns.size() > 1 && g.differing.empty())
            agree += cat(agree.empty() ? "" : "; ", name(g.label), " (",
                         counted(g.columns.size(), "node"), ")");
        if (g.columns.size() == 1 && !f.majority_group) // else: named by fingerprint_outliers
            alone += cat(alone.empty() ? "" : "; ", name(f.m.cells[g.columns[0]]), " (",
                         name(g.label), ")");
    }
    std::vector<std::string> out;
    if (!agree.empty())
        out.push_back("Every node agrees with the rest of its group on every case in: " + agree +
                      ".");
    if (!alone.empty())
        out.push_back("Alone in its fingerprint group (nothing to compare it with): " + alone +
                      ".");
    return out;
}
/// How many cases `other` holds another value of (most of its nodes') than `norm`.
std::size_t cases_held_otherwise(const fleet_view& f, const fleet_group& other,
                                 const fleet_group& norm) {
    std::size_t differ = 0;
    for (const auto& key : f.m.keys)
        differ += group_value(f.m, key, other.columns) != group_value(f.m, key, norm.columns);
    return differ;
}

/// The nodes outside the fleet's majority group, one line each: their fingerprint against the
/// majority's, how many cases their group holds otherwise, and `pitfall doctor`'s headline (a
/// stub driver, a missing library: why a node's GPU is not the others'). `name` renders a node
/// name, `text` any other text, for the format.
template <class Name, class Text>
std::vector<std::string> fingerprint_outliers(const fleet_view& f, Name name, Text text) {
    std::vector<std::string> out;
    if (!f.majority_group)
        return out;
    const fleet_group& norm = f.fingerprint_groups[*f.majority_group];
    for (std::size_t g = 0; g < f.fingerprint_groups.size(); ++g) {
        if (g == *f.majority_group)
            continue;
        const fleet_group& other = f.fingerprint_groups[g];
        const std::size_t differ = cases_held_otherwise(f, other, norm);
        for (const std::size_t c : other.columns) {
            std::string line =
                cat(name(f.m.cells[c]), " differs by its fingerprint: ", text(other.label),
                    ", where most nodes (", std::to_string(norm.columns.size()), ") have ",
                    text(norm.label), "; ", counted(differ, "case"), differ == 1 ? " has" : " have",
                    " another verdict or outcome than theirs");
            if (const std::string doctor = node_doctor(f.ran[c]); doctor != "-")
                line += "; pitfall doctor: " + text(doctor);
            out.push_back(line + ".");
        }
    }
    return out;
}
} // namespace
std::string render_fleet_markdown(const std::vector<run_data>& nodes) {
    const fleet_view f = build_fleet(nodes);
    std::ostringstream md;
    const auto node_name = [](const std::string& n) { return "`" + md_code(n) + "`"; };
    const auto names_of = [&](const std::vector<std::string>& names) {
        std::string text;
        for (const auto& n : names)
            text += (text.empty() ? "" : ", ") + md_inline(n, 80);
        return text;
    };
    const auto markdown_groups = [&](const value_groups& groups) {
        for (std::size_t g = 0; g < groups.size(); ++g)
            md << (g ? "; " : "") << "**" << md_inline(groups[g].first, 160)
               << "**: " << names_of(groups[g].second);
        md << '\n';
    };
    md << "## pitfall fleet: " << fleet_title(f) << "\n\n### Which node differs\n\n";
    if (f.differing_within == 0) {
        md << (std::any_of(f.fingerprint_groups.begin(), f.fingerprint_groups.end(),
                           [](const fleet_group& g) { return g.columns.size() > 1; })
                   ? "Nothing: in every fingerprint group, every node has the same verdict and "
                     "outcome in every case.\n"
                   : "Nothing to compare: no fingerprint group has two nodes that ran.\n")
           << '\n';
    }
    for (const auto& g : f.fingerprint_groups) {
        if (g.differing.empty())
            continue;
        md << "#### " << md_inline(g.label, 160) << ": " << counted(g.columns.size(), "node")
           << " (";
        for (std::size_t i = 0; i < g.columns.size(); ++i)
            md << (i ? ", " : "") << node_name(f.m.cells[g.columns[i]]);
        md << ")\n\n";
        for (const auto& odd : g.odd) {
            md << node_name(f.m.cells[odd.column]) << " differs from the other "
               << counted(g.columns.size() - 1, "node") << " of its group in "
               << counted(odd.cases.size(), "case") << ":\n\n";
            for (std::size_t i = 0; i < odd.cases.size() && i < odd_cases_listed; ++i) {
                const odd_case& c = odd.cases[i];
                md << "- `" << md_code(c.key) << "`: **" << md_inline(c.here, 160) << "** here, ";
                if (c.majority)
                    md << "**" << md_inline(c.versus[0].first, 160) << "** on most of the group\n";
                else {
                    md << "no majority: ";
                    markdown_groups(c.versus);
                }
            }
            if (odd.cases.size() > odd_cases_listed)
                md << "- and " << odd.cases.size() - odd_cases_listed << " more\n";
            md << '\n';
        }
        md << "Each case that differs in this group, by value:\n\n";
        for (std::size_t i = 0; i < g.differing.size(); ++i) {
            md << "- `" << md_code(g.differing[i]) << "`: ";
            markdown_groups(g.by_value[i]);
        }
        md << '\n';
    }
    if (f.differing_within != 0)
        for (const auto& line :
             quiet_groups(f, [](const std::string& n) { return md_inline(n, 160); }))
            md << line << "\n\n";
    for (const auto& line :
         fingerprint_outliers(f, node_name, [](const std::string& s) { return md_inline(s, 200); }))
        md << line << "\n\n";

    md << "### Nodes\n\n| node | outcome | fingerprint group | doctor | verdicts |\n"
          "|---|---|---|---|---|\n";
    for (std::size_t n = 0; n < nodes.size(); ++n)
        md << "| " << node_name(f.names[n]) << " | " << md_inline(node_outcome(nodes[n]), 300)
           << " | " << md_inline(f.groups[n], 160) << " | " << md_inline(node_doctor(nodes[n]), 200)
           << " | " << md_inline(verdict_counts_text(nodes[n]), 160) << " |\n";

    if (f.fingerprint_groups.size() > 1) {
        md << "\n### Between groups\n\n";
        if (f.between.empty())
            md << "Nothing: every fingerprint group has the same verdict and outcome (most of "
                  "its nodes') in every case.\n";
        for (const auto& [key, values] : f.between) {
            md << "- `" << md_code(key) << "`: ";
            markdown_groups(values);
        }
    }

    md << "\n### Cases\n\n";
    if (f.ran.empty()) {
        md << "No node ran: no cases to show.\n";
        return md.str();
    }
    md << "| case |";
    for (const auto& c : f.m.cells)
        md << ' ' << md_inline(c, 80) << " |";
    md << "\n|---|";
    for (std::size_t i = 0; i < f.m.cells.size(); ++i)
        md << "---|";
    md << '\n';
    for (const auto& key : f.m.keys) {
        md << "| `" << md_code(key) << "` |";
        for (const json* r : f.m.at.at(key))
            md << ' ' << md_inline(cell_text(r), 80) << " |";
        md << '\n';
    }
    return md.str();
}

json render_fleet_json(const std::vector<run_data>& nodes) {
    const fleet_view f = build_fleet(nodes);
    const auto names_of = [&](const std::vector<std::size_t>& columns) {
        json names = json::array();
        for (const std::size_t c : columns)
            names.push_back(f.m.cells[c]);
        return names;
    };
    const auto optional_text = [](const std::string& text) {
        return text.empty() || text == "-" ? json() : json(text);
    };
    json doc = {{"schema", "pitfall.fleet-report/1"},
                {"title", fleet_title(f)},
                {"node_count", f.names.size()},
                {"ran_count", f.ran.size()},
                {"differing_within_groups", f.differing_within}};
    json node_list = json::array();
    for (std::size_t n = 0; n < nodes.size(); ++n) {
        json verdicts = json::object();
        for (const auto& [verdict, count] : verdict_counts(nodes[n]))
            verdicts[verdict] = count;
        node_list.push_back({{"node", f.names[n]},
                             {"outcome", str(nodes[n].node, "outcome", "?")},
                             {"outcome_text", node_outcome(nodes[n])},
                             {"fingerprint", optional_text(f.groups[n])},
                             {"doctor", optional_text(node_doctor(nodes[n]))},
                             {"verdicts", verdicts}});
    }
    doc["nodes"] = node_list;
    json groups = json::array();
    for (const auto& g : f.fingerprint_groups) {
        json odd_nodes = json::array();
        for (const auto& odd : g.odd) {
            json cases = json::array();
            for (const odd_case& c : odd.cases) {
                json others = json::array();
                if (!c.majority)
                    for (const auto& [value, names] : c.versus)
                        others.push_back({{"value", value}, {"nodes", names}});
                cases.push_back({{"case", c.key},
                                 {"here", c.here},
                                 {"majority", c.majority ? json(c.versus[0].first) : json()},
                                 {"tied", others}});
            }
            odd_nodes.push_back({{"node", f.m.cells[odd.column]}, {"cases", cases}});
        }
        groups.push_back({{"fingerprint", g.label},
                          {"nodes", names_of(g.columns)},
                          {"differing_cases", g.differing},
                          {"odd_nodes", odd_nodes}});
    }
    doc["groups"] = groups;
    json outliers = json::array();
    if (f.majority_group) {
        const fleet_group& norm = f.fingerprint_groups[*f.majority_group];
        doc["majority_fingerprint"] = norm.label;
        for (const auto& other : f.fingerprint_groups) {
            if (&other == &norm)
                continue;
            const std::size_t differ = cases_held_otherwise(f, other, norm);
            for (const std::size_t c : other.columns)
                outliers.push_back({{"node", f.m.cells[c]},
                                    {"fingerprint", other.label},
                                    {"cases_held_otherwise", differ},
                                    {"doctor", optional_text(node_doctor(f.ran[c]))}});
        }
    } else
        doc["majority_fingerprint"] = nullptr;
    doc["fingerprint_outliers"] = outliers;
    json between = json::array();
    for (const auto& [key, values] : f.between) {
        json by_group = json::object();
        for (const auto& [value, labels] : values)
            for (const auto& label : labels)
                by_group[label] = value;
        between.push_back({{"case", key}, {"by_group", by_group}});
    }
    doc["between_groups"] = between;
    json cases = json::array();
    for (const auto& key : f.m.keys) {
        json values = json::object();
        const auto& row = f.m.at.at(key);
        for (std::size_t c = 0; c < f.m.cells.size(); ++c)
            values[f.m.cells[c]] = cell_text(row[c]);
        cases.push_back({{"case", key}, {"by_node", values}});
    }
    doc["cases"] = cases;
    return doc;
}

std::string render_fleet_html(const std::vector<run_data>& nodes) {
    const fleet_view f = build_fleet(nodes);
    std::set<std::string> differing;
    for (const auto& g : f.fingerprint_groups)
        differing.insert(g.differing.begin(), g.differing.end());
    std::ostringstream h;
    const auto names_of = [&](const std::vector<std::string>& names) {
        std::string text;
        for (const auto& n : names)
            text += (text.empty() ? "" : ", ") + escape_markup(n);
        return text;
    };
    const auto html_groups = [&](const value_groups& groups) {
        for (std::size_t g = 0; g < groups.size(); ++g)
            h << (g ? "; " : "") << "<b>" << escape_markup(groups[g].first)
              << "</b>: " << names_of(groups[g].second);
    };
    h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>pitfall "
         "fleet</title>\n<style>"
      << html_style
      << "tr.differs td:first-child{border-left:4px solid #cf222e}</style></head>\n<body>\n"
      << "<h1>pitfall fleet</h1>\n<p id=\"title\">" << escape_markup(fleet_title(f))
      << " (cases differing within a group marked red).</p>\n"
      << "<h2>Which node differs</h2>\n<div id=\"within\">\n";
    if (f.differing_within == 0)
        h << "<p>"
          << (std::any_of(f.fingerprint_groups.begin(), f.fingerprint_groups.end(),
                          [](const fleet_group& g) { return g.columns.size() > 1; })
                  ? "Nothing: in every fingerprint group, every node has the same verdict and "
                    "outcome in every case."
                  : "Nothing to compare: no fingerprint group has two nodes that ran.")
          << "</p>\n";
    for (const auto& g : f.fingerprint_groups) {
        if (g.differing.empty())
            continue;
        h << "<h3>" << escape_markup(g.label) << ": " << counted(g.columns.size(), "node") << " (";
        for (std::size_t i = 0; i < g.columns.size(); ++i)
            h << (i ? ", " : "") << "<code>" << escape_markup(f.m.cells[g.columns[i]]) << "</code>";
        h << ")</h3>\n";
        for (const auto& odd : g.odd) {
            h << "<p class=\"odd\"><code>" << escape_markup(f.m.cells[odd.column])
              << "</code> differs from the other " << counted(g.columns.size() - 1, "node")
              << " of its group in " << counted(odd.cases.size(), "case") << ":</p>\n<ul>\n";
            for (std::size_t i = 0; i < odd.cases.size() && i < odd_cases_listed; ++i) {
                const odd_case& c = odd.cases[i];
                h << "<li><code>" << escape_markup(c.key) << "</code>: <b>" << escape_markup(c.here)
                  << "</b> here, ";
                if (c.majority)
                    h << "<b>" << escape_markup(c.versus[0].first) << "</b> on most of the group";
                else {
                    h << "no majority: ";
                    html_groups(c.versus);
                }
                h << "</li>\n";
            }
            if (odd.cases.size() > odd_cases_listed)
                h << "<li>and " << odd.cases.size() - odd_cases_listed << " more</li>\n";
            h << "</ul>\n";
        }
        h << "<p>Each case that differs in this group, by value:</p>\n<ul class=\"differences\">\n";
        for (std::size_t i = 0; i < g.differing.size(); ++i) {
            h << "<li><code>" << escape_markup(g.differing[i]) << "</code>: ";
            html_groups(g.by_value[i]);
            h << "</li>\n";
        }
        h << "</ul>\n";
    }
    if (f.differing_within != 0)
        for (const auto& line :
             quiet_groups(f, [](const std::string& n) { return escape_markup(n); }))
            h << "<p>" << line << "</p>\n";
    for (const auto& line : fingerprint_outliers(
             f, [](const std::string& n) { return "<code>" + escape_markup(n) + "</code>"; },
             [](const std::string& s) { return escape_markup(s); }))
        h << "<p class=\"outlier\">" << line << "</p>\n";
    h << "</div>\n<h2>Nodes</h2>\n<table class=\"grid\" id=\"nodes\"><tr><th>node</th>"
         "<th>outcome</th><th>fingerprint group</th><th>doctor</th><th>verdicts</th></tr>\n";
    for (std::size_t n = 0; n < nodes.size(); ++n) {
        const std::string outcome = str(nodes[n].node, "outcome", "?");
        const std::string text = node_outcome(nodes[n]);
        h << "<tr><td title=\"" << escape_markup(nodes[n].dir) << "\"><code>"
          << escape_markup(f.names[n]) << "</code></td><td><span class=\"v "
          << verdict_class(outcome == "ran" ? "PASS" : "FAIL") << "\">" << escape_markup(outcome)
          << "</span>" << escape_markup(text.substr(std::min(text.size(), outcome.size())))
          << "</td><td>" << escape_markup(f.groups[n]) << "</td><td>"
          << escape_markup(node_doctor(nodes[n])) << "</td><td>"
          << escape_markup(verdict_counts_text(nodes[n])) << "</td></tr>\n";
    }
    h << "</table>\n";
    if (f.fingerprint_groups.size() > 1) {
        h << "<h2>Between groups</h2>\n<ul id=\"between\">\n";
        if (f.between.empty())
            h << "<li>Nothing: every fingerprint group has the same verdict and outcome (most of "
                 "its nodes') in every case.</li>\n";
        for (const auto& [key, values] : f.between) {
            h << "<li><code>" << escape_markup(key) << "</code>: ";
            html_groups(values);
            h << "</li>\n";
        }
        h << "</ul>\n";
    }
    h << "<h2>Cases</h2>\n";
    if (f.ran.empty()) {
        h << "<p>No node ran: no cases to show.</p>\n</body></html>\n";
        return h.str();
    }
    std::vector<std::string> titles;
    for (const auto& node : f.ran)
        titles.push_back(fingerprint_group(node));
    h << case_grid_html(f.m, titles, differing) << "</body></html>\n";
    return h.str();
}

} // namespace pitfall::runner
