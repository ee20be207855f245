// spring_step.cuh: the loop body type_promotion compiles three ways: into the program's host
// loop (cpu), into its kernels (cuda), and into the PTX image it reads back (spring_ptx.cu).
// One definition, so the PTX counted is the code that runs. No pitfall header here: the PTX
// image is compiled by nvcc alone, without the harness's include path.
//
// One step of a damped spring (x'' = -4 x - 0.1 x'), semi-implicit Euler with dt = 0.01, on
// float32 state: the loop body of an ODE layer, a physics update or an optimiser's momentum.
#pragma once

#if defined(__CUDACC__)
#define TYPE_PROMOTION_HOST_DEVICE __host__ __device__
#else
#define TYPE_PROMOTION_HOST_DEVICE
#endif

namespace type_promotion {

// The constants as people type them: 0.01, 4.0 and 0.1 are double literals, so by the usual
// arithmetic conversions (C++ [expr.arith.conv]) every float operand is widened and each
// right-hand side is computed in float64, then narrowed to float by the assignment. The
// conversion warnings are off here on purpose: -Wfloat-conversion (in -Wconversion) and
// -Wdouble-promotion are the tools that find this code, and this code is the failure.
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wfloat-conversion"
#pragma GCC diagnostic ignored "-Wdouble-promotion"
#endif
#if defined(__clang__) // Clang names the narrowing warning apart from -Wfloat-conversion
#pragma clang diagnostic ignored "-Wimplicit-float-conversion"
#endif
TYPE_PROMOTION_HOST_DEVICE inline void spring_step_untyped(float& p, float& v) {
    v = v + 0.01 * (-4.0 * p - 0.1 * v);
    p = p + 0.01 * v;
}
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

// The remedy: the same constants typed as float (0.01f), so every operation stays in float32.
TYPE_PROMOTION_HOST_DEVICE inline void spring_step_typed(float& p, float& v) {
    v = v + 0.01f * (-4.0f * p - 0.1f * v);
    p = p + 0.01f * v;
}

} // namespace type_promotion
