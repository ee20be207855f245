// The Markdown report, for step summaries and pull-request comments.
#include "report/loaded_libraries.hpp"
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
namespace {
/// "### This machine": the headline, then each error and warning with its fix.
std::string markdown_machine(const run_data& run) {
    const diagnosis d = machine_of(run);
    std::ostringstream m;
    m << "### This machine\n\n"
      << (d.cuda_usable() ? "CUDA work can run here."
                          : "**Not ready for CUDA work: " + md_inline(d.headline(), 200) + "**")
      << "\n\n";
    std::ostringstream rows;
    for (const auto& f : d.findings)
        if (f.severity != finding_severity::ok)
            rows << "| " << severity_name(f.severity) << " | " << md_inline(f.title, 200) << " | "
                 << md_inline(f.fix, 200) << " | `" << f.id << "` |\n";
    if (!rows.str().empty())
        m << "| severity | finding | fix | id |\n|---|---|---|---|\n" << rows.str() << '\n';
    return m.str();
}

/// The headline (passing, failing or incomplete), then the verdict counts and how many of the
/// selected cases finished.
std::string markdown_headline(const run_data& run, const std::map<std::string, int>& counts) {
    std::ostringstream m;
    m << "## pitfall: "
      << (run_failing(run)            ? "failing"
          : !run.not_finished.empty() ? "incomplete"
                                      : "passing")
      << "\n\n";
    m << counts_line(counts) << " (" << run.cases.size() << " of "
      << run.cases.size() + run.not_finished.size() << " cases finished";
    if (run.resumed > 0)
        m << ", resumed " << run.resumed << "x";
    m << ")\n\n";
    return m.str();
}

/// The profile the run judged by, then the machine's facts from its fingerprint summary.
std::string markdown_profile(const run_data& run) {
    const json fp = fingerprint_summary(run);
    std::ostringstream m;
    m << "Profile **" << md_inline(str(obj(run.header, "profile"), "name", "none")) << "**; ";
    std::vector<std::string> facts;
    // The fingerprint summary's own names (fingerprint.cpp, fingerprint_summary).
    for (const char* k :
         {"device_name", "compute_capability", "driver_branch", "cuda_driver_version",
          "cuda_runtime_version", "cudnn_version", "cpu_model", "os"})
        if (fp.contains(k) && !fp[k].is_null())
            facts.push_back(
                std::string(k) + " " +
                md_inline(fp[k].is_string() ? fp[k].get<std::string>() : fp[k].dump(), 60));
    for (std::size_t i = 0; i < facts.size(); ++i)
        m << (i ? ", " : "") << facts[i];
    m << (facts.empty() ? "no fingerprint facts" : "") << ".\n\n";
    return m.str();
}

std::string markdown_verdicts(const std::map<std::string, int>& counts) {
    std::ostringstream m;
    m << "| verdict | cases |\n|---|---:|\n";
    for (const auto& [v, n] : counts)
        m << "| " << v << " | " << n << " |\n";
    return m.str();
}

/// A case as a list names it: its test name, else its case key, as a code span's text.
std::string listed_name(const json& r) {
    return md_code(str(r, "test", str(r, "case")));
}

/// "### Predictions", where some case applies a rule instead of showing the failure.
std::string markdown_predictions(const run_data& run) {
    const auto predicted = predictions(run);
    if (predicted.empty())
        return "";
    std::ostringstream m;
    m << "\n### Predictions\n\n"
      << predicted.size()
      << " reproduce case(s) apply a rule or table instead of showing the failure: their "
         "verdict judges the rule, and they are not counted as reproductions.\n\n";
    for (const json* r : predicted)
        m << "- `" << listed_name(*r) << "` " << str(*r, "verdict") << ": "
          << md_inline(str(*r, "prediction")) << "\n";
    return m.str();
}

std::vector<const json*> failing_cases(const run_data& run) {
    std::vector<const json*> failures;
    for (const auto& r : run.cases)
        if (r.value("failing", false))
            failures.push_back(&r);
    return failures;
}

/// "### Failing": the failing cases, the cases the run ended inside, the failing ratios.
std::string markdown_failing(const run_data& run, const std::vector<const json*>& failures) {
    std::ostringstream m;
    m << "\n### Failing\n\n";
    if (failures.empty() && run.started_unfinished.empty())
        m << "None.\n";
    for (const json* r : failures)
        m << "- `" << listed_name(*r) << "` **" << str(*r, "verdict") << "** ("
          << md_inline(outcome_line(*r), 60) << "): " << md_inline(str(*r, "reason")) << "\n";
    for (const auto& key : run.started_unfinished)
        m << "- `pitfall." << md_code(key)
          << "` **CRASH**: the run ended while it ran (no result recorded)\n";
    for (const auto& r : run.ratios)
        if (r.value("failing", false))
            m << "- ratio `"
              << md_code(str(r, "backend") + "." + str(r, "scenario") + "." + str(r, "name"))
              << "` = " << fmt("%.3g", num(r, "ratio")) << " outside "
              << md_inline(r.value("bound", json()).dump()) << "\n";
    return m.str();
}

/// "### Skipped": each group of UNSUPPORTED cases with its cause ("- 102 CUDA cases
/// UNSUPPORTED: <cause>"), a case alone by its name and reason. (Warnings are listed under
/// "Changed against the baseline".)
std::string markdown_skipped(const run_data& run) {
    std::string m;
    for (const auto& g : quiet_groups(run)) {
        if (g.verdict != "UNSUPPORTED")
            continue;
        if (g.cases.size() == 1)
            m += cat("- `", listed_name(*g.cases.front()), "` ", g.verdict, ": ",
                     md_inline(str(*g.cases.front(), "reason"), 300), "\n");
        else
            m +=
                cat("- ", std::to_string(g.cases.size()), " ", g.backend == "cuda" ? "CUDA" : "CPU",
                    " cases ", g.verdict, ": ", md_inline(g.cause, 300), "\n");
    }
    return m.empty() ? m : "\n### Skipped\n\n" + m;
}

/// The lines of "### Changed against the baseline": cases neither passing, unsupported nor
/// failing, then every timing that got faster.
std::vector<std::string> changed_lines(const run_data& run) {
    std::vector<std::string> lines;
    for (const auto& r : run.cases) {
        const std::string v = str(r, "verdict");
        if (v == "PASS" || v == "UNSUPPORTED" || r.value("failing", false))
            continue;
        lines.push_back(
            cat("- `", listed_name(r), "` ", v, ": ", md_inline(str(r, "reason")), "\n"));
    }
    for (const auto& r : run.cases) {
        const json timings = obj(r, "timings");
        for (const auto& [name, t] : timings.items())
            if (str(t, "verdict") == "FASTER")
                lines.push_back(cat("- `", listed_name(r), "` ", md_inline(name),
                                    " FASTER: ", md_inline(str(t, "reason")), "\n"));
    }
    return lines;
}

std::string markdown_changed(const run_data& run, bool any_failure) {
    std::string m = "\n### Changed against the baseline\n\n";
    const auto lines = changed_lines(run);
    for (const auto& line : lines)
        m += line;
    if (lines.empty())
        m += any_failure ? "Nothing besides the failures above.\n"
                         : "Nothing: every finished case met its baseline or was unsupported "
                           "here.\n";
    return m;
}

/// "### Loaded libraries": a warning for each library a case loaded other than the one the
/// doctor found, then every CUDA library the cases had mapped. Nothing where none was.
std::string markdown_libraries(const run_data& run) {
    const auto uses = libraries_loaded(run);
    const auto mismatches = library_mismatches(run);
    if (uses.empty() && mismatches.empty())
        return "";
    std::string m = "\n### Loaded libraries\n\n";
    for (const auto& mismatch : mismatches)
        m += cat("- **warning**: ", md_inline(mismatch.text(), 400), "\n");
    if (!mismatches.empty())
        m += "\n";
    m += "| library | version | file | cases |\n|---|---|---|---:|\n";
    for (const auto& u : uses)
        m += cat("| ", md_inline(u.name), " | ", md_inline(u.version.empty() ? "?" : u.version),
                 " | `", md_code(u.real_path), "` | ", std::to_string(u.cases.size()), " |\n");
    return m;
}

/// How to complete a run some selected cases have no result in.
std::string markdown_not_finished(const run_data& run) {
    if (run.not_finished.empty())
        return "";
    return cat("\n", std::to_string(run.not_finished.size()),
               " selected case(s) have no result; `pitfall run --resume ", md_code(run.dir),
               "` completes the run.\n");
}
} // namespace

std::string render_markdown(const run_data& run) {
    const auto counts = verdict_counts(run);
    const auto failures = failing_cases(run);
    return cat(markdown_headline(run, counts), markdown_profile(run), markdown_machine(run),
               markdown_verdicts(counts), markdown_predictions(run),
               markdown_failing(run, failures), markdown_skipped(run), flaky_markdown(run),
               markdown_changed(run, !failures.empty()), markdown_libraries(run),
               markdown_not_finished(run));
}

} // namespace pitfall::runner
