#include "bundle/bundle.hpp"

#include "bundle/redact.hpp"
#include "report/loaded_libraries.hpp"
#include "report/report.hpp"
#include "run/run_folder.hpp"

#include "pitfall/detail/json_file.hpp"
#include "pitfall/detail/process.hpp"
#include "pitfall/detail/result_file.hpp"
#include "pitfall/detail/text.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace pitfall::runner {
using nlohmann::json;
namespace fs = std::filesystem;

namespace {
std::string archive_root(const std::string& run_dir);
}

std::string default_bundle_path(const std::string& run_dir) {
    return archive_root(run_dir) + ".tar.gz";
}

namespace {
constexpr int deepest_folder = 32;

/// A folder under $TMPDIR where the bundle is put together, removed with everything in it.
struct staging_folder {
    std::string path;
    staging_folder() {
        const char* tmp = std::getenv("TMPDIR");
        std::string pattern =
            std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/pitfall-bundle-XXXXXX";
        if (::mkdtemp(pattern.data()) != nullptr)
            path = pattern;
    }
    ~staging_folder() {
        std::error_code ec;
        if (!path.empty())
            fs::remove_all(path, ec);
    }
    staging_folder(const staging_folder&) = delete;
    staging_folder& operator=(const staging_folder&) = delete;
};

/// The archive's top folder: the run folder's name and "-bundle", any byte but a letter,
/// digit, '.', '_' or '-' made '_' (and never a leading '-' or '.'), so that no name a person
/// gave the run can make it an option or a path of tar's.
std::string archive_root(const std::string& run_dir) {
    std::string base = run_dir;
    while (base.size() > 1 && base.back() == '/')
        base.pop_back();
    base = base.substr(base.rfind('/') == std::string::npos ? 0 : base.rfind('/') + 1);
    for (char& c : base)
        if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '.' && c != '_' && c != '-')
            c = '_';
    if (base.empty() || base.front() == '-' || base.front() == '.')
        base = "run" + base;
    return base + "-bundle";
}

/// What the bundle is being filled with: the staging root, the secret values to scrub, what
/// each item became, and which files redaction changed.
struct bundle_state {
    const bundle_options& options;
    std::string root; ///< staging/<archive_root>
    std::vector<std::string> secrets;
    std::vector<bundle_item> items;
    std::vector<std::string> redacted_files;
    std::uint64_t run_bytes = 0; ///< of the run folder's copy
};

bool write_file(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes;
    out.close();
    return static_cast<bool>(out);
}

/// A file's bytes as the copy holds them: results.jsonl and JSON redacted record by record,
/// anything else (logs, reports, binary) scrubbed as bytes.
std::string redacted_copy(const std::string& name, const std::string& bytes,
                          const std::vector<std::string>& secrets) {
    if (name == "results.jsonl")
        return redact_results_lines(bytes, secrets);
    if (name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0) {
        auto parsed = detail::parse_json(bytes, name);
        if (parsed.is_ok()) {
            json redacted = redact_json(parsed.value(), secrets);
            return redacted == parsed.value() ? bytes : detail::dump_safe(redacted, 2) + "\n";
        }
    }
    return scrub_text(bytes, secrets);
}

/// The run folder copied into `to`: regular files (redacted) and folders; a link, FIFO,
/// socket or device is listed, never followed or opened.
void copy_tree(bundle_state& b, const fs::path& from, const fs::path& to, const std::string& rel,
               int depth) {
    std::error_code ec;
    fs::create_directories(to, ec);
    if (depth > deepest_folder) {
        b.items.push_back({"run/" + rel, "the run folder", "missing",
                           "deeper than " + std::to_string(deepest_folder) + " folders", 0});
        return;
    }
    for (fs::directory_iterator it(from, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        std::string inner = rel;
        if (!inner.empty())
            inner += '/';
        inner += name;
        const fs::file_status st = it->symlink_status(ec);
        if (fs::is_directory(st)) {
            copy_tree(b, it->path(), to / name, inner, depth + 1);
            continue;
        }
        if (!fs::is_regular_file(st)) {
            b.items.push_back(
                {"run/" + inner, "the run folder", "missing",
                 fs::is_symlink(st) ? "a symbolic link: not followed" : "not a regular file", 0});
            continue;
        }
        auto bytes = detail::read_regular_file(it->path().string(), b.options.largest_copied_file);
        if (!bytes.is_ok()) {
            b.items.push_back(
                {"run/" + inner, "the run folder", "missing", bytes.error().message(), 0});
            continue;
        }
        const std::string copy = redacted_copy(name, bytes.value(), b.secrets);
        if (copy != bytes.value())
            b.redacted_files.push_back("run/" + inner);
        b.run_bytes += copy.size();
        if (!write_file((to / name).string(), copy))
            b.items.push_back({"run/" + inner, "the run folder", "failed",
                               "cannot write the copy: " + std::string(std::strerror(errno)), 0});
    }
    if (ec)
        b.items.push_back({"run/" + rel, "the run folder", "failed", ec.message(), 0});
}

/// A JSON item, redacted; `why` where the document is missing.
void add_json(bundle_state& b, const std::string& file, const std::string& what, const json& doc,
              const std::string& why_missing) {
    if (doc.is_null()) {
        b.items.push_back({file, what, "missing", why_missing, 0});
        return;
    }
    const json redacted = redact_json(doc, b.secrets);
    if (redacted != doc)
        b.redacted_files.push_back(file);
    const std::string text = detail::dump_safe(redacted, 2) + "\n";
    const bool ok = write_file(b.root + "/" + file, text);
    b.items.push_back({file, what, ok ? "included" : "failed", ok ? "" : "cannot write it",
                       ok ? text.size() : 0});
}

/// The libraries the run's cases loaded, together and case by case, with the warnings.
json loaded_libraries_document(const std::string& run_dir, std::string& why) {
    auto run = load_run(run_dir);
    if (!run.is_ok()) {
        why = run.error().message();
        return json();
    }
    json cases = json::array();
    for (const auto& r : run.value().cases) {
        const json& result = r.contains("result") ? r["result"] : json();
        const json& key = r.contains("case") ? r["case"] : json();
        cases.push_back({{"case", key.is_string() ? key : json("?")},
                         {"loaded_libraries", result.is_object()
                                                  ? result.value("loaded_libraries", json::array())
                                                  : json::array()}});
    }
    return {{"libraries", libraries_json(libraries_loaded(run.value()))},
            {"warnings", mismatches_json(library_mismatches(run.value()))},
            {"cases", cases}};
}

/// Whether a variable is one the bundle carries: what changes how CUDA, its libraries, the
/// loader, BLAS and OpenMP threads and pitfall itself behave. An allow-list: a variable of any
/// other name (a token, a database URL, a proxy with a password) is never carried, whatever
/// its name says.
bool carried_variable(std::string_view name) {
    for (std::string_view exact : {"PATH", "LD_LIBRARY_PATH", "LD_PRELOAD", "LD_BIND_NOW",
                                   "GOTO_NUM_THREADS", "LANG", "LC_ALL", "TZ"})
        if (name == exact)
            return true;
    for (std::string_view prefix : {"CUDA_", "CUDNN_", "CUBLAS_", "CUBLASLT_", "NVIDIA_", "NV_",
                                    "NCCL_", "OMP_", "OPENBLAS_", "MKL_", "BLIS_", "PITFALL_"})
        if (name.substr(0, prefix.size()) == prefix)
            return true;
    return false;
}

/// The copy's summary.json sealed again over the copy's results.jsonl, where redaction changed
/// a record: the copy is a run folder every reader takes (its seal would name the redacted
/// line otherwise). What the run's own seal found and undid ("restored") is kept.
void reseal_copy(const std::string& run_copy) {
    auto summary = detail::read_json_file(run_copy + "/summary.json");
    auto records = detail::read_regular_file(run_copy + "/results.jsonl");
    if (!summary.is_ok() || !records.is_ok() || !summary.value().is_object() ||
        !summary.value().contains("records") || !summary.value()["records"].is_object())
        return;
    json doc = summary.value();
    json seal = run_folder::records_seal(records.value());
    seal["restored"] = doc["records"].value("restored", json::array());
    if (seal == doc["records"])
        return;
    doc["records"] = std::move(seal);
    write_file(run_copy + "/summary.json", detail::dump_safe(doc, 2) + "\n");
}

/// This process's environment by allow-list (carried_variable), each value scrubbed and each
/// secret-named one redacted whatever it holds; the others counted, not named.
std::string environment_text(const std::vector<std::string>& secrets) {
    std::vector<std::string> entries = current_environment();
    std::sort(entries.begin(), entries.end());
    std::string out;
    std::size_t left_out = 0;
    for (const auto& entry : entries) {
        const std::size_t eq = entry.find('=');
        const std::string_view name =
            std::string_view(entry).substr(0, eq == std::string::npos ? entry.size() : eq);
        if (!carried_variable(name)) {
            ++left_out;
            continue;
        }
        out += eq != std::string::npos && is_secret_name(name)
                   ? entry.substr(0, eq + 1) + redacted_text
                   : scrub_text(entry, secrets);
        out += '\n';
    }
    out += "# " + std::to_string(left_out) +
           " more variables not carried: only CUDA, cuDNN, cuBLAS, NVIDIA, NCCL, loader, thread "
           "(OMP, OpenBLAS, MKL, BLIS), locale and PITFALL_ variables are\n";
    return out;
}

/// nvidia-smi -q and nvidia-bug-report.sh, each where installed, each bounded; their output
/// scrubbed like every other file.
void add_nvidia_tools(bundle_state& b) {
    const std::string smi = find_program("nvidia-smi");
    if (smi.empty()) {
        b.items.push_back({"nvidia-smi-q.txt", "nvidia-smi -q", "missing",
                           "nvidia-smi is not installed (no NVIDIA driver here)", 0});
    } else {
        bundle_item item =
            run_bounded({smi, "-q"}, b.root + "/nvidia-smi-q.txt",
                        b.options.command_timeout_seconds, b.options.command_cap_bytes);
        item.file = "nvidia-smi-q.txt";
        b.items.push_back(item);
    }
    const std::string report = find_program("nvidia-bug-report.sh");
    if (report.empty()) {
        b.items.push_back({"nvidia-bug-report.log.gz", "nvidia-bug-report.sh", "missing",
                           "nvidia-bug-report.sh is not installed", 0});
        return;
    }
    // It writes <name>.gz itself; what it prints on the way goes to a log beside it.
    const std::string log = b.root + "/nvidia-bug-report.output.txt";
    bundle_item item =
        run_bounded({report, "--output-file", b.root + "/nvidia-bug-report.log"}, log,
                    b.options.bug_report_timeout_seconds, b.options.bug_report_cap_bytes);
    item.file = "nvidia-bug-report.log.gz";
    std::error_code ec;
    item.bytes =
        fs::exists(b.root + "/nvidia-bug-report.log.gz", ec)
            ? static_cast<std::uint64_t>(fs::file_size(b.root + "/nvidia-bug-report.log.gz", ec))
            : 0;
    b.items.push_back(item);
}

/// After everything is in: the text files scrubbed again (tools' output, the kernel lines).
void scrub_collected(bundle_state& b) {
    for (const char* name :
         {"nvidia-smi-q.txt", "nvidia-bug-report.output.txt", "kernel-messages.txt"}) {
        const std::string path = b.root + "/" + name;
        auto bytes = detail::read_regular_file(path, std::uint64_t{256} << 20);
        if (!bytes.is_ok())
            continue;
        const std::string scrubbed = scrub_text(bytes.value(), b.secrets);
        if (scrubbed != bytes.value() && write_file(path, scrubbed))
            b.redacted_files.push_back(name);
    }
}

std::string utc_now_text() {
    char text[32] = {};
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    ::gmtime_r(&now, &tm);
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return text;
}

/// bundle.json (the index) and README.txt: what is there, what is missing and why.
void write_index(bundle_state& b, const std::string& archive_path) {
    json items = json::array();
    for (const auto& item : b.items)
        items.push_back(item.to_json());
    const json index = {
        {"schema", "pitfall.bundle/1"},
        {"created_at", utc_now_text()},
        {"pitfall_version", PITFALL_VERSION},
        {"run", detail::valid_utf8(b.options.run_dir)},
        {"archive", detail::valid_utf8(archive_path)},
        {"items", items},
        {"redaction",
         {{"names", "environment variables whose names contain TOKEN, KEY, SECRET, PASSWORD "
                    "or CREDENTIAL (any case)"},
          {"replaced_with", redacted_text},
          {"values_scrubbed_everywhere", b.secrets.size()},
          {"files_changed", b.redacted_files}}}};
    write_file(b.root + "/bundle.json", detail::dump_safe(index, 2) + "\n");
    std::string readme =
        "pitfall bundle of the run " + detail::valid_utf8(b.options.run_dir) +
        "\n\nrun/                  the run folder as it was (results.jsonl, reports, logs)\n"
        "doctor.json           `pitfall doctor --json`, run when the bundle was made\n"
        "fingerprint.json      the machine's fingerprint, taken then\n"
        "loaded_libraries.json the CUDA libraries each case's process had mapped\n"
        "environment.txt       the environment `pitfall bundle` ran in: CUDA, loader,\n"
        "                      thread and pitfall variables only\n"
        "kernel-messages.txt   NVIDIA kernel messages of this boot (NVRM, nvidia, Xid)\n"
        "nvidia-smi-q.txt, nvidia-bug-report.log.gz  where those tools are installed\n"
        "bundle.json           this list as data, with each item's state\n\n"
        "Values of environment variables named like secrets (TOKEN, KEY, SECRET, PASSWORD,\n"
        "CREDENTIAL), in any form a file holds them (as is, HTML- or JSON-escaped,\n"
        "URL-encoded), and secrets of a known shape (URL passwords, Authorization and\n"
        "Cookie headers, private keys, GitHub, Hugging Face, AWS, Slack and GitLab tokens)\n"
        "read \"" +
        std::string(redacted_text) + "\" in every file.\n\nWhat is not here, and why:\n";
    bool any = false;
    for (const auto& item : b.items)
        if (item.state != "included") {
            readme += "  " + detail::valid_utf8(item.file) + ": " + item.state + ": " +
                      detail::valid_utf8(item.why) + "\n";
            any = true;
        }
    write_file(b.root + "/README.txt", readme + (any ? "" : "  nothing: every item is here\n"));
}

/// tar (found on PATH, given an argv: no shell) packs the staging root into a new file beside
/// `out`, which is flushed and renamed over `out`: the archive is whole or absent.
status pack(const std::string& staging, const std::string& root_name, const std::string& out) {
    const std::string tar = find_program("tar");
    if (tar.empty())
        return bad_run_input("cannot write " + out + ": no tar program on PATH");
    std::string tmp = out + ".tmp.XXXXXX";
    const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
    if (fd < 0)
        return bad_run_input("--out " + out + ": cannot write there: " + std::strerror(errno));
    ::close(fd);
    const std::string log = staging + "/tar.log";
    process_request req;
    req.argv = {
        tar,  "--create", "--gzip", "--numeric-owner", "--file=" + tmp, "--directory=" + staging,
        "--", root_name};
    req.env_set = {{"LC_ALL", "C"}};
    req.output_path = log;
    req.timeout_seconds = 600;
    const process_outcome p = run_process(req);
    if (!p.started || p.exit_code.value_or(-1) != 0) {
        ::unlink(tmp.c_str());
        return bad_run_input("--out " + out +
                             ": tar failed: " + (p.started ? read_tail(log, 400) : p.start_error));
    }
    const int written = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
    const bool synced = written >= 0 && ::fsync(written) == 0;
    if (written >= 0)
        ::close(written);
    if (!synced || std::rename(tmp.c_str(), out.c_str()) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        return bad_run_input("--out " + out + ": cannot write there: " + std::strerror(err));
    }
    return status::ok();
}

/// RUN must be a run folder and --out's folder a folder: checked before anything is gathered.
/// Whether `out`'s folder is the folder the run sits in, or the run folder itself or a folder in
/// it: a bundle there sits among the runs (`pitfall history ingest runs/*` would take it for one).
bool among_the_runs(const std::string& run_dir, const std::string& out) {
    std::error_code ec;
    const fs::path run = fs::canonical(run_dir, ec);
    if (ec)
        return false;
    const std::string parent = fs::path(out).parent_path().string();
    fs::path folder = fs::canonical(parent.empty() ? "." : parent, ec);
    if (ec)
        return false;
    if (folder == run.parent_path())
        return true;
    for (; !folder.empty() && folder != folder.root_path(); folder = folder.parent_path())
        if (folder == run)
            return true;
    return false;
}

status check_inputs(const bundle_options& options, const std::string& out) {
    struct stat st {};
    if (::stat(options.run_dir.c_str(), &st) != 0)
        return bad_run_input(options.run_dir + ": no such run folder");
    if (!S_ISDIR(st.st_mode))
        return bad_run_input(options.run_dir + ": not a run folder (not a folder)");
    if (auto folder = run_folder::open(options.run_dir); !folder.is_ok())
        return folder.error();
    const std::string parent = fs::path(out).parent_path().string();
    if (::stat(parent.empty() ? "." : parent.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        return bad_run_input("--out " + out + ": no folder " + parent + " to write it in");
    if (::stat(out.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
        return bad_run_input("--out " + out + ": a folder, not a file to write");
    if (options.out.empty() && among_the_runs(options.run_dir, out))
        return bad_run_input(out + ": the default place (the working folder) is among the runs, "
                                   "where `pitfall history ingest` would take the bundle for "
                                   "one: give --out FILE, or run it from another folder");
    return status::ok();
}
} // namespace

status_or<bundle_written> write_bundle(const bundle_options& options) {
    const std::string out =
        options.out.empty() ? default_bundle_path(options.run_dir) : options.out;
    PITFALL_TRY(check_inputs(options, out));
    staging_folder staging;
    if (staging.path.empty())
        return bad_run_input(std::string("cannot make a folder under $TMPDIR: ") +
                             std::strerror(errno));
    const std::string root_name = archive_root(options.run_dir);
    bundle_state b{
        options, staging.path + "/" + root_name, secret_values(current_environment()), {}, {}, 0};
    copy_tree(b, options.run_dir, b.root + "/run", "", 0);
    reseal_copy(b.root + "/run");
    b.items.insert(b.items.begin(),
                   {"run/", "the run folder " + options.run_dir, "included", "", b.run_bytes});
    add_json(b, "doctor.json", "pitfall doctor --json", options.doctor, options.doctor_problem);
    add_json(b, "fingerprint.json", "the fingerprint the doctor took", options.fingerprint,
             options.doctor_problem);
    std::string why_no_libraries;
    const json libraries = loaded_libraries_document(options.run_dir, why_no_libraries);
    add_json(b, "loaded_libraries.json", "each case's loaded_libraries (results.jsonl)", libraries,
             why_no_libraries);
    const std::string env = environment_text(b.secrets);
    write_file(b.root + "/environment.txt", env);
    b.items.push_back({"environment.txt", "the environment of pitfall bundle", "included",
                       "secret-named values redacted", env.size()});
    bundle_item kernel = collect_kernel_messages(b.root + "/kernel-messages.txt", staging.path,
                                                 options.command_timeout_seconds);
    kernel.file = "kernel-messages.txt";
    b.items.push_back(kernel);
    add_nvidia_tools(b);
    scrub_collected(b);
    write_index(b, out);
    PITFALL_TRY(pack(staging.path, root_name, out));
    return bundle_written{out, b.items};
}

} // namespace pitfall::runner
