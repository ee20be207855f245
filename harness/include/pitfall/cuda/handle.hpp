// pitfall/cuda/handle.hpp: one CUDA object owned by one C++ object.
//
// The owners of streams, events, graphs, pinned memory and loaded libraries (stream.hpp,
// graph.hpp, pinned_buffer.hpp, library_image.hpp) are built on unique_handle: the object is
// released once, on every path out of the scope that owns it, moved but never copied.
//
// CUDA only: empty where the build has no CUDA (PITFALL_HAS_CUDA 0).
#pragma once

#include "pitfall/backend.hpp"

#if PITFALL_HAS_CUDA
#include <utility>

namespace pitfall::cuda {

/// Owns `Handle` (a CUDA handle or pointer; a value-initialised Handle means none) and calls
/// `Release{}(handle)` once when it goes. Release's error is dropped: a destructor has nobody
/// to tell, and a release that fails after an error of the case's own is not news.
template <class Handle, class Release> class unique_handle {
public:
    unique_handle() = default;
    explicit unique_handle(Handle handle) noexcept : m_handle(handle) {}
    unique_handle(unique_handle&& other) noexcept : m_handle(std::exchange(other.m_handle, {})) {}
    unique_handle& operator=(unique_handle&& other) noexcept {
        if (this != &other) {
            reset();
            m_handle = std::exchange(other.m_handle, {});
        }
        return *this;
    }
    unique_handle(const unique_handle&) = delete;
    unique_handle& operator=(const unique_handle&) = delete;
    ~unique_handle() { reset(); }

    Handle get() const noexcept { return m_handle; }
    explicit operator bool() const noexcept { return m_handle != Handle{}; }
    /// Releases the object now (nothing when there is none).
    void reset() noexcept {
        if (m_handle != Handle{})
            Release{}(std::exchange(m_handle, {}));
    }

private:
    Handle m_handle{};
};

} // namespace pitfall::cuda

#endif // PITFALL_HAS_CUDA
