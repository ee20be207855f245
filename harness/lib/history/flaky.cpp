// Flaky cases: verdicts grouped by case, build and fingerprint, oldest run first.
#include "history/flaky.hpp"

#include "pitfall/detail/json_file.hpp"
#include "pitfall/detail/text.hpp"

#include <algorithm>
#include <ostream>
#include <sstream>
#include <tuple>

namespace pitfall::history {
using nlohmann::json;

namespace {

/// One case's runs in one (build, fingerprint) group, read oldest first.
struct case_runs {
    std::vector<std::string> at, folder, verdict;
};

/// One case's verdicts in one group, added oldest first: counts, flips and the passing runs
/// since the last other verdict, without keeping every run.
class verdict_tally {
public:
    void add(const std::string& at, const std::string& folder, const std::string& verdict) {
        ++m_case.verdicts[verdict];
        if (m_case.runs > 0 && verdict != m_last)
            m_case.flips.push_back({at, folder, m_last, verdict});
        m_case.trailing_passes = verdict == "PASS" ? m_case.trailing_passes + 1 : 0;
        ++m_case.runs;
        m_last = verdict;
    }
    flaky_case result(const std::string& key, const std::string& build,
                      const std::string& fingerprint, std::size_t release_after) const {
        flaky_case c = m_case;
        c.case_key = key;
        c.build = build;
        c.fingerprint_id = fingerprint;
        c.released = c.trailing_passes >= release_after;
        return c;
    }

private:
    flaky_case m_case;
    std::string m_last;
};

flaky_case summarise(const std::string& key, const std::string& build,
                     const std::string& fingerprint, const case_runs& runs,
                     std::size_t release_after) {
    verdict_tally tally;
    for (std::size_t i = 0; i < runs.verdict.size(); ++i)
        tally.add(runs.at[i], runs.folder[i], runs.verdict[i]);
    return tally.result(key, build, fingerprint, release_after);
}

} // namespace

status_or<std::vector<flaky_case>> flaky_cases(const history_db& db, std::size_t release_after) {
    // The build's identity is its revision where the build recorded one; otherwise its facts
    // (compilers, build type), which at least tell two different builds apart.
    statement query(db, "SELECT c.case_key, COALESCE(r.git_revision, r.build, ''), "
                        "r.fingerprint_id, r.at, r.folder, c.verdict FROM cases c "
                        "JOIN runs r ON r.id = c.run_id ORDER BY c.case_key, c.run_at, r.id");
    PITFALL_TRY(query.prepared("reading the verdicts"));
    using group_key = std::tuple<std::string, std::string, std::string>;
    std::map<group_key, case_runs> groups;
    for (;;) {
        PITFALL_ASSIGN_OR_RETURN(const bool row, query.step("reading the verdicts"));
        if (!row)
            break;
        case_runs& runs = groups[{query.text(0), query.text(1), query.text(2)}];
        runs.at.push_back(query.text(3));
        runs.folder.push_back(query.text(4));
        runs.verdict.push_back(query.text(5));
    }
    std::vector<flaky_case> found;
    for (const auto& [key, runs] : groups) {
        flaky_case c =
            summarise(std::get<0>(key), std::get<1>(key), std::get<2>(key), runs, release_after);
        if (c.verdicts.size() > 1)
            found.push_back(std::move(c));
    }
    return found;
}

std::string build_identity(const json& build) {
    if (build.is_object() && build.contains("git_revision") && build["git_revision"].is_string())
        return build["git_revision"].get<std::string>();
    // As ingest binds it (json::dump); a build JSON it could not dump was never recorded.
    return build.is_null() ? std::string() : detail::dump_safe(build);
}

namespace {

struct group_run {
    std::string at, id, folder;
    bool finishing = false;
};

/// The recorded runs of `run`'s build and fingerprint other than itself, with it, in the order
/// flaky_cases reads them (start time, then id).
status_or<std::vector<group_run>> runs_of_group(const history_db& db, const finishing_run& run) {
    statement query(db, "SELECT at, id, folder FROM runs WHERE fingerprint_id = ?1 AND "
                        "COALESCE(git_revision, build, '') = ?2 AND id <> ?3");
    PITFALL_TRY(query.prepared("reading the runs of this build"));
    query.bind(1, run.fingerprint_id);
    query.bind(2, run.build);
    query.bind(3, run.id);
    std::vector<group_run> runs;
    for (;;) {
        PITFALL_ASSIGN_OR_RETURN(const bool row, query.step("reading the runs of this build"));
        if (!row)
            break;
        runs.push_back({query.text(0), query.text(1), query.text(2)});
    }
    runs.push_back({run.at, run.id, run.folder, true});
    std::sort(runs.begin(), runs.end(), [](const group_run& a, const group_run& b) {
        return std::tie(a.at, a.id) < std::tie(b.at, b.id);
    });
    return runs;
}

} // namespace

status_or<std::vector<flaky_case>>
flaky_cases_of_run(const history_db& db, const finishing_run& run, std::size_t release_after) {
    PITFALL_ASSIGN_OR_RETURN(const std::vector<group_run> runs, runs_of_group(db, run));
    std::map<std::string, verdict_tally> tallies;
    for (const auto& key : run.selected)
        tallies[key];
    statement cases(db, "SELECT case_key, verdict FROM cases WHERE run_id = ?1");
    PITFALL_TRY(cases.prepared("reading the verdicts of this build"));
    for (const group_run& r : runs) {
        if (r.finishing) {
            for (const auto& [key, verdict] : run.verdicts)
                if (const auto it = tallies.find(key); it != tallies.end())
                    it->second.add(r.at, r.folder, verdict);
            continue;
        }
        cases.reset();
        cases.bind(1, r.id);
        for (;;) {
            PITFALL_ASSIGN_OR_RETURN(const bool row,
                                     cases.step("reading the verdicts of this build"));
            if (!row)
                break;
            if (const auto it = tallies.find(cases.text(0)); it != tallies.end())
                it->second.add(r.at, r.folder, cases.text(1));
        }
    }
    std::vector<flaky_case> found;
    for (const auto& [key, tally] : tallies) {
        flaky_case c = tally.result(key, run.build, run.fingerprint_id, release_after);
        if (c.verdicts.size() > 1)
            found.push_back(std::move(c));
    }
    return found;
}

namespace {

std::string counts(const std::map<std::string, std::size_t>& m) {
    std::string out;
    for (const auto& [name, n] : m)
        out += (out.empty() ? "" : ", ") + name + " x" + std::to_string(n);
    return out;
}

} // namespace

std::string flaky_table(const std::vector<flaky_case>& found, std::size_t release_after) {
    std::ostringstream out;
    if (found.empty())
        out << "no flaky case: every case kept one verdict across the runs of each build and "
               "fingerprint\n";
    for (const auto& c : found) {
        out << c.case_key << ": " << c.runs << " runs, " << counts(c.verdicts) << "; "
            << (c.released ? "released" : "not released") << " (" << c.trailing_passes << " of "
            << release_after << " passing runs in a row)\n"
            << "  build " << c.build << "\n  fingerprint " << c.fingerprint_id << '\n';
        for (const auto& f : c.flips)
            out << "  " << f.at << "  " << f.from << " -> " << f.to << "  " << f.folder << '\n';
    }
    // Text from the database (folders, verdicts edited by hand): never a control sequence.
    return detail::visible_controls(out.str());
}

json flaky_json(const std::vector<flaky_case>& found, std::size_t release_after) {
    json cases = json::array();
    for (const auto& c : found) {
        json flips = json::array();
        for (const auto& f : c.flips)
            flips.push_back({{"at", f.at}, {"folder", f.folder}, {"from", f.from}, {"to", f.to}});
        cases.push_back({{"case", c.case_key},
                         {"build", c.build},
                         {"fingerprint_id", c.fingerprint_id},
                         {"runs", c.runs},
                         {"verdicts", c.verdicts},
                         {"flips", std::move(flips)},
                         {"trailing_passes", c.trailing_passes},
                         {"released", c.released}});
    }
    return {{"schema", "pitfall.history-flaky/1"},
            {"release_after", release_after},
            {"cases", std::move(cases)}};
}

status write_flaky(const history_db& db, std::size_t release_after, bool as_json,
                   std::ostream& out) {
    if (release_after == 0)
        return status::error(pitfall_error::bad_input, "--release-after 0: expected 1 or more",
                             stage::none);
    PITFALL_ASSIGN_OR_RETURN(const auto found, flaky_cases(db, release_after));
    if (as_json)
        out << flaky_json(found, release_after).dump(2, ' ', false, json::error_handler_t::replace)
            << '\n';
    else
        out << flaky_table(found, release_after);
    return status::ok();
}

} // namespace pitfall::history
