// The claims of the distance and gate biases (Kerple, Sandwich, FoX, FIRE), measured live: part of
// run_property_checks (properties.h), so `posenc check` prints them.
#pragma once

#include <random>
#include <vector>

#include "posenc/properties.h"

namespace posenc {

// Appends: kerple.log.decay, kerple.power.decay, kerple.shift, sandwich.zero, sandwich.peak,
// sandwich.shift, fox.alibi, fire.shift, fire.unit (o.dim: Sandwich's d' and the kernel checks' head dim).
void append_bias_property_checks(const CheckOptions& o, std::mt19937_64& rng, std::vector<PropertyCheck>& out);

}  // namespace posenc
