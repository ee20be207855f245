#include "run/program_build.hpp"

#include <condition_variable>
#include <mutex>
#include <thread>

#include <sys/stat.h>
#include <unistd.h>

namespace pitfall::runner::run_parts {
namespace {

/// The cases not finished yet, by scenario, in run order: what --build has to build.
std::vector<const scenario_entry*> scenarios_to_build(const run_plan& plan) {
    std::vector<const scenario_entry*> out;
    for (const auto& c : plan.cases)
        if (plan.finished.count(c.key()) == 0 &&
            std::find(out.begin(), out.end(), c.scenario) == out.end())
            out.push_back(c.scenario);
    return out;
}

/// A target as the index must write it: a CMake target name, no option or path in disguise.
bool plain_target(const std::string& target) {
    if (target.empty() || target.front() == '-')
        return false;
    return std::all_of(target.begin(), target.end(), [](char ch) {
        return std::isalnum(static_cast<unsigned char>(ch)) != 0 || ch == '_' || ch == '.' ||
               ch == '+' || ch == '-';
    });
}

/// The terminal's "building X (program k of N) ... " once a build has taken a second: a
/// no-op build of an up-to-date program (every program of a later run) says nothing, and a
/// real one is seen while it runs. No case runs meanwhile, so nothing else prints.
class build_notice {
public:
    explicit build_notice(std::string head)
        : m_head(std::move(head)), m_watch([this] {
              std::unique_lock<std::mutex> lock(m_mutex);
              if (!m_ended.wait_for(lock, std::chrono::seconds(1), [this] { return m_done; })) {
                  std::cout << m_head << " ... " << std::flush;
                  m_shown = true;
              }
          }) {}
    build_notice(const build_notice&) = delete;
    build_notice& operator=(const build_notice&) = delete;
    ~build_notice() { end(); }

    /// Stops the watch; true when the line was started (the caller ends it).
    bool end() {
        {
            const std::lock_guard<std::mutex> lock(m_mutex);
            m_done = true;
        }
        m_ended.notify_all();
        if (m_watch.joinable())
            m_watch.join();
        return m_shown;
    }
    const std::string& head() const { return m_head; }

private:
    std::string m_head;
    std::mutex m_mutex;
    std::condition_variable m_ended;
    bool m_done = false;
    bool m_shown = false;
    std::thread m_watch; // last: started once the members it reads are made
};

} // namespace

status check_can_build(const run_plan& plan) {
    if (!plan.options.build_programs)
        return status::ok();
    const std::string& index = plan.index.path;
    const build_tree& tree = plan.index.tree;
    if (tree.directory.empty() || tree.cmake.empty())
        return bad_run_input(
            index + ": field 'paths." + (tree.directory.empty() ? "build" : "cmake") +
            "': missing, so --build cannot build the programs (an installed index has no build "
            "tree: drop --build; an older build's index: configure it again)");
    struct stat st {};
    if (::stat(tree.directory.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        return bad_run_input(index + ": field 'paths.build': " + tree.directory +
                             " is not a folder (--build builds the programs there)");
    if (::access(tree.cmake.c_str(), X_OK) != 0)
        return bad_run_input(index + ": field 'paths.cmake': " + tree.cmake + " cannot be run (" +
                             std::strerror(errno) + ")");
    for (const scenario_entry* s : scenarios_to_build(plan))
        if (!plain_target(s->target))
            return bad_run_input(index + ": scenario '" + s->description.name +
                                 "': field 'target': " +
                                 (s->target.empty() ? std::string("missing")
                                                    : "'" + s->target + "' is not a target name") +
                                 ", so --build cannot build its program");
    return status::ok();
}

bool needs_build(const run_plan& plan, const scenario_entry& s) {
    return plan.options.build_programs && plan.programs_built.count(s.description.name) == 0;
}

status build_program(run_plan& plan, const scenario_entry& s, bool recorded) {
    const std::string& name = s.description.name;
    // Those built so far and those still to build (a scenario whose cases have all finished
    // leaves scenarios_to_build, not the count).
    std::size_t total = plan.programs_built.size();
    for (const scenario_entry* left : scenarios_to_build(plan))
        total += plan.programs_built.count(left->description.name) == 0 ? 1 : 0;
    const std::size_t nth = plan.programs_built.size() + 1;
    const std::string log = plan.folder->logs_dir() + "/build-" + name + ".log";
    const std::string before = file_stamp(s.program);
    build_notice notice("building " + name + " (program " + std::to_string(nth) + " of " +
                        std::to_string(total) + ")");
    process_request req;
    req.argv = {plan.index.tree.cmake, "--build", plan.index.tree.directory, "--target", s.target};
    req.output_path = log;
    // A cold nvcc compile takes a minute on two cores; an hour is a hung build, not a slow one.
    req.timeout_seconds = 3600;
    const auto started = std::chrono::steady_clock::now();
    const process_outcome out = run_process(req);
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    const bool shown = notice.end();
    if (out.started && out.exit_code && *out.exit_code == 0 && !out.timed_out && !out.interrupted) {
        // Said where it was seen or it made the program; a no-op build says nothing.
        if (shown || file_stamp(s.program) != before)
            std::cout << (shown ? "" : notice.head() + " ... ") << std::fixed
                      << std::setprecision(1) << took << " s\n"
                      << std::flush;
        plan.programs_built.insert(name);
        plan.build_seconds += took;
        return status::ok();
    }
    std::cout << (shown ? "" : notice.head() + " ... ") << "FAILED\n" << std::flush;
    const std::string why = !out.started      ? out.start_error
                            : out.interrupted ? std::string("interrupted")
                            : out.timed_out   ? std::string("timed out after an hour")
                            : out.signal      ? "ended by " + signal_name(*out.signal)
                                         : "exit " + std::to_string(out.exit_code.value_or(-1));
    const std::string what = "building the program of scenario '" + name + "' failed (" + why +
                             "); the last of " + log + ":\n" + read_tail(log, 2000) + "\n";
    if (!recorded)
        return bad_run_input(what + "no case ran: fix the build, then run again");
    return bad_run_input(what + "the run stopped with " + std::to_string(plan.finished.size()) +
                         " of " + std::to_string(plan.cases.size()) +
                         " cases recorded: fix the build, then `pitfall run --build --resume " +
                         plan.folder->dir() + "` completes it");
}

double build_seconds_left(const run_plan& plan) {
    if (!plan.options.build_programs || plan.programs_built.empty())
        return 0;
    std::size_t left = 0;
    for (const scenario_entry* s : scenarios_to_build(plan))
        left += plan.programs_built.count(s->description.name) == 0 ? 1 : 0;
    return plan.build_seconds / static_cast<double>(plan.programs_built.size()) *
           static_cast<double>(left);
}

json build_images_before_building(const scenario_index& index) {
    std::vector<std::pair<std::string, std::string>> present;
    std::vector<std::string> missing;
    for (const auto& s : index.scenarios) {
        if (::access(s.program.c_str(), R_OK) == 0)
            present.emplace_back(s.description.name, s.program);
        else
            missing.push_back(s.description.name);
    }
    // Not kept: the kept answer is for a whole build, and this one is part prediction.
    json images = build_images(present);
    std::string model;
    for (const auto& [name, path] : present)
        if (images.contains(name) && images[name].contains("images")) {
            model = name;
            break;
        }
    if (model.empty())
        return images; // no program read has device code: none predicted to have any
    for (const auto& name : missing)
        images[name] = {{"images", images[model]["images"]}, {"predicted_from", model}};
    return images;
}

} // namespace pitfall::runner::run_parts
