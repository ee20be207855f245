// flaky.json of a finishing run: its header and verdicts (results.jsonl) against the runs of
// its build and fingerprint in the results database.
#include "history/run_flaky.hpp"

#include "report/report.hpp"
#include "util/sha256.hpp"

#include "pitfall/detail/json_file.hpp"
#include "pitfall/detail/result_file.hpp"

#include <exception>
#include <filesystem>
#include <iostream>

namespace pitfall::history {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string text_member(const json& j, const char* key) {
    return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>()
                                                                  : std::string();
}

/// The run as the database will record it: the same id, start time, folder and identity.
status_or<finishing_run> finishing_run_of(const std::string& run_dir) {
    PITFALL_ASSIGN_OR_RETURN(const runner::run_data loaded, runner::load_run(run_dir));
    finishing_run run;
    // ingest's id: the SHA-256 of the header record, so a resumed run recorded before is
    // itself, not an earlier run of the same build.
    run.id = runner::sha256_hex(loaded.header.dump());
    run.at = text_member(loaded.header, "at");
    std::error_code ec;
    const fs::path absolute = fs::absolute(run_dir, ec);
    run.folder = ec ? run_dir : absolute.lexically_normal().string();
    run.build =
        build_identity(loaded.header.is_object() ? loaded.header.value("build", json()) : json());
    run.fingerprint_id = text_member(loaded.header, "fingerprint_id");
    for (const json& record : loaded.cases) {
        const std::string key = text_member(record, "case");
        run.selected.push_back(key);
        run.verdicts[key] = text_member(record, "verdict");
    }
    for (const auto& key : loaded.not_finished) // selected, flaky before, no verdict this time
        run.selected.push_back(key);
    return run;
}

status write_flaky_file(const std::string& db_path, const std::string& run_dir,
                        std::size_t release_after) {
    PITFALL_ASSIGN_OR_RETURN(const history_db db, history_db::open(db_path, false));
    PITFALL_ASSIGN_OR_RETURN(const finishing_run run, finishing_run_of(run_dir));
    PITFALL_ASSIGN_OR_RETURN(const auto found, flaky_cases_of_run(db, run, release_after));
    json doc = run_flaky_json(db_path, found, release_after);
    doc["build"] = detail::valid_utf8(run.build);
    doc["fingerprint_id"] = detail::valid_utf8(run.fingerprint_id);
    return write_file_atomically(run_dir + "/" + run_flaky_file, detail::dump_safe(doc, 2) + "\n");
}

} // namespace

json run_flaky_json(const std::string& db_path, const std::vector<flaky_case>& found,
                    std::size_t release_after) {
    json cases = json::array();
    for (const flaky_case& c : found) {
        if (c.released)
            continue;
        json flips = json::array();
        const std::size_t first =
            c.flips.size() > run_flaky_flips_kept ? c.flips.size() - run_flaky_flips_kept : 0;
        for (std::size_t i = first; i < c.flips.size(); ++i)
            flips.push_back({{"at", c.flips[i].at},
                             {"folder", c.flips[i].folder},
                             {"from", c.flips[i].from},
                             {"to", c.flips[i].to}});
        cases.push_back({{"case", c.case_key},
                         {"runs", c.runs},
                         {"verdicts", c.verdicts},
                         {"flips", std::move(flips)},
                         {"flips_total", c.flips.size()},
                         {"trailing_passes", c.trailing_passes}});
    }
    return {{"schema", run_flaky_schema},
            {"db", detail::valid_utf8(db_path)},
            {"release_after", release_after},
            {"cases", std::move(cases)}};
}

void write_run_flaky(const std::string& db_path, const std::string& run_dir,
                     std::size_t release_after) {
    const std::string path = run_dir + "/" + run_flaky_file;
    std::error_code ec;
    // A resumed run's earlier flaky.json is replaced or dropped: never a stale claim.
    fs::remove(path, ec);
    // No database yet: nothing recorded, nothing flaky (the run makes it as it is recorded).
    if (!fs::exists(fs::symlink_status(db_path, ec)))
        return;
    auto warn = [&](const std::string& why) {
        std::cerr << "pitfall: warning: " << path << " not written, the reports name no flaky "
                  << "case: " << why << '\n';
    };
    try {
        if (const status written = write_flaky_file(db_path, run_dir, release_after);
            !written.is_ok())
            warn(written.message());
    } catch (const std::exception& e) {
        warn(e.what());
    }
}

} // namespace pitfall::history
