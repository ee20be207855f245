// A case judged against its baseline entry: outcome, own proof, events, records, measurements,
// memory, ratios.
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
} // namespace baseline_parts

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

namespace baseline_parts {
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
} // namespace baseline_parts

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

namespace baseline_parts {
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

/// A case that did not run to a result: timed out, never started, or unsupported here. An
/// unsupported case whose baseline says it runs here is the regression, not a skip.
std::optional<verdict> judge_not_run(const json& o, const json& want, bool have_baseline) {
    const std::string st = o.value("status", "");
    if (st == "timeout")
        return verdict{verdict_kind::timeout, o.value("detail", "timed out")};
    if (st == "not_started")
        return verdict{verdict_kind::crash, o.value("detail", "did not start")};
    if (st != "unsupported")
        return std::nullopt;
    std::string reason = o.value("reason", "unsupported");
    // The profile chosen for this environment says the case runs here: that it no longer can
    // (a driver or library broken) is the regression, not a skip.
    if (have_baseline && want.value("status", "") != "unsupported")
        return verdict{verdict_kind::fail, "behaviour changed: expected " + describe_outcome(want) +
                                               ", now unsupported: " + reason};
    // A different cause (no device instead of no driver) is worth saying; "built without CUDA"
    // has no cause to compare.
    if (have_baseline && want.contains("error") && o.contains("error") &&
        o.value("error", "") != want["error"].get<std::string>())
        reason += " [baseline expected " + want["error"].get<std::string>() + "]";
    return verdict{verdict_kind::unsupported, reason};
}

/// Judged with or without a baseline: the case's own proof of where it ran, and its checks
/// against independent references.
std::optional<verdict> judge_own_proof(const observation& observed, const json& expected,
                                       const std::string& backend, const judge_context& context) {
    const json& result = observed.result;
    const std::string ran_on = result.value("ran_on", "");
    // "cuda:0 <name> (sm_90, ...)" is a device; "cuda: no device (...)" is not. A claim the
    // fingerprint contradicts is not a result of this machine.
    if (backend == "cuda" && context.gpu_count && *context.gpu_count == 0 && names_a_device(ran_on))
        return verdict{verdict_kind::fail,
                       "claims a GPU the machine does not have: ran_on = " + ran_on +
                           ", but the run's fingerprint has gpu_count 0"};
    // A baseline may expect where a case runs (a silent CPU fallback is the reproduced failure
    // of device_visibility): then the proof must match it, whichever it says.
    if (expected.is_object() && expected.contains("ran_on")) {
        const std::string want_ran_on = expected["ran_on"].get<std::string>();
        if (ran_on.rfind(want_ran_on, 0) != 0)
            return verdict{verdict_kind::fail, "behaviour changed: expected to run on '" +
                                                   want_ran_on + "...', ran on '" + ran_on + "'"};
    } else if (backend == "cuda" && ran_on.rfind("cpu", 0) == 0) {
        return verdict{verdict_kind::fail, "GPU asked for, CPU used: ran_on = " + ran_on};
    }
    if (const auto why =
            gpu_claim_without_work(backend, observed.outcome.value("status", ""), ran_on, result))
        return verdict{verdict_kind::fail, *why};
    for (const auto& c : result.value("checks", json::array()))
        if (!c.value("passed", true))
            return verdict{verdict_kind::numeric_mismatch,
                           "check " + c.value("name", "?") + " failed: " + c.value("detail", "")};
    return std::nullopt;
}

/// The observed outcome against the blessed one: a crash where the baseline has none, a
/// behaviour that changed, or (nothing) the same outcome.
std::optional<verdict> judge_outcome(const json& o, const json& want, bool abnormal) {
    const auto diff = outcome_difference(want, o);
    if (!diff)
        return std::nullopt;
    const std::string detail = o.value("detail", "");
    const std::string w = describe_outcome(want),
                      h = describe_outcome(o) + (detail.empty() ? "" : ": " + detail);
    if (abnormal)
        return verdict{verdict_kind::crash, h + " (baseline: " + w + ")"};
    if (want.value("status", "") != "ok" && o.value("status", "") == "ok")
        return verdict{verdict_kind::fail, "behaviour changed: expected " + w + ", now succeeds"};
    return verdict{verdict_kind::fail,
                   "expected " + w + ", observed " + h + " (" + *diff + " differs)"};
}

/// Each event the baseline pins (an error a step raised, a stage reached), as observed.
std::optional<verdict> judge_events(const json& expected, const json& result) {
    if (!expected.contains("events"))
        return std::nullopt;
    const json events = result.value("events", json::object());
    for (const auto& [name, want_event] : expected["events"].items()) {
        const json have_event = events.contains(name) ? events[name] : json::object();
        if (outcome_difference(want_event, have_event))
            return verdict{verdict_kind::fail, "event " + name + ": expected " +
                                                   describe_outcome(want_event) + ", observed " +
                                                   describe_outcome(have_event)};
    }
    return std::nullopt;
}

/// Under --full-sizes the outcome alone is judged: a larger problem than the baselines were
/// blessed at has other measurements, memory and times.
verdict full_sizes_verdict(const json& o, const json& expected, const json& result) {
    verdict v{verdict_kind::pass, "as expected: " + describe_outcome(o) +
                                      " (measurements, memory and times not compared: " +
                                      full_sizes_reason + ")" + unpinned_records(expected, result)};
    if (expected.contains("timings"))
        for (const auto& [name, ignored] : expected["timings"].items())
            v.timings[name] = {{"verdict", "NOT_COMPARED"}, {"reason", full_sizes_reason}};
    return v;
}

/// Memory against its bounds. The process's peak RSS is a fact of the machine and build it was
/// measured on, like a time (the libraries the process maps: a CPU case of a CUDA build holds
/// ~200 MB that the same case of a CPU-only build never maps): judged only under the
/// fingerprint and build type it was blessed under, and only against a figure measured the same
/// way (provenance.rss_method: the case's own VmHWM, or wait4's, which also counts the harness's
/// image; an entry without one was blessed from wait4). The tracked device bytes are the
/// program's own and are judged everywhere.
std::optional<verdict> judge_memory(const observation& observed, const json& expected,
                                    const judge_context& context) {
    if (!expected.contains("memory"))
        return std::nullopt;
    const json& result = observed.result;
    json memory = result.value("memory", json::object());
    if (observed.peak_rss_bytes)
        memory["peak_rss_bytes"] = *observed.peak_rss_bytes;
    json bounds = expected["memory"];
    const json prov = expected.value("provenance", json::object());
    // The build type too: a Debug build under the sanitizers maps several times the memory of
    // the Release build a host profile is blessed from.
    const std::string blessed_build = prov.value("build_type", "");
    const bool other_build = !blessed_build.empty() && !context.build_type.empty() &&
                             blessed_build != context.build_type;
    const bool other_method = prov.value("rss_method", "wait4") != observed.peak_rss_method;
    // A peak blessed again alone (bless --memory-only) holds under the fingerprint it was
    // measured under, named by its rss_run.
    const json rss_run = prov.value("rss_run", json::object());
    const std::string blessed_under = rss_run.is_object() && rss_run.contains("fingerprint_id")
                                          ? rss_run.value("fingerprint_id", "")
                                          : prov.value("fingerprint_id", "");
    if (prov.value("kind", "") == "observed" &&
        (blessed_under != context.fingerprint_id || other_build || other_method))
        bounds.erase("peak_rss_bytes");
    if (auto why = per_measurement(bounds, memory, result))
        return verdict{verdict_kind::mem_regression, *why};
    if (const auto why = bounds_violation(bounds, memory, nullptr))
        return verdict{verdict_kind::mem_regression, *why};
    return std::nullopt;
}

/// A result's measurements, events, records and memory against its baseline entry, in that
/// order; the first difference is the verdict.
std::optional<verdict> judge_result(const observation& observed, const json& expected,
                                    const judge_context& context) {
    const json& result = observed.result;
    if (auto v = judge_events(expected, result))
        return v;
    if (const auto why = lost_records(expected, result))
        return verdict{verdict_kind::fail, *why};
    if (context.full_sizes)
        return full_sizes_verdict(observed.outcome, expected, result);
    if (expected.contains("measurements"))
        if (const auto why = bounds_violation(
                expected["measurements"], result.value("measurements", json::object()), "value"))
            return verdict{verdict_kind::numeric_mismatch, *why};
    return judge_memory(observed, expected, context);
}

verdict judge_against(const observation& observed, const json& expected, const std::string& backend,
                      const judge_context& context) {
    const json& o = observed.outcome;
    const std::string st = o.value("status", "");
    const bool have_baseline = expected.is_object();
    const json want = have_baseline ? expected.value("outcome", json::object()) : json();
    if (auto v = judge_not_run(o, want, have_baseline))
        return *v;
    const bool abnormal =
        st == "signal" || st == "exit" || st == "load_error" || st == "bad_result";
    const json& result = observed.result;
    if (!abnormal && result.is_object())
        if (auto v = judge_own_proof(observed, expected, backend, context))
            return *v;
    if (!have_baseline)
        return abnormal
                   ? verdict{verdict_kind::crash, describe_outcome(o) + " " + o.value("detail", "")}
                   : verdict{verdict_kind::no_baseline, "no baseline entry for this case"};
    if (auto v = judge_outcome(o, want, abnormal))
        return *v;
    if (abnormal) // an expected crash: the baseline names exactly this signal/exit
        return verdict{verdict_kind::pass, "expected " + describe_outcome(o)};
    if (result.is_object())
        if (auto v = judge_result(observed, expected, context))
            return *v;
    verdict v{verdict_kind::pass,
              "as expected: " + describe_outcome(o) + unpinned_records(expected, result)};
    judge_timings(expected, result, observed.threads, context, v);
    return v;
}
} // namespace baseline_parts

} // namespace pitfall::runner
