#include "manifest_parts.hpp"

#include "pitfall/controls.hpp"

#include <algorithm>
#include <utility>

// scenario.json's "variants" (each one's name, kind, backends, parameter set, threads and
// prediction) and the "timings" of the scenario or of one variant.
namespace pitfall::manifest_parts {
namespace {
const std::vector<std::string> known_variant_keys{
    "name",   "kind",      "doc",     "labels",     "backends", "needs_device", "helper",
    "params", "param_set", "threads", "memory_per", "timings",  "prediction",   "gate"};

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

/// Every control's name, for the error of a bound_by that names none of them.
std::string control_names() {
    std::string names;
    for (const auto& known : controls::all())
        names += (names.empty() ? "" : ", ") + std::string(known.name);
    return names;
}

/// One series' "bound_by": a known control for each of the backends, a GPU one only on cuda.
status read_bound_by(const reader& r, const json& spec, const std::string& at,
                     const std::vector<std::string>& backends, timing_spec& ts) {
    if (!spec.contains("bound_by") || !spec["bound_by"].is_object() || spec["bound_by"].empty())
        return r.fail(at + ".bound_by", "expected an object {backend: control}");
    for (const auto& [backend, control] : spec["bound_by"].items()) {
        const std::string where = dotted_key(at + ".bound_by", backend);
        if (std::find(backends.begin(), backends.end(), backend) == backends.end())
            return r.fail(where, "'" + backend + "' is not among the backends");
        const controls::control_spec* c =
            control.is_string() ? controls::find(control.get<std::string>()) : nullptr;
        if (c == nullptr)
            return r.fail(where, "expected a control: " + control_names());
        if (c->gpu && backend != "cuda")
            return r.fail(where, std::string(c->name) + " is a GPU control: cuda only");
        ts.bound_by[backend] = c->name;
    }
    return status::ok();
}

/// One series of "timings": {"bound_by": {...}, "why": "..."}.
status read_timing_series(const reader& r, const std::string& series, const json& spec,
                          const std::string& at, const std::vector<std::string>& backends,
                          timing_spec& ts) {
    if (series.empty() || series.size() > 128)
        return r.fail(at, "a series name is 1 to 128 characters");
    if (!spec.is_object())
        return r.fail(at, "expected an object {bound_by, why}");
    for (const auto& [key, ignored] : spec.items())
        if (key != "bound_by" && key != "why")
            return r.fail(dotted_key(at, key), "unknown field (bound_by, why)");
    ts.series = series;
    PITFALL_TRY(r.string(spec, at + ".", "why", ts.why, true));
    if (ts.why.empty())
        return r.fail(at + ".why", "say why that resource bounds the series");
    return read_bound_by(r, spec, at, backends, ts);
}
} // namespace

status read_timings(const reader& r, const json& doc, const std::string& path,
                    const std::vector<std::string>& backends, std::vector<timing_spec>& out) {
    if (!doc.contains("timings"))
        return status::ok();
    const json& t = doc["timings"];
    const std::string field = path + "timings";
    if (!t.is_object())
        return r.fail(field, "expected an object {series: {bound_by, why}}");
    for (const auto& [series, spec] : t.items()) {
        timing_spec ts;
        PITFALL_TRY(read_timing_series(r, series, spec, dotted_key(field, series), backends, ts));
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
          std::pair<const char*, bool*>{"helper", &spec.helper},
          std::pair<const char*, bool*>{"gate", &spec.gate}}) {
        if (!v.contains(key))
            continue;
        if (!v[key].is_boolean())
            return r.fail(path + key, "expected true or false");
        *flag = v[key].get<bool>();
    }
    if (spec.gate) {
        const auto backends = m.backends_of(spec);
        if (spec.helper || std::find(backends.begin(), backends.end(), "cuda") == backends.end())
            return r.fail(path + "gate", "a gate case runs on the GPU: the variant needs the "
                                         "cuda backend and cannot be a helper");
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

} // namespace pitfall::manifest_parts
