// `pitfall bless`: write a run's observations into expected/.
#include "commands.hpp"

#include "judge/bless.hpp"
#include "model/locate.hpp"

#include <string>
#include <utility>

namespace pitfall::cli {
namespace {

void declare_bless(CLI::App& sub, command_line& cl) {
    runner::bless_options& b = cl.bless;
    sub.add_option("RUN", cl.runs, "one run folder, or several of the same cases and machine");
    add_filter(sub, "--scenario", b.scenarios, "S", "only this scenario's cases");
    add_filter(sub, "--case", b.cases, "KEY",
               "only this case (cpu.float64_inputs.reproduce); a crashed or\n"
               "timed-out case is blessed only when named so (an expected SIGSEGV)");
    sub.add_option("--profile", b.profile,
                   "write into expected/P (default: the profile that judged each case)")
        ->type_name("P");
    add_checked(sub, "--ratio-tolerance", b.ratio_tolerance, parse_ratio_tolerance,
                "a factor in (1, 1000]",
                "each ratio whose two cases are blessed gets the bound [r / F, r x F]\n"
                "around the measured r; from several runs [lowest / F, highest x F]\n"
                "around their ratios (default 2)")
        ->type_name("F");
    sub.add_flag("--ratios-only", b.ratios_only,
                 "write only the ratios the selected cases measure; each case's\n"
                 "entry stays as it is");
    sub.add_flag("--memory-only", b.memory_only,
                 "write only each case's peak RSS bound (provenance.rss_method and\n"
                 "rss_run say how and where it was measured); the rest of each\n"
                 "entry stays as it is, and the peak is judged under this run's\n"
                 "fingerprint id from then on")
        ->excludes("--ratios-only");
    sub.add_flag("--dry-run", b.dry_run, "print the diff, write nothing");
    sub.add_flag("--no-timings", b.no_timings,
                 "write no timed series (and drop the entries' old ones): times\n"
                 "measured here must not gate later runs here (a shared, loaded host)");
    add_locations(sub, cl, true);
    sub.footer(
        R"(Each entry is marked observed with the evidence of its run: today's date, the run's
fingerprint summary and id, the pitfall version that ran it and the case's run; files are
written whole and renamed into place. Each run blessed from is kept, gzip'd, under
expected/<profile>/runs/<id>/ (results.jsonl, fingerprint.json), named by its entries; a kept
run no entry names any more is removed. A run made with PITFALL_INJECT is refused. A ratio of
scenario.json whose two cases are both blessed is written as an observed bound (judged only
under this fingerprint); a documented ratio bound is kept, and the measured ratio printed.

examples:
  pitfall bless runs/a --dry-run
  pitfall bless runs/a runs/b runs/c
  pitfall bless runs/x --case cpu.float64_inputs.reproduce --profile host
  pitfall bless runs/a --ratios-only --ratio-tolerance 3)");
}

int run_bless(const CLI::App&, command_line& cl) {
    if (cl.runs.empty())
        return usage_error("bless needs a run folder: pitfall bless RUN [RUN...]", "bless");
    for (const auto& [flag, values] :
         {std::pair{"--scenario", &cl.bless.scenarios}, std::pair{"--case", &cl.bless.cases}})
        if (auto bad = split_commas(*values, flag))
            return usage_error(*bad, "bless");
    for (std::string& key : cl.bless.cases)
        key = case_key_from_user(key);
    auto at = runner::locate(cl.index_flag, cl.expected_flag);
    if (!at.is_ok())
        return input_error(at.error());
    auto expected = runner::required_path(at.value(), at->expected, "baselines folder", "expected",
                                          "give --expected DIR or set PITFALL_EXPECTED");
    if (!expected.is_ok())
        return input_error(expected.error());
    cl.bless.common.index_path = at->index;
    cl.bless.common.expected_dir = expected.value();
    cl.bless.run_dirs = cl.runs;
    return runner::bless_run(cl.bless);
}

} // namespace

command bless_command() {
    return {"bless",
            "write a run's observations into expected/ (prints the diff); with\n"
            "several runs of one machine, each case from the run with the lowest\n"
            "median time (the least disturbed)",
            declare_bless, run_bless};
}

} // namespace pitfall::cli
