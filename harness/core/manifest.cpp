#include "manifest_parts.hpp"

#include "pitfall/detail/json_file.hpp"
#include "pitfall/memory.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>

namespace pitfall {
namespace manifest_parts {
// [a-z][a-z0-9_]*: names become file names, CTest names and CMake target names.
bool is_identifier(const std::string& text) {
    if (text.empty() || text[0] < 'a' || text[0] > 'z')
        return false;
    return std::all_of(text.begin(), text.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    });
}
} // namespace manifest_parts

using namespace manifest_parts;

namespace {
const std::vector<std::string> known_top_keys{
    "name",     "summary",         "failure_class", "seeds",         "labels",
    "backends", "timeout_seconds", "links",         "params",        "variants",
    "ratios",   "compile_checks",  "evidence",      "device_images", "timings"};
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

const timing_spec* manifest::timing_of(const variant_spec& variant,
                                       const std::string& series) const {
    for (const auto* list : {&variant.timings, &timings})
        for (const auto& t : *list)
            if (t.series == series)
                return &t;
    return nullptr;
}

std::string manifest::bound_by(const variant_spec& variant, const std::string& backend,
                               const std::string& series) const {
    const timing_spec* t = timing_of(variant, series);
    if (t == nullptr)
        return "";
    const auto it = t->bound_by.find(backend);
    return it != t->bound_by.end() ? it->second : std::string();
}

std::vector<std::string> manifest::controls_of(const variant_spec& variant,
                                               const std::string& backend) const {
    std::vector<std::string> names;
    for (const auto* list : {&variant.timings, &timings})
        for (const auto& t : *list) {
            const std::string c = bound_by(variant, backend, t.series);
            if (!c.empty() && std::find(names.begin(), names.end(), c) == names.end())
                names.push_back(c);
        }
    return names;
}

namespace {
status read_ratios(const reader& r, const json& doc, manifest& m) {
    if (!doc.contains("ratios"))
        return status::ok();
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
    return status::ok();
}

// device_images: extra device code the build compiles with nvcc and embeds in the program
// (add_failure_scenario); checked here so a typo is named before CMake meets it.
status read_device_images(const reader& r, const json& doc) {
    if (!doc.contains("device_images"))
        return status::ok();
    if (!doc["device_images"].is_array())
        return r.fail("device_images", "expected an array of {name, source, format, nvcc_flags}");
    for (std::size_t i = 0; i < doc["device_images"].size(); ++i) {
        const json& v = doc["device_images"][i];
        const std::string path = "device_images[" + std::to_string(i) + "].";
        if (!v.is_object())
            return r.fail(path.substr(0, path.size() - 1), "expected an object");
        std::string name;
        std::string source;
        std::string format;
        PITFALL_TRY(r.string(v, path, "name", name, true));
        if (!is_identifier(name))
            return r.fail(path + "name", "'" + name + "' must match [a-z][a-z0-9_]*");
        PITFALL_TRY(r.string(v, path, "source", source, true));
        PITFALL_TRY(r.string(v, path, "format", format, true));
        if (format != "fatbin" && format != "cubin" && format != "ptx")
            return r.fail(path + "format", "'" + format + "' is not fatbin, cubin or ptx");
        if (!v.contains("nvcc_flags") || !v["nvcc_flags"].is_array() ||
            !std::all_of(v["nvcc_flags"].begin(), v["nvcc_flags"].end(),
                         [](const json& f) { return f.is_string(); }))
            return r.fail(path + "nvcc_flags", "expected an array of strings");
    }
    return status::ok();
}

status read_compile_checks(const reader& r, const json& doc, manifest& m) {
    if (!doc.contains("compile_checks"))
        return status::ok();
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
    return status::ok();
}

// "limits": {"address_space": "8G", "cpu_seconds": 600, "file_size": 4294967296}: bytes as a
// positive integer or a string with a K/M/G/T suffix (powers of 1024); seconds an integer.
status read_limits(const reader& r, const json& doc, manifest& m) {
    if (!doc.contains("limits"))
        return status::ok();
    const json& limits = doc["limits"];
    if (!limits.is_object())
        return r.fail("limits", "expected an object of {address_space, cpu_seconds, file_size}");
    for (const auto& [key, value] : limits.items()) {
        const std::string path = "limits." + key;
        std::optional<std::uint64_t>* slot = key == "address_space" ? &m.limits.address_space
                                             : key == "cpu_seconds" ? &m.limits.cpu_seconds
                                             : key == "file_size"   ? &m.limits.file_size
                                                                    : nullptr;
        if (slot == nullptr)
            return r.fail(path, "unknown field (address_space, cpu_seconds, file_size)");
        if (value.is_number_unsigned() && value.get<std::uint64_t>() > 0)
            *slot = value.get<std::uint64_t>();
        else if (value.is_string() && key != "cpu_seconds")
            *slot = parse_byte_size(value.get<std::string>());
        if (!*slot || **slot == 0)
            return r.fail(path, key == "cpu_seconds"
                                    ? "expected a positive whole number of seconds"
                                    : "expected a positive number of bytes, or a string like "
                                      "\"8G\" (K, M, G, T: powers of 1024)");
    }
    return status::ok();
}

status read_top_level(const reader& r, const json& doc, manifest& m) {
    PITFALL_TRY(read_limits(r, doc, m));
    for (const auto& [key, value] : doc.items())
        if (key != "limits" && // read above
            std::find(known_top_keys.begin(), known_top_keys.end(), key) == known_top_keys.end())
            return r.fail(key, "unknown field");
    PITFALL_TRY(r.string(doc, "", "name", m.name, true));
    if (!is_identifier(m.name))
        return r.fail("name", "'" + m.name + "' must match [a-z][a-z0-9_]*");
    if (m.name.size() > max_scenario_name)
        return r.fail("name", "'" + m.name + "' is longer than " +
                                  std::to_string(max_scenario_name) + " characters" +
                                  name_length_why);
    PITFALL_TRY(r.string(doc, "", "summary", m.summary, true));
    PITFALL_TRY(r.string(doc, "", "failure_class", m.failure_class, true));
    PITFALL_TRY(r.strings(doc, "", "seeds", m.seeds));
    PITFALL_TRY(read_evidence(r, doc, m));
    PITFALL_TRY(r.strings(doc, "", "labels", m.labels));
    PITFALL_TRY(r.strings(doc, "", "backends", m.backends));
    if (m.backends.empty())
        return r.fail("backends", "missing or empty (cpu and/or cuda)");
    for (const auto& b : m.backends)
        if (!backend_from_string(b))
            return r.fail("backends", "unknown backend '" + b + "' (cpu, cuda)");
    if (doc.contains("timeout_seconds")) {
        const json& t = doc["timeout_seconds"];
        // A day at most: a case is one process of one failure, and the bound keeps the
        // timeout (times --timeout-scale) far inside what the clocks can hold.
        if (!t.is_number() || !(t.get<double>() > 0) || !(t.get<double>() <= 86400))
            return r.fail("timeout_seconds", "expected a number of seconds in (0, 86400]");
        m.timeout_seconds = t.get<double>();
    }
    std::vector<std::string> links;
    return r.strings(doc, "", "links", links);
}
} // namespace

status_or<manifest> parse_manifest(std::string_view text, const std::string& origin) {
    auto parsed = detail::parse_json(text, origin);
    if (!parsed.is_ok())
        return status::error(pitfall_error::bad_manifest, parsed.error().message(), stage::init);
    const json doc = std::move(parsed).value();
    const reader r{origin};
    if (!doc.is_object())
        return r.fail("(top level)", "expected an object");
    manifest m;
    PITFALL_TRY(read_top_level(r, doc, m));
    PITFALL_TRY(read_params(r, doc, m));
    if (!doc.contains("variants") || !doc["variants"].is_array() || doc["variants"].empty())
        return r.fail("variants", "missing or empty (an array of {name, kind, doc})");
    PITFALL_TRY(read_timings(r, doc, "", m.backends, m.timings));
    for (std::size_t i = 0; i < doc["variants"].size(); ++i)
        PITFALL_TRY(read_variant(r, doc["variants"][i], "variants[" + std::to_string(i) + "].", m));
    PITFALL_TRY(read_ratios(r, doc, m));
    PITFALL_TRY(read_compile_checks(r, doc, m));
    PITFALL_TRY(read_device_images(r, doc));
    return m;
}

} // namespace pitfall
