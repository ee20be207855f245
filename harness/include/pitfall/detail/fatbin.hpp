// pitfall/detail/fatbin.hpp: the device code a program carries, and where it runs.
//
// A CUDA program's ELF file holds a fatbinary (section .nv_fatbin): SASS for some sm_XY and PTX
// for some compute_XY, each plain, arch-specific (sm_90a: that compute capability only) or
// family-specific (sm_100f: that major, that minor or newer). Which image a device runs, if
// any, follows from the documented compatibility rules, written here as small pure functions.
// Host code only: reading a binary needs no driver and no device.
//
//   PITFALL_ASSIGN_OR_RETURN(const auto elf, pitfall::detail::read_elf(path));
//   PITFALL_ASSIGN_OR_RETURN(const auto images, pitfall::detail::fatbin_images(elf, path));
//   const auto p = pitfall::detail::predict_image(images, 103, 13000, false, false);
//   std::cout << p.describe(103) << '\n'; // "runs from SASS sm_100f", or why nothing runs
#pragma once

#include "pitfall/status.hpp"

#include <elf.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pitfall::detail {

// =============================================================================================
// The ELF file: read whole, section headers parsed, every access bounds-checked.
// =============================================================================================

/// The largest file read_elf takes whole: big enough for the largest CUDA libraries (a cuBLASLt
/// with SASS for every architecture is under 1 GiB).
inline constexpr std::size_t elf_file_max_bytes = std::size_t{2} << 30;

/// Copies the T at `offset` of `bytes` into `out`; false (and `out` untouched) past the end.
template <class T> bool read_at(std::string_view bytes, std::uint64_t offset, T& out) {
    if (offset > bytes.size() || sizeof(T) > bytes.size() - offset)
        return false;
    std::memcpy(&out, bytes.data() + offset, sizeof(T));
    return true;
}

/// A 64-bit little-endian ELF file and its section headers. Section headers are not mapped into
/// a running process, so the file is the only place to find .nv_fatbin and friends by name.
struct elf_image {
    std::string bytes; ///< the whole file
    std::vector<Elf64_Shdr> sections;
    std::size_t names_index = 0; ///< e_shstrndx: the section holding the section names

    /// Copies the T at `offset` into `out`; false (and `out` untouched) past the end.
    template <class T> bool read_at(std::uint64_t offset, T& out) const {
        return detail::read_at(bytes, offset, out);
    }
    /// The NUL-terminated string at `offset` ("" when out of bounds).
    std::string string_at(std::uint64_t offset) const;
    /// The first section called `name`, or nullptr.
    const Elf64_Shdr* find(const std::string& name) const;
    /// The first section of type `type` (SHT_GNU_verneed, ...), or nullptr.
    const Elf64_Shdr* find_type(Elf64_Word type) const;
};

/// Reads the file at `path` (a regular file of at most elf_file_max_bytes) and parses it.
/// Errors: host_error::unreadable_file, host_error::malformed_elf, each naming `path`.
status_or<elf_image> read_elf(const std::string& path);
/// Parses bytes already in memory; `name` heads every error (host_error::malformed_elf).
status_or<elf_image> parse_elf(std::string bytes, const std::string& name);

// =============================================================================================
// The fatbinary: one fatbin_image per SASS or PTX entry.
// =============================================================================================

enum class image_kind { sass, ptx };

/// The suffix of a target: none (sm_90), `a` (sm_90a: arch-specific, CUDA 12.0+), `f`
/// (sm_100f: family-specific, CUDA 12.9+).
enum class arch_variant { plain, arch_specific, family };

/// One image of the fatbinary: SASS (a cubin for sm_XY) or PTX (for compute_XY).
struct fatbin_image {
    image_kind kind = image_kind::sass;
    unsigned arch = 0; ///< 90 = sm_90 / compute_90, 103 = sm_103 (10 * major + minor)
    arch_variant variant = arch_variant::plain;
    /// PTX: the PTX ISA version (9.0 from CUDA 13.0), which the driver must know to JIT it.
    /// SASS: the cubin's code version (cuobjdump's "code version = [1,8]").
    unsigned version_major = 0;
    unsigned version_minor = 0;
    /// Which container of the fatbinary holds it (0, 1, ...). nvcc writes one per translation
    /// unit (or device link), and a kernel runs only from the images of its own container.
    unsigned container = 0;

    bool is_ptx() const { return kind == image_kind::ptx; }
    /// "sm_90a", "compute_100f", "sm_86".
    std::string name() const;
    /// "SASS sm_90a", "PTX compute_100f (PTX ISA 9.0)".
    std::string describe() const;
};

/// The layout as nvcc writes it. The container header is the fatBinaryHeader of older toolkits'
/// fatbinary.h; the entry header is undocumented: its fields here are the ones cuobjdump
/// reports, located by comparing nvcc 13.0's output byte by byte across -gencode targets.
/// The section holds one or more containers, 8-byte aligned, each a 16-byte header
/// { u32 magic 0xBA55ED50, u16 version, u16 header_size, u64 payload_size } followed by
/// entries, each a header of at least 64 bytes { u16 kind (1 PTX, 2 ELF/SASS), u16,
/// u32 header_size, u64 payload_size, u32, u32, u16 minor, u16 major, u32 arch, u32, u32,
/// u64 flags, ... } and its payload.
inline constexpr std::uint32_t fatbin_magic = 0xBA55ED50u;
inline constexpr std::uint16_t fatbin_kind_ptx = 1;
inline constexpr std::uint16_t fatbin_kind_sass = 2;
/// Entry flags: the arch field says 90 for sm_90 and sm_90a alike; the suffix is a flag bit,
/// the same for PTX and SASS (nvcc 13.0: sm_90 0x11, sm_90a 0x100011, compute_100f 0x208011,
/// sm_100f 0x1200011). cuobjdump prints it back as "arch = sm_90a" / "arch = sm_100f".
inline constexpr std::uint64_t fatbin_flag_arch_specific = 0x100000;
inline constexpr std::uint64_t fatbin_flag_family = 0x200000;

/// The images of the fatbinary in `elf` (empty when it has no .nv_fatbin: no device code, or
/// relocatable device code only). `path` heads every error (host_error::malformed_elf).
status_or<std::vector<fatbin_image>> fatbin_images(const elf_image& elf, const std::string& path);
/// The images of fatbinary containers in `bytes` (a .nv_fatbin section, or nvcc -fatbin's
/// output); `name` heads every error.
status_or<std::vector<fatbin_image>> parse_fatbin(std::string_view bytes, const std::string& name);

// =============================================================================================
// The rules. Compute capabilities and architectures are written 10 * major + minor (86 = 8.6,
// 103 = 10.3); driver versions as cudaDriverGetVersion answers (12040 = CUDA 12.4, 0 = none).
// =============================================================================================

/// 86 -> "8.6", 103 -> "10.3".
std::string cc_text(unsigned cc);
/// "8.6" -> 86, "10.3" -> 103; nullopt for anything else.
std::optional<unsigned> parse_compute_capability(std::string_view text);
/// CUDA's version integers: 13000 -> "13.0", 12080 -> "12.8".
std::string cuda_version_text(long long version);

/// Whether SASS for `arch` runs on a device of compute capability `cc`.
bool sass_runs_on(unsigned arch, arch_variant variant, unsigned cc);
/// Whether PTX for `arch` can be JIT-compiled for `cc` (its PTX ISA version aside:
/// driver_can_jit decides that).
bool ptx_jits_to(unsigned arch, arch_variant variant, unsigned cc);

/// A PTX ISA version (the `.version` directive of a PTX file).
struct ptx_isa {
    unsigned major = 0;
    unsigned minor = 0;
    std::string text() const { return std::to_string(major) + "." + std::to_string(minor); }
    friend bool operator<(ptx_isa a, ptx_isa b) {
        return a.major != b.major ? a.major < b.major : a.minor < b.minor;
    }
};

/// The newest PTX ISA a driver of `driver_version` can JIT: 12040 -> 8.4, 13000 -> 9.0.
/// nullopt for 0 (no driver answered) and for drivers older than CUDA 9.0.
std::optional<ptx_isa> max_ptx_isa(int driver_version);
/// The oldest driver (cudaDriverGetVersion form) that can JIT `isa`: 8.4 -> 12040. nullopt for
/// an ISA the table does not hold (older than 6.0 or newer than it knows).
std::optional<int> first_driver_for_ptx_isa(ptx_isa isa);
/// Whether a driver of `driver_version` can JIT PTX of `isa`. True for driver 0 (unknown: no
/// claim), and for an ISA newer than the table on a driver newer than the table (no claim).
bool driver_can_jit(ptx_isa isa, int driver_version);

enum class image_path { sass, ptx_jit, no_image };

/// What a device would run: an image and how, or the error its first launch answers and why.
struct image_prediction {
    image_path how = image_path::no_image;
    fatbin_image image; ///< the image that runs (sass, ptx_jit)
    std::string error;  ///< no_image: cudaErrorNoKernelImageForDevice / ...UnsupportedPtxVersion
    std::string reason; ///< no_image: why, in plain words
    /// "runs from SASS sm_90a", "runs by PTX JIT from compute_90 to sm_120",
    /// "fails: no SASS for 7.x; PTX compute_90 needs 9.0 or newer:
    /// cudaErrorNoKernelImageForDevice".
    std::string describe(unsigned cc) const;
};

/// The image a device of `cc` runs from `images` (for a program of several translation units,
/// the images of one container answer for its kernels), under a driver of `driver_version` (0:
/// unknown, the PTX ISA goes unchecked). SASS first (CUDA_FORCE_PTX_JIT=1: never), else PTX
/// by JIT (CUDA_DISABLE_PTX_JIT=1: never); among several that fit, the newest architecture,
/// then the most specific variant.
image_prediction predict_image(const std::vector<fatbin_image>& images, unsigned cc,
                               int driver_version, bool force_ptx_jit, bool disable_ptx_jit);

} // namespace pitfall::detail
