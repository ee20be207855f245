#include "baseline.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace pitfall::runner {
using nlohmann::json;
namespace fs = std::filesystem;

namespace {
status bad_input(const std::string& file, const std::string& field, const std::string& what) {
    return status::error(library::pitfall, "bad_input",
                         file + (field.empty() ? "" : ": field '" + field + "'") + ": " + what,
                         stage::init);
}

status_or<json> read_json(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in)
        return bad_input(path, "", "cannot be read");
    std::ostringstream text;
    text << in.rdbuf();
    try {
        return json::parse(text.str());
    } catch (const json::parse_error& e) {
        return bad_input(path, "", "malformed JSON at " + describe_offset(text.str(), e.byte));
    }
}

const std::set<std::string> outcome_statuses{"ok",     "error",      "unsupported",
                                             "signal", "exit",       "load_error"};

status check_bounds(const std::string& file, const std::string& field, const json& bounds) {
    if (!bounds.is_object())
        return bad_input(file, field, "expected an object of {name: {min, max}}");
    for (const auto& [name, b] : bounds.items()) {
        if (!b.is_object() || (!b.contains("min") && !b.contains("max")))
            return bad_input(file, field + "." + name, "expected {\"min\": x} and/or {\"max\": y}");
        for (const auto& [k, v] : b.items())
            if ((k != "min" && k != "max") || !v.is_number())
                return bad_input(file, field + "." + name + "." + k, "expected min/max numbers");
    }
    return status::ok();
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

status check_expected_file(const std::string& file, const json& doc, const scenario_entry& scenario) {
    if (!doc.is_object())
        return bad_input(file, "", "expected an object");
    if (doc.value("schema", "") != "pitfall.expected/1")
        return bad_input(file, "schema", "expected \"pitfall.expected/1\"");
    if (!doc.contains("cases") || !doc["cases"].is_object())
        return bad_input(file, "cases", "missing (an object keyed by backend.variant)");
    for (const auto& [key, entry] : doc["cases"].items()) {
        const std::string field = "cases." + key;
        const auto dot = key.find('.');
        const variant_spec* v =
            dot == std::string::npos ? nullptr : scenario.description.find_variant(key.substr(dot + 1));
        if (v == nullptr || v->helper)
            return bad_input(file, field, "no such case (expected <backend>.<variant> of " +
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
            PITFALL_TRY(check_bounds(file, field + ".memory", entry["memory"]));
        if (entry.contains("events")) {
            if (!entry["events"].is_object())
                return bad_input(file, field + ".events", "expected an object of outcomes");
            for (const auto& [name, ev] : entry["events"].items())
                PITFALL_TRY(check_outcome(file, field + ".events." + name, ev));
        }
        if (entry.contains("ran_on") && !entry["ran_on"].is_string())
            return bad_input(file, field + ".ran_on", "expected a string: the start of the case's ran_on (\"cpu\", \"cuda\")");
        const json& prov = entry.contains("provenance") ? entry["provenance"] : json();
        const std::string kind = prov.is_object() ? prov.value("kind", "") : "";
        if (kind != "observed" && kind != "documented")
            return bad_input(file, field + ".provenance.kind", "expected \"observed\" or \"documented\"");
        if (kind == "documented" && !prov.contains("source"))
            return bad_input(file, field + ".provenance.source", "a documented baseline names its source");
    }
    return status::ok();
}

// A profile's match value: a value (equal), an array (any of), or {"min", "max"} (a range,
// e.g. every CUDA 13.x runtime: {"min": 13000, "max": 13999}).
bool value_matches(const json& want, const json& have) {
    if (want.is_array())
        return std::any_of(want.begin(), want.end(), [&](const json& w) { return value_matches(w, have); });
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
    const std::string st = o.value("status", "?");
    if (st == "error")
        return o.value("error", "?") + " (" + o.value("library", "?") + ", " + o.value("stage", "?") +
               (o.value("sticky", false) ? ", sticky" : "") + ")";
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
    for (const char* field : {"status", "library", "error", "stage", "sticky", "signal", "exit_code"}) {
        if (!want.contains(field))
            continue;
        if (!have.contains(field) || have[field] != want[field])
            return std::string(field);
    }
    return std::nullopt;
}

std::optional<std::string> bound_violation(const json& bounds, const json& values,
                                           const char* value_key) {
    for (const auto& [name, b] : bounds.items()) {
        if (!values.contains(name))
            return name + " was not recorded";
        const json& item = values[name];
        const json v = value_key != nullptr ? (item.is_object() ? item.value(value_key, json()) : json()) : item;
        if (!v.is_number())
            return name + " is not a number";
        const double x = v.get<double>();
        std::ostringstream why;
        if (b.contains("min") && x < b["min"].get<double>())
            why << name << " = " << x << " below min " << b["min"].get<double>();
        else if (b.contains("max") && x > b["max"].get<double>())
            why << name << " = " << x << " above max " << b["max"].get<double>();
        if (!why.str().empty())
            return why.str();
    }
    return std::nullopt;
}
} // namespace

status_or<std::vector<profile>> load_profiles(const std::string& expected_dir,
                                             const scenario_index& index) {
    std::vector<profile> profiles;
    std::error_code ec;
    if (!fs::is_directory(expected_dir, ec))
        return bad_input(expected_dir, "", "is not a folder of baselines");
    std::vector<fs::path> dirs;
    for (const auto& entry : fs::directory_iterator(expected_dir, ec))
        if (entry.is_directory())
            dirs.push_back(entry.path());
    std::sort(dirs.begin(), dirs.end());
    for (const auto& dir : dirs) {
        const std::string profile_file = (dir / "profile.json").string();
        PITFALL_ASSIGN_OR_RETURN(const json doc, read_json(profile_file));
        if (doc.value("schema", "") != "pitfall.profile/1")
            return bad_input(profile_file, "schema", "expected \"pitfall.profile/1\"");
        if (!doc.contains("match") || !doc["match"].is_object())
            return bad_input(profile_file, "match", "missing (an object of fingerprint keys)");
        profile p;
        p.name = dir.filename().string();
        if (doc.value("name", p.name) != p.name)
            return bad_input(profile_file, "name", "must equal the folder name '" + p.name + "'");
        p.dir = dir.string();
        p.description = doc.value("description", "");
        p.match = doc["match"];
        std::vector<fs::path> files;
        for (const auto& entry : fs::directory_iterator(dir, ec))
            if (entry.path().extension() == ".json" && entry.path().filename() != "profile.json")
                files.push_back(entry.path());
        std::sort(files.begin(), files.end());
        for (const auto& file : files) {
            const std::string scenario_name = file.stem().string();
            const auto it = std::find_if(index.scenarios.begin(), index.scenarios.end(),
                                         [&](const scenario_entry& s) { return s.description.name == scenario_name; });
            PITFALL_ASSIGN_OR_RETURN(const json expected, read_json(file.string()));
            if (it == index.scenarios.end())
                continue; // a baseline for a scenario this build leaves out (PITFALL_SCENARIOS)
            if (expected.value("scenario", "") != scenario_name)
                return bad_input(file.string(), "scenario", "must equal the file name '" + scenario_name + "'");
            PITFALL_TRY(check_expected_file(file.string(), expected, *it));
            p.cases[scenario_name] = expected["cases"];
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
                choice.chosen = &p;
                choice.chain = {&p};
                choice.reason = "chosen with --profile";
                return choice;
            }
        std::string known;
        for (const auto& p : profiles)
            known += (known.empty() ? "" : ", ") + p.name;
        return status::error(library::pitfall, "bad_usage",
                             "--profile " + override_name + ": no such profile (known: " + known + ")",
                             stage::init);
    }
    for (const auto& p : profiles) {
        bool all = true;
        for (const auto& [key, want] : p.match.items())
            all = all && summary.contains(key) && value_matches(want, summary[key]);
        if (all)
            choice.chain.push_back(&p);
    }
    // Most keys first; stable, so profiles with as many keys stay in name order.
    std::stable_sort(choice.chain.begin(), choice.chain.end(),
                     [](const profile* a, const profile* b) { return a->match.size() > b->match.size(); });
    if (choice.chain.empty()) {
        choice.reason = "no profile under expected/ matches this environment";
        return choice;
    }
    choice.chosen = choice.chain.front();
    choice.reason = "matches " + choice.chosen->match.dump();
    if (choice.chain.size() > 1 && choice.chain[1]->match.size() == choice.chosen->match.size())
        choice.reason += "; " + choice.chain[1]->name + " matches as specifically (first by name wins)";
    if (choice.chain.size() > 1) {
        choice.reason += "; then";
        for (std::size_t i = 1; i < choice.chain.size(); ++i)
            choice.reason += " " + choice.chain[i]->name;
    }
    return choice;
}

std::pair<const json*, const profile*> profile_choice::entry_for(const std::string& scenario,
                                                                const std::string& case_key) const {
    for (const profile* p : chain) {
        const auto it = p->cases.find(scenario);
        if (it != p->cases.end() && it->second.contains(case_key))
            return {&it->second[case_key], p};
    }
    return {nullptr, nullptr};
}

const char* to_string(verdict_kind v) {
    switch (v) {
    case verdict_kind::pass: return "PASS";
    case verdict_kind::fail: return "FAIL";
    case verdict_kind::numeric_mismatch: return "NUMERIC_MISMATCH";
    case verdict_kind::mem_regression: return "MEM_REGRESSION";
    case verdict_kind::crash: return "CRASH";
    case verdict_kind::timeout: return "TIMEOUT";
    case verdict_kind::unsupported: return "UNSUPPORTED";
    case verdict_kind::no_baseline: return "NO_BASELINE";
    }
    return "?";
}

bool is_failing(verdict_kind v) {
    return v == verdict_kind::fail || v == verdict_kind::numeric_mismatch ||
           v == verdict_kind::mem_regression || v == verdict_kind::crash || v == verdict_kind::timeout;
}

verdict judge(const observation& observed, const json& expected, const std::string& backend) {
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
    const bool abnormal = st == "signal" || st == "exit" || st == "load_error" || st == "bad_result";
    const json& result = observed.result;
    // Judged with or without a baseline: the case's own proof of where it ran, and its checks
    // against independent references.
    if (!abnormal && result.is_object()) {
        const std::string ran_on = result.value("ran_on", "");
        // A baseline may expect where a case runs (a silent CPU fallback is the reproduced
        // failure of device_visibility): then the proof must match it, whichever it says.
        if (have_baseline && expected.contains("ran_on")) {
            const std::string want_ran_on = expected["ran_on"].get<std::string>();
            if (ran_on.rfind(want_ran_on, 0) != 0)
                return {verdict_kind::fail, "behaviour changed: expected to run on '" + want_ran_on +
                                                "...', ran on '" + ran_on + "'"};
        } else if (backend == "cuda" && ran_on.rfind("cpu", 0) == 0) {
            return {verdict_kind::fail, "GPU asked for, CPU used: ran_on = " + ran_on};
        }
        for (const auto& c : result.value("checks", json::array()))
            if (!c.value("passed", true))
                return {verdict_kind::numeric_mismatch,
                        "check " + c.value("name", "?") + " failed: " + c.value("detail", "")};
    }
    if (!have_baseline)
        return abnormal ? verdict{verdict_kind::crash, describe_outcome(o) + " " + o.value("detail", "")}
                        : verdict{verdict_kind::no_baseline, "no baseline entry for this case"};

    if (const auto diff = outcome_difference(want, o)) {
        const std::string w = describe_outcome(want), h = describe_outcome(o) + o.value("detail", "");
        if (abnormal)
            return {verdict_kind::crash, h + " (baseline: " + w + ")"};
        if (want.value("status", "") != "ok" && st == "ok")
            return {verdict_kind::fail, "behaviour changed: expected " + w + ", now succeeds"};
        return {verdict_kind::fail, "expected " + w + ", observed " + h + " (" + *diff + " differs)"};
    }
    if (abnormal) // an expected crash: the baseline names exactly this signal/exit
        return {verdict_kind::pass, "expected " + describe_outcome(o)};

    if (result.is_object()) {
        if (expected.contains("events")) {
            for (const auto& [name, want_event] : expected["events"].items()) {
                const json events = result.value("events", json::object());
                const json have_event = events.contains(name) ? events[name] : json::object();
                if (const auto diff = outcome_difference(want_event, have_event))
                    return {verdict_kind::fail, "event " + name + ": expected " + describe_outcome(want_event) +
                                                    ", observed " + describe_outcome(have_event)};
            }
        }
        if (expected.contains("measurements"))
            if (const auto why = bound_violation(expected["measurements"], result.value("measurements", json::object()), "value"))
                return {verdict_kind::numeric_mismatch, *why};
        if (expected.contains("memory"))
            if (const auto why = bound_violation(expected["memory"], result.value("memory", json::object()), nullptr))
                return {verdict_kind::mem_regression, *why};
    }
    return {verdict_kind::pass, "as expected: " + describe_outcome(o)};
}

} // namespace pitfall::runner
