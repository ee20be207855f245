// NVML (libnvidia-ml.so.1, shipped with the driver), opened by name: the devices' state that
// the CUDA runtime does not tell (modes, ECC, remapped rows, throttling, clocks).
#include "probe.hpp"

#include "pitfall/detail/text.hpp"

#include <optional>
#include <string>
#include <utility>

#include <dlfcn.h>

namespace pitfall::probe {
using nlohmann::json;

namespace {

/// The few types used are declared here as NVML's API reference gives them (nvml.h is not
/// part of the toolkit).
struct nvml_memory {
    unsigned long long total, free, used;
};

std::string nvml_error(void* lib, int result) {
    using string_fn = const char* (*)(int);
    if (auto f = reinterpret_cast<string_fn>(dlsym(lib, "nvmlErrorString")))
        if (const char* s = f(result))
            return s;
    return "nvmlReturn " + std::to_string(result);
}

/// One device's handle and the library it came from. Each query is looked up by name: a
/// driver too old for one leaves its fact out, the rest are still asked.
struct nvml_device {
    void* lib;
    void* handle;
    template <class Function> Function query(const char* name) const {
        return reinterpret_cast<Function>(dlsym(lib, name));
    }
};

/// Name, UUID, memory and the number of compute processes.
void add_identity(const nvml_device& device, json& dev) {
    char text[96] = {};
    using text_fn = int (*)(void*, char*, unsigned);
    if (auto f = device.query<text_fn>("nvmlDeviceGetName");
        f && f(device.handle, text, sizeof text) == 0)
        dev["name"] = pitfall::detail::valid_utf8(text);
    if (auto f = device.query<text_fn>("nvmlDeviceGetUUID");
        f && f(device.handle, text, sizeof text) == 0)
        dev["uuid"] = pitfall::detail::valid_utf8(text);
    if (auto f = device.query<int (*)(void*, nvml_memory*)>("nvmlDeviceGetMemoryInfo")) {
        nvml_memory m{};
        if (const int r = f(device.handle, &m); r == 0)
            dev["memory"] = {{"total_bytes", m.total}, {"used_bytes", m.used}};
        else
            dev["memory_error"] = nvml_error(device.lib, r);
    }
    // Only the count: NVML answers NVML_ERROR_INSUFFICIENT_SIZE (7) with the number of compute
    // processes when given no room, so no process-record layout is assumed.
    if (auto f = device.query<int (*)(void*, unsigned*, void*)>(
            "nvmlDeviceGetComputeRunningProcesses_v3")) {
        unsigned n = 0;
        if (const int r = f(device.handle, &n, nullptr); r == 0 || r == 7)
            dev["compute_processes"] = n;
    }
}

/// Compute, MIG, persistence and ECC modes.
void add_modes(const nvml_device& device, json& dev) {
    using int_fn = int (*)(void*, int*);
    using two_int_fn = int (*)(void*, int*, int*);
    if (auto f = device.query<int_fn>("nvmlDeviceGetComputeMode")) {
        int mode = 0;
        if (f(device.handle, &mode) == 0)
            dev["compute_mode"] = mode; // 0 default, 2 prohibited, 3 exclusive process
    }
    if (auto f = device.query<two_int_fn>("nvmlDeviceGetMigMode")) {
        int current = 0, pending = 0;
        if (f(device.handle, &current, &pending) == 0)
            dev["mig_mode"] = {{"current", current}, {"pending", pending}};
    }
    if (auto f = device.query<int_fn>("nvmlDeviceGetPersistenceMode")) {
        int mode = 0;
        if (f(device.handle, &mode) == 0)
            dev["persistence_mode"] = mode != 0;
    }
    if (auto f = device.query<two_int_fn>("nvmlDeviceGetEccMode")) {
        int current = 0, pending = 0;
        if (f(device.handle, &current, &pending) == 0)
            dev["ecc_mode"] = {{"current", current != 0}, {"pending", pending != 0}};
    }
}

/// Retired pages and remapped rows (memory going bad), throttle reasons and SM clocks.
void add_health(const nvml_device& device, json& dev) {
    if (auto f = device.query<int (*)(void*, int*)>("nvmlDeviceGetRetiredPagesPendingStatus")) {
        int pending = 0;
        if (f(device.handle, &pending) == 0)
            dev["retired_pages_pending"] = pending != 0;
    }
    if (auto f = device.query<int (*)(void*, unsigned*, unsigned*, unsigned*, unsigned*)>(
            "nvmlDeviceGetRemappedRows")) {
        unsigned corrected = 0, uncorrected = 0, pending = 0, failed = 0;
        if (f(device.handle, &corrected, &uncorrected, &pending, &failed) == 0)
            dev["remapped_rows"] = {{"correctable", corrected},
                                    {"uncorrectable", uncorrected},
                                    {"pending", pending != 0},
                                    {"failure", failed != 0}};
    }
    if (auto f = device.query<int (*)(void*, unsigned long long*)>(
            "nvmlDeviceGetCurrentClocksThrottleReasons")) {
        unsigned long long reasons = 0;
        if (f(device.handle, &reasons) == 0)
            dev["clocks_throttle_reasons"] = reasons;
    }
    using clock_fn = int (*)(void*, int, unsigned*);
    unsigned mhz = 0;
    if (auto f = device.query<clock_fn>("nvmlDeviceGetClockInfo");
        f && f(device.handle, 1, &mhz) == 0)
        dev["sm_clock_mhz"] = mhz; // 1 = NVML_CLOCK_SM
    if (auto f = device.query<clock_fn>("nvmlDeviceGetMaxClockInfo");
        f && f(device.handle, 1, &mhz) == 0)
        dev["sm_clock_max_mhz"] = mhz;
}

/// Every device NVML counts, each with its index (or the error its handle gave); nothing
/// where NVML cannot count them.
std::optional<json> nvml_devices(void* lib) {
    const auto get_count =
        reinterpret_cast<int (*)(unsigned*)>(dlsym(lib, "nvmlDeviceGetCount_v2"));
    const auto handle =
        reinterpret_cast<int (*)(unsigned, void**)>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
    unsigned count = 0;
    if (get_count == nullptr || handle == nullptr || get_count(&count) != 0)
        return std::nullopt;
    json devices = json::array();
    for (unsigned i = 0; i < count; ++i) {
        void* device = nullptr;
        if (const int r = handle(i, &device); r != 0) {
            devices.push_back({{"index", i}, {"error", nvml_error(lib, r)}});
            continue;
        }
        json dev = json::object();
        add_identity({lib, device}, dev);
        add_modes({lib, device}, dev);
        add_health({lib, device}, dev);
        dev["index"] = i;
        devices.push_back(std::move(dev));
    }
    return devices;
}

} // namespace

json nvml_facts() {
    json n = {{"library", "libnvidia-ml.so.1"}};
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
        n["load_error"] = dl_error_text("libnvidia-ml.so.1 not found");
        return n;
    }
    const auto init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
    n["path"] = library_file(reinterpret_cast<void*>(init));
    if (init == nullptr) {
        n["init_error"] = "symbol nvmlInit_v2 missing";
        return n;
    }
    if (const int r = init(); r != 0) {
        n["init_error"] = nvml_error(lib, r);
        return n;
    }
    char version[96] = {};
    if (auto f =
            reinterpret_cast<int (*)(char*, unsigned)>(dlsym(lib, "nvmlSystemGetDriverVersion"));
        f != nullptr && f(version, sizeof version) == 0)
        n["driver_version"] = pitfall::detail::valid_utf8(version);
    json devices = json::array();
    if (auto counted = nvml_devices(lib)) {
        n["device_count"] = counted->size();
        devices = std::move(*counted);
    }
    n["devices"] = devices;
    if (auto shutdown = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlShutdown")))
        shutdown();
    return n;
}

} // namespace pitfall::probe
