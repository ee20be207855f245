// What the files of pitfall's child-process handling share, private to harness/core: the run's
// containment state and the cases running now, the reads of /proc, the cgroups and the guardian.
// process.cpp runs one process; containment.cpp keeps the run's containment and ends a case's
// processes; process_table.cpp reads /proc; cgroups.cpp makes and removes the cgroups;
// guardian.cpp is the guardian process's whole life.
#pragma once

#include "pitfall/detail/process.hpp"

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <sys/types.h>
#include <vector>

namespace pitfall::process_parts {

using clock_type = std::chrono::steady_clock;

// ---- containment.cpp -----------------------------------------------------------------------

// Set once by contain_cases(): then this process is a subreaper, g_guardian watches over the
// run, and (where one could be made) each case runs in a cgroup under g_run_cgroup.
struct containment_state {
    bool active = false;
    pid_t guardian = -1;
    int guardian_fd = -1; ///< our end of the guardian's pipe (close-on-exec: no case holds it)
    std::string run_cgroup;
    std::string run_token;
    std::atomic<unsigned> case_count{0};
};
extern containment_state g_contained;

// The case processes running now, each watched by its own run_process call (`pitfall run
// --jobs N` runs several at once from threads): one case's clean-up must neither kill another
// case's processes nor reap another's exit status.
extern std::mutex g_running_mutex;
extern std::set<pid_t> g_running_cases;

/// Tells the guardian a case's process group, to end should the harness die ("+<pgid>"), or
/// that the case is over ("-<pgid>"). One write of a short line each: atomic on a pipe.
void tell_guardian(char what, pid_t pgid);

std::set<pid_t> running_cases();
/// Takes a case that has been reaped off the running ones.
void forget_running_case(pid_t pid);

/// Ends (KILL) every process of a case that has finished. In the case's cgroup (`cgroup_dir`
/// not empty), everything in it, however it left the process group: cgroup.kill until it is
/// empty. Then, in either mode, what carries its token and, under containment, every
/// descendant but `child` (still unreaped, so that its pid and group id are not reused
/// meanwhile), found by scanning /proc. Either until none is left or 5 s have passed (a
/// process stuck in a driver call). What became our child is reaped.
void end_case_processes(const std::string& token, pid_t child, const std::string& cgroup_dir);

// ---- process_table.cpp ---------------------------------------------------------------------

bool read_file(const std::string& path, std::string& text);
bool write_text(const std::string& path, const char* text);

/// Every process's parent and whether it has exited but is not reaped ("Z").
struct proc_entry {
    pid_t ppid = 0;
    bool zombie = false;
};
std::map<pid_t, proc_entry> process_table();

/// The live processes but us whose environment holds `entry_prefix` ("PITFALL_CASE_TOKEN=
/// <token>") as the start of one of its entries; `whole` asks for the entry to be exactly that.
std::vector<pid_t> processes_marked(const std::map<pid_t, proc_entry>& table,
                                    const std::string& entry_prefix, bool whole);

/// Our live descendants but the guardian (and its own, none), `spare`, and the other running
/// cases and theirs.
std::vector<pid_t> descendants(const std::map<pid_t, proc_entry>& table, pid_t spare);

/// Our children that exited and wait to be reaped, but the guardian, `spare` and the running
/// cases (each reaped by its own watcher, which reads its exit status).
void reap_zombie_children(pid_t spare);

// ---- cgroups.cpp ---------------------------------------------------------------------------

/// Whether a cgroup still holds a live process (its cgroup.events; a zombie does not count).
bool cgroup_populated(const std::string& dir);

/// A case's own cgroup: made before the fork, the child moves itself in, cgroup.kill ends
/// whatever is in it however it left the process group.
struct case_cgroup {
    std::string dir;
    int procs_fd = -1; ///< <dir>/cgroup.procs, written "0" by a forked child
    int dir_fd = -1;   ///< <dir> itself, for a child cloned straight into it

    void make();
    /// Whether `pid` is in it (/proc/<pid>/cgroup ends with its folder's name).
    bool holds(pid_t pid) const;
    void kill() const;
    /// Once what was in it is gone and reaped: waits (up to 5 s) for it to empty, removes it.
    void remove();
};

/// A child started straight in the cgroup `cgroup_dir_fd` (clone3 with CLONE_INTO_CGROUP,
/// Linux 5.7): like fork, but the kernel places it at creation, where a forked child writing
/// its own pid into cgroup.procs waits for the cgroup migration (~10 ms a case here). -1 with
/// errno where the kernel or the cgroup refuses; the caller forks instead.
pid_t clone_into_cgroup(int cgroup_dir_fd);

/// Where the run's cgroup goes: a folder under ours; "" with the reason where there is none.
std::string planned_run_cgroup(const std::string& token, std::string& why);

/// Makes the run's cgroup, proved by moving a process into it; false with the reason where
/// that cannot be done.
bool make_run_cgroup(const std::string& dir, std::string& why);

/// Removes a run's cgroup and its cases' (empty by now, or soon: up to 1 s).
void remove_cgroup_tree(const std::string& dir);

// ---- guardian.cpp --------------------------------------------------------------------------

/// The guardian's whole life: wait on the pipe; at a goodbye, leave; at its end without one
/// (the harness died), kill every process carrying the run's token, and the run's cgroup.
[[noreturn]] void guard(int pipe_fd, const std::string& token, const std::string& cgroup);

} // namespace pitfall::process_parts
