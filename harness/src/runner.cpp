#include "runner.hpp"

#include "baseline.hpp"
#include "fingerprint.hpp"
#include "report.hpp"
#include "pitfall/detail/inject.hpp"
#include "pitfall/detail/result_file.hpp"
#include "pitfall/detail/process.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <iomanip>
#include <iostream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <unistd.h>

namespace pitfall::runner {
using nlohmann::json;
namespace fs = std::filesystem;

std::string counts_line(const std::map<std::string, int>& counts) {
    std::string line;
    for (const auto& [name, n] : counts)
        line += (line.empty() ? "" : ", ") + std::to_string(n) + ' ' + name;
    return line;
}

std::string utc_now(const char* format) {
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    std::ostringstream out;
    out << std::put_time(&tm, format);
    return out.str();
}

double median(std::vector<double> v) {
    if (v.empty())
        return std::nan("");
    std::sort(v.begin(), v.end());
    const std::size_t mid = v.size() / 2;
    return v.size() % 2 == 1 ? v[mid] : 0.5 * (v[mid - 1] + v[mid]);
}

double first_time_median(const json& result) {
    if (!result.is_object())
        return std::nan("");
    const json samples = result.value("samples", json::object());
    for (const auto& [name, series] : samples.items())
        if (series.value("unit", "s") == "s" && series.contains("values") && series["values"].is_array() &&
            !series["values"].empty())
            return median(series["values"].get<std::vector<double>>());
    return std::nan("");
}

namespace {

int report_error(const status& s) {
    std::cerr << "pitfall: error: " << s.message() << '\n';
    return exit_bad_input;
}

std::string now_iso8601() { return utc_now("%Y-%m-%dT%H:%M:%SZ"); }

/// The most samples any timed series (unit "s") of a result holds; 0 when none.
std::size_t samples_taken(const json& result) {
    std::size_t taken = 0;
    const json series_by_name = result.is_object() ? result.value("samples", json::object()) : json::object();
    for (const auto& [name, series] : series_by_name.items())
        if (series.value("unit", "s") == "s" && series.contains("values") && series["values"].is_array())
            taken = std::max(taken, series["values"].size());
    return taken;
}

/// The request for measuring a case again after an AMBIGUOUS or PERF_REGRESSION timing: three
/// times the samples of the first attempt (odd), so that an episode of interference a few
/// samples long moves the median less and the interval narrows, and twice the time allowed.
process_request remeasure_request(process_request req, const json& first_result) {
    const std::size_t taken = samples_taken(first_result);
    if (taken == 0)
        return req;
    const std::string samples = "samples=" + std::to_string(3 * taken + (taken % 2 == 0 ? 1 : 0));
    bool replaced = false;
    for (std::size_t i = 0; i + 1 < req.argv.size(); ++i)
        if (req.argv[i] == "--param" && req.argv[i + 1].rfind("samples=", 0) == 0) {
            req.argv[i + 1] = samples;
            replaced = true;
        }
    if (!replaced)
        req.argv.insert(req.argv.end(), {"--param", samples});
    req.timeout_seconds *= 2;
    return req;
}

/// Waits `seconds` in short steps; false when Ctrl-C (or TERM) came meanwhile.
bool pause_unless_interrupted(double seconds) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (interrupt_requested == 0 && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return interrupt_requested == 0;
}

std::string timestamp_folder() { return utc_now("%Y%m%d-%H%M%S"); }

std::string format_duration(double seconds) {
    const long s = std::lround(seconds);
    std::ostringstream out;
    out << s / 60 << ':' << std::setw(2) << std::setfill('0') << s % 60;
    return out.str();
}

/// results.jsonl: one JSON document a line, each written with one write() and fsync'd, so a
/// run killed at any moment keeps every line it finished.
class results_log {
public:
    status open(const std::string& path) {
        m_fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (m_fd < 0)
            return status::error(library::pitfall, "bad_input",
                                 "cannot write " + path + ": " + std::strerror(errno), stage::init);
        // A line cut short by a kill mid-write is cut off, back to the last whole record, so
        // the next record starts a line of its own and every later read sees only whole lines.
        std::ifstream in(path, std::ios::binary);
        const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        if (!text.empty() && text.back() != '\n') {
            const auto last_newline = text.rfind('\n');
            const off_t keep = last_newline == std::string::npos ? 0 : static_cast<off_t>(last_newline + 1);
            if (::ftruncate(m_fd, keep) != 0)
                return status::error(library::pitfall, "bad_input",
                                     "cannot repair " + path + ": " + std::strerror(errno), stage::init);
        }
        return status::ok();
    }
    void append(const json& record) {
        const std::string line = record.dump() + "\n";
        std::size_t done = 0;
        while (done < line.size()) {
            const ssize_t n = ::write(m_fd, line.data() + done, line.size() - done);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                return;
            done += static_cast<std::size_t>(n);
        }
        ::fsync(m_fd);
    }
    ~results_log() {
        if (m_fd >= 0)
            ::close(m_fd);
    }

private:
    int m_fd = -1;
};

// The dynamic loader's own words for a library it could not find, before main ran.
std::optional<std::string> missing_library(const std::string& log) {
    // "<program>: error while loading shared libraries: libcudnn.so.9: cannot open shared object file"
    static const std::string marker = "error while loading shared libraries: ";
    const auto at = log.find(marker);
    if (at == std::string::npos)
        return std::nullopt;
    const auto start = at + marker.size();
    const auto colon = log.find(": cannot open shared object file", start);
    if (colon == std::string::npos)
        return std::nullopt;
    return log.substr(start, colon - start);
}

std::string last_line(const std::string& text) {
    std::string trimmed = text;
    while (!trimmed.empty() && (trimmed.back() == '\n' || trimmed.back() == '\r'))
        trimmed.pop_back();
    const auto nl = trimmed.rfind('\n');
    return nl == std::string::npos ? trimmed : trimmed.substr(nl + 1);
}

observation observe(const case_ref& c, const process_outcome& p, const std::string& result_path,
                    const std::string& log_text, double timeout) {
    observation o;
    o.result = json();
    if (!p.started) {
        o.outcome = {{"status", "not_started"}, {"detail", p.start_error}};
        return o;
    }
    if (p.timed_out) {
        std::ostringstream detail;
        detail << "no exit within " << timeout << " s; process group ended (TERM, then KILL)";
        o.outcome = {{"status", "timeout"}, {"detail", detail.str()}};
        return o;
    }
    if (p.signal) {
        o.outcome = {{"status", "signal"}, {"signal", signal_name(*p.signal)}};
        return o;
    }
    const int code = p.exit_code.value_or(-1);
    if (code == 127) {
        if (const auto lib = missing_library(log_text)) {
            o.outcome = {{"status", "load_error"}, {"error", "missing library " + *lib}, {"detail", last_line(log_text)}};
            return o;
        }
    }
    if (code != 0 && code != 77) {
        o.outcome = {{"status", "exit"}, {"exit_code", code}, {"detail", last_line(log_text)}};
        return o;
    }
    std::ifstream in(result_path);
    if (!in) {
        o.outcome = {{"status", "bad_result"}, {"detail", "exit " + std::to_string(code) + " but no result file"}};
        return o;
    }
    try {
        o.result = json::parse(in);
    } catch (const json::parse_error& e) {
        o.outcome = {{"status", "bad_result"}, {"detail", std::string("result is not JSON: ") + e.what()}};
        return o;
    }
    const std::string schema = o.result.value("schema", "");
    if (schema != result_schema || o.result.value("scenario", "") != c.scenario->description.name ||
        o.result.value("variant", "") != c.variant->name || o.result.value("backend", "") != c.backend ||
        !o.result.contains("outcome")) {
        o.outcome = {{"status", "bad_result"},
                     {"detail", "result is not a " + std::string(result_schema) + " document for this case"}};
        return o;
    }
    o.outcome = o.result["outcome"];
    const bool says_unsupported = o.outcome.value("status", "") == "unsupported";
    if ((code == 77) != says_unsupported)
        o.outcome = {{"status", "bad_result"},
                     {"detail", "exit " + std::to_string(code) + " disagrees with outcome " + o.outcome.dump()}};
    return o;
}


// Ratios between variants declared in scenario.json, from the medians measured in this run.
// A ratio the chosen profiles bound ("ratios" in expected/<profile>/<scenario>.json) is judged:
// PASS inside the bounds, PERF_REGRESSION outside (it fails the run); unbounded ones are
// reported only.
json compute_ratios(const scenario_index& index, const std::map<std::string, json>& finished,
                    const profile_choice& choice) {
    json out = json::array();
    for (const auto& s : index.scenarios) {
        for (const auto& r : s.description.ratios) {
            for (const char* backend : {"cpu", "cuda"}) {
                const std::string num_key = std::string(backend) + "." + s.description.name + "." + r.numerator;
                const std::string den_key = std::string(backend) + "." + s.description.name + "." + r.denominator;
                const auto num = finished.find(num_key);
                const auto den = finished.find(den_key);
                if (num == finished.end() || den == finished.end())
                    continue;
                auto samples_of = [&](const json& rec) {
                    const json& res = rec["result"];
                    if (!res.is_object() || !res.contains("samples") || !res["samples"].contains(r.samples))
                        return std::vector<double>{};
                    return res["samples"][r.samples]["values"].get<std::vector<double>>();
                };
                const double a = median(samples_of(num->second));
                const double b = median(samples_of(den->second));
                if (!std::isfinite(a) || !std::isfinite(b) || b <= 0)
                    continue;
                out.push_back({{"scenario", s.description.name},
                               {"backend", backend},
                               {"name", r.name},
                               {"numerator", r.numerator},
                               {"denominator", r.denominator},
                               {"samples", r.samples},
                               {"median_numerator", a},
                               {"median_denominator", b},
                               {"ratio", a / b}});
                const auto [bound, from] = choice.ratio_bounds_for(s.description.name, std::string(backend) + "." + r.name);
                if (bound != nullptr) {
                    const auto why = bound_violation(r.name, *bound, a / b);
                    out.back()["bound"] = *bound;
                    out.back()["profile"] = from->name;
                    out.back()["verdict"] = why ? "PERF_REGRESSION" : "PASS";
                    out.back()["failing"] = why.has_value();
                    if (why)
                        out.back()["reason"] = *why;
                }
            }
        }
    }
    return out;
}


std::string child_cuda_visible_devices() {
    // Under `ctest --resource-spec-file`, the GPU a test was given: pin the case to it.
    const char* gpus = std::getenv("CTEST_RESOURCE_GROUP_0_GPUS");
    if (gpus == nullptr)
        return {};
    const std::string spec = gpus; // "id:0,slots:1"
    const auto id = spec.find("id:");
    if (id == std::string::npos)
        return {};
    const std::string value = spec.substr(id + 3, spec.find(',', id) - id - 3);
    return !value.empty() && std::all_of(value.begin(), value.end(), ::isdigit) ? value : std::string{};
}

} // namespace

/// The records of an existing results.jsonl; an unreadable last line (a kill mid-write) is
/// skipped, any other malformed line is bad input naming the line.
status_or<std::vector<json>> read_results(const std::string& path) {
    std::ifstream in(path);
    if (!in)
        return status::error(library::pitfall, "bad_input", "cannot read " + path, stage::init);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);)
        if (!line.empty())
            lines.push_back(line);
    std::vector<json> records;
    for (std::size_t i = 0; i < lines.size(); ++i) {
        try {
            records.push_back(json::parse(lines[i]));
        } catch (const json::parse_error&) {
            if (i + 1 == lines.size())
                break;
            return status::error(library::pitfall, "bad_input",
                                 path + ": line " + std::to_string(i + 1) + " is not JSON", stage::init);
        }
    }
    return records;
}


int list_cases(const common_options& options, bool as_json) {
    auto index = load_index(options.index_path);
    if (!index.is_ok())
        return report_error(index.error());
    auto cases = select_cases(index.value(), options.filter);
    if (!cases.is_ok())
        return report_error(cases.error());
    if (as_json) {
        json out = json::array();
        for (const auto& c : cases.value())
            out.push_back({{"test", c.test_name()},
                           {"scenario", c.scenario->description.name},
                           {"backend", c.backend},
                           {"variant", c.variant->name},
                           {"kind", c.variant->kind},
                           {"labels", c.labels()},
                           {"timeout_seconds", c.scenario->description.timeout_seconds},
                           {"doc", c.variant->doc}});
        std::cout << out.dump(2) << '\n';
        return exit_ok;
    }
    std::size_t width = 4;
    for (const auto& c : cases.value())
        width = std::max(width, c.test_name().size());
    std::cout << std::left << std::setw(static_cast<int>(width) + 2) << "CASE" << "LABELS\n";
    for (const auto& c : cases.value()) {
        std::string labels;
        for (const auto& l : c.labels())
            labels += (labels.empty() ? "" : ",") + l;
        std::cout << std::left << std::setw(static_cast<int>(width) + 2) << c.test_name() << labels << '\n';
    }
    std::cout << cases.value().size() << " cases in " << index.value().scenarios.size() << " scenarios\n";
    return exit_ok;
}

int run_cases(const run_options& requested) {
    auto index_or = load_index(requested.common.index_path);
    if (!index_or.is_ok())
        return report_error(index_or.error());
    const scenario_index& index = index_or.value();

    // A resumed run completes the run as it was asked for: its selection, samples and timeout
    // scale come from its own header, not from this command line (the profiles are chosen
    // again from this environment's fingerprint).
    run_options options = requested;
    const bool resuming = !options.resume_dir.empty();
    std::vector<json> earlier;
    std::set<std::string> earlier_selection;
    if (resuming) {
        const auto& f = options.common.filter;
        if (!f.scenarios.empty() || !f.backends.empty() || !f.variants.empty() || !f.labels.empty() ||
            options.samples || options.timeout_scale != 1.0) {
            std::cerr << "pitfall: error: --resume completes a run as it was started: drop --scenario, --backend, "
                         "--variant, --label, --samples and --timeout-scale\n";
            return exit_bad_input;
        }
        const std::string path = options.resume_dir + "/results.jsonl";
        std::error_code exists_ec;
        if (!fs::exists(path, exists_ec)) {
            std::cerr << "pitfall: error: --resume " << options.resume_dir << ": no results.jsonl there\n";
            return exit_bad_input;
        }
        auto records = read_results(path);
        if (!records.is_ok())
            return report_error(records.error());
        earlier = std::move(records).value();
        const auto header = std::find_if(earlier.begin(), earlier.end(),
                                         [](const json& r) { return r.value("record", "") == "run"; });
        if (header == earlier.end() || !header->contains("selection")) {
            std::cerr << "pitfall: error: --resume " << path << ": no run header (record \"run\") to resume from\n";
            return exit_bad_input;
        }
        for (const auto& key : (*header)["selection"])
            earlier_selection.insert(key.get<std::string>());
        const json saved = header->value("options", json::object());
        if (saved.contains("samples") && saved["samples"].is_number_integer())
            options.samples = saved["samples"].get<int>();
        options.timeout_scale = saved.value("timeout_scale", 1.0);
    }

    auto cases_or = select_cases(index, options.common.filter);
    if (!cases_or.is_ok())
        return report_error(cases_or.error());
    std::vector<case_ref> cases = std::move(cases_or).value();
    if (resuming) {
        std::vector<case_ref> kept;
        for (const auto& c : cases)
            if (earlier_selection.count(c.key()) != 0)
                kept.push_back(c);
        if (kept.size() != earlier_selection.size()) {
            std::cerr << "pitfall: error: --resume " << options.resume_dir
                      << ": some of its cases are not in this build's index (" << index.path << ")\n";
            return exit_bad_input;
        }
        cases = std::move(kept);
    }
    if (cases.empty()) {
        std::cerr << "pitfall: error: the filters select no case (see `pitfall list`)\n";
        return exit_bad_input;
    }
    auto profiles_or = load_profiles(options.common.expected_dir, index);
    if (!profiles_or.is_ok())
        return report_error(profiles_or.error());

    // The run folder: a new one, or the one being resumed.
    const std::string dir = resuming ? options.resume_dir
                            : !options.out_dir.empty() ? options.out_dir
                                                       : std::string(PITFALL_DEFAULT_RUNS) + "/" + timestamp_folder();
    const std::string results_path = dir + "/results.jsonl";
    std::error_code ec;
    if (!resuming && fs::exists(results_path, ec)) {
        if (!options.replace) {
            std::cerr << "pitfall: error: --out " << dir
                      << " already holds a run (use --resume to complete it, --replace to start it afresh)\n";
            return exit_bad_input;
        }
        // Only what a run writes: --out may name a folder that holds other things too.
        for (const char* item : {"results.jsonl", "summary.json", "fingerprint.json", "cases", "logs"})
            fs::remove_all(fs::path(dir) / item, ec);
    }
    fs::create_directories(dir + "/cases", ec);
    fs::create_directories(dir + "/logs", ec);
    if (ec || ::access(dir.c_str(), W_OK) != 0) {
        std::cerr << "pitfall: error: --out " << dir << ": cannot create or write the run folder"
                  << (ec ? ": " + ec.message() : std::string()) << '\n';
        return exit_bad_input;
    }

    std::map<std::string, json> finished; // case key -> its judged record
    for (const auto& r : earlier)
        if (r.value("record", "") == "case")
            finished[r.value("case", "")] = r;

    const json fingerprint = take_fingerprint(options.probe_program, dir + "/logs");
    const json summary_facts = fingerprint_summary(fingerprint);
    const std::string fp_id = fingerprint_id(summary_facts);
    judge_context judging;
    judging.fingerprint_id = fp_id;
    judging.timing.floor = options.timing_floor;
    auto choice_or = choose_profile(profiles_or.value(), summary_facts, options.profile_override);
    if (!choice_or.is_ok())
        return report_error(choice_or.error());
    const profile_choice choice = choice_or.value();
    const json profile_json = choice.chosen != nullptr
                                  ? json{{"name", choice.chosen->name}, {"reason", choice.reason}}
                                  : json{{"name", nullptr}, {"reason", choice.reason}};

    results_log log;
    if (auto opened = log.open(results_path); !opened.is_ok())
        return report_error(opened);
    json selection = json::array();
    for (const auto& c : cases)
        selection.push_back(c.key());
    log.append({{"record", resuming ? "resumed" : "run"},
                {"schema", "pitfall.run/1"},
                {"at", now_iso8601()},
                {"pitfall_version", PITFALL_VERSION},
                {"argv", options.argv},
                {"index", index.path},
                {"build", index.build},
                {"fingerprint", fingerprint},
                {"fingerprint_summary", summary_facts},
                {"fingerprint_id", fp_id},
                {"profile", profile_json},
                {"selection", selection},
                {"options", {{"samples", options.samples ? json(*options.samples) : json(nullptr)},
                             {"timeout_scale", options.timeout_scale},
                             {"timing_floor", options.timing_floor},
                             {"remeasure_pause_seconds", options.remeasure_pause}}}});
    (void)write_file_atomically(dir + "/fingerprint.json", fingerprint.dump(2) + "\n");

    std::cout << "pitfall: " << cases.size() << " cases -> " << dir << '\n'
              << "profile: " << (choice.chosen ? choice.chosen->name : std::string("(none)")) << " ("
              << choice.reason << ")\n";
    if (resuming)
        std::cout << "resuming: " << finished.size() << " cases already finished\n";
    if (const char* injecting = std::getenv(inject::env_name); injecting != nullptr && *injecting != '\0')
        std::cout << "warning: " << inject::env_name << "=" << injecting
                  << " is set: the cases it names report injected faults, not real ones\n";

    std::size_t name_width = 4;
    for (const auto& c : cases)
        name_width = std::max(name_width, c.test_name().size() + 2);

    install_interrupt_handlers();
    const std::string visible = child_cuda_visible_devices();
    std::size_t position = 0;
    double spent = 0;
    std::size_t ran = 0;
    bool interrupted = false;
    std::vector<std::string> order;
    for (const auto& c : cases) {
        ++position;
        const std::string key = c.key();
        order.push_back(key);
        if (finished.count(key) != 0)
            continue;
        if (interrupt_requested != 0) {
            interrupted = true;
            break;
        }
        std::cout << '[' << std::setw(static_cast<int>(std::to_string(cases.size()).size())) << position << '/'
                  << cases.size() << "] " << std::left << std::setw(static_cast<int>(name_width)) << c.test_name() << std::right << std::flush;
        log.append({{"record", "started"}, {"case", key}, {"at", now_iso8601()}});

        const std::string result_path = dir + "/cases/" + key + ".json";
        const std::string log_path = dir + "/logs/" + key + ".log";
        ::unlink(result_path.c_str());
        process_request req;
        req.argv = {c.scenario->program, "--backend", c.backend, "--variant", c.variant->name, "--out", result_path};
        if (options.samples)
            req.argv.insert(req.argv.end(), {"--param", "samples=" + std::to_string(*options.samples)});
        req.output_path = log_path;
        req.timeout_seconds = c.scenario->description.timeout_seconds * options.timeout_scale;
        if (!visible.empty()) {
            // CTest's ids come from nvidia-smi, which counts in PCI order; CUDA's default order
            // is fastest first. Make CUDA count the same way.
            req.env_set["CUDA_VISIBLE_DEVICES"] = visible;
            req.env_set["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
        }
        process_outcome p = run_process(req);
        if (p.interrupted) {
            log.append({{"record", "interrupted"}, {"case", key}, {"at", now_iso8601()}});
            std::cout << " INTERRUPTED\n";
            interrupted = true;
            break;
        }
        std::string log_text = read_tail(log_path, 16 * 1024);
        observation o = observe(c, p, result_path, log_text, req.timeout_seconds);
        o.peak_rss_bytes = static_cast<double>(p.peak_rss_bytes);
        static const json no_entry;
        const auto [entry, judged_by] =
            choice.entry_for(c.scenario->description.name, c.backend + "." + c.variant->name);
        const json* expected = entry != nullptr ? entry : &no_entry;
        verdict v = judge(o, *expected, c.backend, judging);
        json attempts = json::array();
        if (v.kind == verdict_kind::ambiguous || v.kind == verdict_kind::perf_regression) {
            // Up to two more processes before a timing verdict stands, each after a pause and
            // with three times the samples (remeasure_request). Separate processes on a shared
            // machine differ by more than one process's samples show, and interference only
            // ever adds time: like the baseline (the fastest of the runs blessed), the candidate
            // is the least disturbed of its processes, the one with the lowest median.
            // Its verdict stands: a PERF_REGRESSION fails the run only when even that process is
            // slower beyond tolerance; AMBIGUOUS warns.
            struct attempt {
                process_outcome p;
                observation o;
                verdict v;
                std::string log_text;
            };
            std::vector<attempt> tried{{p, o, v, log_text}};
            while (tried.size() < 3 && (tried.back().v.kind == verdict_kind::ambiguous ||
                                        tried.back().v.kind == verdict_kind::perf_regression)) {
                std::cout << ' ' << to_string(tried.back().v.kind) << "? measuring again..." << std::flush;
                // Interference on a shared machine comes in episodes of seconds (a co-tenant busy
                // on the other hyperthread of the core): a process started at once lands in the
                // same one.
                // The pause grows so that three attempts span several seconds.
                if (!pause_unless_interrupted(options.remeasure_pause * static_cast<double>(tried.size())))
                    break;
                ::unlink(result_path.c_str());
                attempt next;
                next.p = run_process(remeasure_request(req, tried.front().o.result));
                if (next.p.interrupted)
                    break;
                next.log_text = read_tail(log_path, 16 * 1024);
                next.o = observe(c, next.p, result_path, next.log_text, req.timeout_seconds);
                next.o.peak_rss_bytes = static_cast<double>(next.p.peak_rss_bytes);
                next.v = judge(next.o, *expected, c.backend, judging);
                tried.push_back(std::move(next));
            }
            if (interrupt_requested != 0 && tried.size() < 3 &&
                (tried.back().v.kind == verdict_kind::ambiguous || tried.back().v.kind == verdict_kind::perf_regression)) {
                log.append({{"record", "interrupted"}, {"case", key}, {"at", now_iso8601()}});
                std::cout << " INTERRUPTED\n";
                interrupted = true;
                break;
            }
            std::size_t best = 0;
            double best_median = std::numeric_limits<double>::infinity();
            for (std::size_t i = 0; i < tried.size(); ++i) {
                const double m = first_time_median(tried[i].o.result);
                attempts.push_back({{"verdict", to_string(tried[i].v.kind)},
                                    {"reason", tried[i].v.reason},
                                    {"samples", samples_taken(tried[i].o.result)},
                                    {"median_seconds", std::isfinite(m) ? json(m) : json(nullptr)},
                                    {"wall_seconds", tried[i].p.wall_seconds}});
                // An attempt that failed otherwise (a crash, another outcome) is the verdict.
                if (is_failing(tried[i].v.kind) && tried[i].v.kind != verdict_kind::perf_regression) {
                    best = i;
                    break;
                }
                if (m < best_median) {
                    best_median = m;
                    best = i;
                }
            }
            p = tried[best].p;
            o = tried[best].o;
            v = tried[best].v;
            log_text = tried[best].log_text;
            v.reason = "least disturbed of " + std::to_string(tried.size()) + " processes: " + v.reason;
            if (v.kind == verdict_kind::ambiguous)
                v.reason += " (a warning, not a failure)";
            if (o.result.is_object()) // the kept result is the one judged
                (void)write_file_atomically(result_path, o.result.dump(2) + "\n");
        }
        json process = {{"exit_code", p.exit_code ? json(*p.exit_code) : json(nullptr)},
                        {"signal", p.signal ? json(signal_name(*p.signal)) : json(nullptr)},
                        {"timed_out", p.timed_out},
                        {"wall_seconds", p.wall_seconds},
                        {"peak_rss_bytes", p.peak_rss_bytes}};
        json record = {{"record", "case"},
                       {"case", key},
                       {"test", c.test_name()},
                       {"scenario", c.scenario->description.name},
                       {"backend", c.backend},
                       {"variant", c.variant->name},
                       {"kind", c.variant->kind},
                       {"labels", c.labels()},
                       {"verdict", to_string(v.kind)},
                       {"failing", is_failing(v.kind)},
                       {"reason", v.reason},
                       {"observed", o.outcome},
                       {"process", process},
                       {"result", o.result},
                       {"timings", v.timings},
                       {"attempts", attempts},
                       {"baseline", {{"profile", judged_by != nullptr ? json(judged_by->name) : json(nullptr)},
                                     {"entry", *expected}}},
                       {"log", "logs/" + key + ".log"},
                       {"output_tail", log_text.size() > 2000 ? log_text.substr(log_text.size() - 2000) : log_text},
                       {"finished_at", now_iso8601()}};
        log.append(record);
        finished[key] = record;
        spent += p.wall_seconds;
        ++ran;
        std::size_t remaining = 0;
        for (std::size_t k = position; k < cases.size(); ++k)
            remaining += finished.count(cases[k].key()) == 0 ? 1 : 0;
        std::cout << std::left << std::setw(17) << to_string(v.kind) << std::right << std::fixed
                  << std::setprecision(2) << std::setw(7) << p.wall_seconds << " s   ETA "
                  << format_duration(spent / static_cast<double>(ran) * static_cast<double>(remaining)) << '\n';
        if (is_failing(v.kind) || v.kind == verdict_kind::no_baseline || v.kind == verdict_kind::ambiguous)
            std::cout << "      " << v.reason << '\n';
    }

    // Summary over every finished case of this run folder (a resumed run included).
    std::map<std::string, int> counts;
    json summary_cases = json::array();
    bool any_failing = false;
    bool all_unsupported = true;
    const std::size_t width = name_width;
    std::ostringstream table;
    table << '\n' << std::left << std::setw(static_cast<int>(width)) << "CASE" << std::setw(18) << "VERDICT"
          << "DETAIL\n";
    for (const auto& key : order) {
        const auto it = finished.find(key);
        if (it == finished.end()) {
            table << std::left << std::setw(static_cast<int>(width)) << ("pitfall." + key) << "NOT RUN\n";
            all_unsupported = false;
            continue;
        }
        const json& r = it->second;
        const std::string verdict_text = r.value("verdict", "?");
        ++counts[verdict_text];
        any_failing = any_failing || r.value("failing", false);
        all_unsupported = all_unsupported && verdict_text == "UNSUPPORTED";
        std::string reason = r.value("reason", "");
        if (reason.size() > 90)
            reason = reason.substr(0, 87) + "...";
        table << std::left << std::setw(static_cast<int>(width)) << r.value("test", key) << std::setw(18)
              << verdict_text << reason << '\n';
        summary_cases.push_back({{"case", key},
                                 {"verdict", verdict_text},
                                 {"failing", r.value("failing", false)},
                                 {"reason", r.value("reason", "")},
                                 {"wall_seconds", r["process"].value("wall_seconds", 0.0)}});
    }
    const json ratios = compute_ratios(index, finished, choice);
    for (const auto& r : ratios)
        any_failing = any_failing || r.value("failing", false);
    int code = interrupted ? exit_interrupted : any_failing ? exit_failed : exit_ok;
    if (!interrupted && !any_failing && all_unsupported && options.skip_code)
        code = *options.skip_code;
    json summary = {{"schema", "pitfall.summary/1"},
                    {"at", now_iso8601()},
                    {"complete", !interrupted && finished.size() >= cases.size()},
                    {"cases_selected", cases.size()},
                    {"cases_finished", summary_cases.size()},
                    {"counts", counts},
                    {"profile", profile_json},
                    {"fingerprint_summary", summary_facts},
                    {"ratios", ratios},
                    {"cases", summary_cases},
                    {"exit_code", code}};
    if (auto written = write_file_atomically(dir + "/summary.json", summary.dump(2) + "\n"); !written.is_ok())
        std::cerr << "pitfall: warning: " << written.message() << '\n';

    std::cout << table.str();
    for (const auto& r : ratios)
        std::cout << "ratio " << r["backend"].get<std::string>() << '.' << r["scenario"].get<std::string>() << '.'
                  << r["name"].get<std::string>() << " = " << std::setprecision(3) << r["ratio"].get<double>()
                  << (r.contains("verdict") ? "  " + r["verdict"].get<std::string>() + " (bound " + r["bound"].dump() + ")"
                                            : std::string())
                  << '\n';
    std::cout << '\n' << counts_line(counts) << (interrupted ? "  (interrupted: --resume " + dir + " completes it)" : std::string()) << '\n'
              << "results: " << results_path << "\nsummary: " << dir << "/summary.json\n";
    // The reports, rendered from results.jsonl as written (an interrupted run's too: what a
    // person reads first is what finished and what did not). A report that cannot be written
    // is a warning: the results are safe either way.
    auto rendered = load_run(dir);
    const status written = rendered.is_ok() ? write_reports(rendered.value()) : rendered.error();
    if (written.is_ok())
        std::cout << "reports: " << dir << '/' << report_html_name << ", " << report_junit_name << ", "
                  << report_markdown_name << ", " << report_json_name << '\n';
    else
        std::cerr << "pitfall: warning: reports not written: " << written.message() << '\n';
    return code;
}

} // namespace pitfall::runner
