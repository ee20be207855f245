// The gate as Slurm's Prolog or HealthCheckProgram: NHC's contract, the check drains the node
// itself (`scontrol update NodeName=N State=DRAIN Reason=...`), and a node comes back only when
// a later gate passes and it was pitfall that drained it. scontrol is always started with an
// argv, never through a shell: the reason is one argument whatever it holds.
#include "gate/gate_parts.hpp"

#include "pitfall/detail/process.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <unistd.h>

namespace pitfall::runner::gate_parts {
namespace {
using nlohmann::json;

/// scontrol on PATH, else where Slurm's packages put it (a prolog's PATH may be minimal).
std::string find_scontrol() {
    std::string path = std::getenv("PATH") != nullptr ? std::getenv("PATH") : "";
    path += ":/usr/bin:/usr/local/bin:/usr/sbin:/usr/local/sbin";
    std::istringstream folders(path);
    std::string folder;
    while (std::getline(folders, folder, ':'))
        if (!folder.empty() && ::access((folder + "/scontrol").c_str(), X_OK) == 0)
            return folder + "/scontrol";
    return "";
}

struct scontrol_answer {
    bool ok = false;
    std::optional<int> exit_code;
    std::string output;
    std::string error;
};

scontrol_answer run_scontrol(const std::vector<std::string>& args) {
    scontrol_answer answer;
    const std::string scontrol = find_scontrol();
    if (scontrol.empty()) {
        answer.error = "scontrol not found on PATH or in /usr/bin, /usr/local/bin";
        return answer;
    }
    char pattern[] = "/tmp/pitfall-scontrol-XXXXXX";
    const int fd = ::mkstemp(pattern);
    if (fd < 0) {
        answer.error = "cannot make a file for scontrol's output under /tmp";
        return answer;
    }
    ::close(fd);
    process_request req;
    req.argv = {scontrol};
    req.argv.insert(req.argv.end(), args.begin(), args.end());
    req.output_path = pattern;
    req.timeout_seconds = 30;
    const process_outcome out = run_process(req);
    answer.output = read_tail(pattern, std::size_t{64} * 1024);
    ::unlink(pattern);
    answer.exit_code = out.exit_code;
    answer.ok = out.started && out.exit_code == 0;
    if (!out.started)
        answer.error = "scontrol did not start: " + out.start_error;
    else if (out.timed_out)
        answer.error = "scontrol did not answer in 30 s";
    else if (!answer.ok)
        answer.error = "scontrol failed: " + answer.output.substr(0, 400);
    return answer;
}

/// Whether `scontrol -o show node` says the node is drained (DRAIN in its state) with a
/// reason pitfall gave ("pitfall: ..."): the only drain a passing gate undoes.
bool drained_by_pitfall(const std::string& shown) {
    const auto state = shown.find("State=");
    if (state == std::string::npos)
        return false;
    const std::string state_text = shown.substr(state, shown.find(' ', state) - state);
    if (state_text.find("DRAIN") == std::string::npos)
        return false;
    const auto reason = shown.find(" Reason=");
    return reason != std::string::npos && shown.compare(reason + 8, 8, "pitfall:") == 0;
}

} // namespace

json act_on_slurm(const gate_options& options, const std::string& node, bool drain, bool admitted,
                  const std::string& reason) {
    json done = {{"mode", options.slurm == slurm_mode::prolog ? "prolog" : "health-check"},
                 {"action", "none"}};
    std::vector<std::string> args;
    if (drain) {
        args = {"update", "NodeName=" + node, "State=DRAIN", "Reason=" + reason};
        done["action"] = "drain";
    } else if (admitted && options.resume_on_pass) {
        const scontrol_answer shown = run_scontrol({"-o", "show", "node", node});
        if (!shown.ok) { // the resume could not even be considered: said as a failed resume
            done["action"] = "resume";
            done["error"] = shown.error;
            done["exit_code"] = shown.exit_code ? json(*shown.exit_code) : json(nullptr);
            return done;
        }
        if (!drained_by_pitfall(shown.output))
            return done;
        args = {"update", "NodeName=" + node, "State=RESUME"};
        done["action"] = "resume";
    } else
        return done;
    const scontrol_answer answer = run_scontrol(args);
    done["command"] = json::array({"scontrol"});
    for (const auto& a : args)
        done["command"].push_back(a);
    done["exit_code"] = answer.exit_code ? json(*answer.exit_code) : json(nullptr);
    if (!answer.ok)
        done["error"] = answer.error;
    return done;
}

} // namespace pitfall::runner::gate_parts
