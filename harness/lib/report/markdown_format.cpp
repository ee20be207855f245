// The Markdown report, for step summaries and pull-request comments.
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
} // namespace

std::string render_markdown(const run_data& run) {
    const auto counts = verdict_counts(run);
    std::ostringstream m;
    const bool failing = run_failing(run);
    const json fp = fingerprint_summary(run);
    m << "## pitfall: "
      << (failing                     ? "failing"
          : !run.not_finished.empty() ? "incomplete"
                                      : "passing")
      << "\n\n";
    m << counts_line(counts) << " (" << run.cases.size() << " of "
      << run.cases.size() + run.not_finished.size() << " cases finished";
    if (run.resumed > 0)
        m << ", resumed " << run.resumed << "x";
    m << ")\n\n";
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
    m << markdown_machine(run);

    m << "| verdict | cases |\n|---|---:|\n";
    for (const auto& [v, n] : counts)
        m << "| " << v << " | " << n << " |\n";
    if (const auto predicted = predictions(run); !predicted.empty()) {
        m << "\n### Predictions\n\n"
          << predicted.size()
          << " reproduce case(s) apply a rule or table instead of showing the failure: their "
             "verdict judges the rule, and they are not counted as reproductions.\n\n";
        for (const json* r : predicted)
            m << "- `" << md_code(str(*r, "test", str(*r, "case"))) << "` " << str(*r, "verdict")
              << ": " << md_inline(str(*r, "prediction")) << "\n";
    }

    std::vector<const json*> failures, warnings;
    for (const auto& r : run.cases) {
        if (r.value("failing", false))
            failures.push_back(&r);
        else if (is_warning(str(r, "verdict")))
            warnings.push_back(&r);
    }
    m << "\n### Failing\n\n";
    if (failures.empty() && run.started_unfinished.empty())
        m << "None.\n";
    for (const json* r : failures)
        m << "- `" << md_code(str(*r, "test", str(*r, "case"))) << "` **" << str(*r, "verdict")
          << "** (" << md_inline(outcome_line(*r), 60) << "): " << md_inline(str(*r, "reason"))
          << "\n";
    for (const auto& key : run.started_unfinished)
        m << "- `pitfall." << md_code(key)
          << "` **CRASH**: the run ended while it ran (no result recorded)\n";
    for (const auto& r : run.ratios)
        if (r.value("failing", false))
            m << "- ratio `"
              << md_code(str(r, "backend") + "." + str(r, "scenario") + "." + str(r, "name"))
              << "` = " << fmt("%.3g", num(r, "ratio")) << " outside "
              << md_inline(r.value("bound", json()).dump()) << "\n";

    m << "\n### Changed against the baseline\n\n";
    std::size_t changed = 0;
    for (const auto& r : run.cases) {
        const std::string v = str(r, "verdict");
        if (v == "PASS" || v == "UNSUPPORTED" || r.value("failing", false))
            continue;
        ++changed;
        m << "- `" << md_code(str(r, "test", str(r, "case"))) << "` " << v << ": "
          << md_inline(str(r, "reason")) << "\n";
    }
    for (const auto& r : run.cases) {
        const json timings = obj(r, "timings");
        for (const auto& [name, t] : timings.items())
            if (str(t, "verdict") == "FASTER") {
                ++changed;
                m << "- `" << md_code(str(r, "test", str(r, "case"))) << "` " << md_inline(name)
                  << " FASTER: " << md_inline(str(t, "reason")) << "\n";
            }
    }
    if (changed == 0)
        m << (failures.empty()
                  ? "Nothing: every finished case met its baseline or was unsupported here.\n"
                  : "Nothing besides the failures above.\n");
    if (!run.not_finished.empty())
        m << "\n"
          << run.not_finished.size() << " selected case(s) have no result; `pitfall run --resume "
          << md_code(run.dir) << "` completes the run.\n";
    return m.str();
}

} // namespace pitfall::runner
