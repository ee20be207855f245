#include "process_parts.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <fcntl.h>
#include <iostream>
#include <random>
#include <sstream>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace pitfall {
namespace process_parts {

containment_state g_contained;
std::mutex g_running_mutex;
std::set<pid_t> g_running_cases;

void tell_guardian(char what, pid_t pgid) {
    if (!g_contained.active || g_contained.guardian_fd < 0)
        return;
    const std::string line = what + std::to_string(pgid) + "\n";
    (void)!::write(g_contained.guardian_fd, line.data(), line.size());
}

std::set<pid_t> running_cases() {
    const std::lock_guard<std::mutex> lock(g_running_mutex);
    return g_running_cases;
}

void forget_running_case(pid_t pid) {
    const std::lock_guard<std::mutex> lock(g_running_mutex);
    g_running_cases.erase(pid);
}

namespace {
/// The cgroup v2 path of `pid` ("0::<path>" of /proc/PID/cgroup); "" where none is read.
std::string cgroup_path_of(pid_t pid) {
    std::string text;
    if (!read_file("/proc/" + std::to_string(pid) + "/cgroup", text))
        return "";
    const std::size_t at = text.rfind("0::");
    if (at == std::string::npos)
        return "";
    const std::size_t end = text.find('\n', at);
    return text.substr(at + 3, end == std::string::npos ? std::string::npos : end - at - 3);
}

/// The processes this harness adopted (its descendants by parents) that the case of `token`
/// (run in `cgroup_dir`, "" without one) may end. Not those of another case still running:
/// carrying another case's token of this run, or in another case's cgroup of this run. One
/// that says whose it is in neither way (its environment cleared, no cgroup) could be any
/// running case's: it is ended only when no other case runs (else by the last case's end, or
/// the run's). With --jobs, a case's double-forked helper lives as long as its own case.
std::vector<pid_t> adopted_by_this_case(const std::map<pid_t, proc_entry>& table,
                                        const std::string& token, pid_t child,
                                        const std::string& cgroup_dir) {
    const std::string run_entry =
        std::string(case_token_env) + "=" + token.substr(0, token.find('/') + 1);
    std::vector<pid_t> cases_marked = processes_marked(table, run_entry, false);
    const std::set<pid_t> marked(cases_marked.begin(), cases_marked.end());
    const std::string run_leaf =
        g_contained.run_cgroup.empty()
            ? std::string()
            : g_contained.run_cgroup.substr(g_contained.run_cgroup.rfind('/')) + "/case-";
    const std::string own_leaf =
        cgroup_dir.empty() ? std::string() : cgroup_dir.substr(cgroup_dir.rfind('/'));
    std::set<pid_t> others = running_cases();
    others.erase(child);
    std::vector<pid_t> out;
    for (const pid_t pid : descendants(table, child)) {
        if (marked.count(pid) != 0)
            continue; // a case's own: ours were found by their token, another's are its
        const std::string path = cgroup_path_of(pid);
        const bool in_a_case = !run_leaf.empty() && path.find(run_leaf) != std::string::npos;
        const bool in_ours =
            !own_leaf.empty() && path.size() >= own_leaf.size() &&
            path.compare(path.size() - own_leaf.size(), own_leaf.size(), own_leaf) == 0;
        if (in_ours || (!in_a_case && others.empty()))
            out.push_back(pid);
    }
    return out;
}
} // namespace

void end_case_processes(const std::string& token, pid_t child, const std::string& cgroup_dir) {
    const auto until = clock_type::now() + std::chrono::seconds(5);
    if (!cgroup_dir.empty()) {
        while (cgroup_populated(cgroup_dir) && clock_type::now() < until) {
            (void)write_text(cgroup_dir + "/cgroup.kill", "1");
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        reap_zombie_children(child);
    }
    // Then the sweep, whatever the mode: a process that moved itself out of the case's cgroup
    // (into another it may write to) is no longer in what cgroup.kill ends, but it still
    // carries the token, or descends from us (the subreaper) by its parents.
    const std::string entry = std::string(case_token_env) + "=" + token;
    for (;;) {
        const auto table = process_table();
        std::vector<pid_t> left = processes_marked(table, entry, true);
        if (g_contained.active)
            for (const pid_t pid : adopted_by_this_case(table, token, child, cgroup_dir))
                left.push_back(pid);
        left.erase(std::remove(left.begin(), left.end(), child), left.end());
        for (const pid_t pid : left)
            ::kill(pid, SIGKILL);
        reap_zombie_children(child);
        if (left.empty() || clock_type::now() > until)
            return;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

} // namespace process_parts

using namespace process_parts;

std::vector<int> marked_processes(const std::string& token_prefix) {
    return processes_marked(process_table(), std::string(case_token_env) + "=" + token_prefix,
                            false);
}

// ---- the run's containment -----------------------------------------------------------------

namespace {
std::string random_token() {
    std::random_device device;
    std::ostringstream out;
    out << std::hex << device() << device();
    return out.str();
}
} // namespace

status_or<containment> contain_cases(const std::string& mode) {
    if (mode != "auto" && mode != "cgroup" && mode != "subreaper")
        return status::error(
            pitfall_error::bad_environment,
            "PITFALL_CONTAINMENT='" + mode + "': expected auto, cgroup or subreaper", stage::init);
    if (g_contained.active)
        return containment{g_contained.run_cgroup.empty() ? "subreaper" : "cgroup",
                           g_contained.run_cgroup, g_contained.run_token};
    containment held{"subreaper", "PITFALL_CONTAINMENT=subreaper", random_token()};
    std::string planned;
    if (mode != "subreaper")
        planned = planned_run_cgroup(held.run_token, held.detail);
    // Orphaned descendants of a case (a setsid grandchild whose parent exited) come back to us,
    // not to init: each case's sweep finds them by their parents.
    if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
        return status::from_errno(errno, "prctl(PR_SET_CHILD_SUBREAPER)", stage::init);
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
        return status::from_errno(errno, "pipe for the guardian", stage::init);
    std::cout.flush();
    // The guardian first, the cgroup after: a kill from here on leaves no cgroup behind.
    const pid_t guardian = ::fork();
    if (guardian < 0)
        return status::from_errno(errno, "fork of the guardian", stage::init);
    if (guardian == 0) {
        ::close(fds[1]);
        guard(fds[0], held.run_token, planned);
    }
    ::close(fds[0]);
    g_contained.active = true;
    g_contained.guardian = guardian;
    g_contained.guardian_fd = fds[1];
    g_contained.run_token = held.run_token;
    if (!planned.empty() && make_run_cgroup(planned, held.detail)) {
        g_contained.run_cgroup = planned;
        held.method = "cgroup";
        held.detail = planned;
    }
    if (mode == "cgroup" && held.method != "cgroup") {
        end_containment();
        return status::error(pitfall_error::bad_environment,
                             "PITFALL_CONTAINMENT=cgroup: " + held.detail, stage::init);
    }
    return held;
}

void end_containment() {
    if (!g_contained.active)
        return;
    (void)!::write(g_contained.guardian_fd, "q\n", 2);
    ::close(g_contained.guardian_fd);
    int status = 0;
    while (::waitpid(g_contained.guardian, &status, 0) < 0 && errno == EINTR) {
    }
    if (!g_contained.run_cgroup.empty())
        ::rmdir(g_contained.run_cgroup.c_str());
    g_contained.active = false;
    g_contained.guardian = -1;
    g_contained.guardian_fd = -1;
    g_contained.run_cgroup.clear();
    g_contained.run_token.clear();
    g_contained.case_count = 0;
}

} // namespace pitfall
