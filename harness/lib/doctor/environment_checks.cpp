// Environment variables that decide which GPUs CUDA sees, how it numbers them, and what every
// CUDA program does.
#include "doctor/registry.hpp"

#include <algorithm>

namespace pitfall::runner::doctor {
namespace {

// ---- CUDA_VISIBLE_DEVICES ----

const rule visible_devices_empty{
    "visible-devices-empty",
    finding_severity::error,
    "cuda.device_visibility.reproduce_empty_visible_devices",
    "cuda-visible-devices",
    {"cudaErrorNoDevice"},
    {"CUDA_VISIBLE_DEVICES is set to an empty string",
     "CUDA sees no device (cudaErrorNoDevice, 100)", "unset it or list devices"},
    {"an empty list is not 'no restriction': CUDA sees no device and answers cudaErrorNoDevice "
     "(100); frameworks may then fall back to the CPU without a word",
     "unset CUDA_VISIBLE_DEVICES, or list the GPUs to use (0,1 or GPU-<uuid>)"}};

const rule visible_devices_invalid{
    "visible-devices-invalid",
    finding_severity::error, // a warning where entries before the bad one stay visible
    "cuda.device_visibility.reproduce_ordinal_past_last",
    "cuda-visible-devices",
    {"cudaErrorNoDevice", "cudaErrorInvalidDevice"},
    {"an entry of CUDA_VISIBLE_DEVICES is malformed or past the last GPU (NVML's count)",
     "CUDA ignores that entry and every one after it", "list only existing indices or UUIDs"},
    {"CUDA reads the list up to the first entry it cannot match and ignores the rest, so a typo "
     "or a stale index silently removes GPUs (cudaErrorNoDevice when none is left)",
     "list only existing indices or UUIDs (nvidia-smi -L)"}};

const rule visible_devices_mig{
    "visible-devices-mig",
    finding_severity::warning,
    "cuda.multi_gpu_distribution.remedy",
    "cuda-visible-devices",
    {},
    {"CUDA_VISIBLE_DEVICES names a MIG- instance", "a process enumerates one MIG instance",
     "expected with MIG"},
    {"a CUDA process enumerates a single MIG instance (the first usable entry): a multi-GPU case "
     "sees one device and memory limits are the slice's, not the GPU's",
     "expected for MIG; list one MIG UUID per process"}};

/// The comma-separated entries, empty ones included ("0,,1" has three).
std::vector<std::string> entries_of(const std::string& list) {
    std::vector<std::string> entries;
    for (std::size_t start = 0; start <= list.size();) {
        const std::size_t comma = std::min(list.find(',', start), list.size());
        entries.push_back(list.substr(start, comma - start));
        start = comma + 1;
    }
    return entries;
}

/// Why CUDA cannot match an entry: neither an index nor a UUID, or an index past the last GPU
/// NVML counts; "" where it can.
std::string entry_problem(const std::string& entry, const facts& f) {
    const bool index = !entry.empty() && entry.find_first_not_of("0123456789") == std::string::npos;
    const bool uuid = entry.rfind("GPU-", 0) == 0 || entry.rfind("MIG-", 0) == 0;
    if (!index && !uuid)
        return "'" + entry + "' is neither a device index nor a GPU-/MIG- UUID";
    if (index && f.physical_devices && entry.size() < 10 &&
        std::stoll(entry) >= *f.physical_devices)
        return "index " + entry + " is past the last GPU (NVML counts " +
               std::to_string(*f.physical_devices) + ")";
    return "";
}

/// The first entry CUDA cannot match hides it and every entry after it: every GPU where it is
/// the first.
finding hidden_from(std::size_t position, const std::string& problem, std::string observed) {
    const bool first = position == 0;
    observed.append("; ").append(problem);
    finding hidden = visible_devices_invalid.found(
        "CUDA_VISIBLE_DEVICES hides " +
            std::string(first ? "every GPU"
                              : "the GPUs from entry " + std::to_string(position + 1) + " on") +
            ": " + problem,
        std::move(observed));
    if (!first)
        hidden.severity = finding_severity::warning;
    return hidden;
}

/// CUDA_VISIBLE_DEVICES: empty hides every device; CUDA stops at the first entry it cannot
/// match, so an index past the last GPU hides it and everything after it.
void check_visible_devices(const facts& f, findings& out) {
    const auto value = f.env("CUDA_VISIBLE_DEVICES");
    if (!value)
        return;
    const std::string observed = "CUDA_VISIBLE_DEVICES='" + *value + "'";
    if (value->find_first_not_of(" \t") == std::string::npos) {
        out.push_back(visible_devices_empty.found(
            "CUDA_VISIBLE_DEVICES is set but empty: it hides every GPU",
            observed + (f.cuda_error.empty() ? "" : "; cudaGetDeviceCount: " + f.cuda_error)));
        return;
    }
    const std::vector<std::string> entries = entries_of(*value);
    bool mig = false; // among the entries CUDA reads
    for (std::size_t i = 0; i < entries.size(); ++i) {
        mig = mig || entries[i].rfind("MIG-", 0) == 0;
        if (const std::string problem = entry_problem(entries[i], f); !problem.empty()) {
            out.push_back(hidden_from(i, problem, observed));
            break;
        }
    }
    if (mig)
        out.push_back(visible_devices_mig.found(
            "CUDA_VISIBLE_DEVICES names a MIG instance: this process sees one GPU slice",
            observed));
}

// ---- CUDA_DEVICE_ORDER ----

const rule device_order{
    "device-order",
    finding_severity::warning,
    "cuda.device_visibility.remedy_explicit_device",
    "cuda-device-order",
    {},
    {"two or more GPUs and CUDA_DEVICE_ORDER is not PCI_BUS_ID",
     "CUDA's device numbers differ from nvidia-smi's", "export CUDA_DEVICE_ORDER=PCI_BUS_ID"},
    {"with mixed GPUs CUDA's device 0 may not be nvidia-smi's GPU 0: CUDA_VISIBLE_DEVICES "
     "indices and per-device monitoring then name different GPUs",
     "export CUDA_DEVICE_ORDER=PCI_BUS_ID"}};

void check_device_order(const facts& f, findings& out) {
    const long long gpus =
        f.physical_devices.value_or(static_cast<long long>(f.device_names.size()));
    if (gpus < 2)
        return;
    const auto order = f.env("CUDA_DEVICE_ORDER");
    if (order && *order == "PCI_BUS_ID")
        return;
    out.push_back(device_order.found(
        "CUDA numbers these " + std::to_string(gpus) + " GPUs fastest first, nvidia-smi by PCI bus",
        "CUDA_DEVICE_ORDER " +
            (order ? "= '" + *order + "'" : std::string("unset (FASTEST_FIRST)"))));
}

// ---- variables that alter every CUDA program ----

const rule cuda_env{
    "cuda-env",
    finding_severity::warning,
    no_reproducing_case,
    "environment-variables",
    {},
    {"DCGM's list of variables that slow or alter CUDA (injection, profiling, core dumps) and "
     "CUDA_LAUNCH_BLOCKING, CUDA_FORCE_PTX_JIT, CUDA_DISABLE_PTX_JIT",
     "set, they change outcomes and timings of every CUDA program", "unset them for measurements"},
    {"injection, profiling, core dumps on exceptions, synchronous launches and forced or "
     "disabled PTX JIT change what every CUDA program does and how long it takes: timings and "
     "outcomes are not this machine's normal",
     "unset them for measurements (keep them for debugging)"}};

/// Variables that slow or alter every CUDA program (DCGM's "Environmental Variables" list, plus
/// the JIT and synchronisation switches): set, they change what the cases measure.
void check_cuda_env(const facts& f, findings& out) {
    std::string set;
    for (const char* name :
         {"NSIGHT_CUDA_DEBUGGER", "CUDA_INJECTION32_PATH", "CUDA_INJECTION64_PATH",
          "CUDA_AUTO_BOOST", "CUDA_ENABLE_COREDUMP_ON_EXCEPTION", "CUDA_COREDUMP_FILE",
          "CUDA_DEVICE_WAITS_ON_EXCEPTION", "CUDA_PROFILE", "COMPUTE_PROFILE", "OPENCL_PROFILE",
          "CUDA_LAUNCH_BLOCKING", "CUDA_FORCE_PTX_JIT", "CUDA_DISABLE_PTX_JIT"})
        if (const auto value = f.env(name))
            set += (set.empty() ? "" : ", ") + std::string(name) + "=" + *value;
    if (set.empty())
        return;
    const auto comma = set.find(',');
    out.push_back(cuda_env.found("variables that slow or alter CUDA work are set (" +
                                     set.substr(0, comma) +
                                     (comma == std::string::npos ? ")" : ", ...)"),
                                 set));
}

} // namespace

check visible_devices_check() {
    return {check_visible_devices,
            {&visible_devices_empty, &visible_devices_invalid, &visible_devices_mig}};
}

check device_order_check() {
    return {check_device_order, {&device_order}};
}

check cuda_env_check() {
    return {check_cuda_env, {&cuda_env}};
}

} // namespace pitfall::runner::doctor
