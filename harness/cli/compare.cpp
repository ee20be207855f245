// `pitfall compare`: case by case, what changed from one run to another.
#include "commands.hpp"

#include "judge/compare.hpp"

namespace pitfall::cli {
namespace {

void declare_compare(CLI::App& sub, command_line& cl) {
    sub.add_option("RUN", cl.runs, "RUN_A RUN_B: the reference run folder, then the candidate");
    sub.add_flag("--json", cl.as_json, "the comparison as JSON");
    add_checked(sub, "--timing-floor", cl.compare.timing_floor, parse_fraction,
                "a fraction in [0, 1) (0.10 = 10%)",
                "smallest relative slowdown that is PERF_REGRESSION (default 0.10)")
        ->type_name("F");
    add_locations(sub, cl, false);
    sub.footer(
        R"(Run B is judged against run A's observations as if A were the baseline: outcomes by name,
tracked device bytes exactly, peak RSS within 25%, checks; times (Mann-Whitney U and a
bootstrap interval of the median ratio) only when both runs share a fingerprint id.
Exit 0 when no change would fail, 1 when one would.

examples:
  pitfall compare runs/a runs/b
  pitfall compare runs/a runs/b --json --timing-floor 0.2)");
}

int run_compare(const CLI::App&, command_line& cl) {
    if (cl.runs.size() != 2)
        return usage_error("compare needs two run folders: pitfall compare RUN_A RUN_B", "compare");
    cl.compare.run_a = cl.runs[0];
    cl.compare.run_b = cl.runs[1];
    cl.compare.as_json = cl.as_json;
    cl.compare.argv = cl.argv;
    return runner::compare_runs(cl.compare);
}

} // namespace

command compare_command() {
    return {"compare",
            "case by case, what changed from run A to run B (outcome, time,\n"
            "memory, numerics) and the verdict each change would get",
            declare_compare, run_compare};
}

} // namespace pitfall::cli
