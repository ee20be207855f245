// Runs and gate documents as Prometheus text exposition format 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/).
#include "report/openmetrics.hpp"

#include "util/fnv1a.hpp"

#include "report/report_parts.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

namespace pitfall::runner {
using namespace report_parts;

namespace {

const char* const replacement_character = "\xEF\xBF\xBD";

/// Valid UTF-8 with every control character but newline replaced: the file is read line by
/// line, and pitfall's standard output would rewrite a control character as "\x1b", which is
/// no escape the exposition format knows.
std::string printable_utf8(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
        const std::size_t n = detail::utf8_sequence_length(text, i);
        const std::string_view seq = text.substr(i, n == 0 ? 1 : n);
        if (n == 0 || (seq != "\n" && detail::is_control_character(seq)))
            out += replacement_character;
        else
            out.append(seq);
        i += seq.size();
    }
    return out;
}

/// The shortest text that reads back as `x` (Go's strconv.ParseFloat reads what printf writes).
std::string sample_value(double x) {
    if (std::isnan(x))
        return "NaN";
    if (std::isinf(x))
        return x > 0 ? "+Inf" : "-Inf";
    if (x == std::floor(x) && std::fabs(x) < 9007199254740992.0) // 2^53: exact as an integer
        return fmt("%.0f", x);
    char text[40];
    for (int precision = 6; precision <= 17; ++precision) {
        std::snprintf(text, sizeof text, "%.*g", precision, x);
        if (std::strtod(text, nullptr) == x)
            break;
    }
    return text;
}

/// Seconds since the epoch of "YYYY-MM-DDTHH:MM:SS[.fraction]Z" (how pitfall writes times);
/// nothing for any other text.
std::optional<double> utc_seconds(const std::string& text) {
    std::tm t{};
    int consumed = 0;
    if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &t.tm_year, &t.tm_mon, &t.tm_mday,
                    &t.tm_hour, &t.tm_min, &t.tm_sec, &consumed) != 6 ||
        consumed != 19)
        return std::nullopt;
    std::size_t at = 19;
    double fraction = 0;
    if (at < text.size() && text[at] == '.') {
        double scale = 0.1;
        for (++at; at < text.size() && text[at] >= '0' && text[at] <= '9'; ++at, scale /= 10)
            fraction += (text[at] - '0') * scale;
    }
    if (text.substr(at) != "Z" || t.tm_year < 1970 || t.tm_mon < 1 || t.tm_mon > 12 ||
        t.tm_mday < 1 || t.tm_mday > 31 || t.tm_hour > 23 || t.tm_min > 59 || t.tm_sec > 60)
        return std::nullopt;
    t.tm_year -= 1900;
    t.tm_mon -= 1;
    return static_cast<double>(::timegm(&t)) + fraction;
}

/// Label name and raw value (escaped when written).
using label_list = std::vector<std::pair<const char*, std::string>>;

/// The exposition text, one family after another: HELP and TYPE, then its samples. A sample
/// whose labels repeat an earlier one of the same family (two values cut to the same text, a
/// case listed twice) is left out: Prometheus counts a repeated series as an error, and
/// node_exporter drops it with an error in its log.
class exposition {
public:
    void family(const char* name, const char* help, const char* type = "gauge") {
        m_name = name;
        m_seen.clear();
        m_text += cat("# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
    }
    void sample(const label_list& labels, double value) {
        std::string set;
        for (const auto& [label, raw] : labels)
            set += cat(set.empty() ? "" : ",", label, "=\"", metrics_label_value(raw), "\"");
        if (!m_seen.insert(set).second)
            return;
        m_text += cat(m_name, set.empty() ? "" : "{", set, set.empty() ? "" : "}", " ",
                      sample_value(value), "\n");
    }
    std::string text() const { return m_text; }

private:
    std::string m_text;
    std::string m_name;
    std::set<std::string> m_seen;
};

/// pitfall_cases: every verdict of the table (0 where none had it), NOT_RUN, then any other
/// text a record named.
void add_case_counts(exposition& out, const char* source,
                     const std::map<std::string, double>& counts) {
    out.family("pitfall_cases", "Cases by verdict (source run: the run folder; gate: the gate "
                                "cases over every GPU).");
    std::map<std::string, double> rest = counts;
    const auto emit = [&](const std::string& verdict) {
        const auto it = rest.find(verdict);
        out.sample({{"source", source}, {"verdict", verdict}}, it == rest.end() ? 0 : it->second);
        if (it != rest.end())
            rest.erase(it);
    };
    for (const auto& v : verdict_table())
        emit(v.name);
    emit("NOT_RUN");
    for (const auto& [verdict, n] : std::map<std::string, double>(rest))
        out.sample({{"source", source}, {"verdict", verdict}}, n);
}

void add_doctor_counts(exposition& out, const char* source, int errors, int warnings) {
    out.family("pitfall_doctor_findings",
               "The doctor's findings by severity (source run: over the run's fingerprint; gate: "
               "the gate's, accepted errors included).");
    out.sample({{"source", source}, {"severity", "error"}}, errors);
    out.sample({{"source", source}, {"severity", "warning"}}, warnings);
}

/// The facts every source shares, taken from a fingerprint summary: one info series.
struct fingerprint_labels {
    std::string fingerprint_id, host_id, profile, driver_version, pitfall_version;
};

void add_fingerprint_info(exposition& out, const char* source, const json& summary,
                          const fingerprint_labels& given) {
    out.family("pitfall_fingerprint_info",
               "The machine and software stack the results were taken on (always 1).");
    const auto fact = [&](const char* key) { return str(summary, key); };
    std::string driver_version = given.driver_version;
    if (driver_version.empty())
        driver_version = fact("driver_version");
    out.sample({{"source", source},
                {"fingerprint_id", given.fingerprint_id},
                {"host_id", given.host_id},
                {"profile", given.profile},
                {"device_name", fact("device_name")},
                {"compute_capability", fact("compute_capability")},
                {"gpu_count", fact("gpu_count")},
                {"driver_version", driver_version},
                {"driver_branch", fact("driver_branch")},
                {"cuda_driver_version", fact("cuda_driver_version")},
                {"cuda_runtime_version", fact("cuda_runtime_version")},
                {"cudnn_version", fact("cudnn_version")},
                {"mig", fact("mig")},
                {"os", fact("os")},
                {"cpu_model", fact("cpu_model")},
                {"pitfall_version", given.pitfall_version}},
               1);
}

const char* const gate_verdicts[] = {"admit", "drain", "unjudged"};

// ---- a run

void add_run_cases(exposition& out, const run_data& run) {
    out.family("pitfall_case_verdict", "Each case's verdict in the run (always 1).");
    for (const auto& r : run.cases)
        out.sample({{"case", str(r, "case")}, {"verdict", str(r, "verdict", "?")}}, 1);
    for (const auto& key : run.not_finished)
        out.sample({{"case", key}, {"verdict", "NOT_RUN"}}, 1);
    out.family("pitfall_case_outcome",
               "Each case's observed outcome in the run: ok, unsupported, an error name@stage, a "
               "signal (always 1).");
    for (const auto& r : run.cases)
        out.sample({{"case", str(r, "case")}, {"outcome", outcome_line(r)}}, 1);
    const std::set<std::string> started(run.started_unfinished.begin(),
                                        run.started_unfinished.end());
    for (const auto& key : run.not_finished)
        out.sample({{"case", key}, {"outcome", started.count(key) != 0 ? "unfinished" : "not_run"}},
                   1);
}

fingerprint_labels run_fingerprint(const json& header) {
    const json fingerprint = obj(header, "fingerprint");
    return {str(header, "fingerprint_id"), str(obj(obj(fingerprint, "host"), "identity"), "id"),
            str(obj(header, "profile"), "name"),
            str(obj(obj(fingerprint, "libraries"), "nvml"), "driver_version"),
            str(header, "pitfall_version")};
}

} // namespace

std::string metrics_label_value(std::string_view text) {
    std::string value = printable_utf8(text);
    if (value.size() > metrics_label_max_bytes)
        value = detail::utf8_head(value, metrics_label_max_bytes - 17) + "~" + fnv1a_hex(text);
    std::string out;
    out.reserve(value.size() + 8);
    for (const char c : value) {
        if (c == '\\')
            out += "\\\\";
        else if (c == '"')
            out += "\\\"";
        else if (c == '\n')
            out += "\\n";
        else
            out += c;
    }
    return out;
}

bool valid_metrics_label_name(std::string_view name) {
    const auto letter = [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    };
    if (name.empty() || !letter(name[0]) || name.substr(0, 2) == "__")
        return false;
    for (const char c : name)
        if (!letter(c) && !(c >= '0' && c <= '9'))
            return false;
    return true;
}

status_or<std::string> render_run_metrics(const run_data& run) {
    const std::size_t cases = run.cases.size() + run.not_finished.size();
    if (cases > metrics_max_cases)
        return bad_run_input(cat(run.dir, ": ", std::to_string(cases), " cases, more than the ",
                                 std::to_string(metrics_max_cases),
                                 " an export carries (the catalog holds a few hundred)"));
    exposition out;
    const auto counted = verdict_counts(run);
    add_case_counts(out, "run", {counted.begin(), counted.end()});
    out.family("pitfall_run_failing",
               "1 where a case or ratio of the run has a failing verdict (`pitfall run` exit 1).");
    out.sample({}, run_failing(run) ? 1 : 0);
    if (const auto at = utc_seconds(str(run.header, "at"))) {
        out.family("pitfall_run_timestamp_seconds",
                   "When the run started, seconds since the epoch.");
        out.sample({}, *at);
    }
    add_run_cases(out, run);
    int errors = 0, warnings = 0;
    for (const auto& f : machine_of(run).findings) {
        errors += f.severity == finding_severity::error ? 1 : 0;
        warnings += f.severity == finding_severity::warning ? 1 : 0;
    }
    add_doctor_counts(out, "run", errors, warnings);
    add_fingerprint_info(out, "run", fingerprint_summary(run), run_fingerprint(run.header));
    return out.text();
}

namespace {

// ---- a gate document (validated against its schema before any of this reads it)

/// The labels naming one GPU of the gate: its index and UUID (empty where the node has none).
label_list gpu_labels(const std::string& node, const json& gpu) {
    return {{"node", node}, {"index", str(gpu, "index")}, {"uuid", str(gpu, "uuid")}};
}

void add_gate_gpus(exposition& out, const json& gate, const std::string& node) {
    out.family("pitfall_gate_gpu_verdict",
               "The gate's verdict for each GPU: 1 for the verdict it has, 0 for the others.");
    for (const auto& gpu : gate["gpus"]) {
        for (const char* verdict : gate_verdicts) {
            label_list labels = gpu_labels(node, gpu);
            labels.emplace_back("name", str(gpu, "name"));
            labels.emplace_back("verdict", verdict);
            out.sample(labels, str(gpu, "verdict") == verdict ? 1 : 0);
        }
    }
    for (const auto& [family, field, help] :
         {std::tuple{"pitfall_gate_case_verdict", "verdict",
                     "Each gate case's verdict on each GPU (always 1)."},
          {"pitfall_gate_case_outcome", "outcome",
           "Each gate case's observed outcome on each GPU (always 1)."}}) {
        out.family(family, help);
        for (const auto& gpu : gate["gpus"])
            for (const auto& c : gpu["cases"]) {
                label_list labels = gpu_labels(node, gpu);
                labels.emplace_back("case", str(c, "case"));
                labels.emplace_back(field, str(c, field));
                out.sample(labels, 1);
            }
    }
}

void add_gate_findings(exposition& out, const json& gate, const std::string& node) {
    out.family("pitfall_gate_finding",
               "Each doctor finding of the gate (always 1); accepted: an error the requirement "
               "expects, which drains nothing.");
    int errors = 0, warnings = 0;
    for (const auto& f : gate["findings"]) {
        const std::string severity = str(f, "severity");
        errors += severity == "error" ? 1 : 0;
        warnings += severity == "warning" ? 1 : 0;
        out.sample({{"node", node},
                    {"id", str(f, "id")},
                    {"severity", severity},
                    {"accepted", str(f, "accepted")}},
                   1);
    }
    add_doctor_counts(out, "gate", errors, warnings);
}

/// Past the caps, or a time that is not one: said naming the document and the field.
status check_gate_bounds(const json& gate, const std::string& name) {
    std::size_t units = 0;
    for (const auto& gpu : gate["gpus"])
        units += 1 + gpu["cases"].size();
    if (units > metrics_max_cases)
        return bad_run_input(cat(name, ": /gpus: ", std::to_string(units),
                                 " GPUs and cases, more than the ",
                                 std::to_string(metrics_max_cases), " an export carries"));
    if (obj(gate, "counts").size() > metrics_max_cases)
        return bad_run_input(cat(name, ": /counts: ", std::to_string(gate["counts"].size()),
                                 " verdicts, more than the ", std::to_string(metrics_max_cases),
                                 " an export carries"));
    if (gate["findings"].size() > metrics_max_findings)
        return bad_run_input(cat(name, ": /findings: ", std::to_string(gate["findings"].size()),
                                 " findings, more than the ", std::to_string(metrics_max_findings),
                                 " an export carries"));
    if (!utc_seconds(gate["time"].get<std::string>()))
        return bad_run_input(cat(name, ": /time: expected a UTC time as 2026-11-28T05:56:19Z"));
    return status::ok();
}

/// "counts" where the document has it, else the cases' verdicts counted over every GPU.
std::map<std::string, double> gate_counts(const json& gate) {
    std::map<std::string, double> counts;
    if (!gate.contains("counts")) {
        for (const auto& gpu : gate["gpus"])
            for (const auto& c : gpu["cases"])
                ++counts[str(c, "verdict")];
        return counts;
    }
    const json given = obj(gate, "counts");
    for (const auto& [verdict, n] : given.items())
        counts[verdict] = n.get<double>(); // a sample is a float64: 1e300 stays 1e300
    return counts;
}

} // namespace

status_or<std::string> render_gate_metrics(const json& gate, const std::string& name) {
    PITFALL_TRY(detail::validate_document("gate", gate, name));
    PITFALL_TRY(check_gate_bounds(gate, name));
    const std::string node = str(gate, "node");
    exposition out;
    out.family("pitfall_gate_verdict",
               "The gate's verdict for the node: 1 for the verdict it has, 0 for the others.");
    for (const char* verdict : gate_verdicts)
        out.sample({{"node", node}, {"verdict", verdict}}, str(gate, "verdict") == verdict ? 1 : 0);
    out.family("pitfall_gate_timestamp_seconds", "When the gate started, seconds since the epoch.");
    out.sample({{"node", node}}, *utc_seconds(str(gate, "time")));
    out.family("pitfall_gate_duration_seconds", "How long the gate took.");
    out.sample({{"node", node}}, num(gate, "seconds", 0));
    add_gate_gpus(out, gate, node);
    add_case_counts(out, "gate", gate_counts(gate));
    add_gate_findings(out, gate, node);
    add_fingerprint_info(
        out, "gate", obj(gate, "facts"),
        {str(gate, "fingerprint_id"), str(gate, "host_id"), str(gate, "profile"), "", ""});
    return out.text();
}

status_or<std::string> metrics_of(const std::string& path) {
    const char* const expected = " (pitfall export reads a run folder or a gate document)";
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        return bad_run_input(cat(path, ": ", std::strerror(errno), expected));
    if (S_ISDIR(st.st_mode)) {
        PITFALL_ASSIGN_OR_RETURN(const run_data run, load_run(path));
        return render_run_metrics(run);
    }
    auto doc = detail::read_json_file(path);
    if (!doc.is_ok())
        return bad_run_input(doc.error().message() + expected);
    if (!doc->is_object() || str(*doc, "schema") != gate_schema_name)
        return bad_run_input(cat(path,
                                 ": neither a run folder nor a gate document (no \"schema\": \"",
                                 gate_schema_name, "\")"));
    return render_gate_metrics(*doc, path);
}

} // namespace pitfall::runner
