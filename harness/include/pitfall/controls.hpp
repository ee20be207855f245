// pitfall/controls.hpp: calibration controls, and what disturbed a timed series.
//
// A control is a small fixed piece of work that stresses one resource (scalar compute, memory
// bandwidth, BLAS, kernel launches, device memory, device arithmetic, PCIe). The SDK times the
// controls a variant's series are bound by (scenario.json "timings": {"<series>": {"bound_by":
// {"cpu": "host_scalar", "cuda": "gpu_launch"}, "why": "..."}}) interleaved with the series'
// samples, in the same process. A series divided by its control's median says how fast the code
// is *for this machine*: two hosts of one model, or one host busier than another, differ in both
// alike, and the quotient is what a baseline blessed on one judges on the other.
//
// Alongside, each series records what may have disturbed it: the CPU's steal time and run queue
// during the series, and (CUDA) the GPU's clocks, throttle reasons, temperature and power before
// and after it. A series measured while the GPU throttled, or while steal or load was high, is
// judged AMBIGUOUS, saying why, never a regression.
//
// On the host, each sample and each control sample also records the share of its time the
// timing thread spent runnable but kept off a CPU (the kernel's run delay: a CPU-bandwidth quota
// holding the process back, or another task on its core). The normalised twin is judged with
// that wait taken out of both, so a quota that stops the process for 2 ms in some samples and
// not in others moves neither; the absolute series keeps its wall time, and a wait above 5% is
// evidence of disturbance there.
#pragma once

#include "pitfall/memory.hpp"
#include "pitfall/status.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace pitfall::controls {

/// A control: its name (as scenario.json writes it), what it measures, and whether it needs a
/// GPU (measured only by CUDA cases).
struct control_spec {
    const char* name;
    const char* measures;
    bool gpu;
};

/// Every control, host ones first: host_scalar, host_stream, host_blas, gpu_launch, gpu_memory,
/// gpu_fma, gpu_h2d. A run of one is short (tens of microseconds on the host); the SDK repeats
/// it so that a control sample lasts as long as the series' sample beside it.
const std::vector<control_spec>& all();
/// The control named so, or null.
const control_spec* find(const std::string& name);

/// Seconds of one run of a host control (host_scalar, host_stream, host_blas). The first call
/// of each in a process sets up its buffers; the caller runs one untimed call first.
status_or<double> run_host(const std::string& name);

/// Seconds the calling thread has spent runnable but kept off a CPU since it started (the
/// second field of /proc/thread-self/schedstat, the kernel's run delay); nullopt where the
/// kernel does not say (built without schedstats, or no /proc).
std::optional<double> thread_cpu_wait_seconds();

/// The share of wall time the calling thread spent waiting for a CPU, between mark() and
/// share(): a quota's throttled periods, or another task on the thread's core.
class cpu_wait_clock {
public:
    cpu_wait_clock() { mark(); }
    void mark();
    /// wait / wall since the last mark, in [0, 1]; nullopt where the wait cannot be read or no
    /// time has passed.
    std::optional<double> share() const;

private:
    std::chrono::steady_clock::time_point m_start;
    std::optional<double> m_wait0;
};

/// A run's view of the CPU's disturbance: steal time and runnable tasks (/proc/stat), sampled
/// at the start, after every sample and at the end of a series.
class cpu_watch {
public:
    cpu_watch();
    void tick();
    /// {"steal_fraction", "run_queue_mean", "run_queue_max", "cpus", "ticks", "threads",
    /// "others_busy_cores" (CPU time of every other process over the series, in cores; only
    /// over series of 0.1 s or more, the kernel counting in 10 ms ticks), "quota_cores" (the
    /// process's cgroup CPU quota, where it has one)}; where /proc/stat cannot be read,
    /// {"error"}.
    nlohmann::json finish();

private:
    bool m_ok = false;
    unsigned long long m_steal0 = 0;
    unsigned long long m_total0 = 0;
    unsigned long long m_busy0 = 0;
    unsigned long long m_self0 = 0;
    std::vector<int> m_running;
};

/// Whether a series' recorded disturbance makes its times unfit to judge, and why ("" when
/// not): CPU steal above 5% of the series' time; more runnable tasks than CPUs on average; fewer
/// cores left to the case than its threads need (other processes' CPU time, or its cgroup's CPU
/// quota in whole cores, leaving less than threads - 0.5: a one-thread case beside a busy
/// neighbour on two cores is judged, a two-thread one is not); or a GPU throttle reason other
/// than idle, application clocks, sync boost or display clocks.
std::string disturbed(const nlohmann::json& disturbance);

/// The GPU's state through NVML (opened by name): {"sm_clock_mhz", "memory_clock_mhz",
/// "throttle_reasons", "temperature_c", "power_w"} of the device at `pci_bus_id`
/// ("0000:3B:00.0"), or {"error"} where NVML or the device cannot answer.
nlohmann::json gpu_state(const std::string& pci_bus_id);

} // namespace pitfall::controls

namespace pitfall::detail {
/// Seconds of one run of a control on `backend`: host controls anywhere, GPU controls only on
/// CUDA (the kernels are registered by the CUDA backend's header, compiled into the scenario).
status_or<double> control_seconds(backend_kind backend, const std::string& name);
/// The PCI bus id of the current CUDA device ("" where there is none): NVML's key to it.
std::string current_gpu_bus_id();
using gpu_control_runner = status_or<double> (*)(const std::string& name);
using gpu_bus_id_reader = std::string (*)();
/// Called once by the CUDA backend's header (a static initialiser): true.
bool register_gpu_controls(gpu_control_runner runner, gpu_bus_id_reader bus_id);
} // namespace pitfall::detail
