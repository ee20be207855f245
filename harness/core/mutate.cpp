#include "pitfall/detail/mutate.hpp"

#include "pitfall/detail/env_items.hpp"

#include <cmath>
#include <cstdlib>
#include <sstream>

namespace pitfall::mutate {
namespace {
plan g_active;

status bad(const std::string& item, const std::string& what) {
    return status::error(pitfall_error::bad_parameter,
                         std::string(env_name) + ": '" + item + "': " + what, stage::init);
}

const char* const kinds_in_words =
    "force_pass, drop_check, drop_measurement, scale_measurement, drop_event";

/// scale_measurement's argument, "<measurement>=<factor>", into `one`.
status read_scale(const std::string& item, const std::string& arg, plan& one) {
    const auto eq = arg.rfind('=');
    const std::string name = eq == std::string::npos ? "" : arg.substr(0, eq);
    const std::string factor = eq == std::string::npos ? "" : arg.substr(eq + 1);
    char* end = nullptr;
    const double f = std::strtod(factor.c_str(), &end);
    if (name.empty() || factor.empty() || end == factor.c_str() || *end != '\0' ||
        !std::isfinite(f) || f <= 0 || f > 1e6)
        return bad(item, "expected <measurement>=<factor>, a factor in (0, 1e6]");
    one.scaled_measurements[name] = f;
    return status::ok();
}

/// The mutation one item asks for, of its kind and with its argument, into `one`.
status read_mutation(const std::string& item, const std::string& kind, const std::string& arg,
                     plan& one) {
    if (kind == "force_pass")
        one.forced_checks.insert(arg);
    else if (kind == "drop_check")
        one.dropped_checks.insert(arg);
    else if (kind == "drop_measurement")
        one.dropped_measurements.insert(arg);
    else if (kind == "drop_event")
        one.dropped_events.insert(arg);
    else if (kind == "scale_measurement")
        return read_scale(item, arg, one);
    else
        return bad(item, "unknown kind '" + kind + "' (" + kinds_in_words + ")");
    return status::ok();
}

void add_to(plan& into, const plan& one) {
    into.forced_checks.insert(one.forced_checks.begin(), one.forced_checks.end());
    into.dropped_checks.insert(one.dropped_checks.begin(), one.dropped_checks.end());
    into.dropped_measurements.insert(one.dropped_measurements.begin(),
                                     one.dropped_measurements.end());
    into.dropped_events.insert(one.dropped_events.begin(), one.dropped_events.end());
    for (const auto& [name, f] : one.scaled_measurements)
        into.scaled_measurements[name] = f;
}

/// One item read and checked into `into` (when it names `case_key`, or always when that is
/// empty); the case it is aimed at in `target`.
status parse_item(const std::string& item, const std::string& case_key, plan& into,
                  std::string& target) {
    const auto first = item.find(':');
    const auto second = first == std::string::npos ? std::string::npos : item.find(':', first + 1);
    if (second == std::string::npos)
        return bad(item, "expected kind:case:argument");
    const std::string kind = item.substr(0, first);
    target = item.substr(first + 1, second - first - 1);
    const std::string arg = item.substr(second + 1);
    if (target.empty() || arg.empty())
        return bad(item, "expected kind:case:argument");
    plan one;
    PITFALL_TRY(read_mutation(item, kind, arg, one));
    if (!case_key.empty() && target != "*" && target != case_key)
        return status::ok();
    add_to(into, one);
    into.items.push_back(kind + " " + arg);
    return status::ok();
}

} // namespace

status_or<plan> parse(const std::string& value, const std::string& case_key) {
    plan p;
    std::string target;
    for (const std::string& item : detail::env_items(value))
        if (!item.empty())
            PITFALL_TRY(parse_item(item, case_key, p, target));
    return p;
}

status validate(const std::string& value, const std::set<std::string>& case_keys) {
    return detail::validate_env_items(env_name, value, case_keys,
                                      [](const std::string& item) -> status_or<std::string> {
                                          plan ignored;
                                          std::string target;
                                          PITFALL_TRY(parse_item(item, "", ignored, target));
                                          return target;
                                      });
}

const plan& active() {
    return g_active;
}
void set_active(plan p) {
    g_active = std::move(p);
}

namespace {
/// result[key] as an object (made one if the case wrote something else there).
nlohmann::json& object_member(nlohmann::json& result, const char* key) {
    nlohmann::json& member = result[key];
    if (!member.is_object())
        member = nlohmann::json::object();
    return member;
}

/// Erases each of `names` from `records`; those it found go into `hit` as `kind` + name.
void drop_names(nlohmann::json& records, const std::set<std::string>& names, const char* kind,
                std::set<std::string>& hit) {
    for (const auto& name : names)
        if (records.erase(name) != 0)
            hit.insert(kind + name);
}
} // namespace

void apply(const plan& p, nlohmann::json& result) {
    if (p.empty())
        return;
    std::set<std::string> hit; // what the case recorded of the names the mutants give
    nlohmann::json kept = nlohmann::json::array();
    for (auto check : result.value("checks", nlohmann::json::array())) {
        const std::string name = check.value("name", "");
        if (p.dropped_checks.count(name) != 0) {
            hit.insert("drop_check " + name);
            continue;
        }
        if (p.forced_checks.count(name) != 0) {
            hit.insert("force_pass " + name);
            check["passed"] = true;
        }
        kept.push_back(std::move(check));
    }
    result["checks"] = kept;
    nlohmann::json& measurements = object_member(result, "measurements");
    drop_names(measurements, p.dropped_measurements, "drop_measurement ", hit);
    for (const auto& [name, f] : p.scaled_measurements)
        if (measurements.contains(name) && measurements[name].is_object() &&
            measurements[name].value("value", nlohmann::json()).is_number()) {
            measurements[name]["value"] = measurements[name]["value"].get<double>() * f;
            hit.insert("scale_measurement " + name);
        }
    drop_names(object_member(result, "events"), p.dropped_events, "drop_event ", hit);
    nlohmann::json& injected = result["injected"];
    if (!injected.is_array())
        injected = nlohmann::json::array();
    for (const auto& item : p.items) {
        // A scale_measurement item is hit by its name, whatever its factor.
        const bool scale = item.rfind("scale_measurement ", 0) == 0;
        const bool recorded = hit.count(scale ? item.substr(0, item.rfind('=')) : item) != 0;
        injected.push_back("mutant " + item + (recorded ? "" : " (not recorded)"));
    }
}

} // namespace pitfall::mutate
