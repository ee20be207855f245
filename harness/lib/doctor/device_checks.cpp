// The GPUs themselves: NVML's view of each (memory already held, compute mode, MIG,
// persistence, ECC, clocks) and whether kernels may touch pageable host memory.
#include "doctor/registry.hpp"

#include <sstream>
#include <utility>

namespace pitfall::runner::doctor {
namespace {

const rule no_nvml{
    "no-nvml",
    finding_severity::warning,
    no_reproducing_case,
    "nvml",
    {},
    {"the driver is here but NVML cannot be opened or initialised",
     "the GPUs' state cannot be read", "install the driver's NVML library"},
    {"memory held by other processes, compute and MIG modes, ECC and clocks cannot be checked; "
     "NVML ships with the driver, so a missing one often means a partial driver install or a "
     "container without the toolkit",
     "install the driver's NVML library of the same version as libcuda"}};

const rule memory_in_use{
    "memory-in-use",
    finding_severity::warning,
    "cuda.memory_growth.reproduce",
    "other-processes",
    {},
    {"NVML: more than a tenth of a GPU's memory used, or compute processes running",
     "cases sized by total memory fail sooner; timings share the GPU", "stop the other processes"},
    {"cases that size their data by the GPU's total memory meet cudaErrorMemoryAllocation "
     "sooner, and timings share the GPU",
     "stop the other processes (nvidia-smi lists them) or give pitfall a GPU of its own"}};

const rule compute_mode{
    "compute-mode",
    finding_severity::warning, // an error where the mode refuses this process
    "cuda.memory_growth.second_process",
    "compute-mode",
    {},
    {"NVML: compute mode other than Default",
     "Prohibited allows no context; exclusive modes allow one process", "nvidia-smi -c DEFAULT"},
    {"one process at a time: a second process (memory_growth's helper, a parallel case) fails "
     "with cudaErrorDevicesUnavailable",
     "nvidia-smi -c DEFAULT (as root) for shared use"}};

const rule mig_mode{
    "mig-mode",
    finding_severity::warning,
    "cuda.device_visibility.helper_count_devices",
    "mig-mode",
    {},
    {"NVML: MIG mode on or a change pending", "CUDA sees MIG instances only",
     "name a MIG instance, or disable MIG"},
    {"with MIG on, CUDA sees MIG instances, not the whole GPU: name one with "
     "CUDA_VISIBLE_DEVICES=MIG-<uuid>; memory and SM counts are the slice's",
     "expected on a MIG-partitioned GPU; otherwise nvidia-smi -mig 0 and a GPU reset"}};

const rule persistence_off{
    "persistence-off",
    finding_severity::warning,
    "cuda.batch_size_one.reproduce",
    "persistence-mode",
    {},
    {"NVML: persistence mode off", "each process pays driver initialisation",
     "run nvidia-persistenced"},
    {"the driver tears the GPU's state down when no process holds it, so every case's first CUDA "
     "call pays its initialisation (up to seconds) and short timings include it",
     "run nvidia-persistenced (or nvidia-smi -pm 1 as root)"}};

const rule memory_errors{
    "memory-errors",
    finding_severity::warning, // an error after uncorrectable errors
    no_reproducing_case,
    "ecc-and-retired-pages",
    {},
    {"NVML: retired pages pending, rows waiting to be remapped, or a remap failure",
     "uncorrectable memory errors; results cannot be trusted until a reset",
     "reset the GPU, or replace it after a remap failure"},
    {"memory rows were marked for remapping after errors; the remap takes effect at the next GPU "
     "reset",
     "drain the GPU and reset it (nvidia-smi -r) or reboot"}};

const rule clocks_slowed{
    "clocks-slowed",
    finding_severity::warning,
    no_reproducing_case,
    "clock-event-reasons",
    {},
    {"NVML: HW slowdown, thermal or power-brake throttle reasons",
     "timings are slower than the GPU's normal", "fix cooling or power first"},
    {"timings taken now are slower than this GPU's normal: a timing verdict would blame the code "
     "for the machine",
     "check cooling and power (nvidia-smi -q -d PERFORMANCE) before timing anything"}};

void check_memory_in_use(const json& dev, const std::string& name, findings& out) {
    const json& memory = at(dev, "memory");
    const auto total = integer(at(memory, "total_bytes"));
    const auto used = integer(at(memory, "used_bytes"));
    const auto processes = integer(at(dev, "compute_processes"));
    if (!total || !used || *total <= 0 || (*used * 10 <= *total && processes.value_or(0) <= 0))
        return;
    std::ostringstream observed;
    observed << (*used >> 20) << " MiB of " << (*total >> 20) << " MiB in use";
    if (processes)
        observed << " by " << *processes << " compute process(es)";
    out.push_back(memory_in_use.found(name + ": memory is already held by other processes (" +
                                          observed.str() + ")",
                                      observed.str()));
}

void check_compute_mode(const json& dev, const std::string& name, findings& out) {
    const auto mode = integer(at(dev, "compute_mode"));
    if (!mode || *mode == 0)
        return;
    const long long processes = integer(at(dev, "compute_processes")).value_or(0);
    // Exclusive_Process with a process already there refuses this one outright.
    const bool refused = *mode == 2 || (*mode == 3 && processes > 0);
    const std::string mode_name = *mode == 2   ? "Prohibited"
                                  : *mode == 3 ? "Exclusive_Process"
                                               : "Exclusive_Thread";
    finding found =
        compute_mode.found(name + ": compute mode " + mode_name +
                               (refused && *mode == 3 ? ", and another process holds the GPU" : ""),
                           "nvmlDeviceGetComputeMode: " + std::to_string(*mode) +
                               "; compute processes: " + std::to_string(processes));
    if (refused)
        found.severity = finding_severity::error;
    if (*mode == 2)
        found.why = "no process may create a CUDA context on this GPU";
    out.push_back(std::move(found));
}

void check_mig_mode(const json& dev, const std::string& name, findings& out) {
    const json& mig = at(dev, "mig_mode");
    const bool on = integer(at(mig, "current")).value_or(0) == 1;
    if (!on && integer(at(mig, "pending")) == integer(at(mig, "current")))
        return;
    out.push_back(mig_mode.found(name + ": MIG mode is " + (on ? "on" : "changing (reset pending)"),
                                 "nvmlDeviceGetMigMode: current " +
                                     std::to_string(integer(at(mig, "current")).value_or(-1)) +
                                     ", pending " +
                                     std::to_string(integer(at(mig, "pending")).value_or(-1))));
}

void check_persistence(const json& dev, const std::string& name, findings& out) {
    if (at(dev, "persistence_mode").is_boolean() && !flag(at(dev, "persistence_mode")))
        out.push_back(persistence_off.found(name + ": persistence mode is off",
                                            "nvmlDeviceGetPersistenceMode: disabled"));
}

/// A remap failure or a page retirement pending after uncorrectable errors stops trust in the
/// GPU; a pending row remapping alone lets work go on until a reset applies it.
void check_memory_errors(const json& dev, const std::string& name, findings& out) {
    const json& rows = at(dev, "remapped_rows");
    const bool failed = flag(at(rows, "failure"));
    const bool retiring = flag(at(dev, "retired_pages_pending"));
    const bool remap_pending = flag(at(rows, "pending"));
    if (!failed && !retiring && !remap_pending)
        return;
    finding found =
        memory_errors.found(name + (failed     ? ": row remapping failed"
                                    : retiring ? ": memory pages wait to be retired (reset needed)"
                                               : ": a row remapping waits for a GPU reset"),
                            std::string("retired pages pending: ") + (retiring ? "yes" : "no") +
                                "; remapped rows pending: " + (remap_pending ? "yes" : "no") +
                                "; remap failure: " + (failed ? "yes" : "no"));
    if (failed || retiring) {
        found.severity = finding_severity::error;
        found.why = "uncorrectable memory errors were found: until a reset retires the pages, "
                    "results on this GPU cannot be trusted";
    }
    if (failed)
        found.fix = "take the GPU out of service and have it replaced";
    out.push_back(std::move(found));
}

void check_clocks(const json& dev, const std::string& name, findings& out) {
    const auto reasons = integer(at(dev, "clocks_throttle_reasons"));
    if (!reasons)
        return;
    // nvml.h's clocks event reasons: 0x8 HW slowdown, 0x20 SW thermal, 0x40 HW thermal,
    // 0x80 HW power brake. Idle (0x1) and the power cap (0x4) are normal at rest.
    std::string names;
    for (const auto& [bit, what] : {std::pair<long long, const char*>{0x8, "HW slowdown"},
                                    {0x20, "SW thermal slowdown"},
                                    {0x40, "HW thermal slowdown"},
                                    {0x80, "HW power brake"}})
        if ((*reasons & bit) != 0)
            names += (names.empty() ? "" : ", ") + std::string(what);
    if (names.empty())
        return;
    out.push_back(clocks_slowed.found(
        name + ": clocks are being slowed (" + names + ")",
        "nvmlDeviceGetCurrentClocksThrottleReasons: " + std::to_string(*reasons) + "; SM clock " +
            std::to_string(integer(at(dev, "sm_clock_mhz")).value_or(0)) + " of " +
            std::to_string(integer(at(dev, "sm_clock_max_mhz")).value_or(0)) + " MHz"));
}

/// NVML's view of one GPU: memory already held, compute mode, MIG, persistence, ECC, clocks.
void check_nvml_device(const json& dev, findings& out) {
    const std::string name =
        text(at(dev, "name"), "GPU " + std::to_string(integer(at(dev, "index")).value_or(0)));
    check_memory_in_use(dev, name, out);
    check_compute_mode(dev, name, out);
    check_mig_mode(dev, name, out);
    check_persistence(dev, name, out);
    check_memory_errors(dev, name, out);
    check_clocks(dev, name, out);
}

void check_nvml(const facts& f, findings& out) {
    if (!f.nvml.is_object())
        return;
    if (f.nvml.contains("load_error") || f.nvml.contains("init_error")) {
        if (f.cu_init != "CUDA_SUCCESS")
            return; // no working driver: no-driver, stub-driver or no-device says why
        out.push_back(
            no_nvml.found("NVML (libnvidia-ml.so.1) could not be used: the GPUs' state is unknown",
                          text(at(f.nvml, "load_error"), text(at(f.nvml, "init_error")))));
        return;
    }
    if (const json& devices = at(f.nvml, "devices"); devices.is_array())
        for (const auto& dev : devices)
            check_nvml_device(dev, out);
}

// ---- pageable memory ----

const rule pageable_memory{"pageable-memory",
                           finding_severity::ok,
                           "cuda.host_only_custom_op.reproduce_kernel_host_data",
                           "pageable-memory-access",
                           {},
                           {"cudaDevAttrPageableMemoryAccess of each device (HMM/ATS)",
                            "whether a host pointer in a kernel works or faults", ""},
                           {"", ""}}; // why: what a host pointer does on this device

void check_pageable_memory(const facts& f, findings& out) {
    const json& devices = at(f.cuda, "devices");
    if (!devices.is_array())
        return;
    for (const auto& d : devices) {
        const json& pageable = at(d, "pageable_memory_access");
        if (!pageable.is_boolean())
            continue;
        const bool yes = pageable.get<bool>();
        finding found = pageable_memory.found(
            text(at(d, "name"), "device") +
                (yes ? ": kernels may read pageable host memory (HMM/ATS)"
                     : ": kernels cannot touch pageable host memory (no HMM/ATS)"),
            "cudaDevAttrPageableMemoryAccess = " + std::string(yes ? "1" : "0"));
        found.why = yes ? "a host pointer passed to a kernel works here but faults "
                          "(cudaErrorIllegalAddress) on machines without HMM/ATS"
                        : "a host pointer passed to a kernel faults with cudaErrorIllegalAddress, "
                          "a sticky error that ends the process's CUDA";
        out.push_back(std::move(found));
    }
}

} // namespace

check nvml_check() {
    return {check_nvml,
            {&no_nvml, &memory_in_use, &compute_mode, &mig_mode, &persistence_off, &memory_errors,
             &clocks_slowed}};
}

check pageable_memory_check() {
    return {check_pageable_memory, {&pageable_memory}};
}

} // namespace pitfall::runner::doctor
