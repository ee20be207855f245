// `pitfall list`: every case with its labels.
#include "commands.hpp"

#include "model/locate.hpp"
#include "run/runner.hpp"

namespace pitfall::cli {
namespace {

void declare_list(CLI::App& sub, command_line& cl) {
    sub.add_flag("--json", cl.as_json,
                 "JSON: test, scenario, backend, variant, kind, labels, timeout, doc");
    add_filters(sub, cl.run.common.filter);
    add_locations(sub, cl, true);
    sub.footer(R"(examples:
  pitfall list
  pitfall list --backend cpu --label reproduce
  pitfall list --scenario float64_inputs --json)");
}

int run_list(const CLI::App&, command_line& cl) {
    if (auto bad = split_filter(cl.run.common.filter))
        return usage_error(*bad, "list");
    auto at = runner::locate(cl.index_flag, cl.expected_flag);
    if (!at.is_ok())
        return input_error(at.error());
    cl.run.common.index_path = at->index;
    cl.run.common.expected_dir = at->expected;
    return runner::list_cases(cl.run.common, cl.as_json);
}

} // namespace

command list_command() {
    return {"list", "every case with its labels", declare_list, run_list};
}

} // namespace pitfall::cli
