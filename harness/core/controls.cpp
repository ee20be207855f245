// Calibration controls run on the host, and the disturbance watches (pitfall/controls.hpp).
#include "pitfall/controls.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <mutex>
#include <numeric>
#include <sstream>
#include <thread>

namespace pitfall::controls {
using nlohmann::json;

const std::vector<control_spec>& all() {
    static const std::vector<control_spec> list{
        {"host_scalar",
         "a dependent chain of scalar floating-point and integer operations "
         "(one core's clock and pipeline)",
         false},
        {"host_stream",
         "a sum over the next MiB of a 64 MiB ring, more than the last-level cache "
         "of common servers (memory bandwidth, and whoever else draws on it)",
         false},
        {"host_blas", "a 128x128x128 OpenBLAS SGEMM (the vector units and the BLAS kernel type)",
         false},
        {"gpu_launch", "32 empty kernels back to back (launch latency)", true},
        {"gpu_memory", "a kernel copying 64 MiB in device memory (device memory bandwidth)", true},
        {"gpu_fma", "a kernel of dependent FMAs on every SM (device arithmetic and its clock)",
         true},
        {"gpu_h2d", "a 16 MiB copy from pinned host memory to the device (the host link)", true},
    };
    return list;
}

const control_spec* find(const std::string& name) {
    for (const auto& c : all())
        if (name == c.name)
            return &c;
    return nullptr;
}

namespace {
/// /proc/stat's aggregate steal, busy and total jiffies, and procs_running.
struct proc_stat {
    unsigned long long steal = 0;
    unsigned long long total = 0;
    unsigned long long busy = 0; ///< all but idle and iowait
    int running = -1;
};

bool read_proc_stat(proc_stat& out) {
    std::ifstream in("/proc/stat");
    std::string line;
    bool have_cpu = false;
    while (std::getline(in, line)) {
        if (line.rfind("cpu ", 0) == 0) {
            std::istringstream fields(line.substr(4));
            unsigned long long v = 0;
            unsigned long long total = 0;
            unsigned long long idle = 0;
            for (int i = 0; i < 8 && (fields >> v); ++i) {
                total += v; // user nice system idle iowait irq softirq steal
                if (i == 3 || i == 4)
                    idle += v;
                if (i == 7)
                    out.steal = v;
            }
            out.total = total;
            out.busy = total - idle;
            have_cpu = true;
        } else if (line.rfind("procs_running ", 0) == 0) {
            out.running = std::atoi(line.c_str() + 14);
        }
    }
    return have_cpu && out.running >= 0;
}

/// This process's user + system CPU time, all threads, in clock ticks (/proc/self/stat fields
/// 14 and 15, after the command name in parentheses, which may hold spaces).
unsigned long long self_ticks() {
    std::ifstream in("/proc/self/stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto close = text.rfind(')');
    if (close == std::string::npos)
        return 0;
    std::istringstream fields(text.substr(close + 2));
    std::string field;
    unsigned long long utime = 0;
    unsigned long long stime = 0;
    for (int i = 3; i <= 15 && (fields >> field); ++i) {
        if (i == 14)
            utime = std::strtoull(field.c_str(), nullptr, 10);
        if (i == 15)
            stime = std::strtoull(field.c_str(), nullptr, 10);
    }
    return utime + stime;
}

/// The CPU quota of this process's cgroup in cores (cgroup v2 cpu.max, v1 cpu.cfs_quota_us
/// over cpu.cfs_period_us), or 0 where there is none or it cannot be read.
double quota_cores() {
    std::ifstream groups("/proc/self/cgroup");
    std::string line;
    while (std::getline(groups, line)) {
        const auto first = line.find(':');
        const auto second = line.find(':', first + 1);
        if (first == std::string::npos || second == std::string::npos)
            continue;
        const std::string controllers = line.substr(first + 1, second - first - 1);
        const std::string path = line.substr(second + 1);
        if (controllers.empty()) { // v2: "0::/path"
            std::ifstream max("/sys/fs/cgroup" + path + "/cpu.max");
            std::string quota;
            double period = 0;
            if (max >> quota >> period && quota != "max" && period > 0)
                return std::strtod(quota.c_str(), nullptr) / period;
        } else if (("," + controllers + ",").find(",cpu,") != std::string::npos) {
            for (const char* root : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"}) {
                std::ifstream q(std::string(root) + path + "/cpu.cfs_quota_us");
                std::ifstream p(std::string(root) + path + "/cpu.cfs_period_us");
                double quota = 0;
                double period = 0;
                if (q >> quota && p >> period)
                    return quota > 0 && period > 0 ? quota / period : 0.0;
            }
        }
    }
    return 0;
}

/// The BLAS/OpenMP threads the harness gave the case (OPENBLAS_NUM_THREADS), else 1.
int case_threads() {
    const char* text = std::getenv("OPENBLAS_NUM_THREADS");
    const long n = text != nullptr ? std::strtol(text, nullptr, 10) : 0;
    return n >= 1 && n <= 256 ? static_cast<int>(n) : 1;
}
} // namespace

std::optional<double> thread_cpu_wait_seconds() {
    // Three numbers: nanoseconds on a CPU, nanoseconds runnable and waiting, timeslices.
    std::ifstream in("/proc/thread-self/schedstat");
    unsigned long long on_cpu = 0;
    unsigned long long waiting = 0;
    if (!(in >> on_cpu >> waiting))
        return std::nullopt;
    return static_cast<double>(waiting) * 1e-9;
}

void cpu_wait_clock::mark() {
    m_wait0 = thread_cpu_wait_seconds();
    m_start = std::chrono::steady_clock::now();
}

std::optional<double> cpu_wait_clock::share() const {
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count();
    const std::optional<double> wait = thread_cpu_wait_seconds();
    if (!m_wait0 || !wait || !(wall > 0))
        return std::nullopt;
    return std::clamp((*wait - *m_wait0) / wall, 0.0, 1.0);
}

cpu_watch::cpu_watch() {
    proc_stat s;
    m_ok = read_proc_stat(s);
    m_steal0 = s.steal;
    m_total0 = s.total;
    m_busy0 = s.busy;
    m_self0 = self_ticks();
    if (m_ok)
        m_running.push_back(s.running);
}

void cpu_watch::tick() {
    proc_stat s;
    if (m_ok && read_proc_stat(s))
        m_running.push_back(s.running);
}

json cpu_watch::finish() {
    proc_stat s;
    if (!m_ok || !read_proc_stat(s))
        return {{"error", "/proc/stat could not be read"}};
    m_running.push_back(s.running);
    const unsigned long long total = s.total - m_total0;
    const double steal =
        total > 0 ? static_cast<double>(s.steal - m_steal0) / static_cast<double>(total) : 0.0;
    const double mean = std::accumulate(m_running.begin(), m_running.end(), 0.0) /
                        static_cast<double>(m_running.size());
    const unsigned cpus = std::max(1U, std::thread::hardware_concurrency());
    json out = {{"steal_fraction", steal},
                {"run_queue_mean", mean},
                {"run_queue_max", *std::max_element(m_running.begin(), m_running.end())},
                {"cpus", cpus},
                {"ticks", m_running.size()},
                {"threads", case_threads()}};
    // The kernel counts CPU time in ticks (10 ms): over 100 ms or more the estimate is within
    // about 0.2 cores, inside the 0.5-core margin disturbed() leaves; over less it says little.
    const double wall_ticks = static_cast<double>(total) / cpus;
    const unsigned long long self = self_ticks() - m_self0;
    const unsigned long long busy = s.busy - m_busy0;
    if (wall_ticks >= 10)
        out["others_busy_cores"] =
            busy > self ? static_cast<double>(busy - self) / wall_ticks : 0.0;
    if (const double q = quota_cores(); q > 0)
        out["quota_cores"] = q;
    return out;
}

namespace {
// NVML's clock-event reasons that mean the GPU ran slower than it would have: software power
// cap, hardware slowdown, software and hardware thermal slowdown, hardware power brake. Idle,
// application clocks, sync boost and display clocks are not disturbances.
constexpr unsigned long long slowing_reasons = 0x4ULL | 0x8ULL | 0x20ULL | 0x40ULL | 0x80ULL;

std::string throttle_words(unsigned long long reasons) {
    std::string words;
    for (const auto& [bit, name] : {std::pair<unsigned long long, const char*>{0x4, "power cap"},
                                    {0x8, "hardware slowdown"},
                                    {0x20, "software thermal slowdown"},
                                    {0x40, "hardware thermal slowdown"},
                                    {0x80, "power brake"}})
        if ((reasons & bit) != 0)
            words += (words.empty() ? "" : ", ") + std::string(name);
    return words;
}

/// What disturbed the series on the CPU side: steal, a run queue longer than the CPUs, or too
/// few cores left for the case's threads.
void describe_cpu(const json& cpu, std::ostringstream& why) {
    const double steal = cpu.value("steal_fraction", 0.0);
    const double queue = cpu.value("run_queue_mean", 0.0);
    const double cpus = cpu.value("cpus", 0.0);
    if (steal > 0.05)
        why << "CPU steal was " << std::lround(steal * 100) << "% of the series' time";
    if (cpus > 0 && queue > cpus)
        why << (why.tellp() > 0 ? "; " : "") << queue << " runnable tasks on " << cpus
            << " CPUs on average";
    const double threads = cpu.value("threads", 1.0);
    const double others = cpu.value("others_busy_cores", 0.0);
    const double quota = cpu.value("quota_cores", 0.0);
    double left = cpus - others;
    if (quota > 0)
        left = std::min(left, std::ceil(quota));
    if (cpus > 0 && left < threads - 0.5) {
        why << (why.tellp() > 0 ? "; " : "") << "the case runs " << threads << " threads and ";
        if (quota > 0 && std::ceil(quota) <= cpus - others)
            why << "its CPU quota allows " << quota << " cores";
        else
            why << "other processes kept " << others << " of " << cpus << " CPUs busy";
    }
}

/// A GPU that throttled before or after the series, and why.
void describe_gpu(const json& gpu, std::ostringstream& why) {
    for (const char* when : {"before", "after"}) {
        const json state = gpu.is_object() ? gpu.value(when, json::object()) : json::object();
        const json reasons = state.is_object() ? state.value("throttle_reasons", json()) : json();
        // Read, not trusted: a negative or fractional value is no bit mask.
        const bool mask = reasons.is_number_unsigned() ||
                          (reasons.is_number_integer() && reasons.get<long long>() >= 0);
        const unsigned long long bits = mask ? reasons.get<unsigned long long>() : 0;
        if ((bits & slowing_reasons) != 0)
            why << (why.tellp() > 0 ? "; " : "") << "the GPU throttled " << when << " the series ("
                << throttle_words(bits) << ")";
    }
}
} // namespace

std::string disturbed(const json& d) {
    if (!d.is_object())
        return "";
    std::ostringstream why;
    const json cpu = d.value("cpu", json::object());
    if (cpu.is_object())
        describe_cpu(cpu, why);
    describe_gpu(d.value("gpu", json::object()), why);
    return why.str();
}

namespace {
/// NVML, opened by name once per process (it ships with the driver; nvml.h is not part of the
/// toolkit, so the few signatures used are declared as NVML's API reference gives them).
struct nvml_library {
    void* lib = nullptr;
    std::string error;
};

const nvml_library& nvml() {
    static nvml_library n;
    static std::once_flag once;
    std::call_once(once, [] {
        n.lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
        if (n.lib == nullptr) {
            n.error = "libnvidia-ml.so.1 could not be opened";
            return;
        }
        const auto init = reinterpret_cast<int (*)()>(dlsym(n.lib, "nvmlInit_v2"));
        if (init == nullptr || init() != 0) {
            n.error = "nvmlInit_v2 failed";
            n.lib = nullptr;
        }
    });
    return n;
}
} // namespace

json gpu_state(const std::string& pci_bus_id) {
    const nvml_library& n = nvml();
    if (n.lib == nullptr)
        return {{"error", n.error}};
    auto fn = [&](const char* name) { return dlsym(n.lib, name); };
    void* device = nullptr;
    const auto by_bus =
        reinterpret_cast<int (*)(const char*, void**)>(fn("nvmlDeviceGetHandleByPciBusId_v2"));
    if (by_bus == nullptr || by_bus(pci_bus_id.c_str(), &device) != 0)
        return {{"error", "NVML knows no device at PCI bus id " + pci_bus_id}};
    json s = json::object();
    using clock_fn = int (*)(void*, int, unsigned*);
    unsigned value = 0;
    if (auto f = reinterpret_cast<clock_fn>(fn("nvmlDeviceGetClockInfo"))) {
        if (f(device, 1, &value) == 0) // NVML_CLOCK_SM
            s["sm_clock_mhz"] = value;
        if (f(device, 2, &value) == 0) // NVML_CLOCK_MEM
            s["memory_clock_mhz"] = value;
    }
    using reasons_fn = int (*)(void*, unsigned long long*);
    auto reasons = reinterpret_cast<reasons_fn>(fn("nvmlDeviceGetCurrentClocksEventReasons"));
    if (reasons == nullptr)
        reasons = reinterpret_cast<reasons_fn>(fn("nvmlDeviceGetCurrentClocksThrottleReasons"));
    unsigned long long bits = 0;
    if (reasons != nullptr && reasons(device, &bits) == 0)
        s["throttle_reasons"] = bits;
    if (auto f = reinterpret_cast<int (*)(void*, int, unsigned*)>(fn("nvmlDeviceGetTemperature"));
        f != nullptr && f(device, 0, &value) == 0) // NVML_TEMPERATURE_GPU
        s["temperature_c"] = value;
    if (auto f = reinterpret_cast<int (*)(void*, unsigned*)>(fn("nvmlDeviceGetPowerUsage"));
        f != nullptr && f(device, &value) == 0)
        s["power_w"] = value / 1000.0; // milliwatts
    return s;
}

} // namespace pitfall::controls
