#include "pitfall/detail/manifest.hpp"

#include "pitfall/controls.hpp"
#include "pitfall/detail/json_file.hpp"
#include "pitfall/memory.hpp"

#include <algorithm>
#include <cmath>

namespace pitfall {
namespace {
using nlohmann::json;

struct reader {
    const std::string& origin;

    status fail(const std::string& field, const std::string& what) const {
        return status::error(pitfall_error::bad_manifest,
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
    return std::all_of(text.begin(), text.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    });
}

// A case's files are named from its key, "<backend>.<scenario>.<variant>" plus ".json" or
// ".log" and a temporary's ".tmp.XXXXXX": bounded so that every such name fits NAME_MAX (255)
// whatever the backend ("cuda": 4) - 5 + 64 + 1 + 100 + 5 + 16 = 191.
constexpr std::size_t max_scenario_name = 64;
constexpr std::size_t max_variant_name = 100;
const char* const name_length_why =
    " (a case's result and log files are named after it, and must fit a file name)";

const std::vector<std::string> known_top_keys{
    "name",     "summary",         "failure_class", "seeds",         "labels",
    "backends", "timeout_seconds", "links",         "params",        "variants",
    "ratios",   "compile_checks",  "evidence",      "device_images", "timings"};
const std::vector<std::string> known_param_keys{"default", "doc", "min", "max", "choices", "full"};
const std::vector<std::string> known_variant_keys{
    "name",   "kind",      "doc",     "labels",     "backends", "needs_device", "helper",
    "params", "param_set", "threads", "memory_per", "timings",  "prediction"};
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
// A bound or a choice must be of the default's type: an integer parameter takes integer bounds.
bool same_kind(const json& def, const json& value) {
    if (def.is_number_integer())
        return value.is_number_integer();
    if (def.is_number())
        return value.is_number();
    return value.is_string();
}

status read_param(const reader& r, const std::string& key, const json& value, param_spec& p) {
    const std::string path = "params." + key;
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
    const json& def = value["default"];
    if (!(def.is_number() && std::isfinite(def.get<double>())) && !def.is_string())
        return r.fail(path + ".default", "expected a finite number or a string");
    p = param_spec{key, def, {}, json(), json(), json(), json()};
    PITFALL_TRY(r.string(value, path + ".", "doc", p.doc, false));
    for (const char* bound : {"min", "max"}) {
        if (!value.contains(bound))
            continue;
        if (!def.is_number() || !same_kind(def, value[bound]))
            return r.fail(path + "." + bound, def.is_number()
                                                  ? "expected a number of the default's type"
                                                  : "a string parameter has no bounds");
        (std::string(bound) == "min" ? p.min : p.max) = value[bound];
    }
    if (value.contains("choices")) {
        const json& choices = value["choices"];
        if (!choices.is_array() || choices.empty())
            return r.fail(path + ".choices", "expected a non-empty array");
        for (std::size_t i = 0; i < choices.size(); ++i)
            if (!same_kind(def, choices[i]))
                return r.fail(path + ".choices[" + std::to_string(i) + "]",
                              "expected a value of the default's type");
        p.choices = choices;
    }
    if (auto ok = check_param_value(p, def); !ok.is_ok())
        return r.fail(path + ".default", ok.message());
    if (value.contains("full")) {
        if (!same_kind(def, value["full"]))
            return r.fail(path + ".full", "expected a value of the default's type");
        if (auto ok = check_param_value(p, value["full"]); !ok.is_ok())
            return r.fail(path + ".full", ok.message());
        p.full_value = value["full"];
    }
    return status::ok();
}

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

// A variant's "params": values of the scenario's own parameters (declared above it), each of the
// default's type and within its bounds, so that a bad set is refused when scenario.json is read,
// not when its case runs. The built-in ones (samples, warmup) belong to a run, not a variant.
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

std::string dotted_key(const std::string& field, const std::string& key) {
    std::string out = field;
    out += '.';
    out += key;
    return out;
}

// A variant's "threads": {"count": 2, "why": "..."}: more than one core, and the reason, since
// every other case runs with one BLAS/OpenMP thread so that its times do not depend on what
// else the machine runs (OpenBLAS with two threads on two shared cores runs at two speeds).
status read_variant_threads(const reader& r, const json& v, const std::string& path,
                            variant_spec& spec) {
    if (!v.contains("threads"))
        return status::ok();
    const json& t = v["threads"];
    const std::string field = path + "threads";
    if (!t.is_object())
        return r.fail(field, "expected an object {\"count\": N, \"why\": \"...\"}");
    for (const auto& [key, value] : t.items())
        if (key != "count" && key != "why")
            return r.fail(dotted_key(field, key), "unknown field (count, why)");
    if (!t.contains("count") || !t["count"].is_number_integer() || t["count"].get<double>() < 1 ||
        t["count"].get<double>() > 256)
        return r.fail(field + ".count", "expected a whole number of threads from 1 to 256");
    spec.threads = t["count"].get<int>();
    PITFALL_TRY(r.string(t, field + ".", "why", spec.threads_why, true));
    if (spec.threads_why.empty())
        return r.fail(field + ".why", "say why the case needs more than the default one thread");
    return status::ok();
}

// "prediction": {"<backend>": "<why>"}: on those backends the reproduce case applies a rule or
// table to what it reads (a driver version, a binary's PTX) and cannot show the failure itself;
// reports and the catalog count it apart from the reproductions.
status read_variant_prediction(const reader& r, const json& v, const std::string& path,
                               const std::vector<std::string>& backends, variant_spec& spec) {
    if (!v.contains("prediction"))
        return status::ok();
    const json& p = v["prediction"];
    const std::string field = path + "prediction";
    if (!p.is_object() || p.empty())
        return r.fail(field, "expected an object {\"<backend>\": \"why it is predicted\"}");
    if (spec.kind != "reproduce")
        return r.fail(field, "only a reproduce case predicts a failure");
    for (const auto& [backend, why] : p.items()) {
        if (std::find(backends.begin(), backends.end(), backend) == backends.end())
            return r.fail(dotted_key(field, backend), "not a backend this variant runs on");
        if (!why.is_string() || why.get<std::string>().empty())
            return r.fail(dotted_key(field, backend),
                          "expected a non-empty string: why the failure is predicted, not seen");
        spec.prediction[backend] = why.get<std::string>();
    }
    return status::ok();
}

// "timings": {"<series>": {"bound_by": {"<backend>": "<control>"}, "why": "..."}}: each series
// names the control it is normalised by on each backend it runs on (a GPU control only on cuda),
// and why that resource is what bounds it.
status read_timings(const reader& r, const json& doc, const std::string& path,
                    const std::vector<std::string>& backends, std::vector<timing_spec>& out) {
    if (!doc.contains("timings"))
        return status::ok();
    const json& t = doc["timings"];
    const std::string field = path + "timings";
    if (!t.is_object())
        return r.fail(field, "expected an object {series: {bound_by, why}}");
    for (const auto& [series, spec] : t.items()) {
        const std::string at = dotted_key(field, series);
        if (series.empty() || series.size() > 128)
            return r.fail(at, "a series name is 1 to 128 characters");
        if (!spec.is_object())
            return r.fail(at, "expected an object {bound_by, why}");
        for (const auto& [key, ignored] : spec.items())
            if (key != "bound_by" && key != "why")
                return r.fail(dotted_key(at, key), "unknown field (bound_by, why)");
        timing_spec ts;
        ts.series = series;
        PITFALL_TRY(r.string(spec, at + ".", "why", ts.why, true));
        if (ts.why.empty())
            return r.fail(at + ".why", "say why that resource bounds the series");
        if (!spec.contains("bound_by") || !spec["bound_by"].is_object() || spec["bound_by"].empty())
            return r.fail(at + ".bound_by", "expected an object {backend: control}");
        for (const auto& [backend, control] : spec["bound_by"].items()) {
            const std::string where = dotted_key(at + ".bound_by", backend);
            if (std::find(backends.begin(), backends.end(), backend) == backends.end())
                return r.fail(where, "'" + backend + "' is not among the backends");
            const controls::control_spec* c =
                control.is_string() ? controls::find(control.get<std::string>()) : nullptr;
            if (c == nullptr) {
                std::string names;
                for (const auto& known : controls::all())
                    names += (names.empty() ? "" : ", ") + std::string(known.name);
                return r.fail(where, "expected a control: " + names);
            }
            if (c->gpu && backend != "cuda")
                return r.fail(where, std::string(c->name) + " is a GPU control: cuda only");
            ts.bound_by[backend] = c->name;
        }
        out.push_back(std::move(ts));
    }
    return status::ok();
}

status read_variant(const reader& r, const json& v, const std::string& path, manifest& m) {
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
    if (spec.name.size() > max_variant_name)
        return r.fail(path + "name", "'" + spec.name + "' is longer than " +
                                         std::to_string(max_variant_name) + " characters" +
                                         name_length_why);
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
    for (const auto& [key, flag] :
         {std::pair<const char*, bool*>{"needs_device", &spec.needs_device},
          std::pair<const char*, bool*>{"helper", &spec.helper}}) {
        if (!v.contains(key))
            continue;
        if (!v[key].is_boolean())
            return r.fail(path + key, "expected true or false");
        *flag = v[key].get<bool>();
    }
    PITFALL_TRY(read_variant_params(r, v, path, m, spec));
    PITFALL_TRY(read_variant_threads(r, v, path, spec));
    PITFALL_TRY(r.string(v, path, "memory_per", spec.memory_per, false));
    if (v.contains("memory_per") && !is_identifier(spec.memory_per))
        return r.fail(path + "memory_per",
                      "'" + spec.memory_per + "' must name a measurement ([a-z][a-z0-9_]*)");
    PITFALL_TRY(read_timings(r, v, path, m.backends_of(spec), spec.timings));
    PITFALL_TRY(read_variant_prediction(r, v, path, m.backends_of(spec), spec));
    m.variants.push_back(std::move(spec));
    return status::ok();
}

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

// owner/name as GitHub spells them: letters, digits, '-', '_' and '.', one slash.
bool is_repo_name(const std::string& text) {
    const auto slash = text.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == text.size() ||
        text.find('/', slash + 1) != std::string::npos || text.size() > 140)
        return false;
    return std::all_of(text.begin(), text.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '-' || c == '_' || c == '.' || c == '/';
    });
}

// "evidence": the public threads a scenario reproduces (the catalog's own rule, at least one
// seed or two threads per scenario, is checked over scenarios/ by ci/catalog.py --check).
status read_evidence(const reader& r, const json& doc, manifest& m) {
    if (doc.contains("evidence")) {
        const json& list = doc["evidence"];
        if (!list.is_array())
            return r.fail("evidence", "expected an array of {repo, number, title, shows}");
        for (std::size_t i = 0; i < list.size(); ++i) {
            const std::string path = "evidence[" + std::to_string(i) + "].";
            const json& item = list[i];
            if (!item.is_object())
                return r.fail(path.substr(0, path.size() - 1),
                              "expected an object {repo, number, title, shows}");
            // gated_by and seen_on say which baselines hold the thread's effect: their shape is
            // read here, their names against expected/ by ci/evidence.py (catalog --check).
            for (const auto& [field, value] : item.items()) {
                if (field == "gated_by") {
                    if (!value.is_array() || value.empty() ||
                        !std::all_of(value.begin(), value.end(),
                                     [](const json& ref) { return ref.is_object(); }))
                        return r.fail(path + field,
                                      "expected a non-empty array of {variant, check | "
                                      "measurement | event | error | signal | ran_on}");
                } else if (field == "seen_on") {
                    if (!value.is_string() || (value != "cuda" && value != "cpu"))
                        return r.fail(path + field, "expected \"cuda\" or \"cpu\"");
                } else if (field != "repo" && field != "number" && field != "title" &&
                           field != "shows") {
                    return r.fail(path + field,
                                  "unknown field (repo, number, title, shows, seen_on, gated_by)");
                }
            }
            evidence_spec e;
            PITFALL_TRY(r.string(item, path, "repo", e.repo, true));
            if (!is_repo_name(e.repo))
                return r.fail(path + "repo", "'" + e.repo + "' is not owner/name");
            if (!item.contains("number") || !item["number"].is_number_unsigned() ||
                item["number"].get<std::uint64_t>() == 0 ||
                item["number"].get<std::uint64_t>() > 100000000)
                return r.fail(path + "number", "expected an issue number in [1, 100000000]");
            e.number = item["number"].get<std::uint64_t>();
            PITFALL_TRY(r.string(item, path, "title", e.title, true));
            PITFALL_TRY(r.string(item, path, "shows", e.shows, true));
            if (e.title.empty() || e.shows.empty())
                return r.fail(path + (e.title.empty() ? "title" : "shows"), "must not be empty");
            for (const auto& seen : m.evidence)
                if (seen.repo == e.repo && seen.number == e.number)
                    return r.fail(path + "number",
                                  e.repo + "#" + std::to_string(e.number) + " is listed twice");
            m.evidence.push_back(std::move(e));
        }
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

status check_param_value(const param_spec& spec, const json& value) {
    const auto text = [](const json& v) {
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
