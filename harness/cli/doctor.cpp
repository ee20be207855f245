// `pitfall doctor`: what is wrong with this machine for CUDA work, from the probe's answers.
#include "commands.hpp"
#include "environment_probe.hpp"

#include "doctor/doctor.hpp"
#include "fingerprint/fingerprint.hpp"
#include "model/index.hpp"
#include "util/suggest.hpp"

#include "pitfall/detail/json_file.hpp"

#include <cerrno>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

namespace pitfall::cli {
namespace {

void declare_doctor(CLI::App& sub, command_line& cl) {
    sub.add_flag("--json", cl.as_json, "the findings as JSON (reports/schema/doctor.schema.json)");
    sub.add_option("--explain", cl.explain,
                   "what finding ID checks, why it matters, the fix\n(all: every finding)")
        ->type_name("ID");
    add_locations(sub, cl, false);
    sub.footer(
        R"(It runs pitfall-probe (a child process: a broken driver or library cannot take pitfall
down), which asks the driver, NVML, the CUDA runtime, cuBLAS and cuDNN themselves, and applies
the rules of docs/cuda-rules.md to what they say.

exit status:
  0    CUDA work can run here (warnings may remain)
  1    a finding is an error: CUDA work cannot run here as it is
  2    bad usage (unknown flag, unknown finding ID), or no pitfall-probe to run

examples:
  pitfall doctor
  pitfall doctor --json
  pitfall doctor --explain stub-driver
  pitfall doctor --explain all)");
}

void print_rule(const runner::rule_doc& rule) {
    std::cout << rule.id << "\n  checks    " << rule.checks << '\n';
    for (const auto& [label, value] : {std::pair{"why", &rule.why},
                                       {"fix", &rule.fix},
                                       {"case", &rule.reproduced_by},
                                       {"rule", &rule.rule}})
        if (!value->empty())
            std::cout << "  " << label << std::string(10 - std::strlen(label), ' ') << *value
                      << '\n';
}

/// --explain ID: the finding's documentation, or every finding's (all).
int explain(const std::string& id) {
    if (id == "all") {
        for (const auto& rule : runner::doctor_rules())
            print_rule(rule);
        return exit_ok;
    }
    const auto rule = runner::find_rule(id);
    if (!rule) {
        std::vector<std::string> ids{"all"};
        for (const auto& r : runner::doctor_rules())
            ids.push_back(r.id);
        return usage_error("--explain " + id + ": no such finding" + runner::did_you_mean(id, ids),
                           "doctor");
    }
    print_rule(*rule);
    return exit_ok;
}

/// The scenario programs of the index, by scenario: their kernel images are checked against
/// the devices. None where no index is found, or it cannot be read.
std::vector<std::pair<std::string, std::string>>
scenario_programs(const std::optional<runner::installation>& installation) {
    std::vector<std::pair<std::string, std::string>> programs;
    if (!installation)
        return programs;
    if (auto index = runner::load_index(installation->index); index.is_ok())
        for (const auto& s : index->scenarios)
            programs.emplace_back(s.description.name, s.program);
    return programs;
}

int run_doctor(const CLI::App&, command_line& cl) {
    if (!cl.explain.empty())
        return explain(cl.explain);
    auto located = locate_probe(cl.index_flag);
    if (!located.is_ok())
        return input_error(located.error());
    const std::string& probe = located->probe;
    const auto programs = scenario_programs(located->installation);
    if (::access(probe.c_str(), X_OK) != 0)
        return usage_error("no environment probe to run at " + probe +
                           " (build the pitfall_probe target)");
    temporary_folder logs;
    if (logs.path.empty())
        return usage_error(std::string("cannot make a folder under $TMPDIR: ") +
                           std::strerror(errno));
    auto fingerprint = runner::take_fingerprint(probe, logs.path);
    fingerprint["build_images"] = runner::build_images(programs);
    fingerprint["toolkits"] = runner::toolkit_facts_of_environment(); // doctor only: runs nvcc
    const runner::diagnosis d = runner::diagnose(fingerprint);
    if (cl.as_json) {
        nlohmann::json out = d.to_json();
        out["facts"] = runner::fingerprint_summary(fingerprint);
        std::cout << pitfall::detail::dump_safe(out, 2) << '\n';
    } else
        std::cout << runner::render_diagnosis(d);
    return d.cuda_usable() ? exit_ok : exit_failed;
}

} // namespace

command doctor_command() {
    return {"doctor",
            "what is wrong with this machine for CUDA work: findings worst first,\n"
            "each with the evidence, why it matters, the fix and the case that\n"
            "reproduces it",
            declare_doctor, run_doctor};
}

} // namespace pitfall::cli
