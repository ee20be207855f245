// allocator_fragmentation: out of memory with more than enough memory free, in pieces.
//
// What
//   One small caching allocator, the same code on both backends, manages an arena: host memory
//   on the CPU, one cudaMalloc on the GPU (the device's memory as a framework's allocator sees
//   it). It works the way PyTorch's CUDA caching allocator does: a request is rounded to 512
//   bytes and served best fit from the cached free blocks of its pool; a block larger than the
//   request is split; when nothing cached fits, a new segment (the request rounded to 2 MiB, or
//   a small segment for a small request) is carved from the arena, first fit (cudaMalloc's
//   part); a freed block stays cached in its segment and merges with free neighbours of the
//   same segment only, never across segments; before giving up, segments that are wholly free
//   are released to the arena and the carve is tried again (the allocator's own empty_cache).
//   The pattern, #35901's training step: allocate a large block and free it, allocate short- and
//   long-lived blocks one after the other, free the short-lived ones, ask for the large block
//   again. Every block handed out is filled with its own tag by the backend (a host loop or a
//   kernel) and the live blocks are read back at the end: overlapping blocks would show.
//
// Why it fails
//   The freed large block's segment stays cached, so best fit serves the small requests from
//   it: the long-lived blocks end up scattered through that segment. Once the short-lived ones
//   are freed the segment is all holes between live blocks: it cannot be released (blocks in it
//   are live), its holes are each smaller than the large request, and the arena outside it is
//   smaller still. free_bytes (cached free + arena) exceeds requested_bytes while
//   largest_free_block_bytes does not: PyTorch's "Tried to allocate X (... Y free; Z reserved but
//   unallocated)".
//
// Expected per backend (defaults: arena 72 MiB, large 40 MiB, 8 pairs of 2 MiB + 1 MiB)
//   cpu   reproduce: host std::bad_alloc at alloc (the allocator's own out-of-memory, host code
//         on both backends), requested 40 MiB, free 64 MiB, largest free block 32 MiB,
//         fragmentation = 1 - largest/free = 0.5, nothing releasable. The remedies: ok, the
//         large block fits (40 MiB arena tail; the large segment whole again).
//   cuda  the same outcomes and the same numbers: the allocator's decisions do not depend on
//         where the arena lives; the arena is one cudaMalloc and the tags are written by
//         kernels. Without a driver: UNSUPPORTED, cudaErrorInsufficientDriver (the SDK's probe).
//   Source: the allocator below (its arithmetic is the reference); PyTorch "CUDA memory
//   management" notes (caching, block splitting, empty_cache, the small and large pools,
//   max_split_size_mb, expandable_segments) and c10/cuda/CUDACachingAllocator.cpp (512-byte
//   rounding, 1 MiB small limit, 2 MiB small segments, large segments rounded to 2 MiB).
//
// Remedy
//   remedy_empty_cache: release the cache once the large block is freed (empty_cache), so the
//   small blocks are carved from the arena, not out of the large segment. remedy_size_classes:
//   small requests come from small segments of their own (PyTorch's small pool; a larger
//   max_split_size_mb or expandable_segments serve the same end), so the long-lived blocks never
//   split the large segment and it merges whole once the short-lived ones are freed.
//
// Evidence
//   pytorch/pytorch#35901 (a freed large tensor's segment split by later blocks; the large
//   tensor no longer fits), pytorch/pytorch#29554 (fragmentation measure at out-of-memory).
#include "pitfall/scenario.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

using pitfall::status;
using pitfall::status_or;

constexpr std::size_t kib = 1024;
constexpr std::size_t mib = 1024 * kib;
constexpr std::size_t round_bytes = 512;          // every request is rounded to this
constexpr std::size_t segment_rounding = 2 * mib; // a large segment's size is rounded to this

std::size_t round_up(std::size_t n, std::size_t to) {
    return (n + to - 1) / to * to;
}

std::string in_mib(std::size_t bytes) {
    std::ostringstream out;
    out << static_cast<double>(bytes) / static_cast<double>(mib) << " MiB";
    return out.str();
}

// ---------------------------------------------------------------------------------------------
// The caching allocator: offsets into an arena it never touches (the backend writes the data).
// ---------------------------------------------------------------------------------------------
class caching_allocator {
public:
    struct options {
        std::size_t small_limit = 0;   ///< 0: one pool; else requests <= this are "small"
        std::size_t small_segment = 0; ///< the size of a small segment
    };
    /// What the allocator would print at out-of-memory, and a fragmentation measure.
    struct snapshot {
        std::size_t allocated = 0;          ///< in live blocks
        std::size_t reserved = 0;           ///< in segments (live + cached)
        std::size_t arena_unreserved = 0;   ///< not in any segment
        std::size_t largest_free_block = 0; ///< the largest cached block or arena range
        std::size_t segments = 0;
        std::size_t free_total() const { return reserved - allocated + arena_unreserved; }
        double fragmentation() const {
            const std::size_t free = free_total();
            return free == 0
                       ? 0.0
                       : 1.0 - static_cast<double>(largest_free_block) / static_cast<double>(free);
        }
    };

    caching_allocator(std::size_t arena_bytes, options opt) : m_options(opt) {
        m_arena_free[0] = arena_bytes;
    }

    /// An offset into the arena, or the allocator's out-of-memory with its numbers.
    status_or<std::size_t> allocate(std::size_t bytes) {
        const std::size_t size = round_up(bytes, round_bytes);
        const bool small = m_options.small_limit != 0 && size <= m_options.small_limit;
        if (auto cached = best_fit(size, small))
            return *cached;
        if (auto carved = carve(size, small))
            return *carved;
        // As PyTorch does before it reports out-of-memory: release what is wholly free, retry.
        m_released_on_retry += empty_cache();
        if (auto carved = carve(size, small))
            return *carved;
        const snapshot s = state();
        return PITFALL_HOST_ERROR(pitfall::stage::alloc, pitfall::host_error::bad_alloc,
                                  "caching allocator out of memory: tried to allocate " +
                                      in_mib(size) + " (" + in_mib(s.free_total()) + " free; " +
                                      in_mib(s.reserved - s.allocated) +
                                      " reserved but unallocated; largest free block " +
                                      in_mib(s.largest_free_block) + ")");
    }

    void deallocate(std::size_t offset) {
        for (auto& seg : m_segments) {
            auto it = seg.blocks.find(offset);
            if (it == seg.blocks.end())
                continue;
            it->second.free = true;
            // Merge with free neighbours of this segment only: segments are separate
            // allocations of the arena (separate cudaMalloc calls in PyTorch).
            auto next = std::next(it);
            if (next != seg.blocks.end() && next->second.free) {
                it->second.size += next->second.size;
                seg.blocks.erase(next);
            }
            if (it != seg.blocks.begin()) {
                auto prev = std::prev(it);
                if (prev->second.free) {
                    prev->second.size += it->second.size;
                    seg.blocks.erase(it);
                }
            }
            return;
        }
    }

    /// Returns every wholly free segment to the arena; the bytes released.
    std::size_t empty_cache() {
        std::size_t released = 0;
        for (auto it = m_segments.begin(); it != m_segments.end();) {
            if (it->blocks.size() == 1 && it->blocks.begin()->second.free) {
                give_back(it->offset, it->size);
                released += it->size;
                it = m_segments.erase(it);
            } else {
                ++it;
            }
        }
        return released;
    }

    snapshot state() const {
        snapshot s;
        for (const auto& seg : m_segments) {
            s.reserved += seg.size;
            for (const auto& [offset, b] : seg.blocks) {
                if (b.free)
                    s.largest_free_block = std::max(s.largest_free_block, b.size);
                else
                    s.allocated += b.size;
            }
        }
        for (const auto& [offset, size] : m_arena_free) {
            s.arena_unreserved += size;
            s.largest_free_block = std::max(s.largest_free_block, size);
        }
        s.segments = m_segments.size();
        return s;
    }
    std::size_t released_on_retry() const { return m_released_on_retry; }

private:
    struct block {
        std::size_t size;
        bool free;
    };
    struct segment {
        std::size_t offset;
        std::size_t size;
        bool small;
        std::map<std::size_t, block> blocks; // by offset, contiguous, covering the segment
    };

    // The smallest cached free block of the pool that holds `size` (lowest offset on a tie),
    // split when the rest is worth keeping.
    std::optional<std::size_t> best_fit(std::size_t size, bool small) {
        segment* best_seg = nullptr;
        std::size_t best_offset = 0;
        std::size_t best_size = SIZE_MAX;
        for (auto& seg : m_segments) {
            if (seg.small != small)
                continue;
            for (const auto& [offset, b] : seg.blocks)
                if (b.free && b.size >= size && b.size < best_size) {
                    best_seg = &seg;
                    best_offset = offset;
                    best_size = b.size;
                }
        }
        if (best_seg == nullptr)
            return std::nullopt;
        take(*best_seg, best_offset, size);
        return best_offset;
    }

    // A new segment from the arena, first fit, with the request at its start.
    std::optional<std::size_t> carve(std::size_t size, bool small) {
        const std::size_t seg_size =
            small ? m_options.small_segment : round_up(size, segment_rounding);
        for (auto it = m_arena_free.begin(); it != m_arena_free.end(); ++it) {
            if (it->second < seg_size)
                continue;
            const std::size_t offset = it->first;
            const std::size_t rest = it->second - seg_size;
            m_arena_free.erase(it);
            if (rest > 0)
                m_arena_free[offset + seg_size] = rest;
            segment seg{offset, seg_size, small, {}};
            seg.blocks[offset] = block{seg_size, true};
            m_segments.push_back(std::move(seg));
            take(m_segments.back(), offset, size);
            return offset;
        }
        return std::nullopt;
    }

    static void take(segment& seg, std::size_t offset, std::size_t size) {
        block& b = seg.blocks.at(offset);
        if (b.size - size >= round_bytes)
            seg.blocks[offset + size] = block{b.size - size, true};
        else
            size = b.size;
        b = block{size, false};
    }

    // An arena range back, merged with its free neighbours (the arena is one address range).
    void give_back(std::size_t offset, std::size_t size) {
        auto it = m_arena_free.emplace(offset, size).first;
        auto next = std::next(it);
        if (next != m_arena_free.end() && it->first + it->second == next->first) {
            it->second += next->second;
            m_arena_free.erase(next);
        }
        if (it != m_arena_free.begin()) {
            auto prev = std::prev(it);
            if (prev->first + prev->second == it->first) {
                prev->second += it->second;
                m_arena_free.erase(it);
            }
        }
    }

    options m_options;
    std::map<std::size_t, std::size_t> m_arena_free; // offset -> size, merged
    std::vector<segment> m_segments;
    std::size_t m_released_on_retry = 0;
};

// ---------------------------------------------------------------------------------------------
// The pattern, run by the allocator over a real arena of the backend.
// ---------------------------------------------------------------------------------------------
struct fill_tag {
    std::uint32_t* words;
    std::uint32_t tag;
    PITFALL_HOST_DEVICE void operator()(std::size_t i) const { words[i] = tag; }
};

struct sizes {
    std::size_t arena, large, short_block, long_block, small_limit, small_segment;
    long long pairs;
};

status_or<sizes> read_sizes(const pitfall::context& ctx) {
    sizes s{};
    PITFALL_ASSIGN_OR_RETURN(const long long arena, ctx.param_int("arena_mib"));
    PITFALL_ASSIGN_OR_RETURN(const long long large, ctx.param_int("large_mib"));
    PITFALL_ASSIGN_OR_RETURN(const long long short_kib, ctx.param_int("short_kib"));
    PITFALL_ASSIGN_OR_RETURN(const long long long_kib, ctx.param_int("long_kib"));
    PITFALL_ASSIGN_OR_RETURN(const long long small_limit, ctx.param_int("small_limit_kib"));
    PITFALL_ASSIGN_OR_RETURN(const long long small_segment, ctx.param_int("small_segment_kib"));
    PITFALL_ASSIGN_OR_RETURN(s.pairs, ctx.param_int("pairs"));
    if (large >= arena)
        return pitfall::bad_parameter("large_mib", "must be smaller than arena_mib");
    if (small_segment < small_limit)
        return pitfall::bad_parameter("small_segment_kib",
                                      "must hold one block of small_limit_kib");
    s.arena = static_cast<std::size_t>(arena) * mib;
    s.large = static_cast<std::size_t>(large) * mib;
    s.short_block = static_cast<std::size_t>(short_kib) * kib;
    s.long_block = static_cast<std::size_t>(long_kib) * kib;
    s.small_limit = static_cast<std::size_t>(small_limit) * kib;
    s.small_segment = static_cast<std::size_t>(small_segment) * kib;
    return s;
}

enum class policy { plain, empty_cache_first, size_classes };

template <class Backend> status run_pattern(pitfall::context& ctx, policy how) {
    PITFALL_ASSIGN_OR_RETURN(const sizes sz, read_sizes(ctx));
    // The arena: the one real allocation (a cudaMalloc on the GPU). Words, so a kernel can tag.
    PITFALL_ASSIGN_OR_RETURN(auto arena, Backend::template allocate<std::uint32_t>(sz.arena / 4));
    caching_allocator::options opt;
    if (how == policy::size_classes)
        opt = {sz.small_limit, sz.small_segment};
    caching_allocator alloc(sz.arena, opt);

    std::map<std::size_t, std::pair<std::size_t, std::uint32_t>> live; // offset -> size, tag
    std::uint32_t next_tag = 1;
    const auto take = [&](std::size_t bytes) -> status_or<std::size_t> {
        PITFALL_ASSIGN_OR_RETURN(const std::size_t offset, alloc.allocate(bytes));
        const std::uint32_t tag = next_tag++;
        PITFALL_TRY(Backend::for_each(bytes / 4, fill_tag{arena.data() + offset / 4, tag}));
        live[offset] = {bytes, tag};
        return offset;
    };
    const auto give = [&](std::size_t offset) {
        alloc.deallocate(offset);
        live.erase(offset);
    };

    // Iteration 1: the large block, used and freed; its segment stays cached.
    PITFALL_ASSIGN_OR_RETURN(const std::size_t first_large, take(sz.large));
    give(first_large);
    if (how == policy::empty_cache_first)
        ctx.record("empty_cache_released_bytes", static_cast<double>(alloc.empty_cache()));
    // The interleaved phase: short- and long-lived blocks one after the other.
    std::vector<std::size_t> shorts;
    for (long long i = 0; i < sz.pairs; ++i) {
        PITFALL_ASSIGN_OR_RETURN(const std::size_t s, take(sz.short_block));
        PITFALL_ASSIGN_OR_RETURN(const std::size_t l, take(sz.long_block));
        (void)l;
        shorts.push_back(s);
    }
    for (const std::size_t s : shorts)
        give(s);

    // Iteration 2: the large block again. The numbers are those at the moment of the request.
    const auto before = alloc.state();
    ctx.record("requested_bytes", static_cast<double>(round_up(sz.large, round_bytes)), "B");
    ctx.record("free_bytes", static_cast<double>(before.free_total()), "B");
    ctx.record("largest_free_block_bytes", static_cast<double>(before.largest_free_block), "B");
    ctx.record("fragmentation", before.fragmentation());
    ctx.record("allocated_bytes", static_cast<double>(before.allocated), "B");
    ctx.record("reserved_bytes", static_cast<double>(before.reserved), "B");
    ctx.record("reserved_unallocated_bytes",
               static_cast<double>(before.reserved - before.allocated), "B");
    ctx.record("segments", static_cast<double>(before.segments));
    ctx.record("arena_bytes", static_cast<double>(sz.arena), "B");
    ctx.check("more_free_than_requested_in_total", before.free_total() >= sz.large,
              in_mib(before.free_total()) + " free in total, " + in_mib(sz.large) + " asked");
    auto second_large = take(sz.large);
    ctx.record("released_on_retry_bytes", static_cast<double>(alloc.released_on_retry()), "B");

    // Independent of the allocator's bookkeeping: every live block still holds its own tag
    // (a block handed out twice, or overlapping another, would have been overwritten).
    std::vector<std::uint32_t> words(sz.arena / 4);
    PITFALL_TRY(Backend::synchronize());
    PITFALL_TRY(Backend::copy_to_host(words.data(), arena, words.size()));
    std::size_t wrong = 0;
    for (const auto& [offset, block] : live)
        for (std::size_t w = offset / 4; w < (offset + block.first) / 4; ++w)
            wrong += words[w] != block.second ? 1 : 0;
    ctx.record("live_blocks", static_cast<double>(live.size()));
    ctx.check("live_blocks_keep_their_tags", wrong == 0,
              std::to_string(wrong) + " words of " + std::to_string(live.size()) +
                  " live blocks hold another block's tag");
    ctx.ran_on(Backend::describe_device());
    if (!second_large.is_ok())
        return second_large.error();
    return status::ok();
}

} // namespace

// reproduce: the pattern as a training loop meets it; the allocator's own out-of-memory.
template <class Backend> status reproduce(pitfall::context& ctx) {
    return run_pattern<Backend>(ctx, policy::plain);
}

// remedy_empty_cache: the cache released after the first large block is freed.
template <class Backend> status remedy_empty_cache(pitfall::context& ctx) {
    return run_pattern<Backend>(ctx, policy::empty_cache_first);
}

// remedy_size_classes: small requests served from small segments of their own.
template <class Backend> status remedy_size_classes(pitfall::context& ctx) {
    return run_pattern<Backend>(ctx, policy::size_classes);
}

PITFALL_SCENARIO(PITFALL_VARIANT(reproduce), PITFALL_VARIANT(remedy_empty_cache),
                 PITFALL_VARIANT(remedy_size_classes))
