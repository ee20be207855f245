#include "pitfall/manifest.hpp"
#include "pitfall/memory.hpp"

#include <algorithm>

namespace pitfall {
namespace {
using nlohmann::json;

struct reader {
    const std::string& origin;

    status fail(const std::string& field, const std::string& what) const {
        return status::error(library::pitfall, "bad_manifest",
                             origin + ": field '" + field + "': " + what, stage::init);
    }
    status string(const json& obj, const std::string& path, const char* key, std::string& out,
                  bool required) const {
        if (!obj.contains(key))
            return required ? fail(path + key, "missing (a string is required)") : status::ok();
        if (!obj[key].is_string())
            return fail(path + key, "expected a string, got " + std::string(obj[key].type_name()));
        out = obj[key].get<std::string>();
        return status::ok();
    }
    status strings(const json& obj, const std::string& path, const char* key,
                   std::vector<std::string>& out) const {
        if (!obj.contains(key))
            return status::ok();
        if (!obj[key].is_array())
            return fail(path + key, "expected an array of strings");
        for (std::size_t i = 0; i < obj[key].size(); ++i) {
            if (!obj[key][i].is_string())
                return fail(path + key + "[" + std::to_string(i) + "]", "expected a string");
            out.push_back(obj[key][i].get<std::string>());
        }
        return status::ok();
    }
};

// [a-z][a-z0-9_]*: names become file names, CTest names and CMake target names.
bool is_identifier(const std::string& text) {
    if (text.empty() || text[0] < 'a' || text[0] > 'z')
        return false;
    return std::all_of(text.begin(), text.end(),
                       [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; });
}

const std::vector<std::string> known_top_keys{
    "name",    "summary",         "failure_class", "seeds",    "labels", "backends",
    "timeout_seconds", "links",   "params",        "variants", "ratios", "compile_checks"};
const std::vector<std::string> known_variant_keys{"name",   "kind",         "doc",   "labels",
                                                  "backends", "needs_device", "helper"};
} // namespace

const variant_spec* manifest::find_variant(std::string_view variant) const {
    for (const auto& v : variants)
        if (v.name == variant)
            return &v;
    return nullptr;
}
const param_spec* manifest::find_param(std::string_view param) const {
    for (const auto& p : params)
        if (p.name == param)
            return &p;
    return nullptr;
}
std::vector<std::string> manifest::backends_of(const variant_spec& variant) const {
    return variant.backends.empty() ? backends : variant.backends;
}

std::string describe_offset(std::string_view text, std::size_t byte_offset) {
    std::size_t line = 1;
    std::size_t column = 1;
    for (std::size_t i = 0; i < text.size() && i + 1 < byte_offset; ++i) {
        if (text[i] == '\n') {
            ++line;
            column = 1;
        } else {
            ++column;
        }
    }
    return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

status_or<manifest> parse_manifest(std::string_view text, const std::string& origin) {
    json doc;
    try {
        doc = json::parse(text.begin(), text.end());
    } catch (const json::parse_error& e) {
        return status::error(library::pitfall, "bad_manifest",
                             origin + ": malformed JSON at " + describe_offset(text, e.byte) +
                                 ": " + e.what(),
                             stage::init);
    }
    const reader r{origin};
    if (!doc.is_object())
        return r.fail("(top level)", "expected an object");
    for (const auto& [key, value] : doc.items())
        if (std::find(known_top_keys.begin(), known_top_keys.end(), key) == known_top_keys.end())
            return r.fail(key, "unknown field");

    manifest m;
    PITFALL_TRY(r.string(doc, "", "name", m.name, true));
    if (!is_identifier(m.name))
        return r.fail("name", "'" + m.name + "' must match [a-z][a-z0-9_]*");
    PITFALL_TRY(r.string(doc, "", "summary", m.summary, true));
    PITFALL_TRY(r.string(doc, "", "failure_class", m.failure_class, true));
    PITFALL_TRY(r.strings(doc, "", "seeds", m.seeds));
    PITFALL_TRY(r.strings(doc, "", "labels", m.labels));
    PITFALL_TRY(r.strings(doc, "", "backends", m.backends));
    if (m.backends.empty())
        return r.fail("backends", "missing or empty (cpu and/or cuda)");
    for (const auto& b : m.backends)
        if (!backend_from_string(b))
            return r.fail("backends", "unknown backend '" + b + "' (cpu, cuda)");
    if (doc.contains("timeout_seconds")) {
        if (!doc["timeout_seconds"].is_number() || doc["timeout_seconds"].get<double>() <= 0)
            return r.fail("timeout_seconds", "expected a positive number");
        m.timeout_seconds = doc["timeout_seconds"].get<double>();
    }
    std::vector<std::string> links;
    PITFALL_TRY(r.strings(doc, "", "links", links));

    if (doc.contains("params")) {
        if (!doc["params"].is_object())
            return r.fail("params", "expected an object of {name: {default, doc}}");
        for (const auto& [key, value] : doc["params"].items()) {
            const std::string path = "params." + key;
            if (!is_identifier(key))
                return r.fail(path, "parameter names must match [a-z][a-z0-9_]*");
            if (key == "samples" || key == "warmup" || key == "warmup_seconds")
                return r.fail(path, "'samples', 'warmup' and 'warmup_seconds' are built in");
            if (!value.is_object() || !value.contains("default"))
                return r.fail(path, "expected an object with a 'default'");
            const json& def = value["default"];
            if (!def.is_number() && !def.is_string())
                return r.fail(path + ".default", "expected a number or a string");
            param_spec p{key, def, {}};
            PITFALL_TRY(r.string(value, path + ".", "doc", p.doc, false));
            m.params.push_back(std::move(p));
        }
    }

    if (!doc.contains("variants") || !doc["variants"].is_array() || doc["variants"].empty())
        return r.fail("variants", "missing or empty (an array of {name, kind, doc})");
    for (std::size_t i = 0; i < doc["variants"].size(); ++i) {
        const json& v = doc["variants"][i];
        const std::string path = "variants[" + std::to_string(i) + "].";
        if (!v.is_object())
            return r.fail(path.substr(0, path.size() - 1), "expected an object");
        for (const auto& [key, value] : v.items())
            if (std::find(known_variant_keys.begin(), known_variant_keys.end(), key) ==
                known_variant_keys.end())
                return r.fail(path + key, "unknown field");
        variant_spec spec;
        PITFALL_TRY(r.string(v, path, "name", spec.name, true));
        if (!is_identifier(spec.name))
            return r.fail(path + "name", "'" + spec.name + "' must match [a-z][a-z0-9_]*");
        if (m.find_variant(spec.name) != nullptr)
            return r.fail(path + "name", "duplicate variant '" + spec.name + "'");
        PITFALL_TRY(r.string(v, path, "kind", spec.kind, true));
        if (spec.kind != "reproduce" && spec.kind != "remedy" && spec.kind != "probe")
            return r.fail(path + "kind", "'" + spec.kind + "' is not reproduce, remedy or probe");
        PITFALL_TRY(r.string(v, path, "doc", spec.doc, false));
        PITFALL_TRY(r.strings(v, path, "labels", spec.labels));
        PITFALL_TRY(r.strings(v, path, "backends", spec.backends));
        for (const auto& b : spec.backends)
            if (std::find(m.backends.begin(), m.backends.end(), b) == m.backends.end())
                return r.fail(path + "backends", "'" + b + "' is not among the scenario's backends");
        for (const auto& [key, flag] : {std::pair<const char*, bool*>{"needs_device", &spec.needs_device},
                                        std::pair<const char*, bool*>{"helper", &spec.helper}}) {
            if (!v.contains(key))
                continue;
            if (!v[key].is_boolean())
                return r.fail(path + key, "expected true or false");
            *flag = v[key].get<bool>();
        }
        m.variants.push_back(std::move(spec));
    }

    if (doc.contains("ratios")) {
        if (!doc["ratios"].is_array())
            return r.fail("ratios", "expected an array");
        for (std::size_t i = 0; i < doc["ratios"].size(); ++i) {
            const json& v = doc["ratios"][i];
            const std::string path = "ratios[" + std::to_string(i) + "].";
            if (!v.is_object())
                return r.fail(path.substr(0, path.size() - 1), "expected an object");
            ratio_spec ratio;
            PITFALL_TRY(r.string(v, path, "name", ratio.name, true));
            PITFALL_TRY(r.string(v, path, "numerator", ratio.numerator, true));
            PITFALL_TRY(r.string(v, path, "denominator", ratio.denominator, true));
            PITFALL_TRY(r.string(v, path, "samples", ratio.samples, true));
            for (const auto* variant : {&ratio.numerator, &ratio.denominator})
                if (m.find_variant(*variant) == nullptr)
                    return r.fail(path.substr(0, path.size() - 1),
                                  "names unknown variant '" + *variant + "'");
            m.ratios.push_back(std::move(ratio));
        }
    }
    if (doc.contains("compile_checks")) {
        if (!doc["compile_checks"].is_array())
            return r.fail("compile_checks", "expected an array of {name, source, diagnostic}");
        for (std::size_t i = 0; i < doc["compile_checks"].size(); ++i) {
            const json& v = doc["compile_checks"][i];
            const std::string path = "compile_checks[" + std::to_string(i) + "].";
            if (!v.is_object())
                return r.fail(path.substr(0, path.size() - 1), "expected an object");
            compile_check_spec check;
            PITFALL_TRY(r.string(v, path, "name", check.name, true));
            if (!is_identifier(check.name))
                return r.fail(path + "name", "'" + check.name + "' must match [a-z][a-z0-9_]*");
            PITFALL_TRY(r.string(v, path, "source", check.source, true));
            PITFALL_TRY(r.string(v, path, "diagnostic", check.diagnostic, true));
            m.compile_checks.push_back(std::move(check));
        }
    }
    return m;
}

} // namespace pitfall
