// The gate cases on one GPU: `pitfall run` of the cases marked "gate": true with only that GPU
// visible, each case's verdict read back from the run's results.jsonl.
#include "gate/gate_parts.hpp"
#include "util/json_member.hpp"

#include "doctor/doctor.hpp"
#include "run/run_folder.hpp"
#include "run/runner.hpp"

#include <cstdlib>
#include <iostream>
#include <sstream>

namespace pitfall::runner {

std::string gate_case_standing(const std::string& verdict, const std::string& reason) {
    if (verdict == "PASS")
        return "ok";
    // An environment fault (the stub driver, a device the driver cannot open) turns a case that
    // differs from its baseline into UNSUPPORTED "environment: ...": on a gate, that is the
    // node failing the case.
    if (verdict == "UNSUPPORTED")
        return reason.rfind("environment:", 0) == 0 ? "failing" : "unjudged";
    if (verdict == "NO_BASELINE" || verdict == "NOT_COMPARED")
        return "unjudged";
    return "failing";
}

namespace gate_parts {
namespace {
using nlohmann::json;

std::string text_of(const json& j) {
    return j.is_string() ? j.get<std::string>() : std::string();
}

/// Standard output and error sent to a string while it lives: the run's terminal lines are
/// the gate's evidence, not its output.
class captured_output {
public:
    captured_output()
        : out_(std::cout.rdbuf(text_.rdbuf())), err_(std::cerr.rdbuf(text_.rdbuf())) {}
    ~captured_output() {
        std::cout.rdbuf(out_);
        std::cerr.rdbuf(err_);
    }
    captured_output(const captured_output&) = delete;
    captured_output& operator=(const captured_output&) = delete;
    std::string text() const { return text_.str(); }

private:
    std::ostringstream text_;
    std::streambuf* out_;
    std::streambuf* err_;
};

/// CUDA_VISIBLE_DEVICES set while it lives, and put back as it was (unset included).
class visible_devices_set {
public:
    explicit visible_devices_set(const std::string& value) {
        if (const char* old = std::getenv("CUDA_VISIBLE_DEVICES"))
            old_ = old;
        if (!value.empty())
            ::setenv("CUDA_VISIBLE_DEVICES", value.c_str(), 1);
        changed_ = !value.empty();
    }
    ~visible_devices_set() {
        if (!changed_)
            return;
        if (old_)
            ::setenv("CUDA_VISIBLE_DEVICES", old_->c_str(), 1);
        else
            ::unsetenv("CUDA_VISIBLE_DEVICES");
    }
    visible_devices_set(const visible_devices_set&) = delete;
    visible_devices_set& operator=(const visible_devices_set&) = delete;

private:
    std::optional<std::string> old_;
    bool changed_ = false;
};

/// The doctor's errors and warnings over the fingerprint of the run that saw only this GPU;
/// an error the requirement does not accept drains (`verdict`, `why`).
json gpu_findings(const json& fingerprint, const std::set<std::string>& accepted,
                  const std::string& where, std::string& verdict, std::string& why) {
    json out = json::array();
    for (const auto& f : diagnose(fingerprint).findings) {
        if (f.severity == finding_severity::ok)
            continue;
        out.push_back({{"id", f.id}, {"severity", severity_name(f.severity)}, {"title", f.title}});
        if (f.severity == finding_severity::error && accepted.count(f.id) == 0 &&
            verdict != "drain") {
            verdict = "drain";
            why = f.title + " [" + f.id + "] on " + where;
        }
    }
    return out;
}

/// The last non-empty line of the run's terminal output: why it could not run its cases.
std::string last_line(const std::string& text) {
    std::istringstream in(text);
    std::string line, last;
    while (std::getline(in, line))
        if (!line.empty())
            last = line;
    return last;
}

/// The run of the gate cases: those labelled "gate" (scenario.json "gate": true), CUDA backend.
run_options gate_run_options(const gate_options& options, const std::string& folder) {
    run_options r;
    r.common.index_path = options.index_path;
    r.common.expected_dir = options.expected_dir;
    r.probe_program = options.probe_program;
    r.out_dir = folder;
    r.replace = true;
    // Judged by their outcome: the times are recorded, never judged, and one sample is enough.
    r.judge_times = false;
    r.samples = 1;
    r.remeasure_pause = 0;
    r.argv = {"pitfall", "gate"};
    r.common.filter.backends = {"cuda"};
    r.common.filter.labels = {"gate"};
    r.deadline = options.deadline;
    return r;
}

} // namespace

std::string gate_gpu::visible_devices() const {
    if (!uuid.empty())
        return uuid;
    return index ? std::to_string(*index) : std::string();
}

json gate_gpu::to_json() const {
    return {{"index", index ? json(*index) : json(nullptr)},
            {"uuid", uuid.empty() ? json(nullptr) : json(uuid)},
            {"name", name.empty() ? json(nullptr) : json(name)}};
}

std::vector<gate_gpu> gpus_of(const json& fingerprint) {
    std::vector<gate_gpu> gpus;
    const json& libraries = member(fingerprint, "libraries");
    const json& nvml = member(member(libraries, "nvml"), "devices");
    const json& cuda = member(member(libraries, "cuda"), "devices");
    const json& devices = nvml.is_array() && !nvml.empty() ? nvml : cuda;
    if (devices.is_array())
        for (std::size_t i = 0; i < devices.size() && i < 64; ++i) {
            gate_gpu g;
            g.index = static_cast<int>(i);
            g.uuid = text_of(member(devices[i], "uuid"));
            g.name = text_of(member(devices[i], "name"));
            gpus.push_back(std::move(g));
        }
    if (gpus.empty())
        gpus.emplace_back();
    return gpus;
}

json run_gate_cases(const gate_options& options, const gate_gpu& gpu,
                    const std::vector<std::string>& cases, const std::string& folder,
                    const std::set<std::string>& accepted, std::string& why) {
    json entry = gpu.to_json();
    entry["cases"] = json::array();
    entry["failing_cases"] = json::array();
    const std::string where = gpu.index ? "GPU " + std::to_string(*gpu.index) : "this node";
    int code = 0;
    std::string terminal;
    {
        visible_devices_set only(gpu.visible_devices());
        captured_output captured;
        code = run_cases(gate_run_options(options, folder));
        terminal = captured.text();
    }
    if (code != exit_ok && code != exit_failed) {
        entry["verdict"] = "unjudged";
        why = "the gate cases could not run on " + where + ": " + last_line(terminal);
        return entry;
    }
    // The run's own reader: the newest record of each case, typed, and the session's
    // fingerprint (the GPU seen alone).
    auto folder_read = run_folder::open(folder);
    auto log = folder_read.is_ok() ? folder_read->read() : status_or<run_log>(folder_read.error());
    if (!log.is_ok()) {
        entry["verdict"] = "unjudged";
        why = "the gate cases' run on " + where + " cannot be read: " + log.error().message();
        return entry;
    }
    std::string verdict = "admit";
    entry["findings"] = gpu_findings(log->latest.fingerprint, accepted, where, verdict, why);
    for (const auto& c : cases) {
        const case_record* record = log->find(c);
        json one = {{"case", c}};
        std::string standing = "unjudged", reason = "no record: the run ended before it";
        if (record != nullptr) {
            one["verdict"] = to_string(record->verdict);
            reason = record->reason;
            const std::string error = text_of(member(record->observed, "error"));
            one["outcome"] = error.empty() ? text_of(member(record->observed, "status")) : error;
            standing = gate_case_standing(one["verdict"].get<std::string>(), reason);
        } else
            one["verdict"] = "NOT_RUN";
        if (!reason.empty())
            one["why"] = reason;
        entry["cases"].push_back(one);
        // "gate case C on GPU 0: FAIL: why", or "... could not be judged: NO_BASELINE: why".
        std::string said = "gate case ";
        said += c;
        said += " on ";
        said += where;
        said += standing == "unjudged" ? " could not be judged: " : ": ";
        said += one["verdict"].get<std::string>();
        if (!reason.empty())
            said += ": " + reason;
        if (standing == "failing") {
            entry["failing_cases"].push_back(c);
            if (verdict != "drain")
                why = said;
            verdict = "drain";
        } else if (standing == "unjudged" && verdict == "admit") {
            verdict = "unjudged";
            why = said;
        }
    }
    entry["verdict"] = verdict;
    return entry;
}

} // namespace gate_parts
} // namespace pitfall::runner
