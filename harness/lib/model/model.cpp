#include "model/model.hpp"

#include "pitfall/detail/json_schema.hpp"

#include <algorithm>
#include <cctype>

namespace pitfall::runner {
using nlohmann::json;

status bad_run_input(const std::string& message) {
    return status::error(library::pitfall, "bad_input", message, stage::init);
}

// ---- verdicts ------------------------------------------------------------------------------

const std::vector<verdict_info>& verdict_table() {
    using k = verdict_kind;
    using s = verdict_severity;
    static const std::vector<verdict_info> table{
        {k::pass, "PASS", s::pass, "outcome, numerics, memory and time within the baseline"},
        {k::fail, "FAIL", s::failure,
         "another outcome than the baseline's (error, stage, stickiness, signal, where it ran)"},
        {k::numeric_mismatch, "NUMERIC_MISMATCH", s::failure,
         "a check against an independent reference failed, or a measurement is out of bounds"},
        {k::mem_regression, "MEM_REGRESSION", s::failure,
         "tracked device bytes or the process's peak RSS out of bounds"},
        {k::perf_regression, "PERF_REGRESSION", s::failure,
         "slower beyond tolerance even in the least disturbed process, or a ratio out of bounds"},
        {k::crash, "CRASH", s::error,
         "a signal, exit or missing result the baseline does not expect"},
        {k::timeout, "TIMEOUT", s::error, "no exit within the case's time limit (group ended)"},
        {k::ambiguous, "AMBIGUOUS", s::warning,
         "a timing neither clearly the same nor clearly slower: a warning"},
        {k::no_baseline, "NO_BASELINE", s::warning, "no baseline entry for this case: a warning"},
        {k::unsupported, "UNSUPPORTED", s::skip, "cannot run here, with the reason: a skip"},
    };
    return table;
}

const verdict_info& info(verdict_kind v) {
    const auto& table = verdict_table();
    return *std::find_if(table.begin(), table.end(),
                         [v](const verdict_info& i) { return i.kind == v; });
}

const char* to_string(verdict_kind v) {
    return info(v).name;
}

const char* to_string(verdict_severity s) {
    switch (s) {
    case verdict_severity::pass: return "pass";
    case verdict_severity::warning: return "warning";
    case verdict_severity::skip: return "skip";
    case verdict_severity::failure: return "failure";
    case verdict_severity::error: return "error";
    }
    return "?";
}

bool is_failing(verdict_kind v) {
    return info(v).failing();
}

std::optional<verdict_kind> verdict_named(const std::string& name) {
    for (const auto& i : verdict_table())
        if (name == i.name)
            return i.kind;
    return std::nullopt;
}

json verdicts_json() {
    json out = json::array();
    for (const auto& i : verdict_table())
        out.push_back({{"name", i.name},
                       {"failing", i.failing()},
                       {"severity", to_string(i.severity)},
                       {"label", i.label}});
    return out;
}

// ---- reading fields ------------------------------------------------------------------------

namespace {

/// Reads the fields of one JSON object, keeping the first error ("field 'process.signal':
/// expected a string or null"). A missing field leaves the default.
class field_reader {
public:
    field_reader(const json& object, std::string prefix)
        : m_object(object), m_prefix(std::move(prefix)) {
        if (!m_object.is_object())
            fail("", "expected an object");
    }

    bool ok() const { return m_error.empty(); }
    status error() const { return bad_run_input(m_error); }
    void fail(const std::string& key, const std::string& what) {
        if (!m_error.empty())
            return;
        const std::string name = m_prefix.empty() ? key
                                 : key.empty()    ? m_prefix
                                                  : m_prefix + "." + key;
        m_error = name.empty() ? what : "field '" + name + "': " + what;
    }
    /// The field, or nullptr when absent (or when this is not an object).
    const json* find(const char* key) const {
        if (!m_object.is_object())
            return nullptr;
        const auto it = m_object.find(key);
        return it == m_object.end() ? nullptr : &*it;
    }
    bool has(const char* key) const { return find(key) != nullptr; }

    void text(const char* key, std::string& out) {
        if (const json* v = find(key); v != nullptr && !v->is_string())
            fail(key, "expected a string");
        else if (v != nullptr)
            out = v->get<std::string>();
    }
    void text(const char* key, std::optional<std::string>& out) {
        if (const json* v = find(key); v != nullptr && !v->is_null() && !v->is_string())
            fail(key, "expected a string or null");
        else if (v != nullptr && v->is_string())
            out = v->get<std::string>();
    }
    void texts(const char* key, std::vector<std::string>& out) {
        const json* v = find(key);
        if (v == nullptr)
            return;
        if (!v->is_array() ||
            !std::all_of(v->begin(), v->end(), [](const json& x) { return x.is_string(); }))
            fail(key, "expected an array of strings");
        else
            out = v->get<std::vector<std::string>>();
    }
    void number(const char* key, double& out) {
        if (const json* v = find(key); v != nullptr && !v->is_number())
            fail(key, "expected a number");
        else if (v != nullptr)
            out = v->get<double>();
    }
    template <class Int> void integer(const char* key, std::optional<Int>& out) {
        if (const json* v = find(key); v != nullptr && !v->is_null() && !v->is_number_integer())
            fail(key, "expected an integer or null");
        else if (v != nullptr && !v->is_null())
            out = v->get<Int>();
    }
    void boolean(const char* key, bool& out) {
        if (const json* v = find(key); v != nullptr && !v->is_boolean())
            fail(key, "expected true or false");
        else if (v != nullptr)
            out = v->get<bool>();
    }
    /// An object field; `or_null` also takes null (kept as null).
    void object(const char* key, json& out, bool or_null = false) {
        const json* v = find(key);
        if (v == nullptr)
            return;
        if (v->is_object() || (or_null && v->is_null()))
            out = *v;
        else
            fail(key, or_null ? "expected an object or null" : "expected an object");
    }
    void array(const char* key, json& out) {
        if (const json* v = find(key); v != nullptr && !v->is_array())
            fail(key, "expected an array");
        else if (v != nullptr)
            out = *v;
    }
    /// A nested object read with its own reader, its errors named under this one's prefix.
    field_reader nested(const char* key) const {
        static const json empty = json::object();
        const json* v = find(key);
        return field_reader(v != nullptr ? *v : empty,
                            m_prefix.empty() ? key : m_prefix + "." + key);
    }
    void take_error(const field_reader& inner) {
        if (m_error.empty())
            m_error = inner.m_error;
    }

private:
    const json& m_object;
    std::string m_prefix;
    std::string m_error;
};

bool is_name(const std::string& part) {
    return !part.empty() && std::islower(static_cast<unsigned char>(part[0])) != 0 &&
           std::all_of(part.begin(), part.end(), [](char c) {
               return std::islower(static_cast<unsigned char>(c)) != 0 ||
                      std::isdigit(static_cast<unsigned char>(c)) != 0 || c == '_';
           });
}

json optional_json(const std::optional<std::string>& v) {
    return v ? json(*v) : json(nullptr);
}

} // namespace

status_or<std::string> record_kind(const json& j) {
    if (!j.is_object())
        return bad_run_input("expected an object (a record)");
    const auto it = j.find("record");
    if (it == j.end() || !it->is_string())
        return bad_run_input("field 'record': expected a string (run, resumed, started, case, "
                             "interrupted)");
    return it->get<std::string>();
}

// ---- case_key ------------------------------------------------------------------------------

std::string case_key::str() const {
    return backend + "." + scenario + "." + variant;
}

status_or<case_key> case_key::parse(const std::string& text) {
    const auto first = text.find('.');
    const auto last = text.rfind('.');
    if (first == std::string::npos || first == last)
        return bad_run_input("'" + text + "' is not a case key (<backend>.<scenario>.<variant>)");
    case_key key{text.substr(0, first), text.substr(first + 1, last - first - 1),
                 text.substr(last + 1)};
    if (!is_name(key.backend) || !is_name(key.scenario) || !is_name(key.variant))
        return bad_run_input("'" + text + "' is not a case key (lower-case names: " +
                             "<backend>.<scenario>.<variant>)");
    return key;
}

// ---- run_header ----------------------------------------------------------------------------

json run_header::to_json() const {
    json keys = json::array();
    for (const auto& k : selection)
        keys.push_back(k.str());
    return {{"record", resumed ? "resumed" : "run"},
            {"schema", "pitfall.run/1"},
            {"at", at},
            {"pitfall_version", pitfall_version},
            {"argv", argv},
            {"index", index},
            {"build", build},
            {"fingerprint", fingerprint},
            {"fingerprint_summary", fingerprint_summary},
            {"fingerprint_id", fingerprint_id},
            {"profile", {{"name", optional_json(profile)}, {"reason", profile_reason}}},
            {"selection", keys},
            {"options",
             {{"samples", options.samples ? json(*options.samples) : json(nullptr)},
              {"timeout_scale", options.timeout_scale},
              {"timing_floor", options.timing_floor},
              {"remeasure_pause_seconds", options.remeasure_pause_seconds},
              {"jobs", options.jobs},
              {"timed_in_parallel", options.timed_in_parallel},
              {"full", options.full},
              {"timings", options.judge_times ? "judge" : "record"},
              {"timing_correction", options.correction},
              {"timing_level", options.timing_level}}}};
}

status_or<run_header> run_header::from_json(const json& j) {
    PITFALL_ASSIGN_OR_RETURN(const std::string kind, record_kind(j));
    if (kind != "run" && kind != "resumed")
        return bad_run_input("field 'record': '" + kind + "' is not a run header");
    run_header h;
    h.resumed = kind == "resumed";
    field_reader r(j, "");
    if (const json* schema = r.find("schema"); schema != nullptr && *schema != "pitfall.run/1")
        r.fail("schema", "expected \"pitfall.run/1\"");
    r.text("at", h.at);
    r.text("pitfall_version", h.pitfall_version);
    r.texts("argv", h.argv);
    r.text("index", h.index);
    r.object("build", h.build, true);
    r.object("fingerprint", h.fingerprint);
    r.object("fingerprint_summary", h.fingerprint_summary);
    r.text("fingerprint_id", h.fingerprint_id);
    field_reader profile = r.nested("profile");
    profile.text("name", h.profile);
    profile.text("reason", h.profile_reason);
    r.take_error(profile);
    std::vector<std::string> keys;
    r.texts("selection", keys);
    for (std::size_t i = 0; i < keys.size() && r.ok(); ++i) {
        auto key = case_key::parse(keys[i]);
        if (key.is_ok())
            h.selection.push_back(key.value());
        else
            r.fail("selection[" + std::to_string(i) + "]", key.error().message());
    }
    field_reader options = r.nested("options");
    options.integer("samples", h.options.samples);
    options.number("timeout_scale", h.options.timeout_scale);
    options.number("timing_floor", h.options.timing_floor);
    options.number("remeasure_pause_seconds", h.options.remeasure_pause_seconds);
    std::optional<std::int64_t> jobs;
    options.integer("jobs", jobs);
    if (jobs && (*jobs < 1 || *jobs > 256))
        options.fail("jobs", "expected a whole number from 1 to 256");
    else if (jobs)
        h.options.jobs = static_cast<int>(*jobs);
    options.boolean("timed_in_parallel", h.options.timed_in_parallel);
    options.boolean("full", h.options.full);
    // Absent from runs started before these were recorded: the defaults they ran with.
    std::string timings = "judge";
    options.text("timings", timings);
    if (timings != "judge" && timings != "record")
        options.fail("timings", "expected \"judge\" or \"record\"");
    h.options.judge_times = timings == "judge";
    options.text("timing_correction", h.options.correction);
    if (h.options.correction != "holm" && h.options.correction != "bh" &&
        h.options.correction != "none")
        options.fail("timing_correction", "expected \"holm\", \"bh\" or \"none\"");
    options.number("timing_level", h.options.timing_level);
    if (!(h.options.timing_level > 0 && h.options.timing_level < 1))
        options.fail("timing_level", "expected a level in (0, 1)");
    r.take_error(options);
    if (!r.ok())
        return r.error();
    return h;
}

// ---- case_record ---------------------------------------------------------------------------

json case_record::to_json() const {
    json labels_json = labels;
    json j = {
        {"record", "case"},
        {"case", key.str()},
        {"test", key.test_name()},
        {"scenario", key.scenario},
        {"backend", key.backend},
        {"variant", key.variant},
        {"kind", kind},
        {"labels", labels_json},
        {"verdict", to_string(verdict)},
        {"failing", failing()},
        {"reason", reason},
        {"observed", observed},
        {"process",
         {{"exit_code", process.exit_code ? json(*process.exit_code) : json(nullptr)},
          {"signal", optional_json(process.signal)},
          {"timed_out", process.timed_out},
          {"wall_seconds", process.wall_seconds},
          {"peak_rss_bytes",
           process.peak_rss_bytes ? json(*process.peak_rss_bytes) : json(nullptr)},
          {"threads", process.threads ? json(*process.threads) : json(nullptr)}}},
        {"result", result},
        {"timings", timings},
        {"attempts", attempts},
        {"baseline", {{"profile", optional_json(baseline_profile)}, {"entry", baseline_entry}}},
        {"log", log},
        {"output_tail", output_tail},
        {"finished_at", finished_at}};
    if (!prediction.empty())
        j["prediction"] = prediction;
    if (process.peak_rss_method) // absent in records of before it was measured two ways
        j["process"]["peak_rss_method"] = *process.peak_rss_method;
    return j;
}

namespace {

/// The key, from "case"; "scenario", "backend" and "variant", where given, must agree with it.
status_or<case_key> record_key(field_reader& r) {
    std::string text;
    r.text("case", text);
    if (!r.ok())
        return r.error();
    if (!r.has("case"))
        return bad_run_input("field 'case': missing (the case key)");
    auto key = case_key::parse(text);
    if (!key.is_ok())
        return bad_run_input("field 'case': " + key.error().message());
    const std::pair<const char*, const std::string*> parts[] = {{"backend", &key.value().backend},
                                                                {"scenario", &key.value().scenario},
                                                                {"variant", &key.value().variant}};
    for (const auto& [name, want] : parts) {
        std::string given = *want;
        r.text(name, given);
        if (r.ok() && given != *want)
            r.fail(name, "'" + given + ("' disagrees with case '" + text) + "'");
    }
    if (!r.ok())
        return r.error();
    return key;
}

void read_process(field_reader& r, process_facts& p) {
    field_reader in = r.nested("process");
    in.integer("exit_code", p.exit_code);
    in.text("signal", p.signal);
    in.boolean("timed_out", p.timed_out);
    in.number("wall_seconds", p.wall_seconds);
    in.integer("peak_rss_bytes", p.peak_rss_bytes);
    in.text("peak_rss_method", p.peak_rss_method);
    if (p.peak_rss_method && *p.peak_rss_method != "case" && *p.peak_rss_method != "wait4")
        in.fail("peak_rss_method", "expected case or wait4");
    std::optional<std::int64_t> threads; // wide first: a huge number is an error, not a wrap
    in.integer("threads", threads);
    if (threads && (*threads < 1 || *threads > 256))
        in.fail("threads", "expected a thread count from 1 to 256");
    else if (threads)
        p.threads = static_cast<int>(*threads);
    r.take_error(in);
}

/// Each field of `doc` that `schema` (at `at`) describes, against its own sub-schema: what
/// the reports and the judging read has its type, while a record written before a field became
/// required still reads.
status check_present_fields(const char* field, const json& doc, std::string_view schema,
                            const std::string& at) {
    if (!doc.is_object())
        return status::ok();
    const auto& s = detail::schema_named(schema);
    for (const auto& [key, value] : doc.items()) {
        const std::string sub = detail::pointer_append(at + "/properties", key);
        // A key the schema does not name has no sub-schema: that error starts "schema ".
        const auto why = s.first_error(value, sub);
        if (why && why->front() == '/')
            return bad_run_input(std::string("field '") + field +
                                 "': " + detail::pointer_append("", key) +
                                 (why->rfind("/: ", 0) == 0 ? why->substr(1) : *why));
    }
    return status::ok();
}

/// An outcome as the harness records it: its text fields strings, sticky a boolean, an exit
/// code an integer an int holds.
status check_observed(const json& o) {
    for (const auto& [key, value] : o.items()) {
        const bool ok = key == "sticky" ? value.is_boolean()
                        : key == "exit_code"
                            ? value.is_null() || (value.is_number_integer() &&
                                                  value.get<double>() >= -2147483648.0 &&
                                                  value.get<double>() <= 2147483647.0)
                            : value.is_string() || value.is_null();
        if (!ok)
            return bad_run_input("field 'observed." + key + "': expected " +
                                 (key == "sticky"      ? "true or false"
                                  : key == "exit_code" ? "an exit code"
                                                       : "a string"));
    }
    return status::ok();
}

/// The parts of a record that are documents of their own: typed like their schemas.
status check_free_parts(const case_record& c) {
    PITFALL_TRY(check_observed(c.observed));
    PITFALL_TRY(check_present_fields("result", c.result, "result", ""));
    return check_present_fields("baseline.entry", c.baseline_entry, "expected", "/$defs/entry");
}

} // namespace

status_or<case_record> case_record::from_json(const json& j) {
    PITFALL_ASSIGN_OR_RETURN(const std::string kind_of_record, record_kind(j));
    if (kind_of_record != "case")
        return bad_run_input("field 'record': '" + kind_of_record + "' is not a case record");
    field_reader r(j, "");
    case_record c;
    PITFALL_ASSIGN_OR_RETURN(c.key, record_key(r));
    r.text("kind", c.kind);
    r.text("prediction", c.prediction);
    r.texts("labels", c.labels);
    std::string verdict_text;
    r.text("verdict", verdict_text);
    if (const auto v = verdict_named(verdict_text))
        c.verdict = *v;
    else if (r.ok())
        r.fail("verdict", r.has("verdict") ? "'" + verdict_text + "' is not a verdict" : "missing");
    bool failing_given = false;
    r.boolean("failing", failing_given); // derived from the verdict; only its type is checked
    r.text("reason", c.reason);
    r.object("observed", c.observed);
    read_process(r, c.process);
    r.object("result", c.result, true);
    r.object("timings", c.timings);
    r.array("attempts", c.attempts);
    field_reader baseline = r.nested("baseline");
    baseline.text("profile", c.baseline_profile);
    baseline.object("entry", c.baseline_entry, true);
    r.take_error(baseline);
    r.text("log", c.log);
    r.text("output_tail", c.output_tail);
    r.text("finished_at", c.finished_at);
    if (!r.ok())
        return r.error();
    PITFALL_TRY(check_free_parts(c));
    return c;
}

} // namespace pitfall::runner
