// The environment fingerprint, taken once per run: the probe's library facts plus the host
// (CPU, OS, compiler, container) and the environment variables that change CUDA's behaviour.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace pitfall::runner {

/// Runs the probe program (a child process; its output goes to <log_dir>/probe.log) and adds
/// the host facts. Never fails: what could not be learned is recorded with the reason.
nlohmann::json take_fingerprint(const std::string& probe_program, const std::string& log_dir);

/// The flat facts profiles match on: gpu_count, cuda_driver_version, cuda_runtime_version,
/// cudnn_version, compute_capability, device_name, built_with_cuda, os, in_container.
/// Also cuda_driver_major, host_only, cpu_model and cpu_threads.
nlohmann::json fingerprint_summary(const nlohmann::json& fingerprint);

/// A short stable id of a fingerprint summary: absolute times are compared only between runs
/// (or a run and a baseline) that share it.
std::string fingerprint_id(const nlohmann::json& summary);

} // namespace pitfall::runner
