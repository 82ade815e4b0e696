// torch_vecgemm._C: loading it registers the ops (ops.cpp, runtime/dispatch.cpp); these
// bindings expose the eligibility rules and the tuning controls to the Python package.
#include <torch/extension.h>

#include "aten_override.h"
#include "device_facts.h"
#include "op_handles.h"
#include "plan_summary.h"
#include "precision.h"
#include "rules.h"
#include "tuning_controls.h"

namespace {

py::dict summary_dict(const vecgemm::PlanSummary& s) {
  py::dict d;
  d["family"] = s.family;
  d["kernel"] = s.kernel;
  d["split_k"] = s.split_k;
  d["stream_k"] = s.stream_k;
  d["copy_a"] = s.copy_a;
  d["copy_b"] = s.copy_b;
  d["orders"] = s.orders;
  d["transposed"] = s.transposed;
  d["fallback_reason"] = s.fallback_reason;
  d["precision"] = s.precision;
  d["precision_fallback"] = s.precision_fallback;
  d["autotune_pending"] = s.autotune_pending;
  d["predicted_us"] = s.predicted_us;
  d["description"] = s.description;
  return d;
}

// DeviceFacts as JSON-ready data: {"name", "sms", "capability", "tiled": [[config, orders,
// vec4, blocks], ...], "tf32x3": [[row, blocks, violation or None], ...]}.
py::dict facts_dict(const vecgemm::DeviceFacts& f) {
  py::list tiled, tf32x3;
  for (const auto& t : f.tiled) tiled.append(py::make_tuple(t.config, t.orders, t.vec4, t.blocks));
  for (const auto& r : f.tf32x3) tf32x3.append(py::make_tuple(r.row, r.blocks, r.violation));
  py::dict d;
  d["name"] = f.name;
  d["sms"] = f.sms;
  d["capability"] = f.capability;
  d["tiled"] = tiled;
  d["tf32x3"] = tf32x3;
  return d;
}

vecgemm::DeviceFacts facts_of(const py::dict& d) {
  vecgemm::DeviceFacts f;
  f.name = d["name"].cast<std::string>();
  f.sms = d["sms"].cast<int>();
  f.capability = d["capability"].cast<int>();
  for (const auto& t : d["tiled"].cast<py::list>()) {
    const auto x = t.cast<py::sequence>();
    f.tiled.push_back({x[0].cast<std::string>(), x[1].cast<std::string>(), x[2].cast<bool>(), x[3].cast<int>()});
  }
  for (const auto& r : d["tf32x3"].cast<py::list>()) {
    const auto x = r.cast<py::sequence>();
    f.tf32x3.push_back({x[0].cast<std::string>(), x[1].cast<int>(), x[2].cast<std::optional<std::string>>()});
  }
  return f;
}

// A device profile's file as torch_vecgemm/_profiles.py hands it over: {"name",
// "capability", "sms", "scalars", "order_percent", "kernel_percent", "scalar_load_percent",
// "tf32x3"} (device_facts.h, ProfileData).
vecgemm::ProfileData profile_data_of(const py::dict& d) {
  vecgemm::ProfileData p;
  p.name = d["name"].cast<std::string>();
  p.capability = d["capability"].cast<int>();
  p.sms = d["sms"].cast<int>();
  p.scalars = d["scalars"].cast<std::map<std::string, double>>();
  p.order_percent = d["order_percent"].cast<std::vector<double>>();
  p.kernel_percent = d["kernel_percent"].cast<std::map<std::string, std::vector<double>>>();
  p.scalar_load_percent = d["scalar_load_percent"].cast<std::map<std::string, std::vector<double>>>();
  p.tf32x3 = d["tf32x3"].cast<std::map<std::string, std::map<std::string, double>>>();
  if (!d["torch_handoff"].is_none()) p.torch_handoff = d["torch_handoff"].cast<std::map<std::string, double>>();
  p.torch_handoff_configs = d["torch_handoff_configs"].cast<std::map<std::string, double>>();
  return p;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  // The lenient op and linear through typed dispatcher handles: what torch.ops.vecgemm.gemm /
  // .linear do, without the boxed call's argument conversion (about a microsecond). The
  // Python wrappers call these unless the call must be seen from Python (torch.compile, a
  // __torch_function__ override or mode); the dispatcher still applies autograd, dispatch
  // modes and tensor subclasses. The GIL is released for the call, as torch's own bindings do.
  m.def(
      "gemm",
      [](const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C, double alpha, double beta,
         const std::string& precision) { return vecgemm::gemm_op().call(A, B, C, alpha, beta, precision); },
      py::arg("A"), py::arg("B"), py::arg("C") = py::none(), py::arg("alpha") = 1.0, py::arg("beta") = 0.0,
      py::arg("precision") = "auto", py::call_guard<py::gil_scoped_release>());
  m.def(
      "linear",
      [](const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
         const std::string& precision) { return vecgemm::linear_op().call(input, weight, bias, precision); },
      py::arg("input"), py::arg("weight"), py::arg("bias") = py::none(), py::arg("precision") = "auto",
      py::call_guard<py::gil_scoped_release>());
  m.def("fallback_reason", &vecgemm::fallback_reason, py::arg("A"), py::arg("B"),
        py::arg("C") = py::none(), py::arg("variant") = "auto", py::arg("precision") = "auto",
        "None if the CUDA kernel will run for alpha * A @ B + beta * C, else why not.");
  // The switch behind precision "auto" (precision.h); torch_vecgemm.set_precision keeps its
  // Python mirror, which torch.compile guards on, in step.
  m.def("_set_precision", [](const std::string& name) {
    vecgemm::set_default_precision(vecgemm::parse_switch_precision(name));
  });
  m.def("_get_precision", [] { return std::string(vecgemm::precision_name(vecgemm::default_precision())); });
  m.def("_check_precision", [](const std::string& name) { vecgemm::parse_precision(name); },
        "Raises the ops' ValueError unless name is a precision they accept.");
  m.def("_set_aten_override", &vecgemm::set_aten_override, py::arg("precision"),
        "The whole-program switch on with a precision, or off (None).");
  m.def("_aten_override", &vecgemm::aten_override, "The precision the whole-program switch is on with, or None.");
  m.def("variants", &vecgemm::available_variants, "Kernel variants this build can run.");
  m.def("cuda_kernels_built", [] { return vecgemm::available_variants().size() > 1; });
  m.def("set_autotune", &vecgemm::set_autotune);
  m.def("autotune_enabled", &vecgemm::autotune_enabled);
  m.def("tuning_entries", &vecgemm::tuning_entries);
  m.def("add_tuning_entry", &vecgemm::add_tuning_entry, py::arg("key"), py::arg("config"), py::arg("splits"),
        py::arg("stream_k") = false, py::arg("torch_faster") = false);
  m.def("tuning_key", &vecgemm::tuning_key, py::arg("A"), py::arg("B"),
        "The tuning cache's key for A @ B under the auto variant (after its copies).");
  m.def("clear_tuning_cache", &vecgemm::clear_tuning_cache);
  m.def("selected_kernel", &vecgemm::selected_kernel, py::arg("A"), py::arg("B"), py::arg("variant") = "auto",
        py::arg("precision") = "auto",
        "The kernel (and split-K factor) A @ B would run on, or 'fallback: <reason>'.");
  m.def(
      "plan",
      [](const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C, const std::string& variant,
         const std::string& precision) { return summary_dict(vecgemm::plan_summary(A, B, C, variant, precision)); },
      py::arg("A"), py::arg("B"), py::arg("C") = py::none(), py::arg("variant") = "auto",
      py::arg("precision") = "auto", "How alpha * A @ B + beta * C would run (pure: nothing is allocated, launched or timed).");
  m.def("_add_device_profile", [](const py::dict& data) { vecgemm::add_device_profile(profile_data_of(data)); },
        py::arg("data"), "A device profile for the planner (torch_vecgemm/_profiles.py loads them at import).");
  m.def("built_architectures", &vecgemm::built_architectures,
        "The GPU architectures the kernels were compiled for, as nvcc numbers them (900 for sm_90).");

  // For the tests and probes, not for users: a view of the planner's model and a knob that
  // changes how products launch, to measure them or reach a path.
  py::module_ testing = m.def_submodule("_testing", "Knobs and views for the tests and probes.");
  testing.def("model_ranking", &vecgemm::model_ranking, py::arg("key"), py::arg("device") = py::none(),
              "The cost model's candidates for a tuning key on a device (a recorded one too; default: the "
              "current CUDA device), fastest first: (predicted ns, config, split-K factor, stream-K tail).");
  testing.def("set_torch_handoff", &vecgemm::set_torch_handoff, py::arg("enabled"),
              "Whether the lenient op hands IEEE plans to torch.matmul where the device profile's rule "
              "predicts it faster (on by default); off, they run on the kernels.");
  testing.def("torch_handoff_enabled", &vecgemm::torch_handoff_enabled);
  testing.def("set_narrow_block_rows", &vecgemm::set_narrow_block_rows, py::arg("rows"),
              "The narrow operand's rows a block of the narrow-side 3xTF32 kernel takes: 8, 16 or 32, or 0 (the "
              "default) for the fewest that cover the narrow side.");
  testing.def("set_tf32x3_splits", &vecgemm::set_tf32x3_splits, py::arg("splits"),
              "The K split every 3xTF32 row is priced and run at (at most the row's most), or 0 (the default; any "
              "value below 1) for the waves model's cheapest.");
  testing.def("set_dependent_launch", &vecgemm::set_dependent_launch,
              "Whether second passes may overlap the end of the kernel before them (on unless "
              "VECGEMM_DEPENDENT_LAUNCH=0).");
  // The CUDA-side rules alone, on tensors of any device: the tests check them without a GPU.
  testing.def(
      "kernel_violation",
      [](const at::Tensor& A, const at::Tensor& B, const std::optional<at::Tensor>& C, const std::string& variant,
         const std::string& precision) {
        return vecgemm::kernel_violation(A, B, C, variant, vecgemm::parse_precision(precision));
      },
      py::arg("A"), py::arg("B"), py::arg("C") = py::none(), py::arg("variant") = "auto",
      py::arg("precision") = "auto", "Why the CUDA kernels' rules refuse the problem (the contract aside), or None.");
  testing.def("resident_blocks", &vecgemm::resident_blocks, py::arg("config"),
              "Resident blocks of a kernel config's kernel on the current CUDA device (SMs x blocks per SM).");
  // Planning without the GPU (device_facts.h): a GPU's facts recorded there, planned for here.
  testing.def("device_facts", [] { return facts_dict(vecgemm::current_device_facts()); },
              "The current CUDA device's facts as the planner reads them, as JSON-ready data.");
  testing.def("add_recorded_device", [](const py::dict& facts) { return vecgemm::add_recorded_device(facts_of(facts)); },
              py::arg("facts"), "A device index under which plans are made for device_facts() data.");
  testing.def("profile_name", &vecgemm::profile_name, py::arg("device"),
              "The measured profile a CUDA or recorded device is planned with, or 'neutral'.");
  testing.def(
      "recorded_plan",
      [](int device, int64_t m, int64_t n, int64_t k, const std::string& orders, bool a_vec4, bool b_vec4,
         const std::string& precision, int64_t batch, const std::string& variant) {
        return summary_dict(
            vecgemm::recorded_plan_summary(device, batch, m, n, k, orders, a_vec4, b_vec4, precision, variant));
      },
      py::arg("device"), py::arg("m"), py::arg("n"), py::arg("k"), py::arg("orders"), py::arg("a_vec4"),
      py::arg("b_vec4"), py::arg("precision") = "auto", py::arg("batch") = 1, py::arg("variant") = "auto",
      "What torch_vecgemm.plan() says of dense operands of these shapes, orders and alignment on a recorded device "
      "(variant 'auto'), or the strict op's plan on a named variant there.");
}
