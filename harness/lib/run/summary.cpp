// Summarising a run: summary.json, the end of the terminal output, the reports.
#include "run/run_plan.hpp"

#include "report/loaded_libraries.hpp"
#include "report/report.hpp"

namespace pitfall::runner::run_parts {

/// Every finished case of the folder (a resumed run's earlier ones included), in run order.
struct run_totals {
    std::vector<const case_record*> finished;
    std::vector<std::string> not_run;
    std::map<std::string, int> counts;
    json ratios = json::array();
    /// A library a case loaded other than the one the probe found as the run began.
    std::vector<library_mismatch> library_mismatches;
    bool any_failing = false;
    bool all_unsupported = true;
};

run_totals tally(const run_plan& plan) {
    run_totals t;
    for (const auto& c : plan.cases) {
        const auto it = plan.finished.find(c.key());
        if (it == plan.finished.end()) {
            t.not_run.push_back(c.key());
            t.all_unsupported = false;
            continue;
        }
        const case_record& r = it->second;
        t.finished.push_back(&r);
        ++t.counts[to_string(r.verdict)];
        t.any_failing = t.any_failing || r.failing();
        t.all_unsupported = t.all_unsupported && r.verdict == verdict_kind::unsupported;
    }
    t.ratios = compute_ratios(plan.index, plan.finished, plan.choice, plan.judging);
    std::vector<json> libraries; // the records' parts the comparison reads
    for (const case_record* r : t.finished)
        libraries.push_back(
            {{"case", r->key.str()},
             {"result",
              {{"loaded_libraries",
                r->result.is_object() ? r->result.value("loaded_libraries", json()) : json()}}}});
    t.library_mismatches = library_mismatches(plan.header.fingerprint, libraries);
    for (const auto& r : t.ratios)
        t.any_failing = t.any_failing || r.value("failing", false);
    return t;
}

status write_summary(const run_plan& plan, const run_totals& t, bool interrupted, int code) {
    json cases = json::array();
    for (const case_record* r : t.finished)
        cases.push_back({{"case", r->key.str()},
                         {"verdict", to_string(r->verdict)},
                         {"failing", r->failing()},
                         {"reason", r->reason},
                         {"wall_seconds", r->process.wall_seconds}});
    const json summary = {{"schema", "pitfall.summary/1"},
                          {"at", now_iso8601()},
                          {"complete", !interrupted && t.not_run.empty()},
                          {"cases_selected", plan.cases.size()},
                          {"cases_finished", t.finished.size()},
                          {"counts", t.counts},
                          {"profile", plan.header.to_json()["profile"]},
                          {"fingerprint_summary", plan.header.fingerprint_summary},
                          {"ratios", t.ratios},
                          {"library_warnings", mismatches_json(t.library_mismatches)},
                          {"timing_family", plan.timing_family},
                          {"cases", cases},
                          {"records", plan.records_seal},
                          {"exit_code", code}};
    return write_file_atomically(plan.folder->summary_path(),
                                 summary.dump(2, ' ', false, json::error_handler_t::replace) +
                                     "\n");
}

/// What a driver error means for a person, where the name alone does not say it.
const char* gloss(const std::string& error) {
    if (error == "cudaErrorInsufficientDriver")
        return "no NVIDIA driver, or one older than the CUDA runtime";
    if (error == "cudaErrorNoDevice")
        return "no CUDA device visible";
    return nullptr;
}

/// Cases that neither pass nor fail, grouped by verdict, backend and cause, in order of first
/// appearance: a cause shared by many cases is said once.
struct case_group {
    verdict_kind verdict;
    std::string backend;
    std::string cause;
    std::vector<const case_record*> members;
};

/// A skip's cause is the observed error (its name, not the wording around it); else the reason.
std::string cause_of(const case_record& r) {
    if (r.verdict != verdict_kind::unsupported)
        return r.reason;
    const std::string error = r.observed.value("error", "");
    if (const char* meaning = gloss(error))
        return error + " (" + meaning + ")";
    return r.observed.value("reason", r.reason);
}

std::vector<case_group> group_quiet_cases(const std::vector<const case_record*>& finished) {
    std::vector<case_group> groups;
    for (const case_record* r : finished) {
        if (r->failing() || r->verdict == verdict_kind::pass)
            continue;
        const std::string cause = cause_of(*r);
        const auto it = std::find_if(groups.begin(), groups.end(), [&](const case_group& g) {
            return g.verdict == r->verdict && g.backend == r->key.backend && g.cause == cause;
        });
        if (it != groups.end())
            it->members.push_back(r);
        else
            groups.push_back({r->verdict, r->key.backend, cause, {r}});
    }
    return groups;
}

std::string upper(std::string text) {
    std::transform(text.begin(), text.end(), text.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::toupper(ch)); });
    return text;
}

/// "  cpu.harness_fixture.segv     CRASH             SIGSEGV (baseline: ok)"
std::string case_line(std::size_t width, const std::string& key, verdict_kind v,
                      const std::string& reason) {
    std::string line = reason.substr(0, reason.find('\n'));
    line.erase(line.find_last_not_of(' ') + 1);
    if (line.size() > 160) { // cut at a word, never inside one (or inside a UTF-8 character)
        const std::size_t space = line.rfind(' ', 157);
        line = detail::utf8_head(line, space != std::string::npos && space > 100 ? space : 157) +
               " ...";
    }
    const std::string verdict = to_string(v);
    std::ostringstream out;
    // The verdict's column fits the longest name, NUMERIC_MISMATCH and PERF_REGRESSION, and a
    // longer one still gets its space: never glued to the reason.
    out << "  " << std::left << std::setw(static_cast<int>(width)) << key << verdict
        << std::string(verdict.size() < 18 ? 18 - verdict.size() : 1, ' ') << line << '\n';
    return out.str();
}

/// Each failing case and ratio, with its reason.
void print_failures(const run_totals& t, std::size_t width) {
    std::string lines;
    for (const case_record* r : t.finished)
        if (r->failing())
            lines += case_line(width, r->key.str(), r->verdict, r->reason);
    for (const auto& ratio : t.ratios)
        if (ratio.value("failing", false))
            lines += "  ratio " + ratio["backend"].get<std::string>() + '.' +
                     ratio["scenario"].get<std::string>() + '.' + ratio["name"].get<std::string>() +
                     "  " + ratio.value("verdict", "") + ": " + ratio.value("reason", "") + '\n';
    if (!lines.empty())
        std::cout << "failing:\n" << lines;
}

/// A skip group's cause in the machine's words where the diagnosis explains its error:
/// "no NVIDIA driver (libcuda.so.1 not found); CUDA 13.0 needs driver >= 580
/// [cudaErrorInsufficientDriver]".
std::string group_cause(const case_group& g, const diagnosis& machine) {
    if (g.verdict != verdict_kind::unsupported || g.backend != "cuda" || machine.cuda_usable())
        return g.cause;
    const std::string error = g.members.front()->observed.value("error", "");
    for (const auto& name : machine.explained_errors())
        if (!error.empty() && name == error)
            return machine.headline() + " [" + error + "]";
    return g.cause;
}

/// Warnings, then skips: a case alone with its reason, a group as "33 CUDA cases UNSUPPORTED:
/// <cause>".
void print_groups(const run_totals& t, std::size_t width, const diagnosis& machine) {
    const auto groups = group_quiet_cases(t.finished);
    const std::pair<verdict_severity, const char*> sections[] = {
        {verdict_severity::warning, "warnings:\n"}, {verdict_severity::skip, "skipped:\n"}};
    for (const auto& [severity, heading] : sections) {
        std::string lines;
        for (const auto& g : groups) {
            if (info(g.verdict).severity != severity)
                continue;
            if (g.members.size() == 1)
                lines += case_line(width, g.members[0]->key.str(), g.verdict, g.members[0]->reason);
            else
                lines += "  " + std::to_string(g.members.size()) + ' ' + upper(g.backend) +
                         " cases " + to_string(g.verdict) + ": " + group_cause(g, machine) + '\n';
        }
        if (!lines.empty())
            std::cout << heading << lines;
    }
}

/// The cases the history database calls flaky (flaky.json, as the reports read it).
void print_flaky(const run_data& run, std::size_t width) {
    std::ostringstream out;
    if (!run.flaky_problem.empty())
        out << "flaky:\n  flaky.json unreadable: " << run.flaky_problem << '\n';
    if (run.flaky.is_object() && !run.flaky["cases"].empty()) {
        out << "flaky: (history database " << run.flaky["db"].get<std::string>()
            << ", released after " << run.flaky["release_after"].get<std::uint64_t>()
            << " passing runs in a row)\n";
        for (const auto& c : run.flaky["cases"])
            out << "  " << std::left << std::setw(static_cast<int>(width))
                << c["case"].get<std::string>() << flaky_summary(c) << '\n';
    }
    // Text from the database and a file in the run folder: never a control sequence.
    std::cout << detail::visible_controls(out.str());
}

void print_ratios(const json& ratios) {
    for (const auto& r : ratios) {
        std::ostringstream value;
        value << std::setprecision(3) << r["ratio"].get<double>();
        std::cout << "ratio " << r["backend"].get<std::string>() << '.'
                  << r["scenario"].get<std::string>() << '.' << r["name"].get<std::string>()
                  << " = " << value.str();
        if (r.contains("verdict")) {
            std::cout << "  " << r["verdict"].get<std::string>();
            if (r.contains("bound"))
                std::cout << " (bound " << r["bound"].dump() << ")";
            // Not judged: say why (another host's or fingerprint's bound, full sizes).
            if (r["verdict"] == "NOT_COMPARED" && r.contains("reason") && r["reason"].is_string())
                std::cout << ": " << r["reason"].get<std::string>();
        }
        std::cout << '\n';
    }
}

/// One line on the run's timed series judged together, when any were.
void print_timing_family(const json& family) {
    if (!family.is_object() || family.value("series", 0) == 0)
        return;
    const json demoted = family.value("demoted", json::array());
    std::cout << "timing: " << family["series"].get<int>() << " series judged together ("
              << family.value("method", "") << ", level " << family.value("level", 0.0) << ")";
    if (!demoted.empty())
        std::cout << ": " << demoted.size()
                  << " slower beyond tolerance, but not significant among them (AMBIGUOUS)";
    std::cout << '\n';
}

/// The end of the terminal output: the counts; each failure with its reason; warnings and
/// skips, a group's cause said once; the flaky cases; what did not run; the ratios; the timings
/// judged together; where things are.
void print_end(const run_plan& plan, const run_totals& t, bool interrupted,
               const run_data* rendered) {
    std::size_t width = 4;
    for (const case_record* r : t.finished)
        width = std::max(width, r->key.str().size() + 2);
    std::cout << '\n';
    if (!t.not_run.empty())
        std::cout << t.finished.size() << " of ";
    std::cout << plan.cases.size() << " cases: " << counts_line(t.counts);
    if (interrupted)
        std::cout << "  (interrupted: --resume " << plan.folder->dir() << " completes it)";
    std::cout << '\n';
    std::size_t predicted = 0;
    for (const case_record* r : t.finished)
        predicted += r->prediction.empty() ? 0 : 1;
    if (predicted > 0) // a PASS of theirs judges a rule applied, not a failure seen
        std::cout << predicted << " of them predicted, not reproduced (scenario.json "
                  << "\"prediction\"; the report lists why)\n";
    print_failures(t, width);
    print_groups(t, width, plan.machine);
    if (rendered != nullptr)
        print_flaky(*rendered, width);
    if (!t.not_run.empty())
        std::cout << "not run: " << t.not_run.size()
                  << (t.not_run.size() == 1 ? " case\n" : " cases\n");
    print_ratios(t.ratios);
    for (const auto& m : t.library_mismatches)
        std::cout << "warning: " << m.text() << '\n';
    print_timing_family(plan.timing_family);
    std::cout << "results: " << plan.folder->results_path()
              << "\nsummary: " << plan.folder->summary_path() << '\n';
}

int summarise(const run_plan& plan, bool interrupted) {
    const run_totals t = tally(plan);
    int code = interrupted ? exit_interrupted : t.any_failing ? exit_failed : exit_ok;
    if (!interrupted && !t.any_failing && t.all_unsupported && plan.options.skip_code)
        code = *plan.options.skip_code;
    // A process of some case changed the run's own records: what it wrote is undone, and the
    // run is red, since its cases are not what the catalog says they are.
    const auto& restored = plan.folder->restorations();
    for (const auto& what : restored)
        std::cerr << "pitfall: warning: " << what << '\n';
    if (!restored.empty() && !interrupted)
        code = exit_failed;
    // summary.json and the reports are what CI and people read: one that cannot be written
    // (a full disk) ends the run with exit 2 naming it, not a pass nobody can see. The
    // records are safe in results.jsonl; `pitfall report` renders them again.
    const status summary = write_summary(plan, t, interrupted, code);
    // The reports, rendered from results.jsonl as written (an interrupted run's too: what a
    // person reads first is what finished and what did not); the terminal's flaky cases are
    // theirs.
    const std::string dir = plan.folder->dir();
    auto rendered = load_run(dir);
    print_end(plan, t, interrupted, rendered.is_ok() ? &rendered.value() : nullptr);
    const status written = rendered.is_ok() ? write_reports(rendered.value()) : rendered.error();
    if (written.is_ok()) {
        std::cout << "reports: " << dir << '/';
        for (const auto& format : report_formats())
            std::cout << (&format == &report_formats().front() ? "" : ", ") << format.file_name;
        std::cout << '\n';
    }
    if (!summary.is_ok())
        std::cerr << "pitfall: error: summary not written: " << summary.message() << '\n';
    if (!written.is_ok())
        std::cerr << "pitfall: error: reports not written: " << written.message() << '\n';
    return summary.is_ok() && written.is_ok() ? code : exit_bad_input;
}

} // namespace pitfall::runner::run_parts
