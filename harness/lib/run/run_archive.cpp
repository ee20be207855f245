// The runs a baseline was blessed from, kept compressed beside it (run_archive.hpp).
#include "run/run_archive.hpp"

#include "pitfall/detail/json_file.hpp"
#include "pitfall/detail/process.hpp"
#include "pitfall/detail/result_file.hpp"

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <set>
#include <system_error>
#include <vector>

namespace pitfall::runner::archive {
namespace fs = std::filesystem;

namespace {

status archive_error(const std::string& what) {
    return PITFALL_HOST_ERROR(stage::none, host_error::write_failed, what);
}

/// `text` gzip'd into `target`: the text in a scratch file beside it, `gzip -n` (no name or
/// time inside, so the same run gives the same bytes) into a second one, renamed into place.
status gzip_into(const std::string& text, const std::string& target, const std::string& gzip) {
    const std::string pid = std::to_string(::getpid());
    const std::string source = target + ".src." + pid;
    const std::string part = target + ".part." + pid;
    PITFALL_TRY(write_file_atomically(source, text));
    process_request req;
    req.argv = {gzip, "-9", "-n", "-c", "--", source};
    req.output_path = part;
    req.timeout_seconds = 120;
    const process_outcome p = run_process(req);
    std::error_code ec;
    fs::remove(source, ec);
    if (!p.started || !p.exit_code || *p.exit_code != 0) {
        fs::remove(part, ec);
        return archive_error("cannot keep " + target + ": " + gzip +
                             (p.started ? " failed" : " did not start: " + p.start_error));
    }
    fs::rename(part, target, ec);
    if (ec) {
        fs::remove(part, ec);
        return archive_error("cannot keep " + target + ": " + ec.message());
    }
    return status::ok();
}

/// A folder made (or found) at `path`, refused when it is a link or something else.
status real_folder(const fs::path& path) {
    std::error_code ec;
    const fs::file_status st = fs::symlink_status(path, ec);
    if (fs::is_symlink(st) || (fs::exists(st) && !fs::is_directory(st)))
        return archive_error("cannot keep runs in " + path.string() +
                             ": it is a link or not a folder");
    if (!fs::exists(st) && !fs::create_directory(path, ec) && ec)
        return archive_error("cannot make " + path.string() + ": " + ec.message());
    return status::ok();
}

/// The kept runs an expected/ entry names ("runs/<id>"): the run it was blessed from, and the
/// run its peak RSS was blessed from again (`pitfall bless --memory-only`).
std::vector<const nlohmann::json*> archives_named_by(const nlohmann::json& entry) {
    std::vector<const nlohmann::json*> named;
    if (!entry.is_object() || !entry.contains("provenance") || !entry["provenance"].is_object())
        return named;
    for (const char* run : {"run", "rss_run"}) {
        const nlohmann::json& prov = entry["provenance"];
        if (prov.contains(run) && prov[run].is_object() && prov[run].contains("archive"))
            named.push_back(&prov[run]["archive"]);
    }
    return named;
}

/// What the profile's entries name: every scenario file of it, as bless reads them.
status_or<std::set<std::string>> archives_named(const std::string& profile_dir) {
    std::set<std::string> named;
    std::error_code ec;
    for (const auto& file : fs::directory_iterator(profile_dir, ec)) {
        const fs::path& path = file.path();
        if (path.extension() != ".json" || path.filename() == "profile.json" ||
            !fs::is_regular_file(fs::symlink_status(path, ec)))
            continue;
        auto doc = detail::read_json_file(path.string());
        if (!doc.is_ok())
            return doc.error(); // a broken baseline is not a reason to delete evidence
        const nlohmann::json cases = doc.value().value("cases", nlohmann::json::object());
        if (!cases.is_object())
            continue;
        for (const auto& [key, entry] : cases.items())
            for (const nlohmann::json* archive : archives_named_by(entry))
                if (archive->is_string())
                    named.insert(archive->get<std::string>());
    }
    return named;
}

} // namespace

std::string run_id(const std::string& started_at, const std::string& fingerprint_id,
                   const std::string& run_dir) {
    std::error_code ec;
    const std::string folder = fs::absolute(run_dir, ec).lexically_normal().string();
    std::uint32_t hash = 2166136261U; // FNV-1a: stable across builds and machines
    for (const char c : folder) {
        hash ^= static_cast<unsigned char>(c);
        hash *= 16777619U;
    }
    char tail[16];
    std::snprintf(tail, sizeof tail, "%08x", hash);
    std::string stamp;
    for (const char c : started_at)
        if (std::isalnum(static_cast<unsigned char>(c)) && stamp.size() < 32)
            stamp += c;
    std::string id;
    for (const char c : fingerprint_id)
        if (std::isxdigit(static_cast<unsigned char>(c)) && id.size() < 32)
            id += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return (stamp.empty() ? std::string("unknown") : stamp) + "-" +
           (id.empty() ? std::string("none") : id) + "-" + tail;
}

std::string entry_path(const std::string& id) {
    return "runs/" + id;
}

status keep_run(const std::string& run_dir, const std::string& profile_dir, const std::string& id,
                const std::string& gzip) {
    const fs::path runs = fs::path(profile_dir) / "runs";
    PITFALL_TRY(real_folder(runs));
    PITFALL_TRY(real_folder(runs / id));
    for (const char* name : {"results.jsonl", "fingerprint.json"}) {
        PITFALL_ASSIGN_OR_RETURN(const std::string text,
                                 detail::read_regular_file((fs::path(run_dir) / name).string()));
        PITFALL_TRY(gzip_into(text, (runs / id / (std::string(name) + ".gz")).string(), gzip));
    }
    return status::ok();
}

status_or<int> prune(const std::string& profile_dir) {
    const fs::path runs = fs::path(profile_dir) / "runs";
    std::error_code ec;
    if (!fs::is_directory(fs::symlink_status(runs, ec)))
        return 0;
    PITFALL_ASSIGN_OR_RETURN(const std::set<std::string> named, archives_named(profile_dir));
    int removed = 0;
    for (const auto& child : fs::directory_iterator(runs, ec)) {
        const std::string name = child.path().filename().string();
        if (named.count(entry_path(name)) != 0)
            continue;
        // A link is removed as a link: nothing it points at is touched.
        if (fs::is_symlink(fs::symlink_status(child.path(), ec)))
            fs::remove(child.path(), ec);
        else
            fs::remove_all(child.path(), ec);
        if (ec)
            return archive_error("cannot remove " + child.path().string() + ": " + ec.message());
        ++removed;
    }
    return removed;
}

} // namespace pitfall::runner::archive
