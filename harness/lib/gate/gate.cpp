// `pitfall gate`: the doctor's findings and the gate cases on each GPU, one verdict for the
// node, said in one line, in JSON, and to Slurm where it asks.
#include "gate/gate.hpp"

#include "gate/gate_parts.hpp"
#include "gate/requirement.hpp"
#include "run/runner.hpp"

#include "pitfall/detail/json_file.hpp"
#include "pitfall/detail/result_file.hpp"

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <set>

#include <sys/stat.h>
#include <unistd.h>

namespace pitfall::runner {
namespace {
using nlohmann::json;
namespace fs = std::filesystem;
using namespace gate_parts;

std::string host_name() {
    char name[256] = {};
    if (::gethostname(name, sizeof name - 1) != 0)
        return "";
    std::string text = name;
    return text.substr(0, text.find('.'));
}

/// The gate's verdict as it grows: the worst standing seen, with the first reason for it.
struct gate_verdict {
    std::string verdict = "admit";
    std::string reason;
    void drain(const std::string& why) {
        if (verdict != "drain")
            reason = why;
        verdict = "drain";
    }
    void unjudged(const std::string& why) {
        if (verdict == "admit") {
            verdict = "unjudged";
            reason = why;
        }
    }
    int exit_code() const {
        return verdict == "admit" ? gate_admit : verdict == "drain" ? gate_drain : gate_unjudged;
    }
};

/// A working folder for the probe's log and the gate cases' runs: --keep-runs, else one under
/// $TMPDIR removed at the end.
struct work_folder {
    std::string path;
    bool remove = false;
    explicit work_folder(const std::string& keep) {
        if (!keep.empty()) {
            std::error_code ec;
            fs::create_directories(keep, ec);
            if (!ec)
                path = keep;
            return;
        }
        const char* tmp = std::getenv("TMPDIR");
        std::string pattern =
            std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/pitfall-gate-XXXXXX";
        if (::mkdtemp(pattern.data()) != nullptr) {
            path = pattern;
            remove = true;
        }
    }
    ~work_folder() {
        if (remove) {
            std::error_code ec;
            fs::remove_all(path, ec);
        }
    }
    work_folder(const work_folder&) = delete;
    work_folder& operator=(const work_folder&) = delete;
};

/// The gate's own runtime folder (PITFALL_RUNTIME_DIR): the machine-wide case lock and the
/// kept probe answers of the user's runs are not the gate's (a health check must decide in
/// seconds, not wait behind a timed case of a job that holds the lock). A new folder under
/// $TMPDIR, mode 0700, removed at the end: never one inside --keep-runs, whose contents are the
/// user's and not the gate's to delete.
bool own_runtime_folder(const work_folder& runtime) {
    if (runtime.path.empty() || ::chmod(runtime.path.c_str(), 0700) != 0)
        return false;
    ::setenv("PITFALL_RUNTIME_DIR", runtime.path.c_str(), 1);
    return true;
}

json findings_json(const std::string& required, const machine_view& view, gate_verdict& v) {
    json out = json::array();
    for (const auto& f : view.doctor.findings) {
        if (f.severity == finding_severity::ok)
            continue;
        const bool accepted = accepted_by_requirement(required, view, f);
        out.push_back({{"id", f.id},
                       {"severity", severity_name(f.severity)},
                       {"title", f.title},
                       {"observed", f.observed},
                       {"fix", f.fix},
                       {"rule", f.rule},
                       {"accepted", accepted}});
    }
    if (const auto unmet = unmet_requirement(required, view))
        v.drain(*unmet);
    return out;
}

bool contains_cuda(const std::vector<std::string>& backends) {
    for (const auto& b : backends)
        if (b == "cuda")
            return true;
    return false;
}

/// The gate cases' ids, in index order; empty where the index marks none.
std::vector<std::string> gate_cases(const scenario_index& index) {
    std::vector<std::string> ids;
    for (const auto& s : index.scenarios)
        for (const auto& variant : s.description.variants)
            if (variant.gate && contains_cuda(s.description.backends_of(variant)))
                ids.push_back("cuda." + s.description.name + "." + variant.name);
    return ids;
}

/// The line the gate prints (and the reason Slurm keeps): "drain: pitfall: ...".
std::string verdict_line(const gate_verdict& v, const json& doc) {
    if (v.verdict != "admit")
        return v.verdict + ": " + v.reason;
    std::size_t cases = 0, gpus = 0;
    for (const auto& g : doc["gpus"]) {
        cases += g["cases"].size();
        gpus += g["index"].is_null() ? 0 : 1;
    }
    return "admit: pitfall: " + doc["node"].get<std::string>() + " passes (" +
           std::to_string(gpus) + " GPU" + (gpus == 1 ? "" : "s") + ", " + std::to_string(cases) +
           " gate case runs, profile " +
           (doc["profile"].is_string() ? doc["profile"].get<std::string>() : "none") + ")";
}

/// Everything but Slurm: the machine examined, the requirement, the cases on each GPU.
json judge_node(const gate_options& o, const std::string& node, const std::string& folder,
                gate_verdict& v) {
    json doc = {{"schema", "pitfall.gate/1"}, {"node", node},
                {"require", o.require},       {"profile", nullptr},
                {"findings", json::array()},  {"gpus", json::array()}};
    auto index = load_index(o.index_path);
    if (!index.is_ok()) {
        v.unjudged("the scenario index cannot be read: " + index.error().message());
        return doc;
    }
    machine_view view;
    // The probe runs afresh: the runtime folder is the gate's own and empty. Its answer is kept
    // there, so the gate cases' run under the same environment (a node without a GPU) reuses
    // it instead of probing again; each GPU alone is probed again (CUDA_VISIBLE_DEVICES differs).
    // The probe shares the budget: a GPU library whose load hangs hangs it, and the gate says so
    // (the doctor's probe-failed finding, a drain) within the budget, the 2 s between the
    // probe's TERM and its KILL included.
    const double left =
        std::chrono::duration<double>(*o.deadline - std::chrono::steady_clock::now()).count();
    if (auto seen = examine_machine(o.probe_program, folder, index.value(), o.expected_dir, true,
                                    view, std::max(0.5, std::min(30.0, left - 2.5)));
        !seen.is_ok()) {
        v.unjudged("the baselines cannot be read: " + seen.message());
        return doc;
    }
    doc["profile"] = view.choice.chosen ? json(view.choice.chosen->name) : json(nullptr);
    doc["fingerprint_id"] = view.fingerprint_id;
    doc["host_id"] = view.host_id;
    doc["facts"] = view.summary;
    doc["findings"] = findings_json(o.require, view, v);
    auto cases = gate_cases(index.value());
    if (cases.empty())
        v.unjudged("the index marks no gate case (scenario.json \"gate\": true)");
    // The probe itself failed (a GPU library that hangs or crashes as it loads): a drain, and
    // the gate cases, whose run probes again, would only spend the rest of the budget on it.
    for (const auto& f : view.doctor.findings)
        if (f.id == "probe-failed" && f.severity == finding_severity::error)
            cases.clear();
    std::set<std::string> accepted;
    for (const auto& f : view.doctor.findings)
        if (accepted_by_requirement(o.require, view, f))
            accepted.insert(f.id);
    json counts = json::object();
    int n = 0;
    for (const auto& gpu : gpus_of(view.fingerprint)) {
        if (cases.empty())
            break;
        std::string why;
        json entry =
            run_gate_cases(o, gpu, cases, folder + "/gpu-" + std::to_string(n++), accepted, why);
        for (const auto& c : entry["cases"])
            counts[c["verdict"].get<std::string>()] =
                counts.value(c["verdict"].get<std::string>(), 0) + 1;
        if (entry["verdict"] == "drain")
            v.drain(why);
        else if (entry["verdict"] == "unjudged")
            v.unjudged(why);
        doc["gpus"].push_back(std::move(entry));
    }
    doc["counts"] = counts;
    return doc;
}

} // namespace

std::string one_line_reason(const std::string& text, std::size_t limit) {
    std::string out;
    bool space = false;
    for (const unsigned char c : text) {
        if (c < 0x20 || c == 0x7f || c == ' ') {
            space = !out.empty();
            continue;
        }
        if (space)
            out += ' ';
        space = false;
        out += c < 0x80 ? static_cast<char>(c) : '?';
    }
    if (out.size() > limit)
        out = out.substr(0, limit - 3) + "...";
    return out;
}

bool valid_node_name(const std::string& name) {
    if (name.empty() || name.size() > 64 || name[0] == '-')
        return false;
    for (const unsigned char c : name)
        if (!std::isalnum(c) && c != '.' && c != '_' && c != '-')
            return false;
    return true;
}

int run_gate(const gate_options& given) {
    const auto started = std::chrono::steady_clock::now();
    gate_options o = given;
    // The verdict's own steps (scontrol, the JSON) keep the last 2 s of the budget.
    o.deadline =
        started + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                      std::chrono::duration<double>(std::max(1.0, o.deadline_seconds - 2.0)));
    const std::string at = utc_now("%Y-%m-%dT%H:%M:%SZ");
    std::string node = o.node;
    if (node.empty() && std::getenv("SLURMD_NODENAME") != nullptr)
        node = std::getenv("SLURMD_NODENAME");
    if (node.empty())
        node = host_name();
    gate_verdict v;
    json doc;
    if (!valid_node_name(node)) {
        doc = {{"schema", "pitfall.gate/1"}, {"node", one_line_reason(node, 64)},
               {"require", o.require},       {"profile", nullptr},
               {"findings", json::array()},  {"gpus", json::array()}};
        v.unjudged("the node name '" + one_line_reason(node, 64) +
                   "' is not a Slurm node name (1-64 of A-Z a-z 0-9 . _ -)");
    } else {
        work_folder folder(o.keep_runs);
        const work_folder runtime("");
        if (folder.path.empty() || !own_runtime_folder(runtime))
            v.unjudged("cannot make a working folder for the gate cases");
        else
            doc = judge_node(o, node, folder.path, v);
    }
    v.reason = one_line_reason("pitfall: " + v.reason);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    doc["time"] = at;
    doc["seconds"] = seconds;
    doc["verdict"] = v.verdict;
    doc["exit_code"] = v.exit_code();
    doc["reason"] = v.verdict == "admit" ? "" : v.reason;
    if (o.slurm != slurm_mode::none && valid_node_name(node))
        doc["slurm"] = act_on_slurm(o, node, v.verdict == "drain", v.verdict == "admit", v.reason);
    // slurmd only logs a health check's exit code, and the node keeps taking jobs: a drain (or
    // a resume) Slurm refused is said where slurmd keeps it, standard error.
    if (doc.contains("slurm") && doc["slurm"].contains("error"))
        std::cerr << "pitfall gate: could not " << doc["slurm"]["action"].get<std::string>()
                  << " node " << node
                  << " through scontrol: " << doc["slurm"]["error"].get<std::string>() << '\n';
    const std::string text = detail::dump_safe(doc, 2) + "\n";
    int code = v.exit_code();
    if (!o.json_out.empty() && o.json_out != "-")
        if (auto written = write_file_atomically(o.json_out, text); !written.is_ok()) {
            std::cerr << "pitfall gate: cannot write --json " << o.json_out << ": "
                      << written.message() << '\n';
            // A drain stands whatever became of its record: never exit 0 (a prolog's job
            // would run on the node just drained).
            if (v.verdict != "drain")
                code = gate_unjudged;
        }
    if (o.json_out == "-")
        std::cout << text;
    else
        std::cout << verdict_line(v, doc) << '\n';
    if (o.slurm == slurm_mode::prolog && code == gate_unjudged) {
        // Slurm drains a node on any non-zero prolog exit: the gate never drains for its own
        // failure, so the job goes on and the reason is left on standard error (slurmd's log).
        std::cerr << "pitfall gate: could not judge, letting the job run: " << v.reason << '\n';
        return gate_admit;
    }
    return code;
}

} // namespace pitfall::runner
