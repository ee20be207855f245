// An expected/<profile>/<scenario>.json file checked: the schema, then what a schema cannot say.
#include "judge/baseline.hpp"

#include "judge/baseline_parts.hpp"
#include "judge/timing.hpp"
#include "pitfall/controls.hpp"
#include "pitfall/detail/json_file.hpp"
#include "pitfall/detail/json_schema.hpp"

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
using namespace baseline_parts;

namespace baseline_parts {
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

/// One key of a bound: a number, or "why" (and, where `allow_per`, "per").
status check_bound_key(const std::string& file, const std::string& field, const std::string& k,
                       const json& v, bool allow_per) {
    static const std::set<std::string> keys{"min", "max", "equals", "value", "rel_tol", "abs_tol"};
    if (k == "why") { // a bound set by hand says why it is what it is
        // 1000 characters (the schema's maxLength) of up to 4 bytes each.
        if (!v.is_string() || v.get<std::string>().empty() || v.get<std::string>().size() > 4000)
            return bad_input(file, dotted(field, k),
                             "expected why the bound is what it is (1 to 1000 characters)");
        return status::ok();
    }
    if (allow_per && k == "per") {
        if (!v.is_string() || v.get<std::string>().empty())
            return bad_input(file, dotted(field, k), "expected the name of a measurement");
        return status::ok();
    }
    if (keys.count(k) == 0)
        return bad_input(file, dotted(field, k),
                         allow_per ? "unknown key (min, max, equals, value, rel_tol, abs_tol, "
                                     "per, why)"
                                   : "unknown key (min, max, equals, value, rel_tol, abs_tol, "
                                     "why)");
    if (!v.is_number())
        return bad_input(file, dotted(field, k), "expected a number");
    return status::ok();
}

/// A bound's form, its keys checked: one of {min, max}, {equals} and {value, rel_tol | abs_tol}.
status check_bound_form(const std::string& file, const std::string& field, const json& b) {
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

// A bound: {"min", "max"} (either or both), {"equals": x}, or {"value": x, "rel_tol": r} /
// {"value": x, "abs_tol": a}. A memory bound (`allow_per`) may hold "per": the name of a
// measurement of the case, the bound then being on the bytes divided by it (a range or a value,
// never equals: a fraction of a device's memory is not an exact number).
status check_bound(const std::string& file, const std::string& field, const json& b,
                   bool allow_per = false) {
    if (!b.is_object() || b.empty())
        return bad_input(file, field,
                         "expected {min, max}, {equals} or {value, rel_tol | abs_tol}");
    for (const auto& [k, v] : b.items())
        PITFALL_TRY(check_bound_key(file, field, k, v, allow_per));
    return check_bound_form(file, field, b);
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

/// A case key names a variant of the scenario that runs on the key's backend.
status check_case_key(const std::string& file, const std::string& key,
                      const scenario_entry& scenario) {
    const std::string field = "cases." + key;
    const auto dot = key.find('.');
    const variant_spec* v =
        dot == std::string::npos ? nullptr : scenario.description.find_variant(key.substr(dot + 1));
    if (v == nullptr || v->helper)
        return bad_input(file, field,
                         "no such case (expected <backend>.<variant> of " +
                             scenario.description.name + ")");
    const auto backends = scenario.description.backends_of(*v);
    if (std::find(backends.begin(), backends.end(), key.substr(0, dot)) == backends.end())
        return bad_input(file, field, "variant does not run on backend " + key.substr(0, dot));
    return status::ok();
}

/// What a case entry pins: its outcome, measurements, memory, events, where it ran, times and
/// records, and no key besides.
status check_entry_content(const std::string& file, const std::string& field, const json& entry) {
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
        return bad_input(file, field + ".ran_on",
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
    return status::ok();
}

/// Where an entry came from: observed (with its evidence) or documented (with a source a
/// reader can check), and the fingerprint its times were measured under.
status check_entry_provenance(const std::string& file, const std::string& field,
                              const json& entry) {
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
    for (const char* k : {"fingerprint_id", "host_id", "build_type"})
        if (prov.contains(k) && !prov[k].is_string())
            return bad_input(file, field + ".provenance." + k, "expected a string");
    if (entry.contains("timings") && !prov.contains("fingerprint_id"))
        return bad_input(file, field + ".provenance.fingerprint_id",
                         "timings need the fingerprint id they were measured under");
    return status::ok();
}

/// The file's ratio bounds: each names a ratio the scenario declares, on cpu or cuda.
status check_ratio_bounds(const std::string& file, const json& ratios_doc,
                          const scenario_entry& scenario) {
    if (!ratios_doc.is_object())
        return bad_input(file, "ratios",
                         "expected an object of {\"<backend>.<ratio>\": {min, max}}");
    for (const auto& [key, b] : ratios_doc.items()) {
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
    return status::ok();
}

status check_expected_file(const std::string& file, const json& doc,
                           const scenario_entry& scenario) {
    // The schema first (reports/schema/expected.schema.json: the one definition of the
    // format), then what it cannot say; the checks below stay for the index-dependent rules.
    PITFALL_TRY(detail::validate_document("expected", doc, file));
    return check_validated_expected_file(file, doc, scenario);
}

status check_validated_expected_file(const std::string& file, const json& doc,
                                     const scenario_entry& scenario) {
    PITFALL_TRY(check_expected_semantics(file, doc));
    if (!doc.is_object())
        return bad_input(file, "", "expected an object");
    if (doc.value("schema", "") != "pitfall.expected/1")
        return bad_input(file, "schema", "expected \"pitfall.expected/1\"");
    if (!doc.contains("cases") || !doc["cases"].is_object())
        return bad_input(file, "cases", "missing (an object keyed by backend.variant)");
    for (const auto& [key, entry] : doc["cases"].items()) {
        PITFALL_TRY(check_case_key(file, key, scenario));
        PITFALL_TRY(check_entry_content(file, "cases." + key, entry));
        PITFALL_TRY(check_entry_provenance(file, "cases." + key, entry));
    }
    if (doc.contains("ratios"))
        PITFALL_TRY(check_ratio_bounds(file, doc["ratios"], scenario));
    for (const auto& [k, v] : doc.items())
        if (k != "schema" && k != "scenario" && k != "cases" && k != "ratios" && k != "note")
            return bad_input(file, k, "unknown key (schema, scenario, cases, ratios, note)");
    return status::ok();
}

} // namespace baseline_parts

status validate_expected(const std::string& file, const json& doc, const scenario_entry& scenario) {
    return check_expected_file(file, doc, scenario);
}

} // namespace pitfall::runner
