// The host identity: which machine ran a case, kept apart from the fingerprint. The fingerprint
// names the hardware model and the software (it picks the baseline profile, and two hosts of one
// model hash alike); the host identity names this one machine, and absolute times are judged
// only against a baseline blessed on it. Across hosts of a profile, timed series are judged
// normalised by a calibration control measured in the same process (pitfall/controls.hpp).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace pitfall::runner {

/// The variable that names the host instead (16 hex digits, or any text, which is hashed): for a
/// test, or a host emulated on this one (bench/cross_host.py).
inline constexpr const char* host_id_env = "PITFALL_HOST_ID";

/// {"id": 16 hex digits, "parts": {"machine_id": a hash of /etc/machine-id (never the id
/// itself), "gpu_uuids": NVML's UUIDs of the fingerprint's devices, "cpu": {"model", "stepping",
/// "microcode", "flags": a hash of the flags}}, "from": "machine" | "PITFALL_HOST_ID"}.
/// What cannot be read is left out of the hash and said in "missing". Never fails.
nlohmann::json host_identity(const nlohmann::json& fingerprint);

/// The id recorded in a fingerprint (its host.identity.id), or "" when it has none.
std::string host_id_of(const nlohmann::json& fingerprint);

} // namespace pitfall::runner
