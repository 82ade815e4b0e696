// torch_vecgemm._C: loading it registers the ops (ops.cpp, cuda/dispatch.cpp); these
// bindings expose the eligibility rules and the tuning controls to the Python package.
#include <torch/extension.h>

#include "problem.h"
#include "tuning.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("fallback_reason", &vecgemm::fallback_reason, py::arg("A"), py::arg("B"),
        py::arg("C") = py::none(), py::arg("variant") = "auto",
        "None if the CUDA kernel will run for alpha * A @ B + beta * C, else why not.");
  // The CUDA-side rules alone, on tensors of any device: lets tests check them without a GPU.
  m.def("_kernel_violation", &vecgemm::kernel_violation, py::arg("A"), py::arg("B"), py::arg("C") = py::none(),
        py::arg("variant") = "auto");
  m.def("variants", &vecgemm::available_variants, "Kernel variants this build can run.");
  m.def("cuda_kernels_built", [] { return vecgemm::available_variants().size() > 1; });
  m.def("set_autotune", &vecgemm::set_autotune);
  m.def("autotune_enabled", &vecgemm::autotune_enabled);
  m.def("tuning_entries", &vecgemm::tuning_entries);
  m.def("add_tuning_entry", &vecgemm::add_tuning_entry, py::arg("key"), py::arg("config"), py::arg("splits"),
        py::arg("stream_k") = false);
  m.def("tuning_key", &vecgemm::tuning_key, py::arg("A"), py::arg("B"),
        "The tuning cache's key for A @ B under the auto variant (after its copies).");
  m.def("clear_tuning_cache", &vecgemm::clear_tuning_cache);
  m.def("_set_checked_loads_only", &vecgemm::set_checked_loads_only,
        "Measurement knob: every block takes the bounds-checked loads (edge-handling cost).");
  m.def("_set_dependent_launch", &vecgemm::set_dependent_launch,
        "Measurement knob: whether the second passes may overlap the end of the kernel before them.");
  m.def("selected_kernel", &vecgemm::selected_kernel, py::arg("A"), py::arg("B"), py::arg("variant") = "auto",
        "The kernel (and split-K factor) A @ B would run on, or 'fallback: <reason>'.");
}
