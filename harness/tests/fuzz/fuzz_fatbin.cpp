// A program's device code: the bytes as an ELF file (parse_elf, then its .nv_fatbin) and as a
// bare fatbinary (parse_fatbin), and, where images come back, every image described and placed
// on a few devices under drivers that do and do not know their PTX ISA.
#include "fuzz_common.hpp"
#include "pitfall/detail/fatbin.hpp"

#include <vector>

namespace {
using namespace pitfall::detail;

void place(const std::vector<fatbin_image>& images) {
    for (const auto& img : images)
        (void)img.describe();
    for (const unsigned cc : {75u, 90u, 103u, 120u})
        for (const int driver : {0, 12040, 13000})
            (void)predict_image(images, cc, driver, false, false).describe(cc);
    (void)predict_image(images, 100, 12080, true, false).describe(100);
    (void)predict_image(images, 100, 12080, false, true).describe(100);
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view bytes = pitfall::fuzz::text_of(data, size);
    const auto elf = parse_elf(std::string(bytes), "fuzz.elf");
    if (elf.is_ok()) {
        const auto images = fatbin_images(elf.value(), "fuzz.elf");
        if (images.is_ok())
            place(images.value());
    }
    const auto images = parse_fatbin(bytes, "fuzz.fatbin");
    if (images.is_ok())
        place(images.value());
    return 0;
}
