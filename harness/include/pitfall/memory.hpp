// pitfall/memory.hpp: the allocation layer every backend allocates through.
//
// It counts current and peak bytes and honours a budget from the environment,
// PITFALL_DEVICE_MEMORY_LIMIT (bytes, or with a K/M/G/T suffix, powers of 1024), so an
// out-of-memory scenario fails at the same size on a 16 GiB card, an 80 GiB card and the CPU.
// The CPU backend's "device" is host memory: the same budget applies there, and an over-budget
// request fails as the host would (`std::bad_alloc`).
//
//   auto& mem = pitfall::memory_tracker::for_backend(pitfall::backend_kind::cuda);
//   if (auto s = mem.reserve(bytes); !s.is_ok()) return s;   // over budget: an OOM status
#pragma once

#include "pitfall/status.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pitfall {

enum class backend_kind { cpu, cuda };
std::string_view to_string(backend_kind kind);
std::optional<backend_kind> backend_from_string(std::string_view text);

/// "512M" -> 536870912; nullopt for anything malformed (the caller names the variable).
std::optional<std::uint64_t> parse_byte_size(std::string_view text);

/// Counts the bytes one backend holds. Not thread-safe: scenarios allocate from one thread.
class memory_tracker {
public:
    /// The tracker of a backend, its budget read once from PITFALL_DEVICE_MEMORY_LIMIT.
    static memory_tracker& for_backend(backend_kind kind);

    /// Checks the budget and counts `bytes` as held; an over-budget request returns the
    /// backend's own out-of-memory error (cudaErrorMemoryAllocation / std::bad_alloc).
    status reserve(std::uint64_t bytes);
    /// Gives back bytes taken by a successful reserve().
    void release(std::uint64_t bytes);
    /// Records an allocation the library itself refused (real OOM), for the counters.
    void count_failure() { ++m_failed; }

    std::uint64_t current() const { return m_current; }
    std::uint64_t peak() const { return m_peak; }
    std::optional<std::uint64_t> limit() const { return m_limit; }
    std::uint64_t allocations() const { return m_allocations; }
    std::uint64_t failed() const { return m_failed; }
    /// Starts the peak again from the current holding (between phases of a case).
    void reset_peak() { m_peak = m_current; }

    explicit memory_tracker(backend_kind kind, std::optional<std::uint64_t> limit);

private:
    backend_kind m_kind;
    std::optional<std::uint64_t> m_limit;
    std::uint64_t m_current = 0;
    std::uint64_t m_peak = 0;
    std::uint64_t m_allocations = 0;
    std::uint64_t m_failed = 0;
};

/// The budget variable's name, for messages.
inline constexpr const char* device_memory_limit_env = "PITFALL_DEVICE_MEMORY_LIMIT";

/// Reads and validates PITFALL_DEVICE_MEMORY_LIMIT: nullopt when unset; an error status naming
/// the variable when it is set but malformed.
status_or<std::optional<std::uint64_t>> device_memory_limit_from_env();

} // namespace pitfall
