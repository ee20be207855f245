// Planning a run: the cases, the run folder, the profiles and the session before the first case.
#include "run/program_build.hpp"
#include "run/run_plan.hpp"

namespace pitfall::runner::run_parts {

/// A resumed run completes the run as it was asked for: its selection, samples, timeout
/// scale and how it judges times (the floor, judge or record, the run's correction and level:
/// the correction at the end spans the earlier cases too) come from its own header, not from
/// this command line (the profiles are chosen again from this environment's fingerprint).
/// Returns its selection.
status_or<std::set<std::string>> plan_resume(run_plan& plan) {
    const auto& f = plan.options.common.filter;
    const run_options defaults;
    if (!f.scenarios.empty() || !f.backends.empty() || !f.variants.empty() || !f.labels.empty() ||
        plan.options.samples || plan.options.timeout_scale != defaults.timeout_scale ||
        plan.options.full || plan.options.timing_floor != defaults.timing_floor ||
        plan.options.judge_times != defaults.judge_times ||
        plan.options.correction != defaults.correction ||
        plan.options.timing_level != defaults.timing_level)
        return bad_run_input("--resume completes a run as it was started: drop --scenario, "
                             "--backend, --variant, --label, --samples, --timeout-scale, "
                             "--full, --timing-floor, --timings, --timing-correction and "
                             "--timing-level");
    auto folder = run_folder::resume(plan.options.resume_dir);
    if (!folder.is_ok())
        return bad_run_input("--resume " + folder.error().message());
    plan.folder.emplace(std::move(folder).value());
    PITFALL_ASSIGN_OR_RETURN(const run_log log, plan.folder->read());
    std::set<std::string> selection;
    for (const auto& key : log.header.selection)
        selection.insert(key.str());
    plan.options.samples = log.header.options.samples;
    plan.options.timeout_scale = log.header.options.timeout_scale;
    plan.options.full = log.header.options.full;
    plan.options.timing_floor = log.header.options.timing_floor;
    plan.options.judge_times = log.header.options.judge_times;
    plan.options.timing_level = log.header.options.timing_level;
    // The header's reader admits only the three names.
    plan.options.correction =
        timing_correction_from_string(log.header.options.correction).value_or(defaults.correction);
    for (const auto& c : log.cases)
        plan.finished.emplace(c.key.str(), c);
    plan.resuming = true;
    return selection;
}

/// The cases to run: the filter's, or a resumed run's own selection.
status plan_cases(run_plan& plan, const std::optional<std::set<std::string>>& resumed) {
    PITFALL_ASSIGN_OR_RETURN(std::vector<case_ref> cases,
                             select_cases(plan.index, plan.options.common.filter));
    if (resumed) {
        std::vector<case_ref> kept;
        std::copy_if(cases.begin(), cases.end(), std::back_inserter(kept),
                     [&](const case_ref& c) { return resumed->count(c.key()) != 0; });
        if (kept.size() != resumed->size())
            return bad_run_input("--resume " + plan.options.resume_dir +
                                 ": some of its cases are not in this build's index (" +
                                 plan.index.path + ")");
        cases = std::move(kept);
    }
    if (cases.empty())
        return bad_run_input("the filters select no case (see `pitfall list`)");
    plan.cases = std::move(cases);
    return status::ok();
}

/// Where a new run goes: --out, else <runs folder>/<UTC timestamp>.
std::string new_run_dir(const run_options& options) {
    if (!options.out_dir.empty())
        return options.out_dir;
    const std::string runs = options.runs_dir.empty() ? "reports/runs" : options.runs_dir;
    return runs + "/" + utc_now("%Y%m%d-%H%M%S");
}

/// Every case can start and its result and log can be made, before the first case runs: a
/// program not built, a file name past NAME_MAX, a path past PATH_MAX, or a cases/ or logs/
/// pitfall cannot create files in is the run's bad input (exit 2, naming the path), never a
/// case's CRASH with its output spilled.
status check_cases_can_start(const run_plan& plan) {
    const run_folder& folder = *plan.folder;
    for (const std::string& dir : {folder.dir() + "/cases", folder.logs_dir()}) {
        std::string probe = dir + "/.write-check.XXXXXX";
        const int fd = ::mkostemp(probe.data(), O_CLOEXEC);
        if (fd < 0)
            return bad_run_input(dir + ": cannot create a file there (" + std::strerror(errno) +
                                 "): each case writes its result and its log there");
        ::close(fd);
        ::unlink(probe.c_str());
    }
    // Room for the ".tmp.XXXXXX" a result is first written as.
    constexpr std::size_t temporary_suffix = 16;
    for (const auto& c : plan.cases) {
        // A scenario the index names but the build has not made yet (a new folder, CMake run,
        // nothing built): one message that says so, not a CRASH "cannot execute" per case.
        if (!plan.options.build_programs && ::access(c.scenario->program.c_str(), X_OK) != 0)
            return bad_run_input(c.scenario->program + ": the program of scenario '" +
                                 c.scenario->description.name + "' is not built (" +
                                 std::strerror(errno) +
                                 "): build it first, `cmake --build --preset <preset>` for the "
                                 "build this index belongs to, or run with --build");
        const case_key key = key_of(c);
        for (const std::string& path : {folder.case_result_path(key), folder.case_log_path(key)}) {
            const std::size_t name = path.size() - path.rfind('/') - 1;
            if (name + temporary_suffix > NAME_MAX || path.size() + temporary_suffix >= PATH_MAX)
                return bad_run_input(
                    path + ": too long for a case's file (names up to " +
                    std::to_string(NAME_MAX - temporary_suffix) + " bytes, paths up to " +
                    std::to_string(PATH_MAX - temporary_suffix - 1) + "): choose a shorter --out");
            struct stat st {};
            if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
                return bad_run_input(path + ": there, and not a regular file: a case's result "
                                            "or log goes there (remove it)");
        }
    }
    return status::ok();
}

/// The PITFALL_* variables `pitfall run` passes on to every case, checked before the first
/// one starts: a bad value would otherwise fail every case alike, as CRASH, and the run.
status check_environment(const scenario_index& index) {
    if (auto limit = device_memory_limit_from_env(); !limit.is_ok())
        return bad_run_input(limit.error().message());
    if (const char* mode = std::getenv("PITFALL_CONTAINMENT");
        mode != nullptr && *mode != '\0' && std::string(mode) != "auto" &&
        std::string(mode) != "cgroup" && std::string(mode) != "subreaper")
        return bad_run_input(std::string("PITFALL_CONTAINMENT='") + mode +
                             "': expected auto, cgroup or subreaper");
    const char* injecting = std::getenv(inject::env_name);
    const char* mutating = std::getenv(mutate::env_name);
    const bool injects = injecting != nullptr && *injecting != '\0';
    const bool mutates = mutating != nullptr && *mutating != '\0';
    if (!injects && !mutates)
        return status::ok();
    std::set<std::string> keys; // helper variants too: run_self passes the variable on
    for (const auto& s : index.scenarios)
        for (const auto& v : s.description.variants)
            for (const auto& b : s.description.backends_of(v))
                keys.insert(b + "." + s.description.name + "." + v.name);
    if (injects)
        if (auto checked = inject::validate(injecting, keys); !checked.is_ok())
            return bad_run_input(checked.message());
    if (mutates)
        if (auto checked = mutate::validate(mutating, keys); !checked.is_ok())
            return bad_run_input(checked.message());
    return status::ok();
}

status plan_run(const run_options& requested, run_plan& plan) {
    plan.options = requested;
    PITFALL_ASSIGN_OR_RETURN(plan.index, load_index(requested.common.index_path));
    PITFALL_TRY(check_environment(plan.index));
    std::optional<std::set<std::string>> resumed;
    if (!requested.resume_dir.empty()) {
        PITFALL_ASSIGN_OR_RETURN(resumed, plan_resume(plan));
    }
    PITFALL_TRY(plan_cases(plan, resumed));
    PITFALL_TRY(check_can_build(plan)); // before the run folder: a refused run leaves none
    // The baselines of the scenarios this run selects, in every profile: what can judge it.
    std::set<std::string> selected;
    for (const auto& c : plan.cases)
        selected.insert(c.scenario->description.name);
    PITFALL_ASSIGN_OR_RETURN(
        plan.profiles, load_profiles(plan.options.common.expected_dir, plan.index, &selected));
    if (!plan.resuming) {
        PITFALL_ASSIGN_OR_RETURN(
            run_folder folder, run_folder::create(new_run_dir(plan.options), plan.options.replace));
        plan.folder.emplace(std::move(folder));
    }
    PITFALL_TRY(check_cases_can_start(plan));
    plan.visible_devices = child_cuda_visible_devices();
    return status::ok();
}

/// The environment's fingerprint for the header: the probe's facts (its answer kept while it
/// holds), the build's SASS and PTX, and how each case's threads are set.
void fingerprint_session(run_plan& plan) {
    run_header& h = plan.header;
    h.fingerprint = take_fingerprint(plan.options.probe_program, plan.folder->logs_dir(),
                                     !plan.options.fresh_probe, seconds_left(plan.options, 30));
    // The build's SASS and PTX beside the machine's facts: the doctor's rules judge them
    // against the devices, here and in every report rendered from this record.
    std::vector<std::pair<std::string, std::string>> programs;
    for (const auto& s : plan.index.scenarios)
        programs.emplace_back(s.description.name, s.program);
    h.fingerprint["build_images"] = plan.options.build_programs
                                        ? build_images_before_building(plan.index)
                                        : kept_build_images(programs);
    // How each case's threads are set (the counts themselves are per case, in its record).
    json variables = json::array();
    for (const char* name : case_thread_variables)
        variables.push_back(name);
    h.fingerprint["case_threads"] = {{"default", 1}, {"variables", variables}};
    h.fingerprint_summary = fingerprint_summary(h.fingerprint);
    h.fingerprint_id = fingerprint_id(h.fingerprint_summary);
}

/// The header's account of this run: when, by which pitfall, from which command line and index,
/// judged by which profile, selecting which cases, with which options.
void describe_session(run_plan& plan) {
    run_header& h = plan.header;
    h.resumed = plan.resuming;
    h.at = now_iso8601();
    h.pitfall_version = PITFALL_VERSION;
    h.argv.clear();
    for (const auto& arg : plan.options.argv) // bytes from the shell: recorded as text
        h.argv.push_back(detail::valid_utf8(arg));
    h.index = detail::valid_utf8(plan.index.path);
    h.build = plan.index.build;
    if (plan.choice.chosen != nullptr)
        h.profile = plan.choice.chosen->name;
    h.profile_reason = plan.choice.reason;
    for (const auto& c : plan.cases)
        h.selection.push_back(key_of(c));
    h.options = {plan.options.samples,
                 plan.options.timeout_scale,
                 plan.options.timing_floor,
                 plan.options.remeasure_pause,
                 plan.options.jobs,
                 plan.options.timed_in_parallel,
                 plan.options.full,
                 plan.options.judge_times,
                 to_string(plan.options.correction),
                 plan.options.timing_level};
}

/// Every process a case starts is ended with it, even past a SIGKILL of this one; the case
/// lock every run of this user shares. How is recorded beside the fingerprint.
status contain_session(run_plan& plan) {
    run_header& h = plan.header;
    // Not in the fingerprint's summary: profiles do not match on it.
    const char* mode = std::getenv("PITFALL_CONTAINMENT");
    PITFALL_ASSIGN_OR_RETURN(const containment held,
                             contain_cases(mode == nullptr || *mode == '\0' ? "auto" : mode));
    plan.run_token = held.run_token;
    std::string no_lock;
    const std::string shared = shared_folder(no_lock);
    plan.case_lock = shared.empty() ? "" : shared + "/cases.lock";
    h.fingerprint["case_lock"] = shared.empty() ? json{{"none", no_lock}} : json(plan.case_lock);
    h.fingerprint["containment"] = {
        {"method", held.method}, {"detail", held.detail}, {"token", held.run_token}};
    return status::ok();
}

/// What each case is judged with: the fingerprint and host it runs under, the build type, the
/// machine's findings (an environment fault explains a failing case) and the timing options.
void prepare_judging(run_plan& plan) {
    const run_header& h = plan.header;
    plan.judging.fingerprint_id = h.fingerprint_id;
    plan.judging.host_id = host_id_of(h.fingerprint);
    plan.judging.build_type = plan.index.build.value("build_type", "");
    plan.judging.judge_times = plan.options.judge_times;
    plan.judging.blas = blas_kernels(h.fingerprint_summary);
    plan.judging.full_sizes = plan.options.full;
    plan.machine = diagnose(h.fingerprint);
    plan.judging.environment_fault = plan.machine.headline();
    plan.judging.environment_errors = plan.machine.environment_errors();
    plan.judging.explained_errors = plan.machine.explained_errors();
    if (const auto gpus = h.fingerprint_summary.find("gpu_count");
        gpus != h.fingerprint_summary.end() && gpus->is_number_integer())
        plan.judging.gpu_count = gpus->get<int>();
    plan.judging.timing.floor = plan.options.timing_floor;
}

/// The terminal's first lines: the machine, the run folder, the profile, and what is set that
/// makes this run report other than its own behaviour.
void say_session(const run_plan& plan) {
    const run_header& h = plan.header;
    const run_folder& folder = *plan.folder;
    // The machine first: what `pitfall doctor` would say decides how to read every line after.
    std::cout << "machine: "
              << (plan.machine.cuda_usable()
                      ? "CUDA work can run here"
                      : "not ready for CUDA work: " + plan.machine.headline())
              << " (`pitfall doctor` for the evidence and the fix)\n";
    std::cout << "pitfall: " << plan.cases.size() << " cases -> " << folder.dir() << '\n'
              << "profile: " << h.profile.value_or("(none)") << " (" << h.profile_reason << ")\n";
    if (plan.resuming)
        std::cout << "resuming: " << plan.finished.size() << " cases already finished\n";
    if (const char* injecting = std::getenv(inject::env_name);
        injecting != nullptr && *injecting != '\0')
        std::cout << "warning: " << inject::env_name << "=" << injecting
                  << " is set: the cases it names report injected faults, not real ones\n";
    if (const char* mutating = std::getenv(mutate::env_name);
        mutating != nullptr && *mutating != '\0')
        std::cout << "warning: " << mutate::env_name << "=" << mutating
                  << " is set: the cases it names report mutated records, not their own\n";
}

/// Fingerprints the environment, chooses the profiles, appends the header and says so.
status start_session(run_plan& plan) {
    run_folder& folder = *plan.folder;
    run_header& h = plan.header;
    // With --build, the first program is built before the header: the build images it records
    // are read from a program of this build, not guessed from an older one.
    for (const auto& c : plan.cases)
        if (plan.finished.count(c.key()) == 0) {
            if (needs_build(plan, *c.scenario))
                PITFALL_TRY(build_program(plan, *c.scenario, false));
            break;
        }
    fingerprint_session(plan);
    PITFALL_ASSIGN_OR_RETURN(plan.choice, choose_profile(plan.profiles, h.fingerprint_summary,
                                                         plan.options.profile_override));
    describe_session(plan);
    PITFALL_TRY(contain_session(plan));
    prepare_judging(plan);
    PITFALL_TRY(folder.append(h));
    // A copy for people and tools; the header line above is the record, so a copy that
    // cannot be written costs nothing.
    warn(write_file_atomically(folder.fingerprint_path(),
                               h.fingerprint.dump(2, ' ', false, json::error_handler_t::replace) +
                                   "\n"));

    say_session(plan);
    return status::ok();
}

} // namespace pitfall::runner::run_parts
