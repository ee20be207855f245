#include "pitfall/detail/fatbin.hpp"

#include "pitfall/detail/json_file.hpp"

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <utility>

namespace pitfall::detail {

namespace {

status malformed(const std::string& name, const std::string& what) {
    return PITFALL_HOST_ERROR(stage::init, host_error::malformed_elf, name + ": " + what);
}

std::string join(const std::vector<std::string>& parts, const std::string& separator) {
    std::string out;
    for (const auto& part : parts) {
        if (!out.empty())
            out += separator;
        out += part;
    }
    return out;
}

} // namespace

// ---------------------------------------------------------------------------------------------
// ELF
// ---------------------------------------------------------------------------------------------

std::string elf_image::string_at(std::uint64_t offset) const {
    if (offset >= bytes.size())
        return {};
    const char* start = bytes.data() + offset;
    return std::string(start, strnlen(start, bytes.size() - offset));
}

const Elf64_Shdr* elf_image::find(const std::string& name) const {
    if (names_index >= sections.size())
        return nullptr;
    const std::uint64_t names = sections[names_index].sh_offset;
    for (const auto& s : sections)
        if (string_at(names + s.sh_name) == name)
            return &s;
    return nullptr;
}

const Elf64_Shdr* elf_image::find_type(Elf64_Word type) const {
    for (const auto& s : sections)
        if (s.sh_type == type)
            return &s;
    return nullptr;
}

status_or<elf_image> read_elf(const std::string& path) {
    auto bytes = read_regular_file(path, elf_file_max_bytes);
    if (!bytes.is_ok())
        return PITFALL_HOST_ERROR(stage::init, host_error::unreadable_file,
                                  bytes.error().message());
    return parse_elf(std::move(bytes).value(), path);
}

status_or<elf_image> parse_elf(std::string bytes, const std::string& name) {
    elf_image elf;
    elf.bytes = std::move(bytes);
    Elf64_Ehdr header{};
    if (!elf.read_at(0, header) || std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0)
        return malformed(name, "not an ELF file");
    if (header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_ident[EI_DATA] != ELFDATA2LSB)
        return malformed(name, "not a 64-bit little-endian ELF file (the only kind read here)");
    if (header.e_shnum > 0 && header.e_shentsize != sizeof(Elf64_Shdr))
        return malformed(name, "unexpected section header size");
    // Checked as a whole first: e_shoff + i * 64 must not wrap around for any i.
    const std::uint64_t table_size = std::uint64_t{header.e_shnum} * sizeof(Elf64_Shdr);
    if (header.e_shoff > elf.bytes.size() || table_size > elf.bytes.size() - header.e_shoff)
        return malformed(name, "section headers out of the file");
    elf.sections.resize(header.e_shnum);
    for (std::size_t i = 0; i < elf.sections.size(); ++i)
        elf.read_at(header.e_shoff + i * sizeof(Elf64_Shdr), elf.sections[i]);
    elf.names_index = header.e_shstrndx;
    return elf;
}

// ---------------------------------------------------------------------------------------------
// The fatbinary
// ---------------------------------------------------------------------------------------------

std::string fatbin_image::name() const {
    const char* suffix = variant == arch_variant::arch_specific ? "a"
                         : variant == arch_variant::family      ? "f"
                                                                : "";
    return (is_ptx() ? "compute_" : "sm_") + std::to_string(arch) + suffix;
}

std::string fatbin_image::describe() const {
    if (!is_ptx())
        return "SASS " + name();
    return "PTX " + name() + " (PTX ISA " + std::to_string(version_major) + "." +
           std::to_string(version_minor) + ")";
}

namespace {

arch_variant variant_of(std::uint64_t flags) {
    // Both bits at once is no target nvcc has: the arch-specific reading is the narrower one,
    // so it never predicts a launch that fails.
    if ((flags & fatbin_flag_arch_specific) != 0)
        return arch_variant::arch_specific;
    if ((flags & fatbin_flag_family) != 0)
        return arch_variant::family;
    return arch_variant::plain;
}

// The two headers as nvcc writes them (fatbin.hpp), field by field: natural alignment puts
// every field at its offset, which the static_asserts hold to.
struct container_header {
    std::uint32_t magic;
    std::uint16_t version;
    std::uint16_t header_size;
    std::uint64_t payload_size;
};
static_assert(sizeof(container_header) == 16 && offsetof(container_header, payload_size) == 8);

struct entry_header {
    std::uint16_t kind;
    std::uint16_t unknown_2;
    std::uint32_t header_size;
    std::uint64_t payload_size;
    std::uint32_t unknown_16;
    std::uint32_t unknown_20;
    std::uint16_t minor;
    std::uint16_t major;
    std::uint32_t arch;
    std::uint32_t unknown_32;
    std::uint32_t unknown_36;
    std::uint64_t flags;
};
static_assert(sizeof(entry_header) == 48 && offsetof(entry_header, minor) == 24 &&
              offsetof(entry_header, arch) == 28 && offsetof(entry_header, flags) == 40);

/// The entries of one container's payload, appended to `images`.
status parse_entries(std::string_view entries, unsigned container, const std::string& name,
                     std::vector<fatbin_image>& images) {
    constexpr std::uint64_t min_entry_header = 64; // what nvcc writes; the fields take 48
    std::uint64_t entry = 0;
    // Fewer than a header's bytes left: padding, as nvcc aligns containers.
    while (entries.size() >= min_entry_header && entry <= entries.size() - min_entry_header) {
        entry_header h{};
        read_at(entries, entry, h); // within the bytes checked above
        if (h.header_size < min_entry_header || h.header_size > entries.size() - entry)
            return malformed(name, "truncated fatbin entry header");
        if (h.payload_size > entries.size() - entry - h.header_size)
            return malformed(name, "fatbin entry of " + std::to_string(h.payload_size) +
                                       " bytes runs past its container");
        if (h.kind == fatbin_kind_ptx || h.kind == fatbin_kind_sass)
            images.push_back({h.kind == fatbin_kind_ptx ? image_kind::ptx : image_kind::sass,
                              h.arch, variant_of(h.flags), h.major, h.minor, container});
        entry += h.header_size + h.payload_size;
    }
    return status::ok();
}

} // namespace

status_or<std::vector<fatbin_image>> parse_fatbin(std::string_view bytes, const std::string& name) {
    std::vector<fatbin_image> images;
    unsigned container = 0;
    std::uint64_t offset = 0;
    while (bytes.size() >= sizeof(container_header) &&
           offset <= bytes.size() - sizeof(container_header)) {
        container_header h{};
        read_at(bytes, offset, h); // within the bytes checked above
        if (h.magic != fatbin_magic) {
            offset += 8; // padding between containers (they are 8-byte aligned)
            continue;
        }
        if (h.header_size < sizeof(container_header) || h.header_size > bytes.size() - offset)
            return malformed(name, "truncated fatbin container header");
        const std::uint64_t begin = offset + h.header_size;
        if (h.payload_size > bytes.size() - begin)
            return malformed(name, "fatbin container of " + std::to_string(h.payload_size) +
                                       " bytes runs past the end of the fatbinary");
        PITFALL_TRY(parse_entries(bytes.substr(begin, h.payload_size), container++, name, images));
        offset = (begin + h.payload_size + 7) / 8 * 8;
    }
    return images;
}

status_or<std::vector<fatbin_image>> fatbin_images(const elf_image& elf, const std::string& path) {
    const Elf64_Shdr* section = elf.find(".nv_fatbin");
    if (section == nullptr || section->sh_type == SHT_NOBITS)
        return std::vector<fatbin_image>{}; // no device code (or relocatable: __nv_relfatbin)
    if (section->sh_offset > elf.bytes.size() ||
        section->sh_size > elf.bytes.size() - section->sh_offset)
        return malformed(path, ".nv_fatbin extends past the end of the file");
    return parse_fatbin(std::string_view(elf.bytes).substr(section->sh_offset, section->sh_size),
                        path);
}

// ---------------------------------------------------------------------------------------------
// The rules
// ---------------------------------------------------------------------------------------------

std::string cc_text(unsigned cc) {
    return std::to_string(cc / 10) + "." + std::to_string(cc % 10);
}

std::optional<unsigned> parse_compute_capability(std::string_view text) {
    const auto dot = text.find('.');
    if (dot == std::string_view::npos)
        return std::nullopt;
    const std::string_view major = text.substr(0, dot);
    const std::string_view minor = text.substr(dot + 1);
    const auto digits = [](std::string_view s) {
        return !s.empty() &&
               std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    // Minors are one digit (9.0, 10.3, 12.1): cc is 10 * major + minor.
    if (!digits(major) || major.size() > 2 || !digits(minor) || minor.size() != 1)
        return std::nullopt;
    return static_cast<unsigned>(std::stoi(std::string(major)) * 10 + (minor[0] - '0'));
}

std::string cuda_version_text(long long version) {
    return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

// CUDA C++ Programming Guide, "Binary Compatibility": a cubin for sm_XY runs on compute
// capability X.Z with Z >= Y, never on another major. "Feature Availability" (CUDA 12.9+):
// arch-specific sm_XYa runs on X.Y only; family-specific sm_XYf on the devices of its family,
// the same major with Z >= Y (sm_100f: 10.0 and 10.3; sm_103f: 10.3), as plain SASS does.
bool sass_runs_on(unsigned arch, arch_variant variant, unsigned cc) {
    if (variant == arch_variant::arch_specific)
        return cc == arch;
    return cc / 10 == arch / 10 && cc % 10 >= arch % 10;
}

// CUDA C++ Programming Guide, "PTX Compatibility": PTX for compute_XY can be JIT-compiled for
// any compute capability >= X.Y. "Feature Availability": compute_XYa only for X.Y (compute_90a
// never for 10.0); compute_XYf only within its family (compute_100f: 10.0 and 10.3, never
// 11.0 or 12.0).
bool ptx_jits_to(unsigned arch, arch_variant variant, unsigned cc) {
    switch (variant) {
    case arch_variant::plain: return cc >= arch;
    case arch_variant::arch_specific: return cc == arch;
    case arch_variant::family: return cc / 10 == arch / 10 && cc % 10 >= arch % 10;
    }
    return false;
}

namespace {

struct ptx_release {
    int driver; ///< cudaDriverGetVersion form
    ptx_isa isa;
};

// PTX ISA document, "Release Notes" (its PTX release history, as NVIDIA's cuda-python maps it
// in cuda.bindings.utils): the PTX ISA each CUDA release introduced; its driver JITs that ISA
// and older ones, newer ones fail with cudaErrorUnsupportedPtxVersion. CUDA 12.6 introduced
// none (it writes 8.5, as 12.5 does); 8.6 is listed under CUDA 12.7. Oldest first.
constexpr ptx_release ptx_releases[] = {
    {9000, {6, 0}},  {9010, {6, 1}},  {9020, {6, 2}},  {10000, {6, 3}}, {10010, {6, 4}},
    {10020, {6, 5}}, {11000, {7, 0}}, {11010, {7, 1}}, {11020, {7, 2}}, {11030, {7, 3}},
    {11040, {7, 4}}, {11050, {7, 5}}, {11060, {7, 6}}, {11070, {7, 7}}, {11080, {7, 8}},
    {12000, {8, 0}}, {12010, {8, 1}}, {12020, {8, 2}}, {12030, {8, 3}}, {12040, {8, 4}},
    {12050, {8, 5}}, {12070, {8, 6}}, {12080, {8, 7}}, {12090, {8, 8}}, {13000, {9, 0}},
    {13010, {9, 1}},
};

} // namespace

std::optional<ptx_isa> max_ptx_isa(int driver_version) {
    std::optional<ptx_isa> newest;
    for (const auto& r : ptx_releases)
        if (r.driver <= driver_version)
            newest = r.isa;
    return newest;
}

std::optional<int> first_driver_for_ptx_isa(ptx_isa isa) {
    for (const auto& r : ptx_releases)
        if (!(r.isa < isa) && !(isa < r.isa))
            return r.driver;
    return std::nullopt;
}

bool driver_can_jit(ptx_isa isa, int driver_version) {
    if (driver_version <= 0 || isa < std::begin(ptx_releases)->isa)
        return true;
    for (const auto& r : ptx_releases)
        if (!(r.isa < isa)) // the first release with this ISA (or, for a gap, the next one)
            return driver_version >= r.driver;
    return driver_version > std::prev(std::end(ptx_releases))->driver;
}

namespace {

bool fits(const fatbin_image& img, unsigned cc) {
    return img.is_ptx() ? ptx_jits_to(img.arch, img.variant, cc)
                        : sass_runs_on(img.arch, img.variant, cc);
}

ptx_isa isa_of(const fatbin_image& img) {
    return {img.version_major, img.version_minor};
}

int specificity(arch_variant v) {
    return v == arch_variant::arch_specific ? 2 : v == arch_variant::family ? 1 : 0;
}

/// Which of several fitting images the driver loads is not documented: the newest
/// architecture, then the most specific variant, is the prediction (a GPU run checks it).
const fatbin_image* best_fit(const std::vector<fatbin_image>& images, image_kind kind, unsigned cc,
                             int driver_version) {
    const fatbin_image* best = nullptr;
    for (const auto& img : images) {
        if (img.kind != kind || !fits(img, cc) ||
            (img.is_ptx() && !driver_can_jit(isa_of(img), driver_version)))
            continue;
        if (best == nullptr || img.arch > best->arch ||
            (img.arch == best->arch && specificity(img.variant) > specificity(best->variant)))
            best = &img;
    }
    return best;
}

/// A library holds one container per translation unit, each with the same targets: one line
/// per distinct reason.
void add_once(std::vector<std::string>& lines, const std::string& line) {
    if (std::find(lines.begin(), lines.end(), line) == lines.end())
        lines.push_back(line);
}

std::string driver_limit(int driver_version) {
    const auto max = max_ptx_isa(driver_version);
    return (max ? "max " + max->text() + ", " : std::string()) + "CUDA " +
           cuda_version_text(driver_version) + " driver";
}

/// Why no SASS of `images` runs on `cc`, for the same-major images a reader would expect to.
std::string sass_reason(const std::vector<fatbin_image>& images, unsigned cc, bool force_ptx_jit) {
    if (force_ptx_jit)
        return "CUDA_FORCE_PTX_JIT=1 skips the SASS";
    const std::string family = std::to_string(cc / 10) + ".x";
    std::vector<std::string> why;
    for (const auto& img : images) {
        if (img.is_ptx() || img.arch / 10 != cc / 10)
            continue;
        add_once(why, img.variant == arch_variant::arch_specific
                          ? "SASS " + img.name() + " runs only on " + cc_text(img.arch)
                          : "SASS " + img.name() + " needs " + cc_text(img.arch) +
                                " or newer within " + family);
    }
    return why.empty() ? "no SASS for " + family : join(why, "; ");
}

/// Why no PTX of `images` runs on `cc`; `too_new` is set when one would, but for its ISA.
std::string ptx_reason(const std::vector<fatbin_image>& images, unsigned cc, int driver_version,
                       bool disable_ptx_jit, bool& too_new) {
    std::vector<std::string> why;
    for (const auto& img : images) {
        if (!img.is_ptx())
            continue;
        std::string line;
        if (fits(img, cc)) {
            too_new = true;
            line = "PTX ISA " + isa_of(img).text() + " is newer than this driver can JIT (" +
                   driver_limit(driver_version) + ")";
        } else if (img.variant == arch_variant::arch_specific) {
            line = "PTX " + img.name() + " JITs only to " + cc_text(img.arch);
        } else if (img.variant == arch_variant::family) {
            line = "PTX " + img.name() + " JITs only within " + std::to_string(img.arch / 10) +
                   ".x, to " + cc_text(img.arch) + " or newer";
        } else {
            line = "PTX " + img.name() + " needs " + cc_text(img.arch) + " or newer";
        }
        add_once(why, line);
    }
    if (why.empty())
        return "no PTX";
    if (disable_ptx_jit) {
        too_new = false;
        return "CUDA_DISABLE_PTX_JIT=1 forbids the JIT of PTX";
    }
    return join(why, "; ");
}

} // namespace

std::string image_prediction::describe(unsigned cc) const {
    switch (how) {
    case image_path::sass: return "runs from SASS " + image.name();
    case image_path::ptx_jit:
        return "runs by PTX JIT from " + image.name() + " to sm_" + std::to_string(cc);
    case image_path::no_image: break;
    }
    return "fails: " + reason + ": " + error;
}

image_prediction predict_image(const std::vector<fatbin_image>& images, unsigned cc,
                               int driver_version, bool force_ptx_jit, bool disable_ptx_jit) {
    image_prediction p;
    if (!force_ptx_jit)
        if (const fatbin_image* sass = best_fit(images, image_kind::sass, cc, driver_version)) {
            p.how = image_path::sass;
            p.image = *sass;
            return p;
        }
    if (!disable_ptx_jit)
        if (const fatbin_image* ptx = best_fit(images, image_kind::ptx, cc, driver_version)) {
            p.how = image_path::ptx_jit;
            p.image = *ptx;
            return p;
        }
    bool too_new = false;
    p.reason = images.empty()
                   ? "no device code in the binary"
                   : sass_reason(images, cc, force_ptx_jit) + "; " +
                         ptx_reason(images, cc, driver_version, disable_ptx_jit, too_new);
    // A PTX image that fits the device but not the driver: the driver refuses it by name.
    p.error = too_new ? "cudaErrorUnsupportedPtxVersion" : "cudaErrorNoKernelImageForDevice";
    return p;
}

} // namespace pitfall::detail
