// `pitfall run --build`: each selected scenario's program built in the index's build tree just
// before its first case, private to harness/lib/run. A first run on a fresh build starts its
// first case after the harness and one program are built, not after all of them; a later run
// costs one no-op build per scenario. Each build runs while no case does, so a case's times
// never measure a compiler beside it.
#pragma once

#include "run/run_plan.hpp"

namespace pitfall::runner::run_parts {

/// Before any case, with --build: the index names a build tree, its cmake, and a target for
/// every scenario the run selects; each error names the index's field.
status check_can_build(const run_plan& plan);

/// True where --build is set and `s`'s program has not been built by this run yet.
bool needs_build(const run_plan& plan, const scenario_entry& s);

/// Builds `s`'s program (`<cmake> --build <tree> --target <target>`, argv, no shell), its
/// output in logs/build-<name>.log, a line on the terminal before and after. An error (the run
/// stops, exit 2) where the build fails or is interrupted; `--resume` completes a run whose
/// header is `recorded`, and the error says so.
status build_program(run_plan& plan, const scenario_entry& s, bool recorded);

/// The seconds the programs still to build should take, at the mean of those built so far
/// (0 without --build, or before any): the progress lines' ETA includes them.
double build_seconds_left(const run_plan& plan);

/// The build's SASS and PTX for the run's header with --build: read from each program that
/// exists; a program not built yet is given the images of one that is (or was just built),
/// marked "predicted_from" it. Every program of a build embeds the same images, the
/// configured architectures (the pitfall.static.cuda_binaries test holds them to that).
json build_images_before_building(const scenario_index& index);

} // namespace pitfall::runner::run_parts
