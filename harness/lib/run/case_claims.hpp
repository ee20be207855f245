// What a running case holds of the machine, and what the running cases hold together: how
// the first pass of a run (execute.cpp) decides which cases may run side by side under --jobs.
// Private to harness/lib/run.
#pragma once

#include <cstddef>

namespace pitfall::runner::run_parts {

/// What a running case holds: slots (its threads, at most --jobs), the GPU (CUDA cases run
/// one at a time: a case may use every visible device), or the whole machine (a case whose
/// time or ratio is judged, unless --timed-in-parallel).
struct case_claim {
    int slots = 1;
    bool gpu = false;
    bool alone = false;
};

/// The cases running now, and what they hold.
struct holdings {
    int slots = 0;
    bool gpu = false;
    bool alone = false;
    std::size_t running = 0;

    bool admits(const case_claim& c, int jobs) const {
        if (running == 0)
            return true;
        return !alone && !c.alone && slots + c.slots <= jobs && !(gpu && c.gpu);
    }
    void take(const case_claim& c) {
        slots += c.slots;
        gpu = gpu || c.gpu;
        alone = alone || c.alone;
        ++running;
    }
    void give_back(const case_claim& c) {
        slots -= c.slots;
        gpu = gpu && !c.gpu;
        alone = alone && !c.alone;
        --running;
    }
};

} // namespace pitfall::runner::run_parts
