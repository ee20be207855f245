// device_assert: an embedding lookup with an id past the end of the table.
//
// What
//   An embedding lookup (a gather): out[r, :] = table[ids[r], :], table vocab x dim floats, one
//   id (position lookups/2) equal to vocab + bad_id_past_end, the rest valid. The same mistake
//   as a token id >= vocab or a label >= num_classes. Four variants:
//     reproduce_device_assert     cpu: the bounds-checked lookup; cuda: a kernel with
//                                 assert(id < vocab), as framework kernels have.
//     reproduce_unchecked_gather  no check at all: table and a neighbouring tensor share one
//                                 allocation, so the bad id reads the neighbour's row.
//     remedy_validate_on_host     the ids checked on the host before the launch.
//     remedy_error_flag           the kernel sets an error flag the host reads afterwards.
//
// Why it fails
//   A CPU lookup can check each id and throw at once, naming it (PyTorch: "IndexError: index
//   out of range in self"). A kernel cannot throw: the cheapest check it has is assert(), which
//   prints "Assertion ... failed" from the device and ends the kernel with cudaErrorAssert
//   (710). The launch itself returns success; the error surfaces at the next synchronising
//   call, and it is STICKY: "the process must be terminated and relaunched" (driver_types.h;
//   docs/cuda-rules.md#sticky-errors), so every later CUDA call fails too and the stack trace
//   points wherever the program next touched the GPU. Without the assert (NDEBUG, or a kernel
//   that never checked) nothing fails at all: the load reads whatever lies past the table.
//
// Expected per backend
//   cpu   reproduce_device_assert: std::out_of_range (host, compute) naming the id, its
//         position and the table size. reproduce_unchecked_gather: ok; the bad row equals the
//         neighbouring tensor's row (rows_from_neighbour_tensor = 1), valid rows exact.
//         Both remedies: ok, the bad id reported as an event, valid rows exact.
//   cuda  reproduce_device_assert: cudaErrorAssert (710), sticky, at the synchronize after the
//         launch; event after_assert_cuda_malloc: a later cudaMalloc fails with the same error
//         (CUDA Runtime API, cudaError: cudaErrorAssert "...the process must be terminated and
//         relaunched"; CUDA C++ Programming Guide, "Assertion"; a standalone assert kernel on
//         an H200, driver 580.159.04, CUDA 13.0, 2026-11-26: launch cudaSuccess, synchronize
//         and a later cudaMalloc cudaErrorAssert). reproduce_unchecked_gather
//         and the remedies: as on the CPU (the GPU reads the same bytes).
//         Here (no driver): UNSUPPORTED, cudaErrorInsufficientDriver at init.
//
// Remedy
//   Validate indices on the host (or in a separate, cheap reduction) before the launch, so the
//   error is an ordinary value naming the id while the context stays healthy; or let the
//   kernel record the first bad position in an error flag (atomicMin) instead of asserting,
//   and check the flag after the kernel. Keep assert() for debugging: it kills the context.
//
// Evidence
//   pytorch/pytorch#19120 (nn.Embedding(10, 20) fed id 10: the next, unrelated call reports
//   the device-side assert), pytorch/pytorch#29966 (Assertion `srcIndex < srcSelectDimSize`),
//   pytorch/pytorch#74079 (one_hot: clear CPU error, GPU assert, then nothing works),
//   pytorch/pytorch#16027 (CPU "index out of range" against CUDA's device-side assert).
#include "pitfall/random.hpp"
#include "pitfall/scenario.hpp"

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

// The deliberate device assert must fire in every build type: a Release build defines NDEBUG,
// which would compile assert() out of the kernel too (that build is reproduce_unchecked_gather).
#ifdef NDEBUG
#undef NDEBUG
#endif
#include <cassert>

namespace device_assert {

/// How the gather treats an id past the table.
enum class id_check { none, device_assert, error_flag };

/// out[r * dim + c] = table[ids[r] * dim + c]. `table` points into an allocation that goes on
/// past vocab rows (the neighbouring tensor), so id_check::none reads defined memory.
struct gather_rows {
    const float* table;
    const int* ids;
    float* out;
    int* first_bad_position; ///< error_flag: the smallest bad position seen (INT_MAX: none)
    std::size_t dim;
    int vocab;
    id_check check;
    PITFALL_HOST_DEVICE void operator()(std::size_t i) const {
        const std::size_t row = i / dim;
        const int id = ids[row];
        const bool in_range = id >= 0 && id < vocab;
        if (check == id_check::device_assert) {
#if defined(__CUDA_ARCH__)
            // DELIBERATE FAULT on the GPU: what framework kernels do (IndexKernel.cu, Loss.cu).
            assert(in_range && "embedding id out of range");
#endif
        } else if (check == id_check::error_flag && !in_range) {
            if (i % dim == 0) { // one flag update per row
#if defined(__CUDA_ARCH__)
                atomicMin(first_bad_position, static_cast<int>(row));
#else
                *first_bad_position = std::min(*first_bad_position, static_cast<int>(row));
#endif
            }
            out[i] = 0.f;
            return;
        }
        out[i] = table[static_cast<std::size_t>(id) * dim + i % dim];
    }
};

struct config {
    std::size_t lookups = 0, dim = 0, neighbour_rows = 0;
    int vocab = 0, bad_id = 0;
    std::size_t bad_position = 0;
    std::uint64_t seed = 0;
};

pitfall::status_or<config> read_config(const pitfall::context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const long long lookups, ctx.param_int("lookups"));
    PITFALL_ASSIGN_OR_RETURN(const long long vocab, ctx.param_int("vocab"));
    PITFALL_ASSIGN_OR_RETURN(const long long dim, ctx.param_int("dim"));
    PITFALL_ASSIGN_OR_RETURN(const long long past_end, ctx.param_int("bad_id_past_end"));
    PITFALL_ASSIGN_OR_RETURN(const long long neighbour, ctx.param_int("neighbour_rows"));
    PITFALL_ASSIGN_OR_RETURN(const long long seed, ctx.param_int("seed"));
    if (past_end >= neighbour) // the unchecked read must stay inside the allocation
        return pitfall::bad_parameter("bad_id_past_end", "must be below neighbour_rows (" +
                                                             std::to_string(neighbour) + ")");
    config c;
    c.lookups = static_cast<std::size_t>(lookups);
    c.vocab = static_cast<int>(vocab);
    c.dim = static_cast<std::size_t>(dim);
    c.neighbour_rows = static_cast<std::size_t>(neighbour);
    c.bad_id = static_cast<int>(vocab + past_end);
    c.bad_position = c.lookups / 2;
    c.seed = static_cast<std::uint64_t>(seed);
    return c;
}

/// The table and its neighbour in one host array (table rows first), and the ids.
struct inputs {
    std::vector<float> arena; ///< (vocab + neighbour_rows) x dim
    std::vector<int> ids;     ///< lookups, ids[bad_position] = bad_id
};

// Table values are row + col / 1024 (exact in float for the bounds above); the neighbour's are
// negative, so a row read from it can never pass for a table row.
inputs make_inputs(const config& cfg) {
    inputs in;
    const std::size_t rows = static_cast<std::size_t>(cfg.vocab) + cfg.neighbour_rows;
    in.arena.resize(rows * cfg.dim);
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t c = 0; c < cfg.dim; ++c) {
            const float v = static_cast<float>(r % 4096) + static_cast<float>(c % 1024) / 1024.f;
            in.arena[r * cfg.dim + c] = r < static_cast<std::size_t>(cfg.vocab) ? v : -1.f - v;
        }
    pitfall::splitmix64 gen(cfg.seed);
    in.ids.resize(cfg.lookups);
    for (int& id : in.ids)
        id = static_cast<int>(gen.next() % static_cast<std::uint64_t>(cfg.vocab));
    in.ids[cfg.bad_position] = cfg.bad_id;
    return in;
}

/// The CPU's bounds-checked lookup, as a framework's CPU path does it: the first id out of
/// range throws, naming the id, its position and the table size.
void check_ids(const std::vector<int>& ids, int vocab) {
    for (std::size_t r = 0; r < ids.size(); ++r)
        if (ids[r] < 0 || ids[r] >= vocab)
            throw std::out_of_range("embedding id " + std::to_string(ids[r]) + " at position " +
                                    std::to_string(r) + " is out of range for a table of " +
                                    std::to_string(vocab) + " rows");
}

pitfall::status out_of_range_status(const std::out_of_range& e, pitfall::stage where) {
    return pitfall::status::error(pitfall::library::host, "std::out_of_range", e.what(), where);
}

/// Device copies of the arena, the ids, the output and the error flag.
template <class Backend> struct device_data {
    pitfall::buffer<float, Backend> arena;
    pitfall::buffer<int, Backend> ids;
    pitfall::buffer<float, Backend> out;
    pitfall::buffer<int, Backend> flag;
};

template <class Backend>
pitfall::status_or<device_data<Backend>> upload(const config& cfg, const inputs& in) {
    device_data<Backend> d;
    PITFALL_ASSIGN_OR_RETURN(d.arena, Backend::template allocate<float>(in.arena.size()));
    PITFALL_ASSIGN_OR_RETURN(d.ids, Backend::template allocate<int>(in.ids.size()));
    PITFALL_ASSIGN_OR_RETURN(d.out, Backend::template allocate<float>(cfg.lookups * cfg.dim));
    PITFALL_ASSIGN_OR_RETURN(d.flag, Backend::template allocate<int>(1));
    PITFALL_TRY(Backend::copy_to_device(d.arena, in.arena.data(), in.arena.size()));
    PITFALL_TRY(Backend::copy_to_device(d.ids, in.ids.data(), in.ids.size()));
    const int none = INT_MAX;
    PITFALL_TRY(Backend::copy_to_device(d.flag, &none, 1));
    return d;
}

template <class Backend>
pitfall::status gather(const config& cfg, device_data<Backend>& d, std::size_t rows,
                       id_check check) {
    PITFALL_TRY(
        Backend::for_each(rows * cfg.dim, gather_rows{d.arena.data(), d.ids.data(), d.out.data(),
                                                      d.flag.data(), cfg.dim, cfg.vocab, check}));
    return Backend::synchronize();
}

/// What the out-of-range rows of the output must hold.
enum class bad_rows_hold { not_judged, neighbour_row, zeros };

/// Compares the first `rows` output rows with a plain host lookup of the arena. Records how
/// many rows were out of range and how many of those hold the neighbouring tensor's row.
template <class Backend>
pitfall::status check_output(pitfall::context& ctx, const config& cfg, const inputs& in,
                             const device_data<Backend>& d, std::size_t rows, bad_rows_hold want) {
    std::vector<float> out(rows * cfg.dim);
    PITFALL_TRY(Backend::copy_to_host(out.data(), d.out, out.size()));
    std::size_t valid_mismatches = 0, bad_rows = 0, from_neighbour = 0, zeroed = 0;
    for (std::size_t r = 0; r < rows; ++r) {
        const int id = in.ids[r];
        const bool bad = id < 0 || id >= cfg.vocab;
        bool same_as_arena = true, all_zero = true;
        for (std::size_t c = 0; c < cfg.dim; ++c) {
            const float got = out[r * cfg.dim + c];
            same_as_arena =
                same_as_arena && got == in.arena[static_cast<std::size_t>(id) * cfg.dim + c];
            all_zero = all_zero && got == 0.f;
        }
        if (!bad)
            valid_mismatches += same_as_arena ? 0 : 1;
        bad_rows += bad ? 1 : 0;
        from_neighbour += bad && same_as_arena ? 1 : 0;
        zeroed += bad && all_zero ? 1 : 0;
    }
    ctx.record("rows_checked", static_cast<double>(rows));
    ctx.record("out_of_range_rows", static_cast<double>(bad_rows));
    ctx.record("rows_from_neighbour_tensor", static_cast<double>(from_neighbour));
    ctx.check("valid_rows_exact", valid_mismatches == 0,
              std::to_string(valid_mismatches) + " rows with a valid id differ from the table");
    if (want == bad_rows_hold::zeros)
        ctx.check("bad_rows_zeroed", zeroed == bad_rows,
                  std::to_string(zeroed) + " of " + std::to_string(bad_rows) +
                      " out-of-range rows written as zeros");
    if (want == bad_rows_hold::neighbour_row) // the silent failure, measured
        ctx.check("bad_rows_read_from_neighbour", bad_rows > 0 && from_neighbour == bad_rows,
                  std::to_string(from_neighbour) + " of " + std::to_string(bad_rows) +
                      " out-of-range rows hold the neighbouring tensor's row");
    return pitfall::status::ok();
}

template <class Backend> pitfall::status reproduce_device_assert(pitfall::context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const config cfg, read_config(ctx));
    const inputs in = make_inputs(cfg);
    PITFALL_ASSIGN_OR_RETURN(auto d, (upload<Backend>(cfg, in)));
    ctx.ran_on(Backend::describe_device());
    if constexpr (Backend::kind == pitfall::backend_kind::cpu) {
        try {
            check_ids(in.ids, cfg.vocab); // the CPU path checks every id before it reads
        } catch (const std::out_of_range& e) {
            return out_of_range_status(e, pitfall::stage::compute);
        }
        return gather(cfg, d, cfg.lookups, id_check::none);
    } else {
        const pitfall::status fault = gather(cfg, d, cfg.lookups, id_check::device_assert);
#if PITFALL_HAS_CUDA
        // Proof of stickiness: an unrelated allocation after the assert fails with it too.
        void* unrelated = nullptr;
        const cudaError_t err = cudaMalloc(&unrelated, 256);
        ctx.record_event("after_assert_cuda_malloc",
                         err == cudaSuccess
                             ? pitfall::status::ok()
                             : pitfall::detail::from_cuda(err, pitfall::stage::alloc, "cudaMalloc",
                                                          __FILE__, __LINE__));
        if (err == cudaSuccess)
            cudaFree(unrelated);
#endif
        if (fault.is_ok()) // no assert fired: judge what the lookup returned
            return check_output(ctx, cfg, in, d, cfg.lookups, bad_rows_hold::not_judged);
        return fault;
    }
}

template <class Backend> pitfall::status reproduce_unchecked_gather(pitfall::context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const config cfg, read_config(ctx));
    const inputs in = make_inputs(cfg);
    PITFALL_ASSIGN_OR_RETURN(auto d, (upload<Backend>(cfg, in)));
    PITFALL_TRY(gather(cfg, d, cfg.lookups, id_check::none));
    ctx.ran_on(Backend::describe_device());
    return check_output(ctx, cfg, in, d, cfg.lookups, bad_rows_hold::neighbour_row);
}

template <class Backend> pitfall::status remedy_validate_on_host(pitfall::context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const config cfg, read_config(ctx));
    const inputs in = make_inputs(cfg);
    PITFALL_ASSIGN_OR_RETURN(auto d, (upload<Backend>(cfg, in)));
    bool rejected = false;
    try {
        check_ids(in.ids, cfg.vocab); // on the host copy, before anything is launched
    } catch (const std::out_of_range& e) {
        ctx.record_event("validation", out_of_range_status(e, pitfall::stage::check));
        rejected = true;
    }
    ctx.check("bad_id_rejected_before_launch", rejected, "the host validation saw the bad id");
    // The context is healthy: the lookup of the ids before the bad one runs and is exact.
    PITFALL_TRY(gather(cfg, d, cfg.bad_position, id_check::none));
    ctx.ran_on(Backend::describe_device());
    return check_output(ctx, cfg, in, d, cfg.bad_position, bad_rows_hold::not_judged);
}

template <class Backend> pitfall::status remedy_error_flag(pitfall::context& ctx) {
    PITFALL_ASSIGN_OR_RETURN(const config cfg, read_config(ctx));
    const inputs in = make_inputs(cfg);
    PITFALL_ASSIGN_OR_RETURN(auto d, (upload<Backend>(cfg, in)));
    PITFALL_TRY(gather(cfg, d, cfg.lookups, id_check::error_flag));
    ctx.ran_on(Backend::describe_device());
    int first_bad = INT_MAX;
    PITFALL_TRY(Backend::copy_to_host(&first_bad, d.flag, 1));
    ctx.record("first_bad_position", first_bad == INT_MAX ? -1.0 : static_cast<double>(first_bad));
    ctx.check("flag_names_bad_position", first_bad == static_cast<int>(cfg.bad_position),
              "flag " + std::to_string(first_bad) + ", bad id at " +
                  std::to_string(cfg.bad_position));
    if (first_bad != INT_MAX)
        ctx.record_event("error_flag",
                         pitfall::status::error(
                             pitfall::library::host, "std::out_of_range",
                             "embedding id " + std::to_string(in.ids[first_bad]) + " at position " +
                                 std::to_string(first_bad) + " is out of range for a table of " +
                                 std::to_string(cfg.vocab) +
                                 " rows (reported by the kernel's error flag)",
                             pitfall::stage::check));
    // Still usable: another allocation and a copy through it succeed after the kernel.
    PITFALL_ASSIGN_OR_RETURN(auto later, Backend::template allocate<int>(1));
    PITFALL_TRY(Backend::copy_to_device(later, &first_bad, 1));
    return check_output(ctx, cfg, in, d, cfg.lookups, bad_rows_hold::zeros);
}

} // namespace device_assert

using namespace device_assert; // the variants by their own names
PITFALL_SCENARIO(PITFALL_VARIANT(reproduce_device_assert),
                 PITFALL_VARIANT(reproduce_unchecked_gather),
                 PITFALL_VARIANT(remedy_validate_on_host), PITFALL_VARIANT(remedy_error_flag))
