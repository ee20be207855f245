// `pitfall bundle RUN [--out FILE]`: one .tar.gz to attach to a bug report (the run folder, the
// doctor's findings now, the loaded libraries, kernel messages, nvidia-smi), secrets redacted.
#include "commands.hpp"
#include "environment_probe.hpp"

#include "bundle/bundle.hpp"
#include "doctor/doctor.hpp"
#include "fingerprint/fingerprint.hpp"
#include "model/index.hpp"

#include <cerrno>
#include <cstring>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

namespace pitfall::cli {
namespace {

/// --out of `pitfall bundle` (its own: the shared command_line holds no bundle options).
std::string& bundle_out_flag() {
    static std::string out;
    return out;
}

void declare_bundle(CLI::App& sub, command_line& cl) {
    sub.add_option("RUN", cl.runs, "the run folder to bundle");
    sub.add_option("--out", bundle_out_flag(),
                   "the archive to write (default: <RUN's name>-bundle.tar.gz in the\n"
                   "working folder, which must not be the folder of the runs)")
        ->type_name("FILE");
    add_locations(sub, cl, false);
    sub.footer(
        R"(The archive holds the run folder, `pitfall doctor --json` and the fingerprint taken now,
the CUDA libraries each case loaded, the NVIDIA kernel messages of this boot (dmesg,
journalctl -k -b or /dev/kmsg), `nvidia-smi -q` and `nvidia-bug-report.sh` where installed
(each ended after its time and cut at its size), and bundle.json / README.txt listing what
is there and what is missing, and why. Values of environment variables whose names contain
TOKEN, KEY, SECRET, PASSWORD or CREDENTIAL are redacted in every file of the copy. It is
written whole or not at all.

exit status:
  0    the bundle was written
  2    bad usage, RUN is not a run folder, or the archive cannot be written at --out

examples:
  pitfall bundle runs/a
  pitfall bundle runs/a --out /tmp/issue-1234.tar.gz)");
}

/// `pitfall doctor --json` as of now, and the fingerprint it read; why not where it cannot run.
void run_doctor_for_bundle(const command_line& cl, runner::bundle_options& options) {
    auto located = locate_probe(cl.index_flag);
    if (!located.is_ok()) {
        options.doctor_problem = located.error().message();
        return;
    }
    if (::access(located->probe.c_str(), X_OK) != 0) {
        options.doctor_problem = "no environment probe to run at " + located->probe;
        return;
    }
    std::vector<std::pair<std::string, std::string>> programs;
    if (located->installation)
        if (auto index = runner::load_index(located->installation->index); index.is_ok())
            for (const auto& s : index->scenarios)
                programs.emplace_back(s.description.name, s.program);
    temporary_folder logs;
    if (logs.path.empty()) {
        options.doctor_problem =
            std::string("cannot make a folder under $TMPDIR: ") + std::strerror(errno);
        return;
    }
    options.fingerprint = runner::take_fingerprint(located->probe, logs.path);
    options.fingerprint["build_images"] = runner::build_images(programs);
    const runner::diagnosis d = runner::diagnose(options.fingerprint);
    options.doctor = d.to_json();
    options.doctor["facts"] = runner::fingerprint_summary(options.fingerprint);
}

int run_bundle(const CLI::App&, command_line& cl) {
    if (cl.runs.size() != 1)
        return usage_error("bundle needs one run folder: pitfall bundle RUN [--out FILE]",
                           "bundle");
    runner::bundle_options options;
    options.run_dir = cl.runs[0];
    options.out = bundle_out_flag();
    run_doctor_for_bundle(cl, options);
    auto written = runner::write_bundle(options);
    if (!written.is_ok())
        return input_error(written.error());
    std::cout << "bundle: " << written->path << '\n';
    for (const auto& item : written->items)
        if (item.state != "included")
            std::cout << "  " << item.file << ": " << item.state << " (" << item.why << ")\n";
    return exit_ok;
}

} // namespace

command bundle_command() {
    return {"bundle",
            "one .tar.gz for a bug report: the run folder, the doctor's findings,\n"
            "the loaded libraries, NVIDIA kernel messages and nvidia-smi, with\n"
            "secret-named environment values redacted",
            declare_bundle, run_bundle};
}

} // namespace pitfall::cli
