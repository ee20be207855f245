// The environment fingerprint, taken once per run: the probe's library facts plus the host
// (CPU, OS, compiler, container) and the environment variables that change CUDA's behaviour.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

namespace pitfall::runner {

/// Runs the probe program (a child process; its output goes to <log_dir>/probe.log) and adds
/// the host facts. Never fails: what could not be learned is recorded with the reason.
/// With `reuse_probe`, a probe answer kept by an earlier run is used instead of starting the
/// probe, while it is valid (probe_cache_file): CTest runs `pitfall run` once per case, and the
/// probe (which loads cuBLAS and cuDNN to ask their versions) costs more than a small case.
/// The fingerprint's "probe" says which: {"reused": bool, "taken_at", "age_seconds", "cache"}.
/// "<size>:<mtime s>.<ns>:<inode>" of a file, "" where it cannot be read: whether a file is
/// still the one seen before (a kept answer's libraries, a program a build may have remade).
std::string file_stamp(const std::string& path);

/// `probe_seconds`: how long the probe may take (a GPU library whose load hangs hangs it).
nlohmann::json take_fingerprint(const std::string& probe_program, const std::string& log_dir,
                                bool reuse_probe = false, double probe_seconds = 30);

/// The folder the runs of one user share on this machine (kept probe answers, the case lock):
/// PITFALL_RUNTIME_DIR, else $XDG_RUNTIME_DIR/pitfall, else /tmp/pitfall-<uid>; made if
/// needed, and used only when it is the user's own and closed to others. "" with `why` set
/// when there is none.
std::string shared_folder(std::string& why);

/// Where a probe answer for `probe_program` under this environment is kept: a file of
/// shared_folder named by a hash of the probe program (path, inode, size, modification time),
/// the user and the values of the variables that change what the probe sees.
/// PITFALL_PROBE_CACHE=off keeps nothing. "" with `why` set when there is none.
std::string probe_cache_file(const std::string& probe_program, std::string& why);

/// build_images() of `programs` (scenario name -> program path), kept in shared_folder beside
/// the probe's answer: every run records the build's SASS and PTX, and a CUDA build's programs
/// carry megabytes of fatbins each, so they are read again only when one of them changed (its
/// size, modification time or inode). PITFALL_PROBE_CACHE=off reads them every time.
nlohmann::json kept_build_images(const std::vector<std::pair<std::string, std::string>>& programs);

/// Seconds a kept probe answer stays valid. It is also dropped after a reboot (the kernel's
/// boot id) and when a library file it names changed (size or modification time).
constexpr double probe_cache_seconds = 600;

/// The flat facts profiles match on: gpu_count, cuda_driver_version, cuda_runtime_version,
/// cudnn_version, compute_capability, device_name, built_with_cuda, os, in_container.
/// Also cuda_driver_major, host_only, cpu_model and cpu_threads.
nlohmann::json fingerprint_summary(const nlohmann::json& fingerprint);

/// A short stable id of a fingerprint summary: absolute times are compared only between runs
/// (or a run and a baseline) that share it.
std::string fingerprint_id(const nlohmann::json& summary);

} // namespace pitfall::runner
