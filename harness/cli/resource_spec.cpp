// `pitfall resource-spec`: CTest's resource spec for this machine, from the probe.
#include "commands.hpp"
#include "environment_probe.hpp"

#include "fingerprint/fingerprint.hpp"

#include "pitfall/detail/json_file.hpp"
#include "pitfall/detail/result_file.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <string>

#include <unistd.h>

namespace pitfall::cli {
namespace {

void declare_resource_spec(CLI::App& sub, command_line& cl) {
    sub.add_option("--out", cl.spec_out, "write it here (atomically); default: standard output")
        ->type_name("FILE");
    add_locations(sub, cl, false);
    sub.footer(
        R"(The CUDA cases' tests ask for RESOURCE_GROUPS "gpus:1"; the build writes this file to
<build>/resource-spec.json, which the presets' test runs read (resourceSpecFile).

exit status:
  0    written
  2    bad usage, no pitfall-probe to run, or the file could not be written

examples:
  pitfall resource-spec
  pitfall resource-spec --out build/ci/resource-spec.json
  ctest --test-dir build/ci -j4 --resource-spec-file build/ci/resource-spec.json)");
}

/// The CTest resource spec of a fingerprint: a "gpus" slot per device the probe counted, else
/// one named "none" (the CUDA tests then run one at a time and report UNSUPPORTED with the
/// real reason, where CTest would otherwise refuse them for lack of resources).
nlohmann::json resource_spec(const nlohmann::json& fingerprint) {
    const nlohmann::json summary = runner::fingerprint_summary(fingerprint);
    const nlohmann::json count = summary.value("gpu_count", nlohmann::json(0));
    nlohmann::json gpus = nlohmann::json::array();
    const long long n = count.is_number_integer() ? count.get<long long>() : 0;
    for (long long id = 0; id < std::min(n, 1024LL); ++id)
        gpus.push_back({{"id", std::to_string(id)}, {"slots", 1}});
    if (gpus.empty())
        gpus.push_back({{"id", "none"}, {"slots", 1}});
    return {{"version", {{"major", 1}, {"minor", 0}}}, {"local", {{{"gpus", gpus}}}}};
}

int run_resource_spec(const CLI::App&, command_line& cl) {
    auto located = locate_probe(cl.index_flag);
    if (!located.is_ok())
        return input_error(located.error());
    const std::string& probe = located->probe;
    if (::access(probe.c_str(), X_OK) != 0)
        return usage_error("no environment probe to run at " + probe +
                               " (build the pitfall_probe target)",
                           "resource-spec");
    temporary_folder logs;
    if (logs.path.empty())
        return usage_error(std::string("cannot make a folder under $TMPDIR: ") +
                           std::strerror(errno));
    const std::string text =
        pitfall::detail::dump_safe(resource_spec(runner::take_fingerprint(probe, logs.path, true)),
                                   2) +
        "\n";
    if (cl.spec_out.empty()) {
        std::cout << text;
        return exit_ok;
    }
    if (auto written = pitfall::write_file_atomically(cl.spec_out, text); !written.is_ok())
        return input_error(written);
    return exit_ok;
}

} // namespace

command resource_spec_command() {
    return {"resource-spec",
            "CTest's resource spec for this machine, from the probe: one \"gpus\"\n"
            "slot per CUDA device (one slot \"none\" without any), so that\n"
            "`ctest -j` runs one CUDA case per device at a time",
            declare_resource_spec, run_resource_spec};
}

} // namespace pitfall::cli
