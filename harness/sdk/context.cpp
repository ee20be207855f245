// A running case's context (pitfall/scenario.hpp): parameters, what the case records, the
// calibration controls measured beside its timed series, and its result document.
#include "pitfall/detail/inject.hpp"
#include "pitfall/detail/json_file.hpp"
#include "pitfall/detail/loaded_libraries.hpp"
#include "pitfall/detail/mutate.hpp"
#include "pitfall/detail/resident_memory.hpp"
#include "pitfall/detail/result_file.hpp"
#include "pitfall/scenario.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

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
    bool process_warm = false; // a warm-up of warmup_seconds has run in this process
    json measurements = json::object();
    json samples_recorded = json::object();
    json events = json::object();
    json info = json::object();
    json checks = json::array();
    std::string ran_on;
    json gpu_work; // null: not written (the CPU backend, or a CUDA case the probe stopped)
    // The controls this case's series are bound by (scenario.json "timings"), the samples of
    // each taken since the last series was recorded, the controls warmed up in this process,
    // and what disturbed the last timed series (attached to the next one recorded).
    std::vector<std::string> controls;
    json control_pool = json::object();
    json control_errors = json::object();
    std::set<std::string> controls_warm;
    json disturbance;
    json last_controls = json::object();
    json last_disturbance;
    // The share of each sample's and each control sample's time the timing thread waited for a
    // CPU (controls::cpu_wait_clock): pending until the next series is recorded, then kept for
    // the series recorded after it from the same loop, as the controls are.
    json wait_pool;
    json last_waits;
    json control_wait_pool = json::object();
    json last_control_waits = json::object();
};

context::context(std::string scenario, std::string variant, backend_kind backend,
                 const std::string& params_json)
    : m_impl(std::make_unique<impl>()) {
    m_impl->scenario = std::move(scenario);
    m_impl->variant = std::move(variant);
    m_impl->backend = backend;
    // Written by resolve_params in this process; read without trusting it all the same.
    auto parsed = detail::parse_json(params_json, "--param values");
    m_impl->params =
        parsed.is_ok() && parsed.value().is_object() ? std::move(parsed).value() : json::object();
    const json& p = m_impl->params;
    if (p.contains("samples") && p["samples"].is_number_integer())
        m_impl->samples = p["samples"].get<int>();
    if (p.contains("warmup") && p["warmup"].is_number_integer())
        m_impl->warmup = p["warmup"].get<int>();
    if (p.contains("warmup_seconds") && p["warmup_seconds"].is_number())
        m_impl->warmup_seconds = p["warmup_seconds"].get<double>();
}
context::~context() = default;

const std::string& context::scenario() const {
    return m_impl->scenario;
}
const std::string& context::variant() const {
    return m_impl->variant;
}
backend_kind context::backend() const {
    return m_impl->backend;
}
int context::sample_count() const {
    return m_impl->samples;
}
int context::warmup_count() const {
    return m_impl->warmup;
}
double context::warmup_seconds() const {
    return m_impl->process_warm ? 0.0 : m_impl->warmup_seconds;
}
void context::process_warmed() {
    m_impl->process_warm = true;
}

status bad_parameter(const std::string& name, const std::string& why) {
    return status::error(pitfall_error::bad_parameter, "--param " + name + ": " + why, stage::init);
}

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
    // (time_samples, or its own clock around an epoch), reads `factor` x longer. The controls
    // are not slowed: the code is, the machine is not.
    const double slowdown = inject::active().slowdown;
    std::vector<double> kept = values;
    if (slowdown > 1.0 && unit == "s")
        for (double& x : kept)
            x *= slowdown;
    json series = {{"unit", unit}, {"values", kept}};
    // A series the case timed with its own clock (not time_samples) took no control samples
    // beside it: take them now, so that the series can still be judged normalised.
    // Several series timed together (seconds per step and per sample of one loop) share the
    // controls taken beside that loop: the first recorded takes them, the next reuse them.
    if (unit == "s" && m_impl->control_pool.empty() && m_impl->last_controls.empty() &&
        !m_impl->controls.empty() && !kept.empty()) {
        std::vector<double> sorted = kept;
        std::sort(sorted.begin(), sorted.end());
        for (int i = 0; i < 9; ++i)
            detail::run_controls(*this, sorted[sorted.size() / 2]);
    }
    if (!m_impl->control_pool.empty()) {
        m_impl->last_controls = m_impl->control_pool;
        m_impl->control_pool = json::object();
        m_impl->last_control_waits = m_impl->control_wait_pool;
        m_impl->control_wait_pool = json::object();
    }
    if (!m_impl->wait_pool.is_null()) {
        m_impl->last_waits = m_impl->wait_pool;
        m_impl->wait_pool = json();
    }
    if (unit == "s" && !m_impl->last_controls.empty()) {
        series["controls"] = m_impl->last_controls;
        json shares = json::object();
        for (const auto& [control, each] : m_impl->last_control_waits.items())
            if (each.is_array())
                shares[control] = each;
        if (!shares.empty())
            series["control_cpu_wait_share"] = std::move(shares);
    }
    // A share per sample, or none: series of this loop have as many samples as it had (a
    // derived series, seconds per step from seconds per chunk, shares its chunk's share; a
    // phase inside a sample, its sample's share, which is right on average).
    if (unit == "s" && m_impl->last_waits.is_array() && m_impl->last_waits.size() == kept.size())
        series["cpu_wait_share"] = m_impl->last_waits;
    if (!m_impl->control_errors.empty())
        series["control_errors"] = m_impl->control_errors;
    if (!m_impl->disturbance.is_null()) {
        m_impl->last_disturbance = m_impl->disturbance;
        m_impl->disturbance = json();
    }
    if (unit == "s" && !m_impl->last_disturbance.is_null())
        series["disturbance"] = m_impl->last_disturbance;
    m_impl->samples_recorded[name] = std::move(series);
}
const std::vector<std::string>& context::controls() const {
    return m_impl->controls;
}
void context::set_controls(std::vector<std::string> names) {
    m_impl->controls = std::move(names);
}
bool context::control_warm(const std::string& name) const {
    return m_impl->controls_warm.count(name) != 0;
}
void context::record_control(const std::string& name, const status_or<double>& seconds,
                             bool warming, std::optional<double> cpu_wait_share) {
    if (!seconds.is_ok()) {
        m_impl->control_errors[name] = seconds.error().name() + ": " + seconds.error().message();
        return;
    }
    if (warming) {
        m_impl->controls_warm.insert(name);
        return;
    }
    if (!m_impl->control_pool.contains(name))
        m_impl->control_pool[name] = json::array();
    m_impl->control_pool[name].push_back(seconds.value());
    // Shares go with every sample of a control or with none: one missing leaves them all out.
    json& shares = m_impl->control_wait_pool[name];
    if (!cpu_wait_share ||
        (shares.is_array() && shares.size() + 1 != m_impl->control_pool[name].size()))
        shares = false;
    else if (!shares.is_boolean())
        shares.push_back(*cpu_wait_share);
}
void context::record_cpu_wait_shares(const std::vector<double>& shares) {
    m_impl->wait_pool = shares;
}
void context::record_disturbance(const nlohmann::json& disturbance) {
    m_impl->disturbance = disturbance;
    if (disturbance.is_null()) // nothing to say of the next series: nor of an earlier one's
        m_impl->last_disturbance = json();
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
void context::ran_on(const std::string& where) {
    m_impl->ran_on = where;
}
bool context::has_ran_on() const {
    return !m_impl->ran_on.empty();
}
void context::record_gpu_work(const nlohmann::json& evidence) {
    m_impl->gpu_work = evidence;
}

std::string context::result_json(const status& outcome) const {
    // First: the peak the case reached by its own work, before this document adds its few kB.
    const detail::own_peak_rss own = detail::read_own_peak_rss();
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
    // The process's own peak resident set (not wait4's, which counts the harness's image the
    // case was forked from): the harness records it as the case's peak_rss_bytes.
    doc["resident_memory"] = {
        {"peak_rss_bytes", own.self_bytes ? json(*own.self_bytes) : json(nullptr)},
        {"children_peak_rss_bytes", own.children_bytes ? json(*own.children_bytes) : json(nullptr)},
        {"method", "VmHWM"}};
    if (!m_impl->gpu_work.is_null())
        doc["gpu_work"] = m_impl->gpu_work;
    // What the process really mapped, read as it writes its result (cuBLAS and cuDNN load on
    // first use): a case that loaded another cuDNN than the doctor found says so.
    doc["loaded_libraries"] = detail::loaded_libraries_json(detail::read_loaded_libraries());
    if (!inject::active().empty())
        doc["injected"] = inject::active().applied;
    mutate::apply(mutate::active(), doc);
    return doc.dump(2);
}

namespace detail {
namespace {
gpu_control_runner registered_runner = nullptr;
gpu_bus_id_reader registered_bus_id = nullptr;
} // namespace

bool register_gpu_controls(gpu_control_runner runner, gpu_bus_id_reader bus_id) {
    registered_runner = runner;
    registered_bus_id = bus_id;
    return true;
}

status_or<double> control_seconds(backend_kind backend, const std::string& name) {
    const controls::control_spec* spec = controls::find(name);
    if (spec != nullptr && !spec->gpu)
        return controls::run_host(name);
    if (spec == nullptr || backend != backend_kind::cuda || registered_runner == nullptr)
        return status::error(pitfall_error::bad_parameter,
                             "control '" + name + "' cannot run on the " +
                                 std::string(to_string(backend)) + " backend of this build",
                             stage::init);
    return registered_runner(name);
}

std::string current_gpu_bus_id() {
    return registered_bus_id != nullptr ? registered_bus_id() : std::string();
}

void run_controls(context& ctx, double target_seconds) {
    for (const auto& name : ctx.controls()) {
        if (!ctx.control_warm(name))
            ctx.record_control(name, control_seconds(ctx.backend(), name), true);
        if (target_seconds <= 0)
            continue; // before the first sample: warmed up, nothing to match yet
        // A control sample lasts about as long as a sample of the series, so that both see the
        // same share of what slows a host down in bursts: a CPU-bandwidth quota that stops the
        // process 1 ms in every 4 ms slows a 40 ms sample by a third and a 0.3 ms one hardly
        // ever. The runs go on until their time adds up to the sample's, not for a count set
        // from one run's time: a count from the cold first run (page faults, library start)
        // made the control a tenth as long as a 10 ms sample, and blind to the quota.
        // Each control sample is the mean of its runs.
        constexpr int most_runs = 4000;
        double total = 0;
        int runs = 0;
        status failed = status::ok();
        const controls::cpu_wait_clock waited; // GPU controls time the device: no host wait
        const bool host = ctx.backend() == backend_kind::cpu ||
                          (controls::find(name) != nullptr && !controls::find(name)->gpu);
        while (failed.is_ok() && runs < most_runs && (runs == 0 || total < target_seconds)) {
            const status_or<double> one = control_seconds(ctx.backend(), name);
            if (one.is_ok())
                total += one.value();
            else
                failed = one.error();
            ++runs;
        }
        ctx.record_control(
            name, failed.is_ok() ? status_or<double>(total / runs) : status_or<double>(failed),
            false, host ? waited.share() : std::nullopt);
    }
}
} // namespace detail

} // namespace pitfall
