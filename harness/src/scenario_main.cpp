// The scenario side of the process protocol: arguments, parameters, probe, result file.
#include "pitfall/inject.hpp"
#include "pitfall/manifest.hpp"
#include "pitfall/result_file.hpp"
#include "pitfall/scenario.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <unistd.h>

namespace pitfall {
using nlohmann::json;

struct context::impl {
    std::string scenario;
    std::string variant;
    backend_kind backend;
    json params; // resolved: every declared parameter with its value
    int samples = 9;
    int warmup = 1;
    double warmup_seconds = 0.25;
    json measurements = json::object();
    json samples_recorded = json::object();
    json events = json::object();
    json info = json::object();
    json checks = json::array();
    std::string ran_on;
};

context::context(std::string scenario, std::string variant, backend_kind backend,
                 std::string params_json)
    : m_impl(std::make_unique<impl>()) {
    m_impl->scenario = std::move(scenario);
    m_impl->variant = std::move(variant);
    m_impl->backend = backend;
    m_impl->params = json::parse(params_json);
    m_impl->samples = m_impl->params.value("samples", 9);
    m_impl->warmup = m_impl->params.value("warmup", 1);
    m_impl->warmup_seconds = m_impl->params.value("warmup_seconds", 0.25);
}
context::~context() = default;

const std::string& context::scenario() const { return m_impl->scenario; }
const std::string& context::variant() const { return m_impl->variant; }
backend_kind context::backend() const { return m_impl->backend; }
int context::sample_count() const { return m_impl->samples; }
int context::warmup_count() const { return m_impl->warmup; }
double context::warmup_seconds() const { return m_impl->warmup_seconds; }

namespace {
status bad_parameter(const std::string& name, const std::string& what) {
    return status::error(library::pitfall, "bad_parameter", "--param " + name + ": " + what,
                         stage::init);
}
} // namespace

status_or<long long> context::param_int(const std::string& name) const {
    const auto it = m_impl->params.find(name);
    if (it == m_impl->params.end() || !it->is_number_integer())
        return bad_parameter(name, "not an integer parameter of this scenario");
    return it->get<long long>();
}
status_or<double> context::param_double(const std::string& name) const {
    const auto it = m_impl->params.find(name);
    if (it == m_impl->params.end() || !it->is_number())
        return bad_parameter(name, "not a numeric parameter of this scenario");
    return it->get<double>();
}
status_or<std::string> context::param_string(const std::string& name) const {
    const auto it = m_impl->params.find(name);
    if (it == m_impl->params.end() || !it->is_string())
        return bad_parameter(name, "not a string parameter of this scenario");
    return it->get<std::string>();
}

void context::record(const std::string& name, double value, const std::string& unit) {
    m_impl->measurements[name] = {{"value", value}, {"unit", unit}};
}
void context::record_samples(const std::string& name, const std::vector<double>& values,
                             const std::string& unit) {
    // PITFALL_INJECT slowdown: every series in seconds, however the scenario timed it
    // (time_samples, or its own clock around an epoch), reads `factor` x longer.
    const double slowdown = inject::active().slowdown;
    if (slowdown > 1.0 && unit == "s") {
        std::vector<double> slowed = values;
        for (double& x : slowed)
            x *= slowdown;
        m_impl->samples_recorded[name] = {{"unit", unit}, {"values", slowed}};
        return;
    }
    m_impl->samples_recorded[name] = {{"unit", unit}, {"values", values}};
}
void context::record_event(const std::string& name, const status& observed) {
    m_impl->events[name] = outcome_to_json(observed);
}
void context::record_info(const std::string& name, const std::string& value) {
    m_impl->info[name] = value;
}
void context::check(const std::string& name, bool passed, const std::string& detail) {
    m_impl->checks.push_back({{"name", name}, {"passed", passed}, {"detail", detail}});
}
void context::ran_on(const std::string& where) { m_impl->ran_on = where; }
bool context::has_ran_on() const { return !m_impl->ran_on.empty(); }

std::string context::result_json(const status& outcome) const {
    const auto& mem = memory_tracker::for_backend(m_impl->backend);
    json limit = mem.limit() ? json(*mem.limit()) : json(nullptr);
    json doc = {
        {"schema", result_schema},
        {"scenario", m_impl->scenario},
        {"variant", m_impl->variant},
        {"backend", std::string(to_string(m_impl->backend))},
        {"params", m_impl->params},
        {"outcome", outcome_to_json(outcome)},
        {"ran_on", m_impl->ran_on},
        {"measurements", m_impl->measurements},
        {"samples", m_impl->samples_recorded},
        {"events", m_impl->events},
        {"info", m_impl->info},
        {"checks", m_impl->checks},
        {"memory",
         {{"tracked_peak_bytes", mem.peak() + inject::active().extra_device_bytes},
          {"tracked_current_bytes", mem.current()},
          {"limit_bytes", limit},
          {"allocations", mem.allocations()},
          {"failed_allocations", mem.failed()}}},
    };
    if (!inject::active().empty())
        doc["injected"] = inject::active().applied;
    return doc.dump(2);
}

json outcome_to_json(const status& s) {
    if (s.is_ok())
        return {{"status", "ok"}};
    if (s.is_unsupported()) {
        json out = {{"status", "unsupported"}, {"reason", s.message()}};
        if (s.lib() != library::none) { // the observed error that made it unsupported
            out["library"] = std::string(to_string(s.lib()));
            out["error"] = s.name();
            out["stage"] = std::string(to_string(s.where()));
        }
        return out;
    }
    json out = {{"status", "error"},
                {"library", std::string(to_string(s.lib()))},
                {"error", s.name()},
                {"stage", std::string(to_string(s.where()))},
                {"sticky", s.sticky()},
                {"message", s.message()}};
    if (!s.file().empty())
        out["where"] = s.file() + ":" + std::to_string(s.line());
    return out;
}

status_or<child_run> run_self(const context& ctx, const std::string& variant,
                              const std::map<std::string, std::string>& env,
                              const std::vector<std::string>& params, double timeout_seconds) {
    char self[4096] = {};
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return PITFALL_HOST_ERROR(stage::init, "no_self_exe", "cannot read /proc/self/exe");
    const char* tmp_root = std::getenv("TMPDIR");
    std::string dir_template = std::string(tmp_root != nullptr ? tmp_root : "/tmp") + "/pitfall-child-XXXXXX";
    if (::mkdtemp(dir_template.data()) == nullptr)
        return PITFALL_HOST_ERROR(stage::init, "no_temp_dir", "cannot create " + dir_template);
    const std::string result_path = dir_template + "/result.json";
    const std::string output_path = dir_template + "/output.log";
    process_request req;
    req.argv = {std::string(self, static_cast<std::size_t>(n)), "--backend",
                std::string(to_string(ctx.backend())), "--variant", variant, "--out", result_path};
    for (const auto& p : params)
        req.argv.insert(req.argv.end(), {"--param", p});
    req.env_set = env;
    req.output_path = output_path;
    req.timeout_seconds = timeout_seconds;
    child_run child;
    child.process = run_process(req);
    child.output = read_tail(output_path, 8192);
    child.result_json = read_tail(result_path, 1 << 24);
    ::unlink(result_path.c_str());
    ::unlink(output_path.c_str());
    ::rmdir(dir_template.c_str());
    if (!child.process.started)
        return PITFALL_HOST_ERROR(stage::init, "child_not_started", child.process.start_error);
    return child;
}

namespace {
constexpr int exit_written = 0;
constexpr int exit_usage = 2;
constexpr int exit_unsupported = 77;

void print_help(const manifest& m, const char* argv0) {
    std::cout << "usage: " << argv0
              << " --list\n       " << argv0
              << " --backend cpu|cuda --variant V --out result.json [--param key=value ...]\n\n"
              << m.name << ": " << m.summary << "\n\n"
              << "Exit status: 0 a result was written (whatever the outcome); 77 unsupported here\n"
              << "(reason in the result); 2 bad usage; anything else or a signal is a crash.\n";
}

void print_list(const manifest& m) {
    std::cout << m.name << ": " << m.summary << "\n\nvariants:\n";
    for (const auto& v : m.variants) {
        std::cout << "  " << v.name << " [" << v.kind << "] backends:";
        for (const auto& b : m.backends_of(v))
            std::cout << ' ' << b;
        std::cout << "\n      " << v.doc << '\n';
    }
    std::cout << "\nparameters (--param key=value):\n"
              << "  samples = 9   timed repetitions (odd)\n"
              << "  warmup = 1    untimed repetitions first\n"
              << "  warmup_seconds = 0.25   and at least this long warming up\n";
    for (const auto& p : m.params)
        std::cout << "  " << p.name << " = " << p.default_value.dump() << "   " << p.doc << '\n';
}

int usage_error(const std::string& what) {
    std::cerr << "error: " << what << " (see --help)\n";
    return exit_usage;
}

// A --param value typed like its default: integer, number or string.
status_or<json> typed_value(const param_spec& spec, const std::string& text) {
    const auto& def = spec.default_value;
    try {
        std::size_t used = 0;
        if (def.is_number_integer()) {
            const long long v = std::stoll(text, &used);
            if (used == text.size())
                return json(v);
        } else if (def.is_number()) {
            const double v = std::stod(text, &used);
            if (used == text.size())
                return json(v);
        } else {
            return json(text);
        }
    } catch (const std::exception&) {
    }
    return bad_parameter(spec.name, "'" + text + "' is not " +
                                        (def.is_number_integer() ? "an integer" : "a number"));
}
} // namespace

int scenario_main(int argc, char** argv, const char* manifest_json, case_entry cpu_entry,
                  case_entry cuda_entry) {
    auto parsed = parse_manifest(manifest_json, "scenario.json (compiled in)");
    if (!parsed.is_ok()) {
        std::cerr << "error: " << parsed.error().message() << '\n';
        return exit_usage;
    }
    const manifest& m = parsed.value();

    std::string backend_name;
    std::string variant_name;
    std::string out_path;
    std::map<std::string, std::string> raw_params;
    bool list = false;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
        if (arg == "--help" || arg == "-h") {
            print_help(m, argv[0]);
            return exit_written;
        }
        if (arg == "--list") {
            list = true;
        } else if (arg == "--backend" || arg == "--variant" || arg == "--out" || arg == "--param") {
            const char* v = value();
            if (v == nullptr)
                return usage_error(arg + " needs a value");
            if (arg == "--backend")
                backend_name = v;
            else if (arg == "--variant")
                variant_name = v;
            else if (arg == "--out")
                out_path = v;
            else {
                const std::string kv = v;
                const auto eq = kv.find('=');
                if (eq == std::string::npos || eq == 0)
                    return usage_error("--param '" + kv + "' is not key=value");
                raw_params[kv.substr(0, eq)] = kv.substr(eq + 1);
            }
        } else {
            return usage_error("unknown argument '" + arg + "'");
        }
    }
    if (list) {
        print_list(m);
        return exit_written;
    }
    if (backend_name.empty() || variant_name.empty() || out_path.empty())
        return usage_error("--backend, --variant and --out are required");
    const auto backend = backend_from_string(backend_name);
    if (!backend)
        return usage_error("unknown backend '" + backend_name + "' (cpu, cuda)");
    const variant_spec* variant = m.find_variant(variant_name);
    if (variant == nullptr)
        return usage_error("unknown variant '" + variant_name + "' of scenario " + m.name);
    const auto backends = m.backends_of(*variant);
    if (std::find(backends.begin(), backends.end(), backend_name) == backends.end())
        return usage_error("variant '" + variant_name + "' does not run on backend '" +
                           backend_name + "'");

    // Resolve parameters: defaults from scenario.json, overrides typed like the default.
    json params = json::object();
    params["samples"] = 9;
    params["warmup"] = 1;
    params["warmup_seconds"] = 0.25;
    for (const auto& p : m.params)
        params[p.name] = p.default_value;
    for (const auto& [key, text] : raw_params) {
        if (key == "samples" || key == "warmup") {
            auto v = typed_value(param_spec{key, json(1), ""}, text);
            if (!v.is_ok())
                return usage_error(v.error().message());
            const long long n = v.value().get<long long>();
            if (key == "samples" && (n < 1 || n % 2 == 0))
                return usage_error("--param samples: must be odd and >= 1 (medians need a middle)");
            if (key == "warmup" && n < 0)
                return usage_error("--param warmup: must be >= 0");
            params[key] = n;
            continue;
        }
        if (key == "warmup_seconds") {
            auto v = typed_value(param_spec{key, json(0.25), ""}, text);
            if (!v.is_ok())
                return usage_error(v.error().message());
            if (!(v.value().get<double>() >= 0))
                return usage_error("--param warmup_seconds: must be >= 0");
            params[key] = v.value();
            continue;
        }
        const param_spec* spec = m.find_param(key);
        if (spec == nullptr)
            return usage_error("--param " + key + ": unknown parameter of scenario " + m.name);
        auto v = typed_value(*spec, text);
        if (!v.is_ok())
            return usage_error(v.error().message());
        params[key] = v.value();
    }
    if (auto limit = device_memory_limit_from_env(); !limit.is_ok())
        return usage_error(limit.error().message());

    if (const char* injections = std::getenv(inject::env_name); injections != nullptr) {
        auto plan = inject::parse(injections, backend_name + "." + m.name + "." + variant_name);
        if (!plan.is_ok())
            return usage_error(plan.error().message());
        inject::set_active(plan.value());
    }

    context ctx(m.name, variant_name, *backend, params.dump());
    auto finish = [&](const status& outcome) {
        if (auto written = write_file_atomically(out_path, ctx.result_json(outcome));
            !written.is_ok()) {
            std::cerr << "error: " << written.message() << '\n';
            return exit_usage;
        }
        return outcome.is_unsupported() ? exit_unsupported : exit_written;
    };

    case_entry entry = *backend == backend_kind::cpu ? cpu_entry : cuda_entry;
    if (entry == nullptr)
        return finish(PITFALL_UNSUPPORTED("built without CUDA (PITFALL_ENABLE_CUDA=OFF or no "
                                          "CUDA toolkit at configure time)"));
#if PITFALL_HAS_CUDA
    if (*backend == backend_kind::cuda && variant->needs_device) {
        // The first CUDA call decides whether this machine can run the case at all. Its error
        // travels as the reason and as an event, so a baseline can tell "no driver" (35) from
        // "no device" (100).
        const status probe = cuda_probe();
        if (!probe.is_ok()) {
            ctx.record_event("cuda_probe", probe);
            ctx.ran_on(cuda_backend::describe_device());
            return finish(status::unsupported_because(
                probe, probe.name() + ": " + probe.message()));
        }
    }
#endif
    const auto started = std::chrono::steady_clock::now();
    status outcome = entry(ctx);
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    ctx.record("case_wall_seconds", wall, "s");
    if (!ctx.has_ran_on()) // the scenario may know better (a silent fallback); else the backend
        ctx.ran_on(*backend == backend_kind::cpu ? cpu_backend::describe_device()
#if PITFALL_HAS_CUDA
                                                 : cuda_backend::describe_device());
#else
                                                 : std::string("cuda: built without CUDA"));
#endif
    if (outcome.lib() == library::pitfall && outcome.name() == "bad_parameter")
        return usage_error(outcome.message());
    if (!inject::active().outcome_error.empty())
        outcome = inject::injected_outcome(outcome, inject::active().outcome_error);
    return finish(outcome);
}

} // namespace pitfall
