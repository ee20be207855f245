// A diagnosis: the registry's checks run over the facts, the findings worst first, and what
// `pitfall doctor` prints of them (text, or JSON: reports/schema/doctor.schema.json).
#include "doctor/registry.hpp"

#include <algorithm>
#include <map>
#include <sstream>

namespace pitfall::runner {
namespace {

int rank(finding_severity s) {
    return static_cast<int>(s);
}

/// "cuda.version_mismatch.stub_driver" -> that, and the command line that runs it.
std::string reproduce_hint(const std::string& case_id) {
    const auto first = case_id.find('.');
    const auto last = case_id.rfind('.');
    if (case_id.empty() || first == std::string::npos || first == last)
        return case_id;
    return case_id + "  (pitfall run --backend " + case_id.substr(0, first) + " --scenario " +
           case_id.substr(first + 1, last - first - 1) + " --variant " + case_id.substr(last + 1) +
           ")";
}

} // namespace

const char* severity_name(finding_severity s) {
    switch (s) {
    case finding_severity::error: return "error";
    case finding_severity::warning: return "warning";
    case finding_severity::ok: break;
    }
    return "ok";
}

bool diagnosis::cuda_usable() const {
    return std::none_of(findings.begin(), findings.end(),
                        [](const finding& f) { return f.severity == finding_severity::error; });
}

std::string diagnosis::headline() const {
    for (const auto& f : findings)
        if (f.severity == finding_severity::error)
            return f.title;
    return {};
}

std::vector<std::string> diagnosis::explained_errors() const {
    std::vector<std::string> names;
    for (const auto& f : findings)
        if (f.severity == finding_severity::error)
            if (const doctor::rule* r = doctor::rule_named(f.id))
                names.insert(names.end(), r->explained_errors.begin(), r->explained_errors.end());
    return names;
}

std::vector<std::string> diagnosis::environment_errors() const {
    std::vector<std::string> names = explained_errors();
    names.erase(std::remove(names.begin(), names.end(), "cudaErrorInsufficientDriver"),
                names.end());
    return names;
}

nlohmann::json diagnosis::to_json() const {
    using nlohmann::json;
    json list = json::array();
    std::map<std::string, int> counts = {{"error", 0}, {"warning", 0}, {"ok", 0}};
    for (const auto& f : findings) {
        ++counts[severity_name(f.severity)];
        json j = {{"id", f.id},       {"severity", severity_name(f.severity)},
                  {"title", f.title}, {"observed", f.observed},
                  {"why", f.why},     {"fix", f.fix},
                  {"rule", f.rule}};
        j["reproduced_by"] = f.reproduced_by.empty() ? json(nullptr) : json(f.reproduced_by);
        list.push_back(std::move(j));
    }
    return {{"schema", "pitfall.doctor/1"},
            {"cuda_usable", cuda_usable()},
            {"headline", headline()},
            {"counts", counts},
            {"findings", std::move(list)}};
}

diagnosis diagnose(const nlohmann::json& fingerprint) {
    const doctor::facts f(fingerprint);
    diagnosis d;
    for (const auto& check : doctor::registry())
        check.run(f, d.findings);
    std::stable_sort(d.findings.begin(), d.findings.end(), [](const finding& a, const finding& b) {
        return rank(a.severity) < rank(b.severity);
    });
    return d;
}

std::string render_diagnosis(const diagnosis& d) {
    std::map<finding_severity, int> counts;
    for (const auto& f : d.findings)
        ++counts[f.severity];
    std::ostringstream out;
    const auto plural = [](int n, const char* word) {
        return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
    };
    out << (d.cuda_usable() ? "CUDA work can run here" : "not ready for CUDA work") << " ("
        << plural(counts[finding_severity::error], "error") << ", "
        << plural(counts[finding_severity::warning], "warning") << ", "
        << counts[finding_severity::ok] << " ok)\n";
    for (const auto& f : d.findings) {
        out << '\n'
            << severity_name(f.severity)
            << (f.severity == finding_severity::ok      ? "      "
                : f.severity == finding_severity::error ? "   "
                                                        : " ")
            << f.title << "  [" << f.id << "]\n";
        const auto field = [&](const char* label, const std::string& value) {
            if (!value.empty())
                out << "  " << label << value << '\n';
        };
        field("observed  ", f.observed);
        field("why       ", f.why);
        field("fix       ", f.fix);
        field("case      ", reproduce_hint(f.reproduced_by));
        if (f.severity != finding_severity::ok)
            field("rule      ", f.rule);
    }
    if (!d.findings.empty())
        out << "\n`pitfall doctor --explain ID` says what a finding checks.\n";
    return out.str();
}

} // namespace pitfall::runner
