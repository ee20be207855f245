#include "manifest_parts.hpp"

#include "pitfall/detail/json_file.hpp"

#include <algorithm>
#include <cmath>

// scenario.json's "params" (each parameter's default, doc, bounds, choices and full value) and a
// variant's values for them.
namespace pitfall {
namespace manifest_parts {
namespace {
const std::vector<std::string> known_param_keys{"default", "doc", "min", "max", "choices", "full"};

// A bound or a choice must be of the default's type: an integer parameter takes integer bounds.
bool same_kind(const json& def, const json& value) {
    if (def.is_number_integer())
        return value.is_number_integer();
    if (def.is_number())
        return value.is_number();
    return value.is_string();
}

/// The parameter's name and the fields it has, before any of their values is read.
status check_param_shape(const reader& r, const std::string& key, const json& value,
                         const std::string& path) {
    if (!is_identifier(key))
        return r.fail(path, "parameter names must match [a-z][a-z0-9_]*");
    if (key == "samples" || key == "warmup" || key == "warmup_seconds")
        return r.fail(path, "'samples', 'warmup' and 'warmup_seconds' are built in");
    if (!value.is_object() || !value.contains("default"))
        return r.fail(path, "expected an object with a 'default'");
    for (const auto& [field, ignored] : value.items()) {
        if (std::find(known_param_keys.begin(), known_param_keys.end(), field) !=
            known_param_keys.end())
            continue;
        std::string where = path;
        where += '.';
        where += field;
        return r.fail(where, "unknown field (default, doc, min, max, choices, full)");
    }
    return status::ok();
}

status read_param_bounds(const reader& r, const json& value, const std::string& path,
                         param_spec& p) {
    const json& def = p.default_value;
    for (const char* bound : {"min", "max"}) {
        if (!value.contains(bound))
            continue;
        if (!def.is_number() || !same_kind(def, value[bound]))
            return r.fail(path + "." + bound, def.is_number()
                                                  ? "expected a number of the default's type"
                                                  : "a string parameter has no bounds");
        (std::string(bound) == "min" ? p.min : p.max) = value[bound];
    }
    return status::ok();
}

status read_param_choices(const reader& r, const json& value, const std::string& path,
                          param_spec& p) {
    if (!value.contains("choices"))
        return status::ok();
    const json& choices = value["choices"];
    if (!choices.is_array() || choices.empty())
        return r.fail(path + ".choices", "expected a non-empty array");
    for (std::size_t i = 0; i < choices.size(); ++i)
        if (!same_kind(p.default_value, choices[i]))
            return r.fail(path + ".choices[" + std::to_string(i) + "]",
                          "expected a value of the default's type");
    p.choices = choices;
    return status::ok();
}

status read_param_full(const reader& r, const json& value, const std::string& path, param_spec& p) {
    if (!value.contains("full"))
        return status::ok();
    if (!same_kind(p.default_value, value["full"]))
        return r.fail(path + ".full", "expected a value of the default's type");
    if (auto ok = check_param_value(p, value["full"]); !ok.is_ok())
        return r.fail(path + ".full", ok.message());
    p.full_value = value["full"];
    return status::ok();
}

status read_param(const reader& r, const std::string& key, const json& value, param_spec& p) {
    const std::string path = "params." + key;
    PITFALL_TRY(check_param_shape(r, key, value, path));
    const json& def = value["default"];
    if (!(def.is_number() && std::isfinite(def.get<double>())) && !def.is_string())
        return r.fail(path + ".default", "expected a finite number or a string");
    p = param_spec{key, def, {}, json(), json(), json(), json()};
    PITFALL_TRY(r.string(value, path + ".", "doc", p.doc, false));
    PITFALL_TRY(read_param_bounds(r, value, path, p));
    PITFALL_TRY(read_param_choices(r, value, path, p));
    if (auto ok = check_param_value(p, def); !ok.is_ok())
        return r.fail(path + ".default", ok.message());
    return read_param_full(r, value, path, p);
}
} // namespace

status read_params(const reader& r, const json& doc, manifest& m) {
    if (!doc.contains("params"))
        return status::ok();
    if (!doc["params"].is_object())
        return r.fail("params", "expected an object of {name: {default, doc, min, max, choices}}");
    for (const auto& [key, value] : doc["params"].items()) {
        param_spec p;
        PITFALL_TRY(read_param(r, key, value, p));
        m.params.push_back(std::move(p));
    }
    return status::ok();
}

status read_variant_params(const reader& r, const json& v, const std::string& path,
                           const manifest& m, variant_spec& spec) {
    if (v.contains("params")) {
        const json& params = v["params"];
        if (!params.is_object() || params.empty())
            return r.fail(path + "params",
                          "expected a non-empty object of {parameter: value} (the parameter set)");
        for (const auto& [key, value] : params.items()) {
            std::string field = path;
            field += "params.";
            field += key;
            const param_spec* p = m.find_param(key);
            if (p == nullptr)
                return r.fail(field, "'" + key + "' is not a parameter of this scenario (see " +
                                         "'params'; samples and warmup are set per run)");
            if (!same_kind(p->default_value, value))
                return r.fail(field, std::string("expected ") +
                                         (p->default_value.is_number_integer() ? "an integer"
                                          : p->default_value.is_number()       ? "a number"
                                                                               : "a string") +
                                         ", the type of params." + key + ".default");
            if (auto ok = check_param_value(*p, value); !ok.is_ok())
                return r.fail(field, ok.message());
        }
        spec.params = params;
    }
    PITFALL_TRY(r.string(v, path, "param_set", spec.param_set, false));
    if (v.contains("param_set") && !is_identifier(spec.param_set))
        return r.fail(path + "param_set", "'" + spec.param_set + "' must match [a-z][a-z0-9_]*");
    if (v.contains("param_set") && spec.params.empty())
        return r.fail(path + "param_set", "names a parameter set, but the variant has no 'params'");
    return status::ok();
}

} // namespace manifest_parts

status check_param_value(const param_spec& spec, const nlohmann::json& value) {
    const auto text = [](const nlohmann::json& v) {
        return v.is_string() ? v.get<std::string>() : detail::dump_safe(v);
    };
    if ((spec.min.is_number() || spec.max.is_number()) && !value.is_number())
        return status::error(pitfall_error::bad_parameter, "expected a number, got " + text(value),
                             stage::init);
    if (spec.min.is_number() && value.get<double>() < spec.min.get<double>())
        return status::error(pitfall_error::bad_parameter,
                             "must be >= " + text(spec.min) + ", got " + text(value), stage::init);
    if (spec.max.is_number() && value.get<double>() > spec.max.get<double>())
        return status::error(pitfall_error::bad_parameter,
                             "must be <= " + text(spec.max) + ", got " + text(value), stage::init);
    if (spec.choices.is_array() &&
        std::find(spec.choices.begin(), spec.choices.end(), value) == spec.choices.end()) {
        std::string list;
        for (const auto& c : spec.choices)
            list += (list.empty() ? "" : ", ") + text(c);
        return status::error(pitfall_error::bad_parameter,
                             "must be one of " + list + ", got " + text(value), stage::init);
    }
    return status::ok();
}

} // namespace pitfall
