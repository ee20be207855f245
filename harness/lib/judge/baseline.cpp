#include "judge/baseline.hpp"

#include "pitfall/controls.hpp"
#include "pitfall/detail/json_file.hpp"
#include "pitfall/detail/json_schema.hpp"
#include "judge/timing.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <set>
#include <sstream>

namespace pitfall::runner {
using nlohmann::json;
namespace fs = std::filesystem;

namespace {
/// "a.b": a field's name below `parent`.
std::string dotted(const std::string& parent, const std::string& name) {
    std::string out = parent;
    out += '.';
    out += name;
    return out;
}

status bad_input(const std::string& file, const std::string& field, const std::string& what) {
    return status::error(library::pitfall, "bad_input",
                         file + (field.empty() ? "" : ": field '" + field + "'") + ": " + what,
                         stage::init);
}

/// The entries of a folder, sorted; an error reading it (not only opening it) is bad input.
status_or<std::vector<fs::path>> list_folder(const fs::path& dir) {
    std::error_code ec;
    std::vector<fs::path> out;
    fs::directory_iterator it(dir, ec);
    for (; !ec && it != fs::directory_iterator(); it.increment(ec))
        out.push_back(it->path());
    if (ec)
        return bad_input(dir.string(), "", "cannot list the folder: " + ec.message());
    std::sort(out.begin(), out.end());
    return out;
}

status_or<json> read_json(const std::string& path) {
    return detail::read_json_file(path);
}

// What a schema cannot say: a range's min is not above its max.
status check_range_order(const std::string& file, const std::string& pointer, const json& b) {
    if (b.is_object() && b.contains("min") && b.contains("max") && b["min"].is_number() &&
        b["max"].is_number() && b["min"].get<double>() > b["max"].get<double>())
        return detail::bad_json_input(file, pointer + ": min " + detail::dump_safe(b["min"]) +
                                                " is above max " + detail::dump_safe(b["max"]));
    return status::ok();
}

// An exit code the schema lets through as "integer" (1e300 is one) must fit an int, since
// describe_outcome reads it as one.
status check_exit_code(const std::string& file, const std::string& pointer, const json& outcome) {
    if (!outcome.is_object() || !outcome.contains("exit_code"))
        return status::ok();
    const double code = outcome["exit_code"].get<double>();
    if (!(code >= -2147483648.0 && code <= 2147483647.0))
        return detail::bad_json_input(file, pointer + "/exit_code: out of an exit code's range");
    return status::ok();
}

// After the schema: the checks it cannot express, each naming the JSON pointer.
status check_expected_semantics(const std::string& file, const json& doc) {
    for (const auto& [key, entry] : doc["cases"].items()) {
        const std::string at = detail::pointer_append("/cases", key);
        PITFALL_TRY(check_exit_code(file, at + "/outcome", entry["outcome"]));
        if (entry.contains("events"))
            for (const auto& [name, ev] : entry["events"].items())
                PITFALL_TRY(
                    check_exit_code(file, detail::pointer_append(at + "/events", name), ev));
        for (const char* group : {"measurements", "memory"})
            if (entry.contains(group))
                for (const auto& [name, b] : entry[group].items())
                    PITFALL_TRY(
                        check_range_order(file, detail::pointer_append(at + "/" + group, name), b));
    }
    if (doc.contains("ratios"))
        for (const auto& [key, b] : doc["ratios"].items())
            PITFALL_TRY(check_range_order(file, detail::pointer_append("/ratios", key), b));
    return status::ok();
}

const std::set<std::string> outcome_statuses{"ok",     "error", "unsupported",
                                             "signal", "exit",  "load_error"};

// A bound: {"min", "max"} (either or both), {"equals": x}, or {"value": x, "rel_tol": r} /
// {"value": x, "abs_tol": a}. A memory bound (`allow_per`) may hold "per": the name of a
// measurement of the case, the bound then being on the bytes divided by it (a range or a value,
// never equals: a fraction of a device's memory is not an exact number).
status check_bound(const std::string& file, const std::string& field, const json& b,
                   bool allow_per = false) {
    static const std::set<std::string> keys{"min", "max", "equals", "value", "rel_tol", "abs_tol"};
    if (!b.is_object() || b.empty())
        return bad_input(file, field,
                         "expected {min, max}, {equals} or {value, rel_tol | abs_tol}");
    for (const auto& [k, v] : b.items()) {
        if (k == "why") { // a bound set by hand says why it is what it is
            // 1000 characters (the schema's maxLength) of up to 4 bytes each.
            if (!v.is_string() || v.get<std::string>().empty() ||
                v.get<std::string>().size() > 4000)
                return bad_input(file, dotted(field, k),
                                 "expected why the bound is what it is (1 to 1000 characters)");
            continue;
        }
        if (allow_per && k == "per") {
            if (!v.is_string() || v.get<std::string>().empty())
                return bad_input(file, dotted(field, k), "expected the name of a measurement");
            continue;
        }
        if (keys.count(k) == 0)
            return bad_input(file, dotted(field, k),
                             allow_per ? "unknown key (min, max, equals, value, rel_tol, abs_tol, "
                                         "per, why)"
                                       : "unknown key (min, max, equals, value, rel_tol, abs_tol, "
                                         "why)");
        if (!v.is_number())
            return bad_input(file, dotted(field, k), "expected a number");
    }
    if (b.contains("per") && b.contains("equals"))
        return bad_input(file, field,
                         "a bound per a measurement is {min, max} or {value, rel_tol | abs_tol}");
    const bool range = b.contains("min") || b.contains("max");
    const bool equals = b.contains("equals");
    const bool value = b.contains("value");
    if (static_cast<int>(range) + static_cast<int>(equals) + static_cast<int>(value) != 1)
        return bad_input(file, field,
                         "use one form: {min, max}, {equals} or {value, rel_tol | abs_tol}");
    if (value != (b.contains("rel_tol") || b.contains("abs_tol")))
        return bad_input(file, field, "{value} needs rel_tol or abs_tol (and only with value)");
    for (const char* tol : {"rel_tol", "abs_tol"})
        if (b.contains(tol) && b[tol].get<double>() < 0)
            return bad_input(file, field + "." + tol, "a tolerance is >= 0");
    return status::ok();
}

status check_bounds(const std::string& file, const std::string& field, const json& bounds,
                    bool allow_per = false) {
    if (!bounds.is_object())
        return bad_input(file, field, "expected an object of {name: bound}");
    for (const auto& [name, b] : bounds.items())
        PITFALL_TRY(check_bound(file, dotted(field, name), b, allow_per));
    return status::ok();
}

// How far apart the blessed processes' medians lay, where bless measured it: a fraction.
status check_process_spread(const std::string& file, const std::string& field, const json& t) {
    if (!t.contains("process_spread"))
        return status::ok();
    const json& s = t["process_spread"];
    if (!s.is_number() || !(s.get<double>() >= 0) || !(s.get<double>() <= 1000))
        return bad_input(file, field + ".process_spread",
                         "expected how far apart the blessed processes lay (a number from 0 to "
                         "1000: largest / smallest median - 1)");
    return status::ok();
}

// A series divided by its control's median: {by: a control, samples: >= 2 numbers >= 0,
// control_median > 0 seconds}.
status check_normalised(const std::string& file, const std::string& field, const json& n) {
    if (!n.is_object())
        return bad_input(file, field, "expected an object {by, samples, control_median}");
    const controls::control_spec* c = n.contains("by") && n["by"].is_string()
                                          ? controls::find(n["by"].get<std::string>())
                                          : nullptr;
    if (c == nullptr)
        return bad_input(file, field + ".by", "expected the name of a calibration control");
    if (!n.contains("samples") || !n["samples"].is_array() || n["samples"].size() < 2)
        return bad_input(file, field + ".samples", "expected an array of 2 or more samples");
    for (const auto& x : n["samples"])
        if (!x.is_number() || !(x.get<double>() >= 0) || !std::isfinite(x.get<double>()))
            return bad_input(file, field + ".samples", "expected finite non-negative numbers");
    const json m = n.value("control_median", json());
    if (!m.is_number() || !(m.get<double>() > 0) || !std::isfinite(m.get<double>()))
        return bad_input(file, field + ".control_median",
                         "expected the control's median seconds (a positive number)");
    PITFALL_TRY(check_process_spread(file, field, n));
    for (const auto& [key, ignored] : n.items())
        if (key != "by" && key != "samples" && key != "control_median" && key != "process_spread")
            return bad_input(file, dotted(field, key),
                             "unknown key (by, samples, control_median, process_spread)");
    return status::ok();
}

status check_timings(const std::string& file, const std::string& field, const json& timings) {
    if (!timings.is_object())
        return bad_input(file, field, "expected an object of {series: {unit, samples}}");
    for (const auto& [name, t] : timings.items()) {
        const std::string f = dotted(field, name);
        if (!t.is_object() || !t.contains("samples") || !t["samples"].is_array())
            return bad_input(file, f + ".samples", "expected an array of raw samples");
        for (const auto& x : t["samples"])
            if (!x.is_number() || x.get<double>() < 0)
                return bad_input(file, f + ".samples", "expected non-negative numbers");
        if (t.contains("unit") && !t["unit"].is_string())
            return bad_input(file, f + ".unit", "expected a string");
        PITFALL_TRY(check_process_spread(file, f, t));
        if (t.contains("normalised"))
            PITFALL_TRY(check_normalised(file, f + ".normalised", t["normalised"]));
    }
    return status::ok();
}

const char* const checkable_source_rule =
    "a documented baseline names a source a reader can check: a URL (https://...), a document "
    "and its anchor (docs/cuda-rules.md#stub-libcuda), or a document and a quoted section title "
    "or the word 'section' (CUDA C++ Programming Guide, 'Arithmetic Instructions'); at least 16 "
    "characters";

// The rule of expected.schema.json's provenance.source pattern, said in code so that the
// message can explain it: "://", "#" and a letter or digit, a title in quotes ('...' or "..."
// of 3 or more characters), or "section"/"Section".
bool checkable_source(const std::string& source) {
    const auto points =
        std::count_if(source.begin(), source.end(), [](char c) { return (c & 0xC0) != 0x80; });
    if (points < 16)
        return false;
    for (const char* mark : {"://", "section", "Section"})
        if (source.find(mark) != std::string::npos)
            return true;
    for (std::size_t at = source.find('#'); at != std::string::npos; at = source.find('#', at + 1))
        if (at + 1 < source.size() && std::isalnum(static_cast<unsigned char>(source[at + 1])) != 0)
            return true;
    for (const char quote : {'\'', '"'}) {
        // An opening quote, then 3 or more characters that are not the quote, then the quote.
        std::size_t open = source.find(quote);
        while (open != std::string::npos) {
            const std::size_t close = source.find(quote, open + 1);
            if (close == std::string::npos)
                break;
            if (close - open - 1 >= 3)
                return true;
            open = close;
        }
    }
    return false;
}

// A ratio entry: a bound ({min, max}, {equals} or {value, rel_tol | abs_tol}), with where its
// numbers come from: provenance documented (a source) or observed (blessed from a run: date,
// fingerprint, fingerprint_id, pitfall_version, and the measured ratio as "observed").
const std::set<std::string> ratio_bound_keys{"min", "max", "equals", "value", "rel_tol", "abs_tol"};

status check_ratio_provenance(const std::string& file, const std::string& entry_field,
                              const json& entry) {
    const std::string field = entry_field + ".provenance";
    const bool has_observed = entry.contains("observed");
    if (!entry.contains("provenance"))
        return bad_input(file, field,
                         has_observed ? "an observed ratio needs its provenance (kind observed)"
                                      : "a ratio bound says where its numbers come from: "
                                        "provenance documented (a source) or observed (blessed "
                                        "from a run)");
    const json& prov = entry["provenance"];
    if (!prov.is_object())
        return bad_input(file, field, "expected an object {kind, ...}");
    static const std::set<std::string> keys{
        "kind", "source", "date", "fingerprint", "fingerprint_id", "pitfall_version", "host_id"};
    for (const auto& [k, v] : prov.items())
        if (keys.count(k) == 0)
            return bad_input(file, dotted(field, k),
                             "unknown key (kind, source, date, fingerprint, fingerprint_id, "
                             "pitfall_version, host_id)");
    for (const char* k : {"kind", "source", "date", "fingerprint_id", "pitfall_version", "host_id"})
        if (prov.contains(k) && !prov[k].is_string())
            return bad_input(file, dotted(field, k), "expected a string");
    const std::string kind = prov.value("kind", "");
    if (kind == "documented") {
        if (prov.value("source", "").empty())
            return bad_input(file, field + ".source",
                             "a documented ratio bound names its source (a document, and why "
                             "this number)");
        if (!checkable_source(prov["source"].get<std::string>()))
            return bad_input(file, field + ".source", checkable_source_rule);
        if (has_observed)
            return bad_input(file, entry_field + ".observed",
                             "a documented bound has no measured ratio (observed entries do)");
        return status::ok();
    }
    if (kind != "observed")
        return bad_input(file, field + ".kind", "expected \"observed\" or \"documented\"");
    for (const char* k : {"date", "fingerprint_id", "pitfall_version"})
        if (!prov.contains(k))
            return bad_input(file, dotted(field, k),
                             "an observed ratio bound says when, where and by which pitfall it "
                             "was blessed (date, fingerprint, fingerprint_id, pitfall_version)");
    if (!prov.contains("fingerprint") || !prov["fingerprint"].is_object())
        return bad_input(file, field + ".fingerprint",
                         "expected the run's fingerprint summary (an object)");
    if (!has_observed)
        return bad_input(file, entry_field + ".observed",
                         "an observed ratio bound records the ratio it was blessed from");
    return status::ok();
}

status check_ratio_entry(const std::string& file, const std::string& field, const json& entry) {
    if (!entry.is_object())
        return bad_input(file, field, "expected {min, max, provenance, ...}");
    json bound = json::object();
    for (const auto& [k, v] : entry.items()) {
        if (ratio_bound_keys.count(k) != 0)
            bound[k] = v;
        else if (k == "observed" && !v.is_number())
            return bad_input(file, field + ".observed", "expected a number (the measured ratio)");
        else if (k == "note" && !v.is_string())
            return bad_input(file, field + ".note", "expected a string");
        else if (k != "observed" && k != "note" && k != "provenance")
            return bad_input(file, dotted(field, k),
                             "unknown key (min, max, equals, value, rel_tol, abs_tol, observed, "
                             "note, provenance)");
    }
    PITFALL_TRY(check_bound(file, field, bound));
    return check_ratio_provenance(file, field, entry);
}

status check_outcome(const std::string& file, const std::string& field, const json& outcome) {
    if (!outcome.is_object() || !outcome.contains("status") || !outcome["status"].is_string())
        return bad_input(file, field, "expected an object with a 'status'");
    const auto st = outcome["status"].get<std::string>();
    if (outcome_statuses.count(st) == 0)
        return bad_input(file, field + ".status",
                         "'" + st + "' is not ok, error, unsupported, signal, exit or load_error");
    if (st == "error" && !outcome.contains("error"))
        return bad_input(file, field + ".error", "an expected error needs its name");
    if (st == "signal" && !outcome.contains("signal"))
        return bad_input(file, field + ".signal", "an expected signal needs its name (SIGSEGV)");
    return status::ok();
}

// What the schema cannot say of an entry's records: each list names a record once.
status check_records(const std::string& file, const std::string& field, const json& records) {
    if (!records.is_object())
        return bad_input(file, field, "expected an object (checks, measurements, samples)");
    for (const auto& [kind, names] : records.items()) {
        if (!names.is_array())
            return bad_input(file, dotted(field, kind), "expected an array of names");
        std::set<std::string> seen;
        for (const auto& name : names)
            if (!name.is_string() || !seen.insert(name.get<std::string>()).second)
                return bad_input(file, dotted(field, kind),
                                 name.is_string() ? "names '" + name.get<std::string>() + "' twice"
                                                  : "expected an array of names");
    }
    return status::ok();
}

// An observed entry carries the evidence of the run it was blessed from (what `pitfall bless`
// writes), never prose: when, the fingerprint summary and its id, the pitfall that ran it, and
// for a success where it ran.
status check_observed_evidence(const std::string& file, const std::string& field, const json& entry,
                               const json& prov) {
    if (!prov.contains("date") || !prov["date"].is_string())
        return bad_input(file, field + ".provenance.date",
                         "an observed baseline says when it was blessed (YYYY-MM-DD)");
    if (!prov.contains("fingerprint") || !prov["fingerprint"].is_object() ||
        prov["fingerprint"].empty())
        return bad_input(file, field + ".provenance.fingerprint",
                         "an observed baseline carries the run's fingerprint summary (an object, "
                         "as bless writes it), not a description");
    if (!prov.contains("fingerprint_id") || !prov["fingerprint_id"].is_string())
        return bad_input(file, field + ".provenance.fingerprint_id",
                         "an observed baseline carries the run's fingerprint id");
    if (!prov.contains("pitfall_version") || !prov["pitfall_version"].is_string())
        return bad_input(file, field + ".provenance.pitfall_version",
                         "an observed baseline names the pitfall version that ran the case");
    if (entry["outcome"].value("status", "") == "ok" && !entry.contains("ran_on"))
        return bad_input(file, field + ".ran_on",
                         "an observed success says where it ran (bless writes it from the case's "
                         "proof: \"cpu\", \"cuda\")");
    return status::ok();
}

status check_expected_file(const std::string& file, const json& doc,
                           const scenario_entry& scenario) {
    // The schema first (reports/schema/expected.schema.json: the one definition of the
    // format), then what it cannot say; the checks below stay for the index-dependent rules.
    PITFALL_TRY(detail::validate_document("expected", doc, file));
    PITFALL_TRY(check_expected_semantics(file, doc));
    if (!doc.is_object())
        return bad_input(file, "", "expected an object");
    if (doc.value("schema", "") != "pitfall.expected/1")
        return bad_input(file, "schema", "expected \"pitfall.expected/1\"");
    if (!doc.contains("cases") || !doc["cases"].is_object())
        return bad_input(file, "cases", "missing (an object keyed by backend.variant)");
    for (const auto& [key, entry] : doc["cases"].items()) {
        const std::string field = "cases." + key;
        const auto dot = key.find('.');
        const variant_spec* v = dot == std::string::npos
                                    ? nullptr
                                    : scenario.description.find_variant(key.substr(dot + 1));
        if (v == nullptr || v->helper)
            return bad_input(file, field,
                             "no such case (expected <backend>.<variant> of " +
                                 scenario.description.name + ")");
        const auto backends = scenario.description.backends_of(*v);
        if (std::find(backends.begin(), backends.end(), key.substr(0, dot)) == backends.end())
            return bad_input(file, field, "variant does not run on backend " + key.substr(0, dot));
        if (!entry.is_object() || !entry.contains("outcome"))
            return bad_input(file, field, "needs an 'outcome'");
        PITFALL_TRY(check_outcome(file, field + ".outcome", entry["outcome"]));
        if (entry.contains("measurements"))
            PITFALL_TRY(check_bounds(file, field + ".measurements", entry["measurements"]));
        if (entry.contains("memory"))
            PITFALL_TRY(check_bounds(file, field + ".memory", entry["memory"], true));
        if (entry.contains("events")) {
            if (!entry["events"].is_object())
                return bad_input(file, field + ".events", "expected an object of outcomes");
            for (const auto& [name, ev] : entry["events"].items())
                PITFALL_TRY(check_outcome(file, dotted(field + ".events", name), ev));
        }
        if (entry.contains("ran_on") && !entry["ran_on"].is_string())
            return bad_input(
                file, field + ".ran_on",
                "expected a string: the start of the case's ran_on (\"cpu\", \"cuda\")");
        if (entry.contains("timings"))
            PITFALL_TRY(check_timings(file, field + ".timings", entry["timings"]));
        if (entry.contains("records"))
            PITFALL_TRY(check_records(file, field + ".records", entry["records"]));
        static const std::set<std::string> entry_keys{"outcome", "events",     "measurements",
                                                      "memory",  "timings",    "ran_on",
                                                      "records", "provenance", "note"};
        for (const auto& [k, value] : entry.items())
            if (entry_keys.count(k) == 0)
                return bad_input(file, dotted(field, k),
                                 "unknown key (outcome, events, measurements, memory, timings, "
                                 "ran_on, records, provenance, note)");
        const json& prov = entry.contains("provenance") ? entry["provenance"] : json();
        const std::string kind = prov.is_object() ? prov.value("kind", "") : "";
        if (kind != "observed" && kind != "documented")
            return bad_input(file, field + ".provenance.kind",
                             "expected \"observed\" or \"documented\"");
        // Required of a documented entry; an observed one may keep the source it had.
        const bool has_source = prov.contains("source");
        if ((kind == "documented" || has_source) &&
            (!has_source || !prov["source"].is_string() ||
             !checkable_source(prov["source"].get<std::string>())))
            return bad_input(file, field + ".provenance.source", checkable_source_rule);
        if (kind == "observed")
            PITFALL_TRY(check_observed_evidence(file, field, entry, prov));
        if (prov.contains("fingerprint_id") && !prov["fingerprint_id"].is_string())
            return bad_input(file, field + ".provenance.fingerprint_id", "expected a string");
        for (const char* k : {"host_id", "build_type"})
            if (prov.contains(k) && !prov[k].is_string())
                return bad_input(file, field + ".provenance." + k, "expected a string");
        if (entry.contains("timings") && !prov.contains("fingerprint_id"))
            return bad_input(file, field + ".provenance.fingerprint_id",
                             "timings need the fingerprint id they were measured under");
    }
    if (doc.contains("ratios")) {
        if (!doc["ratios"].is_object())
            return bad_input(file, "ratios",
                             "expected an object of {\"<backend>.<ratio>\": {min, max}}");
        for (const auto& [key, b] : doc["ratios"].items()) {
            const auto dot = key.find('.');
            const std::string name = dot == std::string::npos ? "" : key.substr(dot + 1);
            const auto& ratios = scenario.description.ratios;
            if (dot == std::string::npos ||
                (key.substr(0, dot) != "cpu" && key.substr(0, dot) != "cuda") ||
                std::none_of(ratios.begin(), ratios.end(),
                             [&](const ratio_spec& r) { return r.name == name; }))
                return bad_input(file, "ratios." + key,
                                 "no such ratio (expected <backend>.<ratio> of " +
                                     scenario.description.name + ")");
            PITFALL_TRY(check_ratio_entry(file, "ratios." + key, b));
        }
    }
    for (const auto& [k, v] : doc.items())
        if (k != "schema" && k != "scenario" && k != "cases" && k != "ratios" && k != "note")
            return bad_input(file, k, "unknown key (schema, scenario, cases, ratios, note)");
    return status::ok();
}

// A profile's match value: a value (equal), an array (any of), or {"min", "max"} (a range,
// e.g. every CUDA 13.x runtime: {"min": 13000, "max": 13999}).
bool value_matches(const json& want, const json& have) {
    if (want.is_array())
        return std::any_of(want.begin(), want.end(),
                           [&](const json& w) { return value_matches(w, have); });
    if (want.is_object() && (want.contains("min") || want.contains("max"))) {
        if (!have.is_number())
            return false;
        const double x = have.get<double>();
        return (!want.contains("min") || x >= want["min"].get<double>()) &&
               (!want.contains("max") || x <= want["max"].get<double>());
    }
    return want == have;
}

std::string describe_outcome(const json& o) {
    std::string st = o.value("status", "?"); // not const: returned by move
    if (st == "error")
        return o.value("error", "?") + " (" + o.value("library", "?") + ", " +
               o.value("stage", "?") + (o.value("sticky", false) ? ", sticky" : "") + ")";
    if (st == "signal")
        return "signal " + o.value("signal", "?");
    if (st == "exit")
        return "exit " + std::to_string(o.value("exit_code", -1));
    if (st == "load_error" || st == "unsupported")
        return st + " " + o.value("error", o.value("reason", ""));
    return st;
}

// The fields the baseline names must equal the observed ones; fields it leaves out are free.
std::optional<std::string> outcome_difference(const json& want, const json& have) {
    for (const char* field :
         {"status", "library", "error", "stage", "sticky", "signal", "exit_code"}) {
        if (!want.contains(field))
            continue;
        if (!have.contains(field) || have[field] != want[field])
            return std::string(field);
    }
    return std::nullopt;
}

// Every bound of `bounds` against `values` (an object of numbers, or of {"value": x} items).
std::optional<std::string> bounds_violation(const json& bounds, const json& values,
                                            const char* value_key) {
    for (const auto& [name, b] : bounds.items()) {
        if (!values.contains(name))
            return name + " was not recorded";
        const json& item = values[name];
        const json v = value_key != nullptr
                           ? (item.is_object() ? item.value(value_key, json()) : json())
                           : item;
        if (!v.is_number())
            return name + " is not a number";
        if (auto why = bound_violation(name, b, v.get<double>()))
            return why;
    }
    return std::nullopt;
}

std::string format_number(double x) {
    std::ostringstream out;
    out << std::setprecision(6) << x;
    return out.str();
}

verdict judge_against(const observation& observed, const json& expected, const std::string& backend,
                      const judge_context& context);

/// Memory bounds "per" a measurement judge the bytes divided by the case's value of it: each
/// such bound is replaced by one on "<name> / <measurement>", and the quotient added to
/// `memory`. A case that did not record the measurement (or a value that is no positive number)
/// fails: the baseline expects a case that sizes itself from it.
std::optional<std::string> per_measurement(json& bounds, json& memory, const json& result) {
    const json measurements = result.value("measurements", json::object());
    json judged = json::object();
    for (const auto& [name, b] : bounds.items()) {
        if (!b.is_object() || !b.contains("per") || !b["per"].is_string()) {
            judged[name] = b;
            continue;
        }
        const std::string per = b["per"].get<std::string>();
        const json item = measurements.contains(per) ? measurements[per] : json();
        const json by = item.is_object() ? item.value("value", json()) : json();
        if (!by.is_number() || !(by.get<double>() > 0)) {
            std::string why = name;
            why.append(" is judged per ")
                .append(per)
                .append(", a measurement this case did not record");
            return why;
        }
        std::string quotient = name;
        quotient.append(" / ").append(per);
        json bound = b;
        bound.erase("per");
        judged[quotient] = bound;
        if (memory.contains(name) && memory[name].is_number())
            memory[quotient] = memory[name].get<double>() / by.get<double>();
    }
    bounds = std::move(judged);
    return std::nullopt;
}
} // namespace

std::optional<std::string> bound_violation(const std::string& name, const json& b, double x) {
    std::string why;
    if (b.contains("equals")) {
        if (x != b["equals"].get<double>())
            why = name + " = " + format_number(x) + ", expected exactly " +
                  format_number(b["equals"].get<double>());
    } else if (b.contains("value")) {
        const double want = b["value"].get<double>();
        const double tol = b.contains("rel_tol") ? b["rel_tol"].get<double>() * std::fabs(want)
                                                 : b.value("abs_tol", 0.0);
        if (!(std::fabs(x - want) <= tol))
            why = name + " = " + format_number(x) + ", expected " + format_number(want) + " +- " +
                  format_number(tol) +
                  (b.contains("rel_tol")
                       ? " (" + format_number(b["rel_tol"].get<double>() * 100) + "%)"
                       : "") +
                  (x > want ? " (" + format_number(want != 0 ? (x / want - 1) * 100 : 0) + "% more)"
                            : "");
    } else if (b.contains("min") && !(x >= b["min"].get<double>())) {
        why =
            name + " = " + format_number(x) + " below min " + format_number(b["min"].get<double>());
    } else if (b.contains("max") && !(x <= b["max"].get<double>())) {
        why =
            name + " = " + format_number(x) + " above max " + format_number(b["max"].get<double>());
    }
    return why.empty() ? std::nullopt : std::optional<std::string>(why);
}

json judge_ratio(const std::string& name, double ratio, const json& entry,
                 const std::string& fingerprint_id, const std::string& host_id) {
    json bound = json::object();
    for (const auto& [k, v] : entry.items())
        if (ratio_bound_keys.count(k) != 0)
            bound[k] = v;
    const json prov = entry.value("provenance", json::object());
    json out = {{"bound", bound}};
    if (!prov.empty())
        out["provenance"] = prov;
    const std::string blessed_under = prov.value("fingerprint_id", "");
    const std::string blessed_on = prov.value("host_id", "");
    if (prov.value("kind", "") == "observed" && !blessed_on.empty() && blessed_on != host_id) {
        out["verdict"] = "NOT_COMPARED";
        out["failing"] = false;
        out["reason"] = "an observed bound is judged only on the host it was blessed on (" +
                        blessed_on + "; this run " + (host_id.empty() ? "none" : host_id) + ")";
        return out;
    }
    if (prov.value("kind", "") == "observed" && blessed_under != fingerprint_id) {
        out["verdict"] = "NOT_COMPARED";
        out["failing"] = false;
        out["reason"] = "an observed bound is judged only under the fingerprint it was blessed "
                        "under (" +
                        blessed_under + "; this run " +
                        (fingerprint_id.empty() ? std::string("none") : fingerprint_id) + ")";
        return out;
    }
    const auto why = bound_violation(name, bound, ratio);
    const verdict_kind v = why ? verdict_kind::perf_regression : verdict_kind::pass;
    out["verdict"] = to_string(v);
    out["failing"] = is_failing(v);
    if (why)
        out["reason"] = *why + (prov.value("kind", "") == "documented"
                                    ? " (documented bound: " + prov.value("source", "") + ")"
                                    : std::string());
    return out;
}

namespace {
/// x to `digits` significant digits: what a reader of the file needs, not 17.
double to_digits(double x, int digits) {
    std::ostringstream text;
    text << std::setprecision(digits) << x;
    return std::stod(text.str());
}
/// x to 3 significant digits, rounded down (`up` false) or up: a blessed range is never
/// narrower than the tolerance makes it.
double round_outwards(double x, bool up) {
    if (!(x > 0) || !std::isfinite(x))
        return x;
    const double scale = std::pow(10.0, std::floor(std::log10(x)) - 2);
    const double steps = x / scale;
    // A quotient a hair off a whole number (0.615 / 0.001 = 614.9999...) is that number.
    const double whole = std::round(steps);
    const double rounded =
        std::fabs(steps - whole) < 1e-9 ? whole : (up ? std::ceil(steps) : std::floor(steps));
    return to_digits(rounded * scale, 3);
}
} // namespace

nlohmann::ordered_json ratio_entry_from_run(double ratio, double tolerance,
                                            const nlohmann::ordered_json& previous,
                                            const json& fingerprint_summary,
                                            const std::string& fingerprint_id,
                                            const std::string& pitfall_version,
                                            const std::string& date, const std::string& host_id) {
    nlohmann::ordered_json entry = nlohmann::ordered_json::object();
    entry["min"] = round_outwards(ratio / tolerance, false);
    entry["max"] = round_outwards(ratio * tolerance, true);
    entry["observed"] = to_digits(ratio, 4);
    if (previous.is_object() && previous.contains("note"))
        entry["note"] = previous["note"];
    entry["provenance"] = {{"kind", "observed"},
                           {"date", date},
                           {"fingerprint", fingerprint_summary},
                           {"fingerprint_id", fingerprint_id},
                           {"pitfall_version", pitfall_version}};
    if (!host_id.empty())
        entry["provenance"]["host_id"] = host_id;
    return keep_key_order(previous, entry);
}

status validate_expected(const std::string& file, const json& doc, const scenario_entry& scenario) {
    return check_expected_file(file, doc, scenario);
}

status_or<std::vector<profile>> load_profiles(const std::string& expected_dir,
                                              const scenario_index& index) {
    std::vector<profile> profiles;
    std::error_code ec;
    // No folder yet is no baselines yet (a new project before its first bless, which makes
    // it): every case is NO_BASELINE. Something else at that path is bad input.
    const fs::file_status st = fs::status(expected_dir, ec);
    if (st.type() == fs::file_type::not_found)
        return profiles;
    if (ec)
        return bad_input(expected_dir, "", "cannot be read: " + ec.message());
    if (!fs::is_directory(st))
        return bad_input(expected_dir, "", "is not a folder of baselines");
    PITFALL_ASSIGN_OR_RETURN(const std::vector<fs::path> entries, list_folder(expected_dir));
    std::vector<fs::path> dirs;
    for (const auto& entry : entries)
        if (fs::is_directory(entry, ec)) // a symlink loop is neither: its profile.json is read
            dirs.push_back(entry);
        else if (ec && ec != std::errc::no_such_file_or_directory)
            return bad_input(entry.string(), "", "cannot be read: " + ec.message());
    for (const auto& dir : dirs) {
        const std::string profile_file = (dir / "profile.json").string();
        PITFALL_ASSIGN_OR_RETURN(const json doc, read_json(profile_file));
        PITFALL_TRY(detail::validate_document("profile", doc, profile_file));
        for (const auto& [key, want] : doc["match"].items())
            PITFALL_TRY(
                check_range_order(profile_file, detail::pointer_append("/match", key), want));
        if (doc.value("schema", "") != "pitfall.profile/1")
            return bad_input(profile_file, "schema", "expected \"pitfall.profile/1\"");
        if (!doc.contains("match") || !doc["match"].is_object())
            return bad_input(profile_file, "match", "missing (an object of fingerprint keys)");
        for (const auto& [k, v] : doc.items())
            if (k != "schema" && k != "name" && k != "description" && k != "match" &&
                k != "overlay")
                return bad_input(profile_file, k,
                                 "unknown key (schema, name, description, match, overlay)");
        if (doc.contains("overlay") && !doc["overlay"].is_boolean())
            return bad_input(profile_file, "overlay", "expected true or false");
        profile p;
        p.name = dir.filename().string();
        if (doc.value("name", p.name) != p.name)
            return bad_input(profile_file, "name", "must equal the folder name '" + p.name + "'");
        p.dir = dir.string();
        p.description = doc.value("description", "");
        p.match = doc["match"];
        p.overlay = doc.value("overlay", false);
        if (p.overlay && p.match.empty())
            return bad_input(profile_file, "match",
                             "an overlay needs a condition (it would apply everywhere)");
        PITFALL_ASSIGN_OR_RETURN(const std::vector<fs::path> in_dir, list_folder(dir));
        std::vector<fs::path> files;
        for (const auto& entry : in_dir)
            if (entry.extension() == ".json" && entry.filename() != "profile.json")
                files.push_back(entry);
        for (const auto& file : files) {
            const std::string scenario_name = file.stem().string();
            const auto it = std::find_if(
                index.scenarios.begin(), index.scenarios.end(),
                [&](const scenario_entry& s) { return s.description.name == scenario_name; });
            PITFALL_ASSIGN_OR_RETURN(const json expected, read_json(file.string()));
            if (it == index.scenarios.end())
                continue; // a baseline for a scenario this build leaves out (PITFALL_SCENARIOS)
            PITFALL_TRY(detail::validate_document("expected", expected, file.string()));
            if (expected["scenario"].get<std::string>() != scenario_name)
                return bad_input(file.string(), "scenario",
                                 "must equal the file name '" + scenario_name + "'");
            PITFALL_TRY(check_expected_file(file.string(), expected, *it));
            p.cases[scenario_name] = expected["cases"];
            if (expected.contains("ratios"))
                p.ratios[scenario_name] = expected["ratios"];
        }
        profiles.push_back(std::move(p));
    }
    return profiles;
}

status_or<profile_choice> choose_profile(const std::vector<profile>& profiles, const json& summary,
                                         const std::string& override_name) {
    profile_choice choice;
    if (!override_name.empty()) {
        for (const auto& p : profiles)
            if (p.name == override_name) {
                if (p.overlay)
                    return status::error(library::pitfall, "bad_usage",
                                         "--profile " + override_name +
                                             ": an overlay (it holds only what its condition "
                                             "changes; it is never the chosen profile): name "
                                             "the GPU's own profile",
                                         stage::init);
                choice.chosen = &p;
                choice.chain = {&p};
                choice.reason = "chosen with --profile";
                return choice;
            }
        std::string known;
        for (const auto& p : profiles)
            known += (known.empty() ? "" : ", ") + p.name;
        return status::error(
            library::pitfall, "bad_usage",
            "--profile " + override_name + ": no such profile (known: " + known + ")", stage::init);
    }
    std::vector<const profile*> regular;
    for (const auto& p : profiles) {
        bool all = true;
        for (const auto& [key, want] : p.match.items())
            all = all && summary.contains(key) && value_matches(want, summary[key]);
        if (all)
            (p.overlay ? choice.overlays : regular).push_back(&p);
    }
    // Most keys first; stable, so profiles with as many keys stay in name order.
    const auto most_keys_first = [](const profile* a, const profile* b) {
        return a->match.size() > b->match.size();
    };
    std::stable_sort(regular.begin(), regular.end(), most_keys_first);
    std::stable_sort(choice.overlays.begin(), choice.overlays.end(), most_keys_first);
    choice.chain = choice.overlays;
    choice.chain.insert(choice.chain.end(), regular.begin(), regular.end());
    if (regular.empty()) {
        choice.reason = "no profile under expected/ matches this environment";
        return choice;
    }
    choice.chosen = regular.front();
    choice.reason = "matches " + choice.chosen->match.dump();
    if (regular.size() > 1 && regular[1]->match.size() == choice.chosen->match.size())
        choice.reason += "; " + regular[1]->name + " matches as specifically (first by name wins)";
    if (!choice.overlays.empty()) {
        choice.reason += "; overlays first:";
        for (const profile* o : choice.overlays)
            choice.reason += " " + o->name;
    }
    if (regular.size() > 1) {
        choice.reason += "; then";
        for (std::size_t i = 1; i < regular.size(); ++i)
            choice.reason += " " + regular[i]->name;
    }
    return choice;
}

std::pair<const json*, const profile*>
profile_choice::entry_for(const std::string& scenario, const std::string& case_key) const {
    for (const profile* p : chain) {
        const auto it = p->cases.find(scenario);
        if (it != p->cases.end() && it->second.contains(case_key))
            return {&it->second[case_key], p};
    }
    return {nullptr, nullptr};
}

std::pair<const json*, const profile*>
profile_choice::ratio_bounds_for(const std::string& scenario, const std::string& key) const {
    for (const profile* p : chain) {
        const auto it = p->ratios.find(scenario);
        if (it != p->ratios.end() && it->second.contains(key))
            return {&it->second[key], p};
    }
    return {nullptr, nullptr};
}

namespace {
/// The kinds of record a baseline pins by name, and what one of each is called.
struct record_kind {
    const char* key;       ///< in the result and in the entry's "records"
    const char* one;       ///< "check": "check `x` no longer runs"
    const char* many;      ///< "checks": "checks `x` and `y` no longer run"
    const char* lost_one;  ///< what became of one
    const char* lost_many; ///< and of several
};
constexpr record_kind record_kinds[] = {
    {"checks", "check", "checks", "no longer runs", "no longer run"},
    {"measurements", "measurement", "measurements", "is no longer recorded",
     "are no longer recorded"},
    {"samples", "timed series", "timed series", "is no longer recorded", "are no longer recorded"}};

/// The names of one kind a result recorded: its checks' names, its measurements' or its timed
/// series' keys (a result is the scenario's file: anything else there is skipped, not trusted).
std::set<std::string> recorded_names(const json& result, const std::string& kind) {
    std::set<std::string> names;
    const json items = result.is_object() && result.contains(kind) ? result[kind] : json();
    if (kind == "checks" && items.is_array()) {
        for (const auto& c : items)
            if (c.is_object() && c.contains("name") && c["name"].is_string())
                names.insert(c["name"].get<std::string>());
    } else if (kind != "checks" && items.is_object()) {
        for (const auto& [name, value] : items.items())
            names.insert(name);
    }
    return names;
}

/// "`a`, `b` and 3 more": names for a reason line, the first few of them (quoted unless
/// `quoted` is false: they say what they are already).
std::string name_list(const std::vector<std::string>& names, bool quoted = true) {
    std::string out;
    const std::size_t shown = std::min<std::size_t>(names.size(), 3);
    for (std::size_t i = 0; i < shown; ++i)
        out += (i == 0                  ? ""
                : i + 1 == names.size() ? " and "
                                        : ", ") +
               (quoted ? "`" + names[i] + "`" : names[i]);
    if (names.size() > shown)
        out += " and " + std::to_string(names.size() - shown) + " more";
    return out;
}

/// A record the baseline names that the case no longer made. A check that stops running
/// passes nothing: without this the case would pass on the checks that are left.
std::optional<std::string> lost_records(const json& expected, const json& result) {
    const json records = expected.value("records", json::object());
    std::string why;
    for (const auto& kind : record_kinds) {
        if (!records.is_object() || !records.contains(kind.key) || !records[kind.key].is_array())
            continue;
        const auto have = recorded_names(result, kind.key);
        std::vector<std::string> lost;
        for (const auto& name : records[kind.key])
            if (name.is_string() && have.count(name.get<std::string>()) == 0)
                lost.push_back(name.get<std::string>());
        if (lost.empty())
            continue;
        const bool one = lost.size() == 1;
        why += (why.empty() ? "" : "; ") + std::string(one ? kind.one : kind.many) + " " +
               name_list(lost) + " " + (one ? kind.lost_one : kind.lost_many);
    }
    if (why.empty())
        return std::nullopt;
    return why + " (the baseline names " + (why.find(';') == std::string::npos ? "it" : "them") +
           ": a record that stopped being made cannot fail)";
}

/// Records the case made that its baseline does not name yet: said until they are blessed.
/// Only for an entry that pins its records (one blessed before they were pinned names none).
std::string unpinned_records(const json& expected, const json& result) {
    if (!expected.contains("records") || !expected["records"].is_object())
        return "";
    const json& records = expected["records"];
    std::vector<std::string> fresh;
    for (const auto& kind : record_kinds) {
        std::set<std::string> pinned;
        if (records.contains(kind.key) && records[kind.key].is_array())
            for (const auto& name : records[kind.key])
                if (name.is_string())
                    pinned.insert(name.get<std::string>());
        for (const auto& name : recorded_names(result, kind.key))
            if (pinned.count(name) == 0)
                fresh.push_back(std::string(kind.one) + " `" + name + "`");
    }
    if (fresh.empty())
        return "";
    return "; not in the baseline yet (bless to pin): " + name_list(fresh, false);
}

/// The first of `names` the case's outcome or events carry as an error, if any.
std::optional<std::string> environment_error_in(const observation& observed,
                                                const std::vector<std::string>& names) {
    std::vector<const json*> outcomes = {&observed.outcome};
    if (observed.result.is_object() && observed.result.contains("events") &&
        observed.result["events"].is_object())
        for (const auto& [name, event] : observed.result["events"].items())
            outcomes.push_back(&event);
    for (const json* o : outcomes)
        if (o->is_object() && o->contains("error") && (*o)["error"].is_string())
            for (const auto& n : names)
                if ((*o)["error"].get<std::string>() == n)
                    return n;
    return std::nullopt;
}
} // namespace

verdict judge(const observation& observed, const json& expected, const std::string& backend,
              const judge_context& context) {
    verdict v = judge_against(observed, expected, backend, context);
    if (backend == "cuda" && !context.environment_fault.empty()) {
        const auto error = environment_error_in(observed, context.environment_errors);
        if (error && (v.kind == verdict_kind::fail || v.kind == verdict_kind::numeric_mismatch))
            return {verdict_kind::unsupported,
                    "environment: " + context.environment_fault + " (" + *error +
                        "; against the baseline: " + to_string(v.kind) + ", " + v.reason + ")"};
        // Reproduced, and only because of the machine: say so.
        if (v.kind == verdict_kind::pass &&
            environment_error_in(observed, context.explained_errors))
            v.reason += " (this machine: " + context.environment_fault + ")";
    }
    if (is_failing(v.kind) && expected.is_object() &&
        expected.value("provenance", json::object()).value("kind", "") == "documented")
        v.reason += " (documented, not observed: bless it if the hardware is right)";
    return v;
}

namespace {
/// "cuda:0 NVIDIA H100 ..." names a device; "cuda: no device (...)" does not.
bool names_a_device(const std::string& ran_on) {
    return ran_on.size() > 5 && ran_on.rfind("cuda:", 0) == 0 &&
           std::isdigit(static_cast<unsigned char>(ran_on[5])) != 0;
}

/// A CUDA case that succeeded and does not say it ran on the CPU must show GPU work the SDK
/// counted (result "gpu_work": kernels counted by the device, cuBLAS calls accepted): ran_on is
/// the case's own words, the count is the evidence. The SDK writes gpu_work for every CUDA case;
/// it counts ("required") where the variant needs a device (scenario.json needs_device), not
/// where it only asks versions or starts children. A result without gpu_work was not written by
/// the SDK, and nothing backs its claim.
std::optional<std::string> gpu_claim_without_work(const std::string& backend,
                                                  const std::string& status,
                                                  const std::string& ran_on, const json& result) {
    if (backend != "cuda" || status != "ok" || ran_on.rfind("cpu", 0) == 0)
        return std::nullopt;
    if (!result.contains("gpu_work") || !result["gpu_work"].is_object())
        return "no evidence of GPU work: the result has no gpu_work (the SDK writes it for every "
               "CUDA case), so nothing backs ran_on = " +
               ran_on;
    const json& work = result["gpu_work"];
    if (!work.value("required", false))
        return std::nullopt;
    const auto count = [&](const char* key) {
        return work.contains(key) && work[key].is_number() ? work[key].get<double>() : 0.0;
    };
    if (work.contains("error"))
        return "claims a GPU (ran_on = " + ran_on + ") but its GPU work could not be counted: " +
               (work["error"].is_string() ? work["error"].get<std::string>() : "?");
    if (count("kernels") + count("library_calls") < 1)
        return "GPU asked for, no GPU work counted: ran_on = " + ran_on +
               ", but the device counted 0 kernels and no cuBLAS call was made";
    return std::nullopt;
}

verdict judge_against(const observation& observed, const json& expected, const std::string& backend,
                      const judge_context& context) {
    const json& o = observed.outcome;
    const std::string st = o.value("status", "");
    const bool have_baseline = expected.is_object();
    const json want = have_baseline ? expected.value("outcome", json::object()) : json();

    if (st == "timeout")
        return {verdict_kind::timeout, o.value("detail", "timed out")};
    if (st == "not_started")
        return {verdict_kind::crash, o.value("detail", "did not start")};
    if (st == "unsupported") {
        std::string reason = o.value("reason", "unsupported");
        // The profile chosen for this environment says the case runs here: that it no longer
        // can (a driver or library broken) is the regression, not a skip.
        if (have_baseline && want.value("status", "") != "unsupported")
            return {verdict_kind::fail, "behaviour changed: expected " + describe_outcome(want) +
                                            ", now unsupported: " + reason};
        // A different cause (no device instead of no driver) is worth saying; "built without
        // CUDA" has no cause to compare.
        if (have_baseline && want.value("status", "") == "unsupported" && want.contains("error") &&
            o.contains("error") && o.value("error", "") != want["error"].get<std::string>())
            reason += " [baseline expected " + want["error"].get<std::string>() + "]";
        return {verdict_kind::unsupported, reason};
    }
    const bool abnormal =
        st == "signal" || st == "exit" || st == "load_error" || st == "bad_result";
    const json& result = observed.result;
    // Judged with or without a baseline: the case's own proof of where it ran, and its checks
    // against independent references.
    if (!abnormal && result.is_object()) {
        const std::string ran_on = result.value("ran_on", "");
        // "cuda:0 <name> (sm_90, ...)" is a device; "cuda: no device (...)" is not. A claim the
        // fingerprint contradicts is not a result of this machine.
        if (backend == "cuda" && context.gpu_count && *context.gpu_count == 0 &&
            names_a_device(ran_on))
            return {verdict_kind::fail, "claims a GPU the machine does not have: ran_on = " +
                                            ran_on + ", but the run's fingerprint has gpu_count 0"};
        // A baseline may expect where a case runs (a silent CPU fallback is the reproduced
        // failure of device_visibility): then the proof must match it, whichever it says.
        if (have_baseline && expected.contains("ran_on")) {
            const std::string want_ran_on = expected["ran_on"].get<std::string>();
            if (ran_on.rfind(want_ran_on, 0) != 0)
                return {verdict_kind::fail, "behaviour changed: expected to run on '" +
                                                want_ran_on + "...', ran on '" + ran_on + "'"};
        } else if (backend == "cuda" && ran_on.rfind("cpu", 0) == 0) {
            return {verdict_kind::fail, "GPU asked for, CPU used: ran_on = " + ran_on};
        }
        if (const auto why = gpu_claim_without_work(backend, st, ran_on, result))
            return {verdict_kind::fail, *why};
        for (const auto& c : result.value("checks", json::array()))
            if (!c.value("passed", true))
                return {verdict_kind::numeric_mismatch,
                        "check " + c.value("name", "?") + " failed: " + c.value("detail", "")};
    }
    if (!have_baseline)
        return abnormal
                   ? verdict{verdict_kind::crash, describe_outcome(o) + " " + o.value("detail", "")}
                   : verdict{verdict_kind::no_baseline, "no baseline entry for this case"};

    if (const auto diff = outcome_difference(want, o)) {
        const std::string detail = o.value("detail", "");
        const std::string w = describe_outcome(want),
                          h = describe_outcome(o) + (detail.empty() ? "" : ": " + detail);
        if (abnormal)
            return {verdict_kind::crash, h + " (baseline: " + w + ")"};
        if (want.value("status", "") != "ok" && st == "ok")
            return {verdict_kind::fail, "behaviour changed: expected " + w + ", now succeeds"};
        return {verdict_kind::fail,
                "expected " + w + ", observed " + h + " (" + *diff + " differs)"};
    }
    if (abnormal) // an expected crash: the baseline names exactly this signal/exit
        return {verdict_kind::pass, "expected " + describe_outcome(o)};

    if (result.is_object()) {
        if (expected.contains("events")) {
            for (const auto& [name, want_event] : expected["events"].items()) {
                const json events = result.value("events", json::object());
                const json have_event = events.contains(name) ? events[name] : json::object();
                if (const auto diff = outcome_difference(want_event, have_event))
                    return {verdict_kind::fail, "event " + name + ": expected " +
                                                    describe_outcome(want_event) + ", observed " +
                                                    describe_outcome(have_event)};
            }
        }
        if (const auto why = lost_records(expected, result))
            return {verdict_kind::fail, *why};
        if (context.full_sizes) {
            verdict v{verdict_kind::pass,
                      "as expected: " + describe_outcome(o) +
                          " (measurements, memory and times not compared: " + full_sizes_reason +
                          ")" + unpinned_records(expected, result)};
            if (expected.contains("timings"))
                for (const auto& [name, ignored] : expected["timings"].items())
                    v.timings[name] = {{"verdict", "NOT_COMPARED"}, {"reason", full_sizes_reason}};
            return v;
        }
        if (expected.contains("measurements"))
            if (const auto why =
                    bounds_violation(expected["measurements"],
                                     result.value("measurements", json::object()), "value"))
                return {verdict_kind::numeric_mismatch, *why};
        if (expected.contains("memory")) {
            // The process's peak RSS is the harness's measurement, not the scenario's.
            json memory = result.value("memory", json::object());
            if (observed.peak_rss_bytes)
                memory["peak_rss_bytes"] = *observed.peak_rss_bytes;
            // A blessed peak RSS is a fact of the machine and build it was measured on, like a
            // time (the libraries the process maps: a CPU case of a CUDA build holds ~200 MB
            // that the same case of a CPU-only build never maps): judged only under the
            // fingerprint it was blessed under. The tracked device bytes are the program's
            // own and are judged everywhere.
            json bounds = expected["memory"];
            const json prov = expected.value("provenance", json::object());
            // The build type too: a Debug build under the sanitizers maps several times the
            // memory of the Release build a host profile is blessed from.
            const std::string blessed_build = prov.value("build_type", "");
            if (prov.value("kind", "") == "observed" &&
                (prov.value("fingerprint_id", "") != context.fingerprint_id ||
                 (!blessed_build.empty() && !context.build_type.empty() &&
                  blessed_build != context.build_type)))
                bounds.erase("peak_rss_bytes");
            if (auto why = per_measurement(bounds, memory, result))
                return {verdict_kind::mem_regression, *why};
            if (const auto why = bounds_violation(bounds, memory, nullptr))
                return {verdict_kind::mem_regression, *why};
        }
    }
    verdict v{verdict_kind::pass,
              "as expected: " + describe_outcome(o) + unpinned_records(expected, result)};
    judge_timings(expected, result, observed.threads, context, v);
    return v;
}
} // namespace

namespace {
using ordered_json = nlohmann::ordered_json;

/// The observed events, each as a baseline expects it (outcome fields only).
ordered_json expected_events(const json& result) {
    ordered_json events = ordered_json::object();
    const json observed = result.value("events", json::object());
    for (const auto& [name, ev] : observed.items()) {
        ordered_json e = ordered_json::object();
        for (const char* field : {"status", "library", "error", "stage", "sticky"})
            if (ev.contains(field))
                e[field] = ev[field];
        events[name] = e;
    }
    return events;
}

/// How far a blessed fraction of a device's memory may move: the cases round rows and batches
/// to whole numbers, which moved the fraction by up to 0.3% between an H100 80GB and an H200.
constexpr double memory_per_tolerance = 0.02;

ordered_json expected_memory(const case_record& record, const observation_origin& origin) {
    ordered_json memory = ordered_json::object();
    const json mem = record.result.value("memory", json::object());
    if (mem.contains("tracked_peak_bytes") && mem["tracked_peak_bytes"].is_number()) {
        // A variant sized from the device's memory: its bytes as a fraction of what it sized
        // from, where it recorded that; else the exact bytes (the program's own count).
        const json measurements = record.result.value("measurements", json::object());
        const json item = origin.memory_per.empty() || !measurements.contains(origin.memory_per)
                              ? json()
                              : measurements[origin.memory_per];
        const json by = item.is_object() ? item.value("value", json()) : json();
        if (by.is_number() && by.get<double>() > 0)
            memory["tracked_peak_bytes"] = {
                {"per", origin.memory_per},
                {"value", mem["tracked_peak_bytes"].get<double>() / by.get<double>()},
                {"rel_tol", memory_per_tolerance}};
        else
            memory["tracked_peak_bytes"] = {{"equals", mem["tracked_peak_bytes"]}};
    }
    if (record.process.peak_rss_bytes && *record.process.peak_rss_bytes > 0)
        memory["peak_rss_bytes"] = {{"value", *record.process.peak_rss_bytes},
                                    {"rel_tol", origin.rss_tolerance}};
    return memory;
}

/// What the case recorded, by name, for the entry's "records": each must be recorded again.
ordered_json expected_records(const json& result) {
    ordered_json records = ordered_json::object();
    for (const auto& kind : record_kinds) {
        const auto names = recorded_names(result, kind.key);
        if (!names.empty())
            records[kind.key] = names; // sorted: a blessed file's order does not move
    }
    return records;
}

/// Where the case ran, as a baseline expects it: the start of its proof ("cpu" of "cpu: 2
/// threads", "cuda" of "cuda:0 NVIDIA H100 ..."), or the previous entry's ran_on while the proof
/// still starts with it (a hand-pinned "cpu: silent fallback after ..." stays). Empty: no proof.
ordered_json expected_ran_on(const json& result, const std::string& previous) {
    const std::string seen = result.value("ran_on", "");
    if (seen.empty())
        return ordered_json();
    if (!previous.empty() && seen.rfind(previous, 0) == 0)
        return previous;
    const std::string start = seen.substr(0, seen.find(':'));
    return start.empty() ? ordered_json() : ordered_json(start);
}

/// Sets entry[key] to `value`, or removes the key when `value` is empty.
void set_or_erase(ordered_json& entry, const char* key, const ordered_json& value) {
    if (value.empty())
        entry.erase(key);
    else
        entry[key] = value;
}
} // namespace

ordered_json entry_from_record(const case_record& record, const ordered_json& previous,
                               const observation_origin& origin) {
    ordered_json entry = previous.is_object() ? previous : ordered_json::object();
    ordered_json outcome = ordered_json::object();
    for (const char* field :
         {"status", "library", "error", "stage", "sticky", "signal", "exit_code"})
        if (record.observed.contains(field) && !record.observed[field].is_null())
            outcome[field] = record.observed[field];
    if (outcome.value("status", "") == "unsupported") // the cause, not the wording of the reason
        outcome.erase("stage");
    entry["outcome"] = outcome;
    const bool have_result = record.result.is_object();
    set_or_erase(entry, "events", have_result ? expected_events(record.result) : ordered_json());
    set_or_erase(entry, "memory", have_result ? expected_memory(record, origin) : ordered_json());
    set_or_erase(entry, "records", have_result ? expected_records(record.result) : ordered_json());
    set_or_erase(entry, "timings",
                 have_result && origin.with_timings ? expected_timings(record.result, origin)
                                                    : ordered_json());
    const std::string previous_ran_on =
        previous.is_object() && previous.contains("ran_on") && previous["ran_on"].is_string()
            ? previous["ran_on"].get<std::string>()
            : "";
    set_or_erase(entry, "ran_on",
                 have_result ? expected_ran_on(record.result, previous_ran_on) : ordered_json());
    ordered_json run = {{"case", record.key.str()}};
    if (!origin.run_folder.empty())
        run["folder"] = origin.run_folder;
    if (!origin.run_started.empty())
        run["started"] = origin.run_started;
    if (!origin.run_archive.empty())
        run["archive"] = origin.run_archive;
    ordered_json provenance = {{"kind", "observed"},
                               {"date", origin.date},
                               {"fingerprint", origin.fingerprint_summary},
                               {"fingerprint_id", origin.fingerprint_id},
                               {"pitfall_version", origin.pitfall_version},
                               {"run", run}};
    if (record.process.threads)
        provenance["threads"] = *record.process.threads; // times hold only at this count
    if (!origin.host_id.empty())
        provenance["host_id"] = origin.host_id; // absolute times hold only on this host
    if (!origin.build_type.empty())
        provenance["build_type"] = origin.build_type; // and only from this build type
    if (previous.is_object() && previous.contains("provenance") &&
        previous["provenance"].contains("source"))
        provenance["source"] = previous["provenance"]["source"];
    entry["provenance"] = provenance;
    return keep_key_order(previous, entry);
}

ordered_json keep_key_order(const ordered_json& previous, const ordered_json& fresh) {
    if (!previous.is_object() || !fresh.is_object())
        return fresh;
    ordered_json out = ordered_json::object();
    for (const auto& [key, value] : previous.items())
        if (fresh.contains(key))
            out[key] = keep_key_order(value, fresh[key]);
    for (const auto& [key, value] : fresh.items())
        if (!out.contains(key))
            out[key] = value;
    return out;
}

} // namespace pitfall::runner
