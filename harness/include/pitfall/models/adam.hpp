// pitfall/models/adam.hpp: the optimiser settings both models train with.
//
//   const pitfall::models::adam_config adam{1e-3};   // Keras' defaults but the learning rate
#pragma once

namespace pitfall::models {

/// Keras' Adam defaults (beta_1, beta_2, epsilon) with the caller's learning rate.
struct adam_config {
    double learning_rate = 1e-3;
    double beta1 = 0.9;
    double beta2 = 0.999;
    double epsilon = 1e-7;
};

} // namespace pitfall::models
