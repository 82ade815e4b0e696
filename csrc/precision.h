// The arithmetic a product is computed in, asked for per call (the ops' `precision`
// argument) or for the process (the switch behind "auto"). Device-independent: both builds
// validate the argument the same way, so a misspelt precision is an error everywhere, never
// a silent IEEE result.
#pragma once
#include <c10/util/string_view.h>

#include <string>

namespace vecgemm {

// What runs: IEEE fp32 FFMA (the SIMT kernels), or fp32 operands split into TF32 pairs and
// multiplied on the tensor cores in three products (sgemm_3xtf32.cuh), to fp32 accuracy.
enum class Precision { Ieee, Tf32x3 };

// What a call asks for: one of the two, or Auto, the process-wide switch.
enum class PrecisionRequest { Auto, Ieee, Tf32x3 };

// "auto", "ieee" or "3xtf32"; anything else raises a ValueError naming those.
PrecisionRequest parse_precision(c10::string_view name);
// The switch's value for a name; "auto" and anything else raise a ValueError.
Precision parse_switch_precision(c10::string_view name);
const char* precision_name(Precision p);  // "ieee", "3xtf32"

// The switch: read at execution, so a graph traced with "auto" follows it. An atomic:
// threads may set and read it at any time; a call reads it once.
void set_default_precision(Precision p);
Precision default_precision();

Precision resolve(PrecisionRequest request);
inline Precision resolve(c10::string_view name) { return resolve(parse_precision(name)); }

}  // namespace vecgemm
