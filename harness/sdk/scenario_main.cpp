// The scenario side of the process protocol: arguments, parameters, probe, result file.
#include "pitfall/detail/inject.hpp"
#include "pitfall/detail/json_file.hpp"
#include "pitfall/detail/json_schema.hpp"
#include "pitfall/detail/manifest.hpp"
#include "pitfall/detail/mutate.hpp"
#include "pitfall/detail/process.hpp"
#include "pitfall/detail/result_file.hpp"
#include "pitfall/scenario.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <map>
#include <new>
#include <system_error>
#include <unistd.h>

namespace pitfall {
using nlohmann::json;

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
    json out = {{"status", "error"},    {"library", std::string(to_string(s.lib()))},
                {"error", s.name()},    {"stage", std::string(to_string(s.where()))},
                {"sticky", s.sticky()}, {"message", s.message()}};
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
        return PITFALL_HOST_ERROR(stage::init, host_error::no_self_exe,
                                  "cannot read /proc/self/exe");
    const char* tmp_root = std::getenv("TMPDIR");
    std::string dir_template =
        std::string(tmp_root != nullptr ? tmp_root : "/tmp") + "/pitfall-child-XXXXXX";
    if (::mkdtemp(dir_template.data()) == nullptr)
        return PITFALL_HOST_ERROR(stage::init, host_error::no_temp_dir,
                                  "cannot create " + dir_template);
    const std::string result_path = dir_template + "/result.json";
    const std::string output_path = dir_template + "/output.log";
    process_request req;
    req.argv = {std::string(self, static_cast<std::size_t>(n)),
                "--backend",
                std::string(to_string(ctx.backend())),
                "--variant",
                variant,
                "--out",
                result_path};
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
        return PITFALL_HOST_ERROR(stage::init, host_error::child_not_started,
                                  child.process.start_error);
    return child;
}

status outcome_from_json(const json& o, const std::string& context) {
    const std::string kind = o.is_object() ? o.value("status", std::string()) : std::string();
    if (kind == "ok")
        return status::ok();
    const auto text = [&](const char* key) {
        return o.contains(key) && o[key].is_string() ? o[key].get<std::string>() : std::string();
    };
    const auto lib = library_from_string(text("library"));
    const auto where = stage_from_string(text("stage"));
    const bool sticky = o.contains("sticky") && o["sticky"].is_boolean() && o["sticky"].get<bool>();
    if (kind == "unsupported") {
        const std::string reason = context + text("reason");
        if (text("error").empty())
            return status::unsupported(reason);
        return status::unsupported_because(status::as_reported(lib.value_or(library::host),
                                                               text("error"), reason,
                                                               where.value_or(stage::none), sticky),
                                           reason);
    }
    std::string message = context + text("message");
    if (!text("where").empty())
        message += " [at " + text("where") + "]";
    if (kind != "error" || text("error").empty())
        return status::error(host_error::child_result_unreadable,
                             context + "an outcome that is neither ok, unsupported nor an error",
                             stage::compute);
    return status::as_reported(lib.value_or(library::host), text("error"), std::move(message),
                               where.value_or(stage::none), sticky);
}

status_or<child_report> read_child(const child_run& child, const std::string& who) {
    const auto& p = child.process;
    const std::string tail = child.output.empty() ? "" : "; its output ends: " + child.output;
    if (p.timed_out)
        return status::error(host_error::child_timed_out, who + " timed out" + tail,
                             stage::compute);
    if (p.signal)
        return status::error(host_error::child_killed,
                             who + " was ended by " + signal_name(*p.signal) + tail,
                             stage::compute);
    const int code = p.exit_code.value_or(-1);
    if (code != 0 && code != 77)
        return status::error(host_error::child_failed,
                             who + " exited " + std::to_string(code) + tail, stage::compute);
    if (child.result_json.empty())
        return status::error(host_error::child_wrote_no_result,
                             who + " exited " + std::to_string(code) + " without a result" + tail,
                             stage::compute);
    auto parsed = detail::parse_json(child.result_json, who + "'s result");
    const status checked =
        parsed.is_ok() ? detail::validate_document("result", parsed.value(), who + "'s result")
                       : parsed.error();
    if (!checked.is_ok())
        return status::error(
            host_error::child_result_unreadable,
            who + " wrote a result that is not a result document: " + checked.message(),
            stage::compute);
    json result = std::move(parsed).value();
    child_report report{outcome_from_json(result["outcome"], who + ": "), std::move(result)};
    return report;
}

void adopt_child_facts(context& ctx, const json& child_result, const std::string& prefix) {
    const json info = child_result.value("info", json::object());
    const json measurements = child_result.value("measurements", json::object());
    for (const auto& [key, value] : info.items())
        if (value.is_string())
            ctx.record_info(prefix + key, value.get<std::string>());
    for (const auto& [key, value] : measurements.items())
        if (key != "case_wall_seconds" && value.is_object() && value.contains("value") &&
            value["value"].is_number())
            ctx.record(prefix + key, value["value"].get<double>(),
                       value.contains("unit") && value["unit"].is_string()
                           ? value["unit"].get<std::string>()
                           : std::string());
}

namespace {
constexpr int exit_written = 0;
constexpr int exit_usage = 2;
constexpr int exit_unsupported = 77;

void print_help(const manifest& m, const char* argv0) {
    std::cout
        << "usage: " << argv0 << " --list\n       " << argv0 << " --check-variants\n       "
        << argv0
        << " --backend cpu|cuda --variant V --out result.json [--full] [--param key=value ...]\n\n"
        << m.name << ": " << m.summary << "\n\n"
        << "Exit status: 0 a result was written (whatever the outcome); 77 unsupported here\n"
        << "(reason in the result); 2 bad usage or a bad parameter; anything else or a\n"
        << "signal is a crash. --check-variants: 0 when the variants in the code are\n"
        << "exactly those of scenario.json, else 2 with the difference.\n";
}

// The built-in parameters every scenario has, with their bounds.
std::vector<param_spec> built_in_params() {
    return {param_spec{"samples", json(9), "timed repetitions (odd)", json(1), json(100001), json(),
                       json()},
            param_spec{"warmup", json(1), "untimed repetitions first", json(0), json(1000000),
                       json(), json()},
            param_spec{"warmup_seconds", json(0.25), "and at least this long warming up", json(0.0),
                       json(3600.0), json(), json()}};
}

std::string bounds_text(const param_spec& p) {
    std::string out;
    if (p.min.is_number())
        out += " min " + p.min.dump();
    if (p.max.is_number())
        out += " max " + p.max.dump();
    if (p.choices.is_array())
        out += " one of " + p.choices.dump();
    return out.empty() ? out : " [" + out.substr(1) + "]";
}

void print_list(const manifest& m) {
    std::cout << m.name << ": " << m.summary << "\n\nvariants:\n";
    for (const auto& v : m.variants) {
        std::cout << "  " << v.name << " [" << v.kind << "] backends:";
        for (const auto& b : m.backends_of(v))
            std::cout << ' ' << b;
        if (!v.params.empty())
            std::cout << "\n      parameter set" << (v.param_set.empty() ? "" : " " + v.param_set)
                      << ": " << v.params.dump();
        std::cout << "\n      " << v.doc << '\n';
    }
    std::cout << "\nparameters (--param key=value):\n";
    std::vector<param_spec> all = built_in_params();
    all.insert(all.end(), m.params.begin(), m.params.end());
    for (const auto& p : all)
        std::cout << "  " << p.name << " = " << p.default_value.dump()
                  << (p.full_value.is_null() ? "" : " (--full: " + p.full_value.dump() + ")")
                  << bounds_text(p) << "   " << p.doc << '\n';
}

int usage_error(const std::string& what) {
    std::cerr << "error: " << what << " (see --help)\n";
    return exit_usage;
}

// In the protocol's main a failed step is a message and exit 2, not a status to pass up.
#define PITFALL_ASSIGN_OR_USAGE_ERROR(lhs, expr)                                                   \
    PITFALL_ASSIGN_OR_USAGE_ERROR_IMPL(PITFALL_CONCAT(pitfall_usage_, __LINE__), lhs, expr)
// NOLINTBEGIN(bugprone-macro-parentheses): tmp and lhs are declarations, not expressions
#define PITFALL_ASSIGN_OR_USAGE_ERROR_IMPL(tmp, lhs, expr)                                         \
    auto tmp = (expr);                                                                             \
    if (!tmp.is_ok())                                                                              \
        return usage_error(tmp.error().message());                                                 \
    lhs = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)

bool is_bad_parameter(const status& s) {
    return s.lib() == library::pitfall && s.name() == to_string(pitfall_error::bad_parameter);
}

// The variants in code against scenario.json's: "" when they agree, else what differs.
std::string variant_difference(const manifest& m, std::initializer_list<variant_entry> code) {
    std::string missing_in_code;
    std::string missing_in_manifest;
    for (const auto& v : m.variants) {
        const bool found = std::any_of(code.begin(), code.end(),
                                       [&](const variant_entry& e) { return v.name == e.name; });
        if (!found)
            missing_in_code += " " + v.name;
    }
    for (const auto& e : code)
        if (m.find_variant(e.name) == nullptr)
            missing_in_manifest += std::string(" ") + e.name;
    std::string out;
    if (!missing_in_code.empty())
        out += "in scenario.json, no code for:" + missing_in_code + ". ";
    if (!missing_in_manifest.empty())
        out += "in the code (PITFALL_SCENARIO), not in scenario.json:" + missing_in_manifest + ".";
    return out;
}

// A --param value typed like its default (integer, number or string), then held to its bounds.
status_or<json> typed_value(const param_spec& spec, const std::string& text) {
    const auto& def = spec.default_value;
    json value;
    try {
        std::size_t used = 0;
        if (def.is_number_integer()) {
            const long long v = std::stoll(text, &used);
            if (used == text.size())
                value = v;
        } else if (def.is_number()) {
            const double v = std::stod(text, &used);
            if (used == text.size() && std::isfinite(v))
                value = v;
        } else {
            value = text;
        }
    } catch (const std::exception&) {
    }
    if (value.is_null())
        return bad_parameter(spec.name,
                             "'" + text + "' is not " +
                                 (def.is_number_integer() ? "an integer" : "a finite number"));
    if (auto in_bounds = check_param_value(spec, value); !in_bounds.is_ok())
        return bad_parameter(spec.name, in_bounds.message());
    return value;
}

// Defaults from scenario.json (with --full, each parameter's "full" value where it has one),
// then the variant's parameter set (checked when the manifest was read), then the --param
// overrides, each typed and bounded: the command line wins.
status_or<json> resolve_params(const manifest& m, const variant_spec& variant,
                               const std::map<std::string, std::string>& raw, bool full) {
    const std::vector<param_spec> built_in = built_in_params();
    json params = json::object();
    for (const auto& p : built_in)
        params[p.name] = p.default_value;
    for (const auto& p : m.params)
        params[p.name] = full && !p.full_value.is_null() ? p.full_value : p.default_value;
    for (const auto& [key, value] : variant.params.items())
        params[key] = value;
    for (const auto& [key, text] : raw) {
        const param_spec* spec = m.find_param(key);
        for (const auto& b : built_in)
            if (b.name == key)
                spec = &b;
        if (spec == nullptr)
            return bad_parameter(key, "unknown parameter of scenario " + m.name);
        PITFALL_ASSIGN_OR_RETURN(params[key], typed_value(*spec, text));
    }
    if (params["samples"].get<long long>() % 2 == 0)
        return bad_parameter("samples", "must be odd (medians need a middle)");
    return params;
}

struct invocation {
    bool help = false;
    bool list = false;
    bool check_variants = false;
    bool full = false; ///< the full parameter set instead of the quick defaults
    std::string backend;
    std::string variant;
    std::string out;
    std::map<std::string, std::string> params;
};

status_or<invocation> parse_arguments(int argc, char** argv) {
    invocation inv;
    const auto usage = [](const std::string& what) {
        return status::error(pitfall_error::bad_usage, what, stage::init);
    };
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--help" || arg == "-h" || arg == "--list" || arg == "--check-variants") {
            (arg == "--list"             ? inv.list
             : arg == "--check-variants" ? inv.check_variants
                                         : inv.help) = true;
            continue;
        }
        if (arg == "--full") {
            inv.full = true;
            continue;
        }
        if (arg != "--backend" && arg != "--variant" && arg != "--out" && arg != "--param")
            return usage("unknown argument '" + arg + "'");
        if (i + 1 >= argc)
            return usage(arg + " needs a value");
        const std::string value = argv[++i];
        if (arg == "--param") {
            const auto eq = value.find('=');
            if (eq == std::string::npos || eq == 0)
                return usage("--param '" + value + "' is not key=value");
            inv.params[value.substr(0, eq)] = value.substr(eq + 1);
        } else {
            (arg == "--backend" ? inv.backend : arg == "--variant" ? inv.variant : inv.out) = value;
        }
    }
    return inv;
}

// A case's own exceptions are outcomes like any other, never an escape: a failed host
// allocation (a data set too large for the host) is std::bad_alloc at the alloc stage.
status run_guarded(case_entry entry, context& ctx) {
    try {
        return entry(ctx);
    } catch (const std::bad_alloc&) {
        return PITFALL_HOST_ERROR(stage::alloc, host_error::bad_alloc, "host allocation failed");
    } catch (const std::system_error& e) {
        return PITFALL_HOST_ERROR(stage::init, host_error::system_error, e.what());
    } catch (const std::exception& e) {
        return PITFALL_HOST_ERROR(stage::compute, host_error::exception, e.what());
    }
}

std::string describe_backend_device(backend_kind backend) {
    if (backend == backend_kind::cpu)
        return cpu_backend::describe_device();
#if PITFALL_HAS_CUDA
    return cuda_backend::describe_device();
#else
    return "cuda: built without CUDA";
#endif
}

// Runs the case and turns what it returned into the outcome the result records.
status run_case(const variant_spec& variant, backend_kind backend, case_entry entry, context& ctx) {
    if (entry == nullptr)
        return PITFALL_UNSUPPORTED("built without CUDA (PITFALL_ENABLE_CUDA=OFF or no CUDA "
                                   "toolkit at configure time)");
#if PITFALL_HAS_CUDA
    if (backend == backend_kind::cuda && variant.needs_device) {
        // The first CUDA call decides whether this machine can run the case at all. Its error
        // travels as the reason and as an event, so a baseline can tell "no driver" (35) from
        // "no device" (100).
        const status probe = cuda_probe();
        if (!probe.is_ok()) {
            ctx.record_event("cuda_probe", probe);
            ctx.ran_on(cuda_backend::describe_device());
            return status::unsupported_because(probe, probe.name() + ": " + probe.message());
        }
    }
#else
    (void)variant;
#endif
    const auto started = std::chrono::steady_clock::now();
    status outcome = run_guarded(entry, ctx);
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    ctx.record("case_wall_seconds", wall, "s");
    if (!ctx.has_ran_on()) // the scenario may know better (a silent fallback); else the backend
        ctx.ran_on(describe_backend_device(backend));
#if PITFALL_HAS_CUDA
    // Evidence of GPU work for a case that needs a device (the probe above passed): what the
    // device counted, not what the case says. The harness holds a GPU claim against it.
    if (backend == backend_kind::cuda && variant.needs_device) {
        const auto work = count_gpu_work();
        ctx.record_gpu_work(work.is_ok()
                                ? json{{"kernels", work.value().kernels},
                                       {"library_calls", work.value().library_calls},
                                       {"required", true}}
                                : json{{"error", work.error().name()}, {"required", true}});
    }
#endif
    // A CUDA case that needs no device (version queries, a parent of child processes) is not
    // counted: said so, so that a CUDA result without gpu_work is one the SDK did not write.
    if (backend == backend_kind::cuda && !variant.needs_device)
        ctx.record_gpu_work(json{{"required", false}});
    if (!inject::active().outcome_error.empty() && !is_bad_parameter(outcome))
        outcome = inject::injected_outcome(outcome, inject::active().outcome_error);
    return outcome;
}

// The case's identity checked against the manifest and the code; the entry to call.
status_or<case_entry> select_entry(const manifest& m, const invocation& inv, backend_kind backend,
                                   std::initializer_list<variant_entry> variants) {
    const auto usage = [](const std::string& what) {
        return status::error(pitfall_error::bad_usage, what, stage::init);
    };
    const variant_spec* variant = m.find_variant(inv.variant);
    if (variant == nullptr)
        return usage("unknown variant '" + inv.variant + "' of scenario " + m.name);
    const auto backends = m.backends_of(*variant);
    if (std::find(backends.begin(), backends.end(), inv.backend) == backends.end())
        return usage("variant '" + inv.variant + "' does not run on backend '" + inv.backend + "'");
    for (const auto& e : variants)
        if (inv.variant == e.name)
            return backend == backend_kind::cpu ? e.cpu : e.cuda;
    return usage("variant '" + inv.variant + "' has no code"); // variant_difference said so first
}

// Environment that shapes the case: the device memory budget, fault injection and mutants.
status apply_environment(const manifest& m, const invocation& inv) {
    PITFALL_TRY(device_memory_limit_from_env());
    if (const char* injections = std::getenv(inject::env_name); injections != nullptr) {
        PITFALL_ASSIGN_OR_RETURN(
            auto plan, inject::parse(injections, inv.backend + "." + m.name + "." + inv.variant));
        inject::set_active(plan);
    }
    if (const char* mutants = std::getenv(mutate::env_name); mutants != nullptr) {
        PITFALL_ASSIGN_OR_RETURN(
            auto plan, mutate::parse(mutants, inv.backend + "." + m.name + "." + inv.variant));
        mutate::set_active(plan);
    }
    return status::ok();
}

int write_result(const context& ctx, const std::string& out_path, const status& outcome) {
    if (auto written = write_file_atomically(out_path, ctx.result_json(outcome));
        !written.is_ok()) {
        std::cerr << "error: " << written.message() << '\n';
        return exit_usage;
    }
    return outcome.is_unsupported() ? exit_unsupported : exit_written;
}
} // namespace

namespace detail {
int scenario_main(int argc, char** argv, const char* manifest_json,
                  std::initializer_list<variant_entry> variants) {
    // Before anything is opened: a closed 1 would otherwise be the result file's number.
    if (!ensure_standard_descriptors())
        return exit_usage;
    auto parsed = parse_manifest(manifest_json, "scenario.json (compiled in)");
    if (!parsed.is_ok()) {
        std::cerr << "error: " << parsed.error().message() << '\n';
        return exit_usage;
    }
    const manifest& m = parsed.value();
    PITFALL_ASSIGN_OR_USAGE_ERROR(const invocation inv, parse_arguments(argc, argv));
    if (inv.help) {
        print_help(m, argv[0]);
        return exit_written;
    }
    if (const std::string diff = variant_difference(m, variants); !diff.empty())
        return usage_error("variants differ: " + diff);
    if (inv.check_variants) {
        std::cout << m.name << ": the " << m.variants.size()
                  << " variants of scenario.json all have code, and no other\n";
        return exit_written;
    }
    if (inv.list) {
        print_list(m);
        return exit_written;
    }
    if (inv.backend.empty() || inv.variant.empty() || inv.out.empty())
        return usage_error("--backend, --variant and --out are required");
    const auto backend = backend_from_string(inv.backend);
    if (!backend)
        return usage_error("unknown backend '" + inv.backend + "' (cpu, cuda)");
    PITFALL_ASSIGN_OR_USAGE_ERROR(const case_entry entry, select_entry(m, inv, *backend, variants));
    const variant_spec& variant = *m.find_variant(inv.variant); // select_entry found it
    PITFALL_ASSIGN_OR_USAGE_ERROR(const json params,
                                  resolve_params(m, variant, inv.params, inv.full));
    if (auto env = apply_environment(m, inv); !env.is_ok())
        return usage_error(env.message());

    context ctx(m.name, inv.variant, *backend, params.dump());
    ctx.set_controls(m.controls_of(variant, inv.backend));
    if (!variant.param_set.empty()) // which named set the params came from, for reports
        ctx.record_info("param_set", variant.param_set);
    if (inv.full) // the larger sizes: baselines are blessed at the quick defaults
        ctx.record_info("size_set", "full");
    const status outcome = run_case(variant, *backend, entry, ctx);
    if (is_bad_parameter(outcome)) // a rule between parameters: bad usage, no result
        return usage_error(outcome.message());
    return write_result(ctx, inv.out, outcome);
}
} // namespace detail

} // namespace pitfall
