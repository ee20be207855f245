// int32_offset_overflow: element offsets computed in 32 bits wrap past 2^31 elements.
//
// What
//   A rows x cols byte tensor with more than 2^31 elements (default 32784 x 65536 = 2^31 +
//   2^20: row 32768 starts exactly at 2^31).
//   A kernel writes a few probe elements in its last `probe_rows` rows at the offset
//   row * cols + col, computed in 32-bit int as `int idx = row * cols + col` does on the GPU;
//   the probes are then read back through 64-bit offsets and compared. Two variants:
//     reproduce_int32_offsets  the offset in 32 bits (two's-complement wrap, written out
//                              explicitly: uint32 arithmetic, then the conversion to int32,
//                              so there is no signed-overflow undefined behaviour).
//     remedy_int64_offsets     the offset in int64_t.
//
// Why it fails
//   INT32_MAX is 2^31 - 1. Past it, a 32-bit offset wraps to 2^32 less: row * cols + col =
//   2^31 + d becomes -2^31 + d, an address 2 GiB BEFORE the tensor's base (and past 2^32 it
//   wraps back into the tensor, onto the wrong element). On the GPU the write leaves the
//   allocation: a kernel "load or store instruction on an invalid memory address"
//   (cudaErrorIllegalAddress, 700), reported at the next synchronising call and STICKY
//   (driver_types.h; docs/cuda-rules.md#sticky-errors), unless the wrapped address happens to
//   be another live allocation, which is then silently corrupted. The elements themselves are
//   never written either way.
//   On the CPU the same addresses would be undefined behaviour; instead the tensor is placed
//   2 GiB into one MAP_NORESERVE reservation, so every wrapped offset lands inside memory this
//   program owns and the wrong place can be measured: only the pages touched become memory
//   (a few MiB), so the > 2^31-element tensor costs nothing.
//
// Expected per backend
//   cpu   reproduce_int32_offsets: ok (nothing faults); wrong_elements = the probes whose
//         offset is > INT32_MAX (defaults: rows 32752-32783 probed, 8 columns each; rows
//         32768 on = 128 probes; row 32767's last byte is offset INT32_MAX itself and is
//         right), first_wrong_offset = 2147483648 (row 32768, column 0),
//         writes_outside_tensor = the same 128 (all 2 GiB before the base).
//         remedy_int64_offsets: ok, wrong_elements = 0.
//   cuda  reproduce_int32_offsets: cudaErrorIllegalAddress, sticky, at the synchronize after
//         the write kernel (CUDA Runtime API, cudaError: cudaErrorIllegalAddress; the 2.15 GB
//         allocation needs a GPU with that much free memory, else cudaErrorMemoryAllocation
//         at alloc; the same 256 wrapped writes in a standalone kernel on an H200, driver
//         580.159.04, CUDA 13.0, 2026-11-26: cudaErrorIllegalAddress at the synchronize).
//         remedy_int64_offsets: ok, wrong_elements = 0.
//         Here (no driver): UNSUPPORTED, cudaErrorInsufficientDriver at init.
//
// Remedy
//   Compute offsets in 64 bits: int64_t / size_t index types, and promote before the multiply
//   (static_cast<int64_t>(row) * cols), or choose a 32-bit kernel only when numel <= INT32_MAX
//   (the "can use int32 index" dual path frameworks use).
//
// Evidence
//   microsoft/onnxruntime#28107 (Gather: int32 input_index overflow, illegal memory access),
//   flashinfer-ai/flashinfer#3391 (RMSNorm fails just above 2^31 elements),
//   NVIDIA/TransformerEngine#2918 (numel stored in int32, illegal memory access),
//   flagos-ai/FlagGems#4156 (int32 offset negative past 2^31, lands before the base).
#include "pitfall/scenario.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace int32_offset_overflow {

/// The offset a 32-bit `int idx = row * cols + col` yields: the exact value modulo 2^32, read
/// as two's complement. Unsigned arithmetic wraps by definition; the conversion to int32_t is
/// modulo 2^32 in GCC, Clang and NVCC (and in C++20 by the standard).
PITFALL_HOST_DEVICE inline std::int64_t offset_int32(std::uint32_t row, std::uint32_t cols,
                                                     std::uint32_t col) {
    return static_cast<std::int32_t>(row * cols + col);
}
PITFALL_HOST_DEVICE inline std::int64_t offset_int64(std::uint32_t row, std::uint32_t cols,
                                                     std::uint32_t col) {
    return static_cast<std::int64_t>(row) * cols + col;
}

/// The value probe k holds: never 0, so an unwritten element is told apart.
PITFALL_HOST_DEVICE inline unsigned char probe_value(std::size_t k) {
    return static_cast<unsigned char>(1 + k % 251);
}

/// tensor[offset(row, col)] = value, the offset in 32 or 64 bits.
struct write_probes {
    unsigned char* tensor;
    const std::uint32_t* rows;
    const std::uint32_t* cols_of_probe;
    std::uint32_t cols;
    bool in_32_bits;
    PITFALL_HOST_DEVICE void operator()(std::size_t k) const {
        const std::int64_t off = in_32_bits ? offset_int32(rows[k], cols, cols_of_probe[k])
                                            : offset_int64(rows[k], cols, cols_of_probe[k]);
        tensor[off] = probe_value(k);
    }
};

/// out[k] = tensor[the probe's true offset] (always 64 bits: the reference read).
struct read_probes {
    const unsigned char* tensor;
    const std::uint32_t* rows;
    const std::uint32_t* cols_of_probe;
    std::uint32_t cols;
    unsigned char* out;
    PITFALL_HOST_DEVICE void operator()(std::size_t k) const {
        out[k] = tensor[offset_int64(rows[k], cols, cols_of_probe[k])];
    }
};

/// Where the tensor lives: on the CPU inside a reservation with 2 GiB before it (the memory
/// a wrapped offset reaches), on the GPU a plain allocation.
class cpu_reservation {
public:
    static constexpr std::size_t before = std::size_t{1} << 31;
    cpu_reservation() = default;
    cpu_reservation(const cpu_reservation&) = delete;
    cpu_reservation& operator=(const cpu_reservation&) = delete;
    ~cpu_reservation() {
        if (m_base != nullptr)
            munmap(m_base, m_bytes);
    }
    pitfall::status reserve(std::size_t tensor_bytes) {
        m_bytes = before + tensor_bytes;
        // MAP_NORESERVE: no swap is set aside; pages become memory only when touched.
        void* p = mmap(nullptr, m_bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED)
            return pitfall::status::from_errno(
                errno, "mmap(" + std::to_string(m_bytes) + " bytes, MAP_NORESERVE)",
                pitfall::stage::alloc, __FILE__, __LINE__);
        m_base = static_cast<unsigned char*>(p);
        return pitfall::status::ok();
    }
    unsigned char* tensor() { return m_base + before; }

private:
    unsigned char* m_base = nullptr;
    std::size_t m_bytes = 0;
};

struct probes {
    std::vector<std::uint32_t> rows, cols_of_probe;
    std::uint32_t cols = 0;
    std::size_t tensor_bytes = 0;
};

pitfall::status_or<probes> make_probes(const pitfall::context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const long long rows, ctx.param_int("rows"));
    PITFALL_ASSIGN_OR_RETURN(const long long cols, ctx.param_int("cols"));
    PITFALL_ASSIGN_OR_RETURN(const long long probe_rows, ctx.param_int("probe_rows"));
    PITFALL_ASSIGN_OR_RETURN(const long long probe_cols, ctx.param_int("probe_cols"));
    if (probe_rows > rows)
        return pitfall::bad_parameter("probe_rows",
                                      "more than rows (" + std::to_string(rows) + ")");
    if (probe_cols > cols)
        return pitfall::bad_parameter("probe_cols",
                                      "more than cols (" + std::to_string(cols) + ")");
    probes p;
    p.cols = static_cast<std::uint32_t>(cols);
    p.tensor_bytes = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
    for (long long r = rows - probe_rows; r < rows; ++r)
        for (long long j = 0; j < probe_cols; ++j) {
            p.rows.push_back(static_cast<std::uint32_t>(r));
            // Spread over the row: the first and last column and evenly between.
            const long long c = probe_cols == 1 ? cols - 1 : j * (cols - 1) / (probe_cols - 1);
            p.cols_of_probe.push_back(static_cast<std::uint32_t>(c));
        }
    return p;
}

template <class Backend> pitfall::status run_probes(pitfall::context& ctx, bool in_32_bits) {
    PITFALL_ASSIGN_OR_RETURN(const probes p, make_probes(ctx));
    const std::size_t n = p.rows.size();
    ctx.record("tensor_elements", static_cast<double>(p.tensor_bytes));
    ctx.record("probes", static_cast<double>(n));

    // The tensor: zero everywhere (fresh anonymous pages; cudaMemset on the GPU).
    cpu_reservation reservation;
    pitfall::buffer<unsigned char, Backend> device_tensor;
    unsigned char* tensor = nullptr;
    if constexpr (Backend::kind == pitfall::backend_kind::cpu) {
        PITFALL_TRY(reservation.reserve(p.tensor_bytes));
        tensor = reservation.tensor();
    } else {
        PITFALL_ASSIGN_OR_RETURN(device_tensor,
                                 Backend::template allocate<unsigned char>(p.tensor_bytes));
        tensor = device_tensor.data();
#if PITFALL_HAS_CUDA
        PITFALL_CUDA_TRY(pitfall::stage::compute, cudaMemset(tensor, 0, p.tensor_bytes));
#endif
    }
    PITFALL_ASSIGN_OR_RETURN(auto d_rows, Backend::template allocate<std::uint32_t>(n));
    PITFALL_ASSIGN_OR_RETURN(auto d_cols, Backend::template allocate<std::uint32_t>(n));
    PITFALL_ASSIGN_OR_RETURN(auto d_out, Backend::template allocate<unsigned char>(n));
    PITFALL_TRY(Backend::copy_to_device(d_rows, p.rows.data(), n));
    PITFALL_TRY(Backend::copy_to_device(d_cols, p.cols_of_probe.data(), n));

    PITFALL_TRY(Backend::for_each(
        n, write_probes{tensor, d_rows.data(), d_cols.data(), p.cols, in_32_bits}));
    PITFALL_TRY(Backend::synchronize()); // the GPU's illegal address surfaces here
    PITFALL_TRY(Backend::for_each(
        n, read_probes{tensor, d_rows.data(), d_cols.data(), p.cols, d_out.data()}));
    PITFALL_TRY(Backend::synchronize());
    ctx.ran_on(Backend::describe_device());
    std::vector<unsigned char> out(n);
    PITFALL_TRY(Backend::copy_to_host(out.data(), d_out, n));

    // Judged against the offsets in exact (64-bit) arithmetic, computed here on the host.
    std::size_t wrong = 0, outside = 0, expected_wrong = 0;
    std::int64_t first_wrong = -1;
    for (std::size_t k = 0; k < n; ++k) {
        const std::int64_t exact = offset_int64(p.rows[k], p.cols, p.cols_of_probe[k]);
        const std::int64_t used =
            in_32_bits ? offset_int32(p.rows[k], p.cols, p.cols_of_probe[k]) : exact;
        expected_wrong += exact > std::numeric_limits<std::int32_t>::max() ? 1 : 0;
        outside += used < 0 || used >= static_cast<std::int64_t>(p.tensor_bytes) ? 1 : 0;
        if (out[k] != probe_value(k)) {
            ++wrong;
            if (first_wrong < 0 || exact < first_wrong)
                first_wrong = exact;
        }
    }
    ctx.record("wrong_elements", static_cast<double>(wrong));
    ctx.record("first_wrong_offset", static_cast<double>(first_wrong));
    ctx.record("writes_outside_tensor", static_cast<double>(outside));
    ctx.record("probes_past_int32_max", static_cast<double>(expected_wrong));
    if (in_32_bits)
        // The rule under test: exactly the probes past INT32_MAX go wrong (a wrapped offset
        // that lands on another probe would break it, and says so).
        ctx.check("wrong_exactly_past_int32_max", wrong == expected_wrong,
                  std::to_string(wrong) + " wrong, " + std::to_string(expected_wrong) +
                      " probes past INT32_MAX");
    else
        ctx.check("all_probes_in_place", wrong == 0,
                  std::to_string(wrong) + " of " + std::to_string(n) + " probes misplaced");
    return pitfall::status::ok();
}

template <class Backend> pitfall::status reproduce_int32_offsets(pitfall::context& ctx) {
    return run_probes<Backend>(ctx, true);
}
template <class Backend> pitfall::status remedy_int64_offsets(pitfall::context& ctx) {
    return run_probes<Backend>(ctx, false);
}

} // namespace int32_offset_overflow

using namespace int32_offset_overflow; // the variants by their own names
PITFALL_SCENARIO(PITFALL_VARIANT(reproduce_int32_offsets), PITFALL_VARIANT(remedy_int64_offsets))
