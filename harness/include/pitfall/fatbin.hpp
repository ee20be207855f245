// pitfall/fatbin.hpp: the device code a program carries, and where it runs, for scenarios.
//
// A CUDA program's ELF file holds a fatbinary (section .nv_fatbin): SASS for some sm_XY and PTX
// for some compute_XY. The SDK reads it and applies the documented compatibility rules
// (docs/cuda-rules.md#binary-compatibility, #ptx-isa-versions); `pitfall doctor` uses the same
// code. These are its public names; the declarations and their contracts are in
// pitfall/detail/fatbin.hpp, the implementation the harness shares. Host code only: reading a
// binary needs no driver and no device, and this header needs no CUDA.
//
//   PITFALL_ASSIGN_OR_RETURN(const auto elf, pitfall::fatbin::read_elf(path));
//   PITFALL_ASSIGN_OR_RETURN(const auto images, pitfall::fatbin::fatbin_images(elf, path));
//   const auto p = pitfall::fatbin::predict_image(images, 90, 13000, false, false);
//   ctx.record_info("prediction", p.describe(90)); // "runs from SASS sm_90", or why not
#pragma once

#include "pitfall/detail/fatbin.hpp"

namespace pitfall::fatbin {

// The ELF file, read whole, every access bounds-checked.
using detail::elf_image;
using detail::parse_elf;
using detail::read_elf;

// The fatbinary's images and its container layout.
using detail::arch_variant;
using detail::fatbin_image;
using detail::fatbin_images;
using detail::fatbin_kind_ptx;
using detail::fatbin_kind_sass;
using detail::fatbin_magic;
using detail::image_kind;
using detail::parse_fatbin;

// Versions as the rules and the messages write them.
using detail::cc_text;
using detail::cuda_version_text;
using detail::parse_compute_capability;

// The rules: which image a device runs, and which PTX a driver JITs.
using detail::driver_can_jit;
using detail::first_driver_for_ptx_isa;
using detail::image_path;
using detail::image_prediction;
using detail::max_ptx_isa;
using detail::predict_image;
using detail::ptx_isa;
using detail::ptx_jits_to;
using detail::sass_runs_on;

} // namespace pitfall::fatbin
