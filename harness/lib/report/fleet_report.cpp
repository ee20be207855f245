// The fleet report as Markdown, JSON and HTML.
#include "report/fleet_view.hpp"
#include "report/loaded_libraries.hpp"

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
/// The items in one line, "none" when there are none.
std::string joined_or_none(const std::vector<std::string>& items) {
    std::string out;
    for (const auto& item : items)
        out += (out.empty() ? "" : ", ") + item;
    return out.empty() ? "none" : out;
}

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

/// A node outside the fleet's majority group: by its fingerprint, not the fleet's norm.
struct fingerprint_outlier {
    std::size_t column;               ///< of the fleet's matrix
    const fleet_group* group;         ///< the node's own
    std::size_t cases_held_otherwise; ///< by its group, against the majority group
    std::string doctor;               ///< `pitfall doctor`'s headline ("-": none)
};

/// The nodes outside the fleet's majority group, group by group; none without a majority.
std::vector<fingerprint_outlier> fingerprint_outliers(const fleet_view& f) {
    std::vector<fingerprint_outlier> out;
    if (!f.majority_group)
        return out;
    const fleet_group& norm = f.fingerprint_groups[*f.majority_group];
    for (const auto& other : f.fingerprint_groups) {
        if (&other == &norm)
            continue;
        const std::size_t differ = cases_held_otherwise(f, other, norm);
        for (const std::size_t c : other.columns)
            out.push_back({c, &other, differ, node_doctor(f.ran[c])});
    }
    return out;
}

/// The nodes outside the fleet's majority group, one line each: their fingerprint against the
/// majority's, how many cases their group holds otherwise, and `pitfall doctor`'s headline (a
/// stub driver, a missing library: why a node's GPU is not the others'). `name` renders a node
/// name, `text` any other text, for the format.
template <class Name, class Text>
std::vector<std::string> fingerprint_outlier_lines(const fleet_view& f, Name name, Text text) {
    std::vector<std::string> out;
    for (const fingerprint_outlier& o : fingerprint_outliers(f)) {
        const fleet_group& norm = f.fingerprint_groups[*f.majority_group];
        const std::size_t differ = o.cases_held_otherwise;
        std::string line =
            cat(name(f.m.cells[o.column]), " differs by its fingerprint: ", text(o.group->label),
                ", where most nodes (", std::to_string(norm.columns.size()), ") have ",
                text(norm.label), "; ", counted(differ, "case"), differ == 1 ? " has" : " have",
                " another verdict or outcome than theirs");
        if (o.doctor != "-")
            line += "; pitfall doctor: " + text(o.doctor);
        out.push_back(line + ".");
    }
    return out;
}

/// What "Which node differs" says when no case differs within a group.
const char* nothing_within_groups(const fleet_view& f) {
    return std::any_of(f.fingerprint_groups.begin(), f.fingerprint_groups.end(),
                       [](const fleet_group& g) { return g.columns.size() > 1; })
               ? "Nothing: in every fingerprint group, every node has the same verdict and "
                 "outcome in every case."
               : "Nothing to compare: no fingerprint group has two nodes that ran.";
}

/// What "Between groups" says when every group holds the same value of every case.
constexpr const char* nothing_between_groups =
    "Nothing: every fingerprint group has the same verdict and outcome (most of its nodes') in "
    "every case.";

/// The nodes of `columns` (of the fleet's matrix), each rendered by `name`, joined by ", ".
template <class Name>
std::string node_names(const fleet_view& f, const std::vector<std::size_t>& columns, Name name) {
    std::string text;
    for (std::size_t i = 0; i < columns.size(); ++i)
        text += cat(i ? ", " : "", name(f.m.cells[columns[i]]));
    return text;
}

/// One node's row of the "Nodes" table, each fact as text.
struct node_row {
    std::string name;
    std::string outcome;      ///< node.json's word ("ran", "node_down"...)
    std::string outcome_text; ///< the outcome with Slurm's state, reason and message
    std::string group;        ///< its fingerprint group ("-": never ran)
    std::string doctor;       ///< `pitfall doctor`'s headline, or why there is none
    std::string verdicts;     ///< "12 PASS, 1 FAIL"
};

node_row node_row_of(const fleet_view& f, const run_data& node, std::size_t n) {
    return {f.names[n],        str(node.node, "outcome", "?"), node_outcome(node), f.groups[n],
            node_doctor(node), verdict_counts_text(node)};
}

// ---- Markdown

std::string markdown_node(const std::string& name) {
    return "`" + md_code(name) + "`";
}

/// One odd node of group `g`: the cases it differs in (the first odd_cases_listed of them).
std::string odd_node_markdown(const fleet_view& f, const fleet_group& g, const odd_node& odd) {
    std::ostringstream md;
    md << markdown_node(f.m.cells[odd.column]) << " differs from the other "
       << counted(g.columns.size() - 1, "node") << " of its group in "
       << counted(odd.cases.size(), "case") << ":\n\n";
    for (std::size_t i = 0; i < odd.cases.size() && i < odd_cases_listed; ++i) {
        const odd_case& c = odd.cases[i];
        md << "- `" << md_code(c.key) << "`: **" << md_inline(c.here, 160) << "** here, "
           << (c.majority ? cat("**", md_inline(c.versus[0].first, 160), "** on most of the group")
                          : "no majority: " + value_groups_markdown(c.versus))
           << '\n';
    }
    if (odd.cases.size() > odd_cases_listed)
        md << "- and " << odd.cases.size() - odd_cases_listed << " more\n";
    md << '\n';
    return md.str();
}

/// A fingerprint group some case differs in: its nodes, its odd nodes, each case by value.
std::string group_markdown(const fleet_view& f, const fleet_group& g) {
    std::ostringstream md;
    md << "#### " << md_inline(g.label, 160) << ": " << counted(g.columns.size(), "node") << " ("
       << node_names(f, g.columns, markdown_node) << ")\n\n";
    for (const auto& odd : g.odd)
        md << odd_node_markdown(f, g, odd);
    md << "Each case that differs in this group, by value:\n\n";
    for (std::size_t i = 0; i < g.differing.size(); ++i)
        md << "- `" << md_code(g.differing[i]) << "`: " << value_groups_markdown(g.by_value[i])
           << '\n';
    md << '\n';
    return md.str();
}

/// "### Which node differs": the groups some case differs in, the quiet ones, the outliers.
std::string within_groups_markdown(const fleet_view& f) {
    std::ostringstream md;
    md << "### Which node differs\n\n";
    if (f.differing_within == 0)
        md << nothing_within_groups(f) << "\n\n";
    for (const auto& g : f.fingerprint_groups)
        if (!g.differing.empty())
            md << group_markdown(f, g);
    if (f.differing_within != 0)
        for (const auto& line :
             quiet_groups(f, [](const std::string& n) { return md_inline(n, 160); }))
            md << line << "\n\n";
    for (const auto& line : fingerprint_outlier_lines(
             f, markdown_node, [](const std::string& s) { return md_inline(s, 200); }))
        md << line << "\n\n";
    return md.str();
}

std::string nodes_markdown(const fleet_view& f, const std::vector<run_data>& nodes) {
    std::ostringstream md;
    md << "### Nodes\n\n| node | outcome | fingerprint group | doctor | verdicts |\n"
          "|---|---|---|---|---|\n";
    for (std::size_t n = 0; n < nodes.size(); ++n) {
        const node_row row = node_row_of(f, nodes[n], n);
        md << "| " << markdown_node(row.name) << " | " << md_inline(row.outcome_text, 300) << " | "
           << md_inline(row.group, 160) << " | " << md_inline(row.doctor, 200) << " | "
           << md_inline(row.verdicts, 160) << " |\n";
    }
    return md.str();
}

/// "### Between groups", where there are two groups or more.
std::string between_groups_markdown(const fleet_view& f) {
    if (f.fingerprint_groups.size() <= 1)
        return "";
    std::ostringstream md;
    md << "\n### Between groups\n\n";
    if (f.between.empty())
        md << nothing_between_groups << '\n';
    for (const auto& [key, values] : f.between)
        md << "- `" << md_code(key) << "`: " << value_groups_markdown(values) << '\n';
    return md.str();
}

std::string cases_markdown(const fleet_view& f) {
    return cat("\n### Cases\n\n",
               f.ran.empty() ? "No node ran: no cases to show.\n" : case_table_markdown(f.m));
}

// ---- JSON

json optional_text(const std::string& text) {
    return text.empty() || text == "-" ? json() : json(text);
}

json nodes_json(const fleet_view& f, const std::vector<run_data>& nodes) {
    json out = json::array();
    for (std::size_t n = 0; n < nodes.size(); ++n) {
        const node_row row = node_row_of(f, nodes[n], n);
        json verdicts = json::object();
        for (const auto& [verdict, count] : verdict_counts(nodes[n]))
            verdicts[verdict] = count;
        out.push_back({{"node", row.name},
                       {"outcome", row.outcome},
                       {"outcome_text", row.outcome_text},
                       {"fingerprint", optional_text(row.group)},
                       {"doctor", optional_text(row.doctor)},
                       {"verdicts", verdicts}});
    }
    return out;
}

json odd_case_json(const odd_case& c) {
    json others = json::array();
    if (!c.majority)
        for (const auto& [value, names] : c.versus)
            others.push_back({{"value", value}, {"nodes", names}});
    return {{"case", c.key},
            {"here", c.here},
            {"majority", c.majority ? json(c.versus[0].first) : json()},
            {"tied", others}};
}

json groups_json(const fleet_view& f) {
    json groups = json::array();
    for (const auto& g : f.fingerprint_groups) {
        json odd_nodes = json::array();
        for (const auto& odd : g.odd) {
            json cases = json::array();
            for (const odd_case& c : odd.cases)
                cases.push_back(odd_case_json(c));
            odd_nodes.push_back({{"node", f.m.cells[odd.column]}, {"cases", cases}});
        }
        json names = json::array();
        for (const std::size_t c : g.columns)
            names.push_back(f.m.cells[c]);
        groups.push_back({{"fingerprint", g.label},
                          {"nodes", names},
                          {"differing_cases", g.differing},
                          {"odd_nodes", odd_nodes}});
    }
    return groups;
}

json outliers_json(const fleet_view& f) {
    json outliers = json::array();
    for (const fingerprint_outlier& o : fingerprint_outliers(f))
        outliers.push_back({{"node", f.m.cells[o.column]},
                            {"fingerprint", o.group->label},
                            {"cases_held_otherwise", o.cases_held_otherwise},
                            {"doctor", optional_text(o.doctor)}});
    return outliers;
}

json between_groups_json(const fleet_view& f) {
    json between = json::array();
    for (const auto& [key, values] : f.between) {
        json by_group = json::object();
        for (const auto& [value, labels] : values)
            for (const auto& label : labels)
                by_group[label] = value;
        between.push_back({{"case", key}, {"by_group", by_group}});
    }
    return between;
}

json cases_json(const fleet_view& f) {
    json cases = json::array();
    for (const auto& key : f.m.keys) {
        json values = json::object();
        const auto& row = f.m.at.at(key);
        for (std::size_t c = 0; c < f.m.cells.size(); ++c)
            values[f.m.cells[c]] = cell_text(row[c]);
        cases.push_back({{"case", key}, {"by_node", values}});
    }
    return cases;
}

// ---- HTML

std::string html_node(const std::string& name) {
    return "<code>" + escape_markup(name) + "</code>";
}

/// One odd node of group `g`: the cases it differs in (the first odd_cases_listed of them).
std::string odd_node_html(const fleet_view& f, const fleet_group& g, const odd_node& odd) {
    std::ostringstream h;
    h << "<p class=\"odd\">" << html_node(f.m.cells[odd.column]) << " differs from the other "
      << counted(g.columns.size() - 1, "node") << " of its group in "
      << counted(odd.cases.size(), "case") << ":</p>\n<ul>\n";
    for (std::size_t i = 0; i < odd.cases.size() && i < odd_cases_listed; ++i) {
        const odd_case& c = odd.cases[i];
        h << "<li><code>" << escape_markup(c.key) << "</code>: <b>" << escape_markup(c.here)
          << "</b> here, "
          << (c.majority ? cat("<b>", escape_markup(c.versus[0].first), "</b> on most of the group")
                         : "no majority: " + value_groups_html(c.versus))
          << "</li>\n";
    }
    if (odd.cases.size() > odd_cases_listed)
        h << "<li>and " << odd.cases.size() - odd_cases_listed << " more</li>\n";
    h << "</ul>\n";
    return h.str();
}

/// A fingerprint group some case differs in: its nodes, its odd nodes, each case by value.
std::string group_html(const fleet_view& f, const fleet_group& g) {
    std::ostringstream h;
    h << "<h3>" << escape_markup(g.label) << ": " << counted(g.columns.size(), "node") << " ("
      << node_names(f, g.columns, html_node) << ")</h3>\n";
    for (const auto& odd : g.odd)
        h << odd_node_html(f, g, odd);
    h << "<p>Each case that differs in this group, by value:</p>\n<ul class=\"differences\">\n";
    for (std::size_t i = 0; i < g.differing.size(); ++i)
        h << "<li><code>" << escape_markup(g.differing[i])
          << "</code>: " << value_groups_html(g.by_value[i]) << "</li>\n";
    h << "</ul>\n";
    return h.str();
}

/// "Which node differs": the groups some case differs in, the quiet ones, the outliers.
std::string within_groups_html(const fleet_view& f) {
    std::ostringstream h;
    h << "<h2>Which node differs</h2>\n<div id=\"within\">\n";
    if (f.differing_within == 0)
        h << "<p>" << nothing_within_groups(f) << "</p>\n";
    for (const auto& g : f.fingerprint_groups)
        if (!g.differing.empty())
            h << group_html(f, g);
    if (f.differing_within != 0)
        for (const auto& line :
             quiet_groups(f, [](const std::string& n) { return escape_markup(n); }))
            h << "<p>" << line << "</p>\n";
    for (const auto& line : fingerprint_outlier_lines(
             f, html_node, [](const std::string& s) { return escape_markup(s); }))
        h << "<p class=\"outlier\">" << line << "</p>\n";
    h << "</div>\n";
    return h.str();
}

/// A row of the "Nodes" table; `dir` (the node's folder) is the name's hover text.
std::string node_row_html(const node_row& row, const std::string& dir) {
    const std::string& text = row.outcome_text;
    return cat("<tr><td title=\"", escape_markup(dir), "\"><code>", escape_markup(row.name),
               "</code></td><td><span class=\"v ",
               verdict_class(row.outcome == "ran" ? "PASS" : "FAIL"), "\">",
               escape_markup(row.outcome), "</span>",
               escape_markup(text.substr(std::min(text.size(), row.outcome.size()))), "</td><td>",
               escape_markup(row.group), "</td><td>", escape_markup(row.doctor), "</td><td>",
               escape_markup(row.verdicts), "</td></tr>\n");
}

std::string nodes_html(const fleet_view& f, const std::vector<run_data>& nodes) {
    std::string h = "<h2>Nodes</h2>\n<table class=\"grid\" id=\"nodes\"><tr><th>node</th>"
                    "<th>outcome</th><th>fingerprint group</th><th>doctor</th><th>verdicts</th>"
                    "</tr>\n";
    for (std::size_t n = 0; n < nodes.size(); ++n)
        h += node_row_html(node_row_of(f, nodes[n], n), nodes[n].dir);
    return h + "</table>\n";
}

/// "Between groups", where there are two groups or more.
std::string between_groups_html(const fleet_view& f) {
    if (f.fingerprint_groups.size() <= 1)
        return "";
    std::ostringstream h;
    h << "<h2>Between groups</h2>\n<ul id=\"between\">\n";
    if (f.between.empty())
        h << "<li>" << nothing_between_groups << "</li>\n";
    for (const auto& [key, values] : f.between)
        h << "<li><code>" << escape_markup(key) << "</code>: " << value_groups_html(values)
          << "</li>\n";
    h << "</ul>\n";
    return h.str();
}

/// "Cases": the case x node grid, each row red where the case differs within a group.
std::string cases_html(const fleet_view& f) {
    if (f.ran.empty())
        return "<h2>Cases</h2>\n<p>No node ran: no cases to show.</p>\n";
    std::set<std::string> differing;
    for (const auto& g : f.fingerprint_groups)
        differing.insert(g.differing.begin(), g.differing.end());
    std::vector<std::string> titles;
    titles.reserve(f.ran.size());
    for (const auto& node : f.ran)
        titles.push_back(fingerprint_group(node));
    return "<h2>Cases</h2>\n" + case_grid_html(f.m, titles, differing);
}
/// "### Loaded libraries": the nodes whose set of loaded (library, version) is not the one
/// most nodes loaded; nothing where fewer than two nodes ran.
std::string libraries_markdown(const std::vector<run_data>& nodes) {
    const library_outliers o = fleet_library_outliers(nodes);
    if (o.nodes_compared < 2)
        return "";
    std::string m = "\n### Loaded libraries\n\n";
    if (o.nodes.empty())
        return m + "Every node that ran loaded the same libraries.\n";
    m += o.has_majority ? cat("Most nodes loaded: ", md_inline(joined_or_none(o.majority), 600),
                              ". These differ:\n\n")
                        : std::string("No set of libraries is loaded by most nodes:\n\n");
    for (const auto& n : o.nodes)
        m += cat("- ", md_inline(n.text(), 600), "\n");
    return m;
}

std::string libraries_html(const std::vector<run_data>& nodes) {
    const library_outliers o = fleet_library_outliers(nodes);
    if (o.nodes_compared < 2)
        return "";
    std::string h = "<h2 id=\"loaded-libraries\">Loaded libraries</h2>\n";
    if (o.nodes.empty())
        return h + "<p>Every node that ran loaded the same libraries.</p>\n";
    h += o.has_majority ? cat("<p>Most nodes loaded: ", escape_markup(joined_or_none(o.majority)),
                              ". These differ:</p>\n")
                        : std::string("<p>No set of libraries is loaded by most nodes:</p>\n");
    h += "<ul>\n";
    for (const auto& n : o.nodes)
        h += cat("<li class=\"v warn\">", escape_markup(n.text()), "</li>\n");
    return h + "</ul>\n";
}
} // namespace

std::string render_fleet_markdown(const std::vector<run_data>& nodes) {
    const fleet_view f = build_fleet(nodes);
    return cat("## pitfall fleet: ", fleet_title(f), "\n\n", within_groups_markdown(f),
               nodes_markdown(f, nodes), libraries_markdown(nodes), between_groups_markdown(f),
               cases_markdown(f));
}

json render_fleet_json(const std::vector<run_data>& nodes) {
    const fleet_view f = build_fleet(nodes);
    json doc = {{"schema", "pitfall.fleet-report/1"},
                {"title", fleet_title(f)},
                {"node_count", f.names.size()},
                {"ran_count", f.ran.size()},
                {"differing_within_groups", f.differing_within}};
    doc["nodes"] = nodes_json(f, nodes);
    doc["groups"] = groups_json(f);
    doc["majority_fingerprint"] =
        f.majority_group ? json(f.fingerprint_groups[*f.majority_group].label) : json();
    doc["fingerprint_outliers"] = outliers_json(f);
    doc["between_groups"] = between_groups_json(f);
    doc["cases"] = cases_json(f);
    doc["loaded_libraries"] = runner::outliers_json(fleet_library_outliers(nodes));
    return doc;
}

std::string render_fleet_html(const std::vector<run_data>& nodes) {
    const fleet_view f = build_fleet(nodes);
    return cat(grid_page_head("fleet"), "<p id=\"title\">", escape_markup(fleet_title(f)),
               " (cases differing within a group marked red).</p>\n", within_groups_html(f),
               nodes_html(f, nodes), libraries_html(nodes), between_groups_html(f), cases_html(f),
               "</body></html>\n");
}

} // namespace pitfall::runner
