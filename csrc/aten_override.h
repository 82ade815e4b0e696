// The whole-program switch (torch_vecgemm.enable): while it is on, the float32 CUDA products
// of aten (mm, addmm, bmm, baddbmm and their out= forms) run on the library's kernels where
// the lenient op's rules and planner take them, and on torch's own CUDA kernels otherwise.
// Kernels registered for those ops at the CUDA dispatch key, below autograd (gradients are
// products too) and below tracing (what torch.matmul, F.linear, einsum, tensordot and a
// compiled graph's extern products lower to), for every thread; switched off, the
// registrations are dropped and torch's kernels are dispatched again, as before.
#pragma once
#include <optional>
#include <string>

#include "precision.h"

namespace vecgemm {

// On with the precision every routed product asks for ("auto": the precision switch,
// read at each product; "ieee"; "3xtf32"; anything else raises a ValueError), or off
// (nullopt). Process-wide; takes effect at the next product.
void set_aten_override(const std::optional<std::string>& precision);
// The precision the switch is on with, or none when it is off.
std::optional<std::string> aten_override();
// What the routed products ask for (read by the kernels at each product).
PrecisionRequest aten_override_request();

// The build's half: the kernels registered (on) or dropped (off). runtime/aten_kernels.cpp;
// nothing in a CPU-only build, whose products are all torch's.
void register_aten_kernels(bool on);

}  // namespace vecgemm
