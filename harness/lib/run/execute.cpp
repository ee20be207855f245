// Executing a run: each case in its own process, measured again while its timing is uncertain.
#include "run/case_claims.hpp"
#include "run/case_memory.hpp"
#include "run/program_build.hpp"
#include "run/progress.hpp"
#include "run/run_plan.hpp"

namespace pitfall::runner::run_parts {

/// One case as it is run: its request, and what it is judged against.
struct case_context {
    const run_plan& plan;
    const case_ref& c;
    case_key key;
    process_request request;
    const json* expected = nullptr; ///< its baseline entry; a null document when none
    const profile* judged_by = nullptr;
    bool timed = false; ///< its time or a ratio it takes part in is judged (timing_judged)
};

/// The machine's memory and swap (/proc/meminfo), bytes; 0 where unknown.
std::uint64_t memory_and_swap_bytes() {
    std::ifstream in("/proc/meminfo");
    std::uint64_t total = 0;
    std::string name;
    std::uint64_t kib = 0;
    std::string unit;
    while (in >> name >> kib >> unit)
        if (name == "MemTotal:" || name == "SwapTotal:")
            total += kib * 1024;
    return total;
}

/// A case's resource limits: its scenario's "limits", else the defaults. CPU time: twice the
/// case's timeout on every hardware thread, plus 10 s (a re-measurement doubles the timeout);
/// it only stops a case spinning on past all reason. File size: 4 GiB. Address space: the
/// machine's memory and swap, so that a case allocating without end meets a failed allocation
/// instead of the kernel's OOM killer; never by default for a CUDA case or a program built with
/// CUDA (the driver reserves address ranges far larger than any memory: a limit makes CUDA fail
/// to initialise), nor in a sanitizer build (AddressSanitizer reserves terabytes of shadow).
resource_limits case_limits(const case_ref& c, double timeout_seconds, bool built_with_cuda) {
    const limits_spec& declared = c.scenario->description.limits;
    resource_limits limits;
    const double threads = std::max(1u, std::thread::hardware_concurrency());
    limits.cpu_seconds = declared.cpu_seconds.value_or(
        static_cast<std::uint64_t>(std::ceil(2 * timeout_seconds * threads)) + 10);
    limits.file_size_bytes = declared.file_size.value_or(std::uint64_t{4} << 30);
    limits.address_space_bytes = declared.address_space;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    const bool sanitized = true;
#elif defined(__has_feature)
    const bool sanitized = __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||
                           __has_feature(memory_sanitizer);
#else
    const bool sanitized = false;
#endif
    static const std::uint64_t machine = memory_and_swap_bytes();
    // A CPU case of a program built with CUDA may still touch the driver (a device query, a
    // library that initialises it): no default there either.
    if (!limits.address_space_bytes && c.backend != "cuda" && !built_with_cuda && !sanitized &&
        machine > 0)
        limits.address_space_bytes = machine;
    return limits;
}

/// Whether a case's samples are judged here: its entry has timed series, or a ratio the chosen
/// profiles bound takes it as numerator or denominator.
bool timing_judged(const run_plan& plan, const case_context& ctx) {
    if (ctx.expected->is_object() && ctx.expected->contains("timings"))
        return true;
    for (const auto& r : ctx.c.scenario->description.ratios)
        if ((r.numerator == ctx.key.variant || r.denominator == ctx.key.variant) &&
            plan.choice.ratio_bounds_for(ctx.key.scenario, ctx.key.backend + "." + r.name).first !=
                nullptr)
            return true;
    return false;
}

case_context prepare_case(const run_plan& plan, const case_ref& c) {
    static const json no_entry;
    case_context ctx{plan, c, key_of(c), {}, &no_entry, nullptr, false};
    const run_folder& folder = *plan.folder;
    process_request& req = ctx.request;
    req.argv = {c.scenario->program,
                "--backend",
                c.backend,
                "--variant",
                c.variant->name,
                "--out",
                folder.case_result_path(ctx.key)};
    if (plan.options.samples)
        req.argv.insert(req.argv.end(),
                        {"--param", "samples=" + std::to_string(*plan.options.samples)});
    if (plan.options.full)
        req.argv.emplace_back("--full");
    req.output_path = folder.case_log_path(ctx.key);
    req.timeout_seconds = seconds_left(plan.options, c.scenario->description.timeout_seconds *
                                                         plan.options.timeout_scale);
    req.limits = case_limits(c, req.timeout_seconds, plan.index.built_with_cuda);
    req.case_token = plan.run_token + "/" + ctx.key.str(); // what it starts carries it too
    // Threads are part of what a case measures: OpenBLAS with two threads on two shared cores
    // runs at two speeds, and a baseline blessed with one count says nothing of another. Each
    // case gets its variant's count (1 unless scenario.json says why more), whatever this
    // shell exports; bless records it and timings are compared only at the same count.
    for (const char* name : case_thread_variables)
        req.env_set[name] = std::to_string(c.variant->threads);
    if (!plan.visible_devices.empty()) {
        // CTest's ids come from nvidia-smi, which counts in PCI order; CUDA's default order
        // is fastest first. Make CUDA count the same way.
        req.env_set["CUDA_VISIBLE_DEVICES"] = plan.visible_devices;
        req.env_set["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
    }
    const auto [entry, from] = plan.choice.entry_for(ctx.key.scenario, ctx.key.entry_key());
    if (entry != nullptr) {
        ctx.expected = entry;
        ctx.judged_by = from;
    }
    ctx.timed = timing_judged(plan, ctx);
    return ctx;
}

/// One process of a case, observed and judged.
struct attempt {
    process_outcome p;
    observation o;
    verdict v;
    std::string log_text;
};

/// The machine-wide case lock, held for the life of one case process: shared by a case whose
/// time is not judged, exclusive by one whose time is. Runs of one user (CTest's `pitfall run`
/// per test under `ctest -j`, two terminals) then never time a case beside another case.
class case_lock {
public:
    /// Waits for the lock; false when Ctrl-C (or TERM) came meanwhile. Without a lock file
    /// (`path` empty, or one that cannot be opened) there is nothing to wait for.
    bool acquire(const std::string& path, bool exclusive) {
        if (path.empty())
            return true;
        m_fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (m_fd < 0)
            return true;
        while (::flock(m_fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
            if (errno != EWOULDBLOCK && errno != EINTR)
                return true; // a lock the file system cannot hold: run unlocked
            if (interrupt_requested != 0)
                return false;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return true;
    }
    case_lock() = default;
    case_lock(const case_lock&) = delete;
    case_lock& operator=(const case_lock&) = delete;
    ~case_lock() {
        if (m_fd >= 0)
            ::close(m_fd); // releases it
    }

private:
    int m_fd = -1;
};

attempt measure(const case_context& ctx, const process_request& req) {
    const std::string result_path = ctx.plan.folder->case_result_path(ctx.key);
    ::unlink(result_path.c_str());
    attempt a;
    case_lock held;
    // --timed-in-parallel asked for timed cases beside others: then every case shares it.
    if (!held.acquire(ctx.plan.case_lock, ctx.timed && !ctx.plan.options.timed_in_parallel)) {
        a.p.interrupted = true;
        return a;
    }
    a.p = run_process(req);
    if (a.p.interrupted)
        return a;
    a.log_text = read_tail(req.output_path, std::size_t{16} * 1024);
    a.o = observe(ctx.c, a.p, result_path, a.log_text, ctx.request.timeout_seconds);
    // A link the case left at its own result or log (read as no result above) is removed, as
    // a link: the run folder stays free of links for every reader after this one.
    for (const std::string& own : {result_path, req.output_path}) {
        struct stat st {};
        if (::lstat(own.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
            ::unlink(own.c_str());
    }
    // The case's own peak, from its result where it wrote one; wait4's counts pitfall's image.
    const case_peak_rss peak = peak_rss_of_case(a.p.peak_rss_bytes, a.o.result);
    if (peak.bytes)
        a.o.peak_rss_bytes = static_cast<double>(*peak.bytes);
    a.o.peak_rss_method = peak.method;
    a.o.threads = ctx.c.variant->threads;
    a.v = judge(a.o, *ctx.expected, ctx.c.backend, ctx.plan.judging);
    return a;
}

bool timing_uncertain(const verdict& v) {
    return v.kind == verdict_kind::ambiguous || v.kind == verdict_kind::perf_regression;
}

/// The timed series that made a verdict uncertain: those the next process is chosen by. A
/// normalised twin ("step_seconds/host_blas") stands for its series: the process is chosen by
/// the times themselves.
std::vector<std::string> uncertain_series(const verdict& v) {
    std::vector<std::string> names;
    for (const auto& [name, t] : v.timings.items()) {
        if (t.value("verdict", "") != "PERF_REGRESSION" && t.value("verdict", "") != "AMBIGUOUS")
            continue;
        const std::string series = name.substr(0, name.find('/'));
        if (std::find(names.begin(), names.end(), series) == names.end())
            names.push_back(series);
    }
    return names;
}

/// The attempt whose verdict stands, and each attempt's summary for the record. An attempt
/// that failed otherwise (a crash, another outcome) is the verdict; else the least disturbed by
/// the series being judged (`series`; relative_slowness: interference only ever adds time).
std::pair<std::size_t, json> least_disturbed(const std::vector<attempt>& tried,
                                             const std::vector<std::string>& series) {
    std::vector<const json*> results;
    results.reserve(tried.size());
    for (const auto& a : tried)
        results.push_back(&a.o.result);
    const std::vector<double> slowness = relative_slowness(results, series);
    std::size_t best = 0;
    json summaries = json::array();
    for (std::size_t i = 0; i < tried.size(); ++i) {
        json medians = json::object();
        for (const auto& name : series) {
            const double m = time_median(tried[i].o.result, name);
            medians[name] = std::isfinite(m) ? json(m) : json(nullptr);
        }
        summaries.push_back({{"verdict", to_string(tried[i].v.kind)},
                             {"reason", tried[i].v.reason},
                             {"samples", samples_taken(tried[i].o.result)},
                             {"median_seconds", medians},
                             {"wall_seconds", tried[i].p.wall_seconds}});
        if (is_failing(tried[i].v.kind) && !timing_uncertain(tried[i].v)) {
            best = i;
            break;
        }
        if (slowness[i] < slowness[best])
            best = i;
    }
    return {best, summaries};
}

/// A case whose first process came out AMBIGUOUS or PERF_REGRESSION, waiting for the end of the
/// run: its second process runs then, alone, after a pause, with three times the samples
/// (remeasure_request). Separate processes on a shared machine differ by more than one
/// process's samples show, and interference only ever adds time: like the baseline (the
/// fastest of the runs blessed), the candidate is the least disturbed of its two processes by
/// the series being judged. A PERF_REGRESSION then fails the run only when even that process is
/// slower beyond tolerance; AMBIGUOUS warns.
struct deferred_case {
    std::size_t index;
    case_context ctx;
    attempt first;
    double took; ///< the first process's seconds, for the ETA
};

/// The second process of a deferred case and the verdict that stands; nullopt when Ctrl-C (or
/// TERM) came meanwhile; an error when the kept result could not be written back to cases/.
status_or<std::optional<std::pair<attempt, json>>> measure_again(deferred_case& d) {
    attempt next = measure(d.ctx, remeasure_request(d.ctx.request, d.first.o.result));
    if (next.p.interrupted)
        return std::optional<std::pair<attempt, json>>{};
    const std::vector<std::string> series = uncertain_series(d.first.v);
    std::vector<attempt> tried;
    tried.push_back(std::move(d.first));
    tried.push_back(std::move(next));
    auto [best, summaries] = least_disturbed(tried, series);
    attempt stands = std::move(tried[best]);
    std::string judged_by;
    for (const auto& name : series)
        judged_by += (judged_by.empty() ? "" : ", ") + name;
    stands.v.reason = "least disturbed of 2 processes (by " + judged_by + "): " + stands.v.reason;
    if (stands.v.kind == verdict_kind::ambiguous)
        stands.v.reason += " (a warning, not a failure)";
    if (stands.o.result.is_object()) // the kept result is the one judged
        PITFALL_TRY(write_file_atomically(
            d.ctx.plan.folder->case_result_path(d.ctx.key),
            stands.o.result.dump(2, ' ', false, json::error_handler_t::replace) + "\n"));
    return std::optional<std::pair<attempt, json>>{
        std::make_pair(std::move(stands), std::move(summaries))};
}

case_record make_record(const case_context& ctx, const attempt& a, json attempts) {
    case_record r;
    r.key = ctx.key;
    r.kind = ctx.c.variant->kind;
    // A case that did not run predicted nothing: it is counted UNSUPPORTED, not a prediction.
    if (const auto it = ctx.c.variant->prediction.find(ctx.key.backend);
        it != ctx.c.variant->prediction.end() && a.o.outcome.value("status", "") != "unsupported")
        r.prediction = it->second;
    r.labels = ctx.c.labels();
    r.verdict = a.v.kind;
    r.reason = a.v.reason;
    r.observed = a.o.outcome;
    r.process.exit_code = a.p.exit_code;
    if (a.p.signal)
        r.process.signal = signal_name(*a.p.signal);
    r.process.timed_out = a.p.timed_out;
    r.process.wall_seconds = a.p.wall_seconds;
    if (a.o.peak_rss_bytes)
        r.process.peak_rss_bytes = static_cast<std::int64_t>(*a.o.peak_rss_bytes);
    r.process.peak_rss_method = a.o.peak_rss_method;
    r.process.threads = ctx.c.variant->threads;
    r.result = a.o.result;
    r.timings = a.v.timings;
    r.attempts = std::move(attempts);
    if (ctx.judged_by != nullptr)
        r.baseline_profile = ctx.judged_by->name;
    r.baseline_entry = *ctx.expected;
    r.log = run_folder::log_name(ctx.key);
    r.output_tail = detail::utf8_tail(a.log_text, 2000); // never half a character
    r.finished_at = now_iso8601();
    return r;
}

/// A case that cannot be recorded ends the run: printing it as finished would claim a result
/// that is not on disk. Said with the file and the errno, and how to go on.
status not_recorded(const run_plan& plan, const case_key& key, const status& why) {
    return bad_run_input(
        why.message() + "\n  " + key.str() + " is not recorded; the run stopped with " +
        std::to_string(plan.finished.size()) + " of " + std::to_string(plan.cases.size()) +
        " cases recorded (results.jsonl holds only whole records). Make room, "
        "then `pitfall run --resume " +
        plan.folder->dir() + "` completes it");
}

case_claim claim_of(const run_plan& plan, const case_context& ctx) {
    case_claim claim;
    claim.slots = std::min(ctx.c.variant->threads, plan.options.jobs);
    claim.gpu = ctx.c.backend == "cuda";
    claim.alone = plan.options.jobs > 1 && !plan.options.timed_in_parallel && ctx.timed;
    return claim;
}

/// A case's first process, run on a worker thread; the main thread records it.
struct running_case {
    std::size_t index;
    case_claim claim;
    std::optional<case_context> ctx;
    attempt first;
    double took = 0;
    bool done = false;
    std::thread worker;
};

/// Records a finished case (or defers one whose timing is uncertain); an error when its record
/// could not be written.
status settle_first(run_plan& plan, running_case& rc, progress& out,
                    std::vector<deferred_case>& deferred) {
    const case_key key = rc.ctx->key;
    if (timing_uncertain(rc.first.v) && interrupt_requested == 0) {
        out.deferred(rc.index, key, rc.first.v.kind, rc.took);
        deferred.push_back({rc.index, std::move(*rc.ctx), std::move(rc.first), rc.took});
        return status::ok();
    }
    case_record record = make_record(*rc.ctx, rc.first, json::array());
    if (auto s = plan.folder->append(record); !s.is_ok()) {
        out.not_recorded(rc.index, key);
        return not_recorded(plan, key, s);
    }
    out.end(rc.index, record, rc.took);
    plan.finished.emplace(key.str(), std::move(record));
    return status::ok();
}

/// The first pass's bookkeeping: the cases waiting, the ones running (each on a worker thread),
/// what they hold of the machine, and the first failure to record anything.
class first_pass_scheduler {
public:
    first_pass_scheduler(run_plan& plan, progress& out) : m_plan(plan), m_out(out) {
        for (std::size_t i = 0; i < plan.cases.size(); ++i)
            if (plan.finished.count(plan.cases[i].key()) == 0)
                m_pending.push_back(i);
    }

    status_or<std::vector<deferred_case>> run(bool& interrupted) {
        while (true) {
            start_what_fits();
            if (m_running.empty())
                break;
            settle_what_finished(interrupted);
        }
        interrupted = interrupted || interrupt_requested != 0;
        if (!m_failure.is_ok())
            return m_failure;
        return std::move(m_deferred);
    }

private:
    /// Starts what fits, in order; a case that must run alone holds back every case after it
    /// until the machine is free (else a stream of small cases would starve it).
    void start_what_fits() {
        while (m_failure.is_ok() && interrupt_requested == 0 && !m_pending.empty()) {
            const std::size_t i = m_pending.front();
            // Past the run's deadline (the gate's budget) no case starts: the rest are not run.
            if (past_deadline(m_plan.options)) {
                m_out.deadline_reached(m_pending.size());
                m_pending.clear();
                break;
            }
            // --build: the program is built while no case runs (a compiler beside a case
            // would be in its times), then the case starts.
            if (const scenario_entry& s = *m_plan.cases[i].scenario; needs_build(m_plan, s)) {
                if (!m_running.empty())
                    break;
                if (auto built = build_program(m_plan, s, true); !built.is_ok()) {
                    m_failure = built;
                    break;
                }
                m_out.builds_left(build_seconds_left(m_plan));
            }
            case_context ctx = prepare_case(m_plan, m_plan.cases[i]);
            const case_claim claim = claim_of(m_plan, ctx);
            {
                const std::lock_guard<std::mutex> lock(m_mutex);
                if (!m_held.admits(claim, m_plan.options.jobs))
                    break;
                m_held.take(claim);
            }
            m_pending.pop_front();
            if (auto s = m_plan.folder->append_event("started", ctx.key, now_iso8601());
                !s.is_ok()) {
                m_out.not_recorded(i, ctx.key);
                m_failure = not_recorded(m_plan, ctx.key, s);
                const std::lock_guard<std::mutex> lock(m_mutex);
                m_held.give_back(claim);
                break;
            }
            m_out.begin(i, ctx.key);
            start(i, claim, std::move(ctx));
        }
    }

    /// The case's first process, measured on a worker thread that says when it is done.
    void start(std::size_t index, const case_claim& claim, case_context ctx) {
        m_running.emplace_back();
        running_case& rc = m_running.back();
        rc.index = index;
        rc.claim = claim;
        rc.ctx.emplace(std::move(ctx));
        rc.worker = std::thread([&rc, this] {
            const auto started = std::chrono::steady_clock::now();
            attempt a = measure(*rc.ctx, rc.ctx->request);
            const std::lock_guard<std::mutex> lock(m_mutex);
            rc.first = std::move(a);
            rc.took =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
            rc.done = true;
            m_finished_one.notify_all();
        });
    }

    /// Waits for a case to finish, then records every finished one (an interrupted one as
    /// interrupted) and gives its claim on the machine back.
    void settle_what_finished(bool& interrupted) {
        std::unique_lock<std::mutex> lock(m_mutex);
        m_finished_one.wait(lock, [&] {
            return std::any_of(m_running.begin(), m_running.end(),
                               [](const running_case& rc) { return rc.done; });
        });
        for (auto it = m_running.begin(); it != m_running.end();) {
            if (!it->done) {
                ++it;
                continue;
            }
            m_held.give_back(it->claim);
            lock.unlock();
            it->worker.join();
            if (it->first.p.interrupted) {
                interrupted = true;
                m_out.interrupted(it->index, it->ctx->key);
                if (auto s =
                        m_plan.folder->append_event("interrupted", it->ctx->key, now_iso8601());
                    !s.is_ok() && m_failure.is_ok())
                    m_failure = not_recorded(m_plan, it->ctx->key, s);
            } else if (m_failure.is_ok()) {
                m_failure = settle_first(m_plan, *it, m_out, m_deferred);
            }
            lock.lock();
            it = m_running.erase(it);
        }
    }

    run_plan& m_plan;
    progress& m_out;
    std::deque<std::size_t> m_pending;
    std::mutex m_mutex;
    std::condition_variable m_finished_one;
    std::list<running_case> m_running;
    holdings m_held;
    status m_failure = status::ok();
    std::vector<deferred_case> m_deferred;
};

/// Each case not finished yet, up to --jobs at once (case_claim says which may share the
/// machine), each record appended as its case ends. Returns the cases whose timing came out
/// uncertain, for the end of the run; `interrupted` set on Ctrl-C (or TERM).
status_or<std::vector<deferred_case>> first_pass(run_plan& plan, progress& out, bool& interrupted) {
    first_pass_scheduler scheduler(plan, out);
    return scheduler.run(interrupted);
}

/// The second processes of the deferred cases, one at a time after one pause (see
/// deferred_case). True when interrupted.
status_or<bool> measure_deferred(run_plan& plan, progress& out,
                                 std::vector<deferred_case>& deferred) {
    if (deferred.empty())
        return false;
    std::cout << "measuring again, one at a time after " << plan.options.remeasure_pause
              << " s: " << deferred.size() << (deferred.size() == 1 ? " case" : " cases")
              << " whose timing came out uncertain\n"
              << std::flush;
    if (!pause_unless_interrupted(plan.options.remeasure_pause))
        return true;
    for (std::size_t k = 0; k < deferred.size(); ++k) {
        deferred_case& d = deferred[k];
        const case_key key = d.ctx.key;
        const auto started = std::chrono::steady_clock::now();
        out.begin_again(k, key);
        PITFALL_ASSIGN_OR_RETURN(auto settled, measure_again(d));
        if (!settled) {
            out.interrupted_again(k, key);
            if (auto s = plan.folder->append_event("interrupted", key, now_iso8601()); !s.is_ok())
                return not_recorded(plan, key, s);
            return true;
        }
        case_record record = make_record(d.ctx, settled->first, std::move(settled->second));
        if (auto s = plan.folder->append(record); !s.is_ok()) {
            out.not_recorded(d.index, key);
            return not_recorded(plan, key, s);
        }
        const double again =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        out.end_again(k, record, again);
        plan.finished.emplace(key.str(), std::move(record));
    }
    return false;
}

/// Runs every case not finished yet, then measures again those whose timing was uncertain;
/// true when interrupted; an error (the run ends, exit 2) when a record could not be written.
status_or<bool> execute(run_plan& plan) {
    install_interrupt_handlers();
    progress out(plan.cases, plan.finished, plan.options.jobs);
    out.builds_left(build_seconds_left(plan)); // the first program was built before the header
    bool interrupted = false;
    PITFALL_ASSIGN_OR_RETURN(std::vector<deferred_case> deferred,
                             first_pass(plan, out, interrupted));
    if (interrupted)
        return true;
    return measure_deferred(plan, out, deferred);
}

/// All timed series of the run judged together: a PERF_REGRESSION that does not survive the
/// correction for their number becomes AMBIGUOUS, and its case's record is appended again (the
/// newest record of a case is the one every reader keeps).
status correct_timings(run_plan& plan) {
    std::vector<case_record*> records;
    for (auto& [key, record] : plan.finished)
        records.push_back(&record);
    std::vector<case_record*> changed;
    plan.timing_family =
        correct_run_timings(records, plan.options.correction, plan.options.timing_level, changed);
    for (case_record* r : changed)
        if (auto s = plan.folder->append(*r); !s.is_ok())
            return not_recorded(plan, r->key, s);
    return status::ok();
}

} // namespace pitfall::runner::run_parts
