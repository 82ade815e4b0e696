#include "planner/plan.h"

#include <ATen/Context.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "kernels/launchers.h"
#include "kernels/simt/kernel_configs.h"
#include "planner/device_profile.h"
#include "planner/kernel_rules.h"
#include "planner/tf32x3_rows.h"
#include "planner/tuning_cache.h"
#include "tuning_controls.h"

namespace vecgemm {
namespace {

constexpr const char* kAuto = "auto";
constexpr const char* kVectorized = "vectorized";
constexpr const char* kGemv = "gemv";

// Two kinds of operands cost the kernels part of their speed: one whose rows do not start
// 16 bytes aligned takes a config's 4-byte-load instance (up to 1.4x slower, and only five
// configs have one), and a K that is not a multiple of the K tile sends every block of the
// register-staged kernels to the bounds-checked main loop. For a large problem, one copy of
// the operand(s) into padded storage may cost less: it moves 8 bytes per element (~2.3 ps
// each at the H200's bandwidth) and saves ~9 fs or more per multiply-add, so it can pay
// where the operand is reused across more than ~250 columns (A) or rows (B) and the product
// is large enough to cover the extra launches. The storage orders run at different speeds
// too (the device profile's order_percent), so a copy may also change an operand's order.
// Which copies, if any, is the cost model's call: the operands as given against every set
// of copies, each priced with its pass (docs/history.md, steps 17 and 44).
constexpr int64_t kCopyMinReuse = 256;
constexpr int64_t kCopyMinMacs = int64_t(1) << 30;
// K is padded to a multiple of every config's BK.
constexpr int64_t kKPadding = 16;

Layout other(Layout l) { return l == Layout::RowMajor ? Layout::ColMajor : Layout::RowMajor; }


// Every K-or-MN vector of the operand is 16-byte aligned (pointer, leading dimension and
// batch stride all multiples of four floats), and the storage holds the last vector's last
// 16-byte chunk whole. The cp.async kernels copy the chunk that a tile's edge cuts whole,
// reading the floats past the vector (AsyncTile::copy): an operand whose storage ends inside
// that chunk (one line of 1-3 floats, whose leading dimension says nothing, or a view that
// ends mid-chunk) takes the 4-byte copies instead.
bool vec4_ok(const at::Tensor& t, const MatrixStorage& s) {
  const int64_t batch_stride = t.dim() == 3 && t.size(0) > 1 ? t.stride(0) : 0;
  if (!lines_aligned16(t.data_ptr(), s.ld, batch_stride)) return false;
  const int64_t last = last_offset(t);  // in floats, from the data pointer
  const int64_t held = int64_t(t.storage().nbytes() / sizeof(float)) - t.storage_offset();
  return (last / 4 + 1) * 4 <= held;
}

// The copies the cost model says pay, into `plan` (copy_a, copy_b, key); none for small
// problems. Returns the model's time for the plan's key with its copies. Each operand is taken as given or copied into either order, a copy padding K
// where K needs it; K must then be padded in both, so there either both operands are copied
// or neither is. A broadcast operand is copied once.
double plan_copies(const Problem& p, Plan& plan) {
  const GemmShape& s = p.shape;
  if (s.batch * s.m * s.n * s.k < kCopyMinMacs || s.m < kCopyMinReuse || s.n < kCopyMinReuse)
    return model_best_ns(plan.key);
  const Layout la = p.a.layout, lb = p.b.layout;
  const int64_t padded_k = ceil_div(s.k, kKPadding) * kKPadding;
  const bool pad_k = padded_k != s.k;
  const int64_t a_elements = (p.a_broadcast ? 1 : s.batch) * s.m * padded_k;
  const int64_t b_elements = (p.b_broadcast ? 1 : s.batch) * padded_k * s.n;
  // The operands as given first: a copy must be predicted faster to be made.
  double best_ns = model_best_ns(plan.key);
  using Choice = std::optional<Layout>;  // none: as given; else copied into that order
  for (const Choice oa : {Choice{}, Choice{la}, Choice{other(la)}}) {
    for (const Choice ob : {Choice{}, Choice{lb}, Choice{other(lb)}}) {
      const bool copy_a = oa.has_value(), copy_b = ob.has_value();
      if ((!copy_a && !copy_b) || (pad_k && copy_a != copy_b)) continue;
      // A copy into the same order pays only for what it mends: misaligned rows or K.
      if ((copy_a && *oa == la && p.a_vec4 && !pad_k) || (copy_b && *ob == lb && p.b_vec4 && !pad_k)) continue;
      const ProblemKey key{int(s.batch), int(s.m), int(s.n), int(copy_a ? padded_k : s.k), oa.value_or(la),
                           ob.value_or(lb), (copy_a || p.a_vec4) && (copy_b || p.b_vec4), p.d_vec4, p.device};
      const double ns = model_best_ns(key) + (copy_a ? copy_ns(a_elements, p.device) : 0.0) +
                        (copy_b ? copy_ns(b_elements, p.device) : 0.0);
      if (ns < best_ns) {
        best_ns = ns;
        plan.key = key;
        plan.copy_a = OperandCopy{copy_a, oa.value_or(la)};
        plan.copy_b = OperandCopy{copy_b, ob.value_or(lb)};
      }
    }
  }
  return best_ns;
}

// The model's choice, remembered per key, config restriction, device and profiles'
// generation: ranking every candidate costs tens of microseconds, as much as a small GEMM.
TilingChoice model_choice(const ProblemKey& key, std::optional<int> only_config) {
  static std::mutex mutex;
  static std::unordered_map<std::string, TilingChoice> choices;
  const std::string name = key.str() + "/" + std::to_string(only_config.value_or(-1)) + "/d" +
                           std::to_string(key.device) + "/p" + std::to_string(profiles_generation());
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = choices.find(name);
    if (it != choices.end()) return it->second;
  }
  const auto candidates = ranked_choices(key, only_config);
  TORCH_INTERNAL_ASSERT(!candidates.empty(), "vecgemm: no kernel config for ", key.str());
  std::lock_guard<std::mutex> lock(mutex);
  return choices[name] = candidates.front().second;
}

// Whether 3xTF32 row r runs on the key's device and takes the problem.
bool tf32x3_row_takes(int r, const ProblemKey& key) {
  const Tf32x3Row& row = kTf32x3Rows[r];
  return !tf32x3_violation(r, key.device) && !(row.refuses && row.refuses(key));
}

// Whether auto may plan 3xTF32 row r: it runs, takes the problem, and the device profile
// prices it on the problem's storage.
bool tf32x3_row_plannable(int r, const ProblemKey& key) { return tf32x3_row_takes(r, key) && tf32x3_priced(key, r); }

// The row and split predicted fastest for `key` among the rows auto may plan that are at
// least as accurate as fp32 summing `fp32_sum` products (earlier rows on a tie), each split
// at least `fewest_splits` ways, and only the rows with a split pass (the wgmma ones) where
// `split_pass_rows_only`; none where no row qualifies.
std::optional<Tf32x3Estimate> fastest_tf32x3_row(const ProblemKey& key, int64_t fp32_sum, int fewest_splits = 1,
                                                 bool split_pass_rows_only = false) {
  std::optional<Tf32x3Estimate> best;
  for (int r = 0; r < kNumTf32x3Rows; ++r) {
    const Tf32x3Row& row = kTf32x3Rows[r];
    if ((split_pass_rows_only && row.kernel_can_split == nullptr) || !tf32x3_row_plannable(r, key) ||
        fp32_sum < row.min_fp32_sum)
      continue;
    const Tf32x3Estimate c = tf32x3_cheapest_split(key, r, fewest_splits);
    if (!best || c.ns < best->ns) best = c;
  }
  return best;
}

// Few rows, many columns: a product of at most this many rows fills at most half of a wgmma
// row's 128-row tiles as given, and may run on its transpose instead.
constexpr int kTransposedMaxRows = 64;

// The problem as C^T = B^T A^T: B^T (N x K) is the kernel's A and A^T (K x M) its B, each the
// same memory read in the other order (the leading dimensions stay), so a row-major weight
// stored (N, K) is the kernel's K-contiguous A.
ProblemKey transposed_key(const ProblemKey& key) {
  ProblemKey t = key;
  t.m = key.n, t.n = key.m;
  t.la = other(key.lb), t.lb = other(key.la);
  return t;
}

// fastest_tf32x3_row on the transpose, for a product of few rows and many columns, or none.
// Only the wgmma rows (those with a split pass) are candidates: the mma.sync rows have 64-row
// tiles for few rows as given, and the narrow-side pair are each other's transpose. The split
// is at least 2, since only the reduction writes D in its own order, so K must hold two
// slices.
std::optional<Tf32x3Estimate> tf32x3_transposed_choice(const ProblemKey& key, int64_t fp32_sum) {
  if (key.m > kTransposedMaxRows || key.n <= kTransposedMaxRows) return std::nullopt;
  const ProblemKey t = transposed_key(key);
  if (tf32x3_most_splits(t) < 2) return std::nullopt;
  return fastest_tf32x3_row(t, fp32_sum, 2, true);
}

// The shortest floor among the rows auto may plan; none where there is none.
std::optional<int64_t> tf32x3_lowest_floor(const ProblemKey& key) {
  std::optional<int64_t> lowest;
  for (int r = 0; r < kNumTf32x3Rows; ++r)
    if (tf32x3_row_plannable(r, key) && (!lowest || kTf32x3Rows[r].min_fp32_sum < *lowest))
      lowest = kTf32x3Rows[r].min_fp32_sum;
  return lowest;
}

// Where precision 3xTF32 with the auto variant runs IEEE fp32 instead: 3xTF32 must not make
// a product less accurate or slower than fp32 would be (docs/design.md, "Precision").
//  - Accuracy. 3xTF32's error has a floor whatever K is, fp32's grows with the length L of
//    each FFMA chain, ~0.3 u sqrt(L), so it undercuts the floor on short sums; each row
//    says from which L on it is the more accurate (Tf32x3Row::min_fp32_sum), and only those
//    rows are candidates. fp32 plans split a deep K over few output tiles (ours and
//    cuBLAS's alike), so L is K over the IEEE plan's split (or over gemv's chains per
//    output), and the rows' figures leave room for cuBLAS splitting more than ours.
//  - Speed. The fastest such row's waves model against the SIMT cost model's time for the
//    IEEE plan (its copies and split included), or torch.matmul's where the hand-off rule
//    predicts that faster (fp32_rival_ns), all with their launches, the waves model's with
//    the device profile's slack for what it underprices (tf32x3_weighed_ns).
// gemv.cu sums each output over a warp: 32 lanes, four chains each, then a shuffle tree.
constexpr int kGemvChainsPerOutput = 128;

// gemv's K split. A warp reads its row a round at a time (kGemvKRound floats, 2 KB), so a
// grid of few warps waits on the memory's latency once a round: by Little's law the memory's
// rate (~4,800 bytes/ns on an H200) over a ~1 us latency needs some 2,400 rounds in flight.
// A matrix of fewer rows (over the batch) than kGemvWarpsPerSm a multiprocessor splits K
// until it has about that many warps, each slice kGemvMinSliceRounds rounds or more so that
// a warp's pipeline outlasts its ramp, the slices summed by the split-K reduction (one more
// launch, hidden behind gemv's last warps, and 4 bytes an output a slice).
constexpr int kGemvWarpsPerSm = 32;
constexpr int kGemvMinSliceRounds = 4;
constexpr int kGemvMaxSplits = 32;

int gemv_k_splits(const ProblemKey& key) {
  const int64_t warps = int64_t(std::max(key.m, key.n)) * key.batch;  // a warp a matrix row
  const int64_t wanted = int64_t(sm_count(key.device)) * kGemvWarpsPerSm / std::max<int64_t>(1, warps);
  const int64_t by_k = key.k / (int64_t(kGemvMinSliceRounds) * kGemvKRound);
  const int splits = int(std::max<int64_t>(1, std::min<int64_t>({wanted, by_k, kGemvMaxSplits})));
  return k_slices(key.k, splits, kGemvKRound).count;  // as it will run
}

std::string microseconds(double ns) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f us", ns / 1000.0);
  return text;
}

// The IEEE plan against torch.matmul: log(its predicted time / torch's), against cuBLAS's
// matrix-vector kernel for a matrix-vector product, else by the device profile's hand-off
// rule; none where neither speaks for the plan.
struct RatioToTorch {
  double log_ratio;
  bool matrix_vector;  // torch's time is its matrix-vector kernel's (torch_matrix_vector_ns)
};

std::optional<RatioToTorch> ratio_to_torch(const Plan& plan) {
  const ProblemKey& key = plan.key;
  if (const std::optional<double> torch_ns = torch_matrix_vector_ns(key)) {
    if (!(plan.predicted_ns > 0.0)) return std::nullopt;
    return RatioToTorch{std::log(plan.predicted_ns / *torch_ns), true};
  }
  const double macs = double(key.batch) * double(key.m) * double(key.n) * double(key.k);
  const std::optional<double> log_ratio = torch_handoff_log_ratio(
      key.device, plan.tiling, macs, plan.copy_a.made || plan.copy_b.made, plan.predicted_ns);
  if (!log_ratio) return std::nullopt;
  return RatioToTorch{*log_ratio, false};
}

// The fp32 time 3xTF32 has to beat: the IEEE plan's, or torch.matmul's where the hand-off
// rule predicts it faster, since the lenient op then runs torch's product (hands_to_torch).
// Under deterministic algorithms nothing is handed to torch, and the IEEE plan's time stands.
double fp32_rival_ns(const Plan& ieee) {
  if (at::globalContext().deterministicAlgorithms()) return ieee.predicted_ns;
  const std::optional<RatioToTorch> ratio = ratio_to_torch(ieee);
  return ratio && ratio->log_ratio > 0.0 ? ieee.predicted_ns / std::exp(ratio->log_ratio) : ieee.predicted_ns;
}

// The length of each fp32 chain of the IEEE plan.
int64_t fp32_sum_of(const ProblemKey& key, const Plan& ieee) {
  const int chains =
      ieee.family == Family::Gemv ? kGemvChainsPerOutput * ieee.gemv_splits : std::max(1, ieee.tiling.splits);
  return ceil_div(key.k, chains);
}

// Why the auto plan runs `ieee` rather than 3xTF32, or none; `choice`: the fastest row as
// accurate as `ieee` (fastest_tf32x3_row, or tf32x3_transposed_choice where `transposed`), none
// where no row is.
Reason tf32x3_declined(const ProblemKey& key, const std::optional<Tf32x3Estimate>& choice, const Plan& ieee,
                       bool transposed = false) {
  if (!choice) {
    const std::optional<int64_t> floor = tf32x3_lowest_floor(key);
    if (!floor)
      return std::string("no 3xTF32 row that takes this problem is priced on its storage orders and alignment "
                         "(the device profile's tf32x3 storage figures)");
    return "3xTF32 would be less accurate: fp32 sums " + std::to_string(fp32_sum_of(key, ieee)) +
           " products here, and below " + std::to_string(*floor) + " its error is under 3xTF32's floor";
  }
  // An IEEE plan the model does not price (gemv) leaves the choice to 3xTF32.
  const double fp32_ns = fp32_rival_ns(ieee);
  // The figures quoted are the two compared: the row's with the profile's slack.
  const double tf32x3_ns = tf32x3_weighed_ns(*choice, key.device);
  if (fp32_ns < tf32x3_ns)
    return "3xTF32 is not predicted faster: " + microseconds(tf32x3_ns) + " on " + kTf32x3Rows[choice->tiling.row].name +
           (transposed ? " on the transpose" : "") + " against " + microseconds(fp32_ns) + " in fp32";
  return std::nullopt;
}

// Why torch.matmul is predicted faster than an auto IEEE plan, or none (ratio_to_torch).
Reason torch_faster(const Plan& plan) {
  const std::optional<RatioToTorch> ratio = ratio_to_torch(plan);
  if (!ratio || ratio->log_ratio <= 0.0) return std::nullopt;
  char text[128];
  std::snprintf(text, sizeof(text), "torch.matmul is predicted faster: this plan at %.2fx its time%s",
                std::exp(ratio->log_ratio),
                ratio->matrix_vector ? " (its matrix-vector kernel reads the matrix once)" : "");
  return std::string(text);
}

// A variant as a number, for the plan cache's key: the config of a FixedConfig, -1..-3 for
// the named families and auto, -10 - row for a 3xTF32 row.
int variant_code(const Variant& variant) {
  if (const auto* fixed = std::get_if<FixedConfig>(&variant)) return fixed->config;
  if (const auto* row = std::get_if<FixedTf32x3>(&variant)) return -10 - row->row;
  if (std::holds_alternative<SeedKernel>(variant)) return -1;
  if (std::holds_alternative<MatrixVector>(variant)) return -2;
  return -3;
}

// The plan cache's key: everything plan() reads, the problem (its leading dimensions only
// through the vec4 flags), the variant, and the state of the process that can change a
// choice (the tuning cache's and the device profiles' generations, autotune mode,
// deterministic mode).
struct PlanKey {
  int64_t batch, m, n, k;
  int device, variant;
  unsigned flags;
  uint64_t tuning_generation, profiles_generation;
  int tf32x3_splits;  // a probe's forced 3xTF32 split (tf32x3_forced_splits), or 0
  bool operator==(const PlanKey& o) const {
    return batch == o.batch && m == o.m && n == o.n && k == o.k && device == o.device && variant == o.variant &&
           flags == o.flags && tuning_generation == o.tuning_generation &&
           profiles_generation == o.profiles_generation && tf32x3_splits == o.tf32x3_splits;
  }
};

struct PlanKeyHash {
  size_t operator()(const PlanKey& key) const {
    size_t h = 0;
    for (const uint64_t v : {uint64_t(key.batch), uint64_t(key.m), uint64_t(key.n), uint64_t(key.k),
                             uint64_t(key.device), uint64_t(int64_t(key.variant)), uint64_t(key.flags),
                             key.tuning_generation, key.profiles_generation, uint64_t(key.tf32x3_splits)})
      h = (h ^ v) * 0x100000001b3ull;  // FNV-1a over the fields
    return h;
  }
};

PlanKey plan_key(const Problem& p, const Variant& variant, Precision precision) {
  unsigned flags = 0, bit = 0;
  for (const bool b : {p.a.layout == Layout::RowMajor, p.b.layout == Layout::RowMajor, p.a_vec4, p.b_vec4,
                       p.a_broadcast, p.b_broadcast, p.d_vec4, at::globalContext().deterministicAlgorithms(),
                       autotune_enabled(), precision == Precision::Tf32x3})
    flags |= unsigned(b) << bit++;
  const GemmShape& s = p.shape;
  return PlanKey{s.batch, s.m, s.n, s.k, p.device, variant_code(variant), flags, tuning_generation(),
                 profiles_generation(), tf32x3_forced_splits()};
}

// allow_copies = false plans for the operands as they are (a plan's without_copies).
Plan make_plan(const Problem& problem, const Variant& variant, Precision precision, bool allow_copies);

// Plans by key, so that a repeated shape costs a lookup: planning a tiling ranks the
// candidates through the cost model, several microseconds. Cleared when full, since a
// process that sees more distinct problems than this gains little from keeping them.
constexpr size_t kMaxCachedPlans = 4096;

std::shared_ptr<const Plan> cached_plan(const Problem& problem, const Variant& variant, Precision precision) {
  static std::mutex mutex;
  static std::unordered_map<PlanKey, std::shared_ptr<const Plan>, PlanKeyHash> plans;
  const PlanKey key = plan_key(problem, variant, precision);
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = plans.find(key);
    if (it != plans.end()) return it->second;
  }
  auto p = std::make_shared<const Plan>(make_plan(problem, variant, precision, true));
  std::lock_guard<std::mutex> lock(mutex);
  if (plans.size() >= kMaxCachedPlans) plans.clear();
  plans.emplace(key, p);
  return p;
}

}  // namespace

std::optional<Variant> parse_variant(const std::string& name) {
  if (name == kAuto) return AutoSelect{};
  if (name == kVectorized) return SeedKernel{};
  if (name == kGemv) return MatrixVector{};
  if (const auto config = kernel_config_of(name)) return FixedConfig{*config};
  if (const auto row = tf32x3_row_of(name)) return FixedTf32x3{*row};
  return std::nullopt;
}

std::vector<std::string> variant_names() {
  std::vector<std::string> names{kAuto, kVectorized, kGemv};
  for (int c = 0; c < kNumKernelConfigs; ++c) names.push_back(kernel_config_name(c));
  for (const Tf32x3Row& row : kTf32x3Rows) names.push_back(row.name);
  return names;
}

ProblemKey key_as_given(const Problem& p) {
  const GemmShape& s = p.shape;
  return ProblemKey{int(s.batch), int(s.m), int(s.n), int(s.k), p.a.layout, p.b.layout, p.a_vec4 && p.b_vec4,
                    p.d_vec4, p.device};
}

Problem problem_of(const at::Tensor& A, const at::Tensor& B, bool d_vec4) {
  const MatrixStorage sa = *storage_of(A), sb = *storage_of(B);
  auto broadcast = [](const at::Tensor& t) { return t.dim() == 3 && t.size(0) > 1 && t.stride(0) == 0; };
  return Problem{shape_of(A, B), sa, sb, vec4_ok(A, sa), vec4_ok(B, sb), broadcast(A), broadcast(B), d_vec4,
                 A.get_device()};
}

std::shared_ptr<const Plan> plan(const Problem& problem, const Variant& variant, Precision precision) {
  return cached_plan(problem, variant, precision);
}

namespace {

Plan make_plan(const Problem& problem, const Variant& variant, Precision precision, bool allow_copies) {
  Plan out;
  out.given_a = problem.a.layout, out.given_b = problem.b.layout;
  out.key = key_as_given(problem);
  const GemmShape& s = problem.shape;
  if (s.batch == 0 || s.m == 0 || s.n == 0 || s.k == 0) {
    out.family = Family::Empty;
    return out;
  }
  if (std::holds_alternative<SeedKernel>(variant)) {
    out.family = Family::Vectorized;
    return out;
  }
  const bool auto_select = std::holds_alternative<AutoSelect>(variant);
  // 3xTF32: every shape on its kernel (matrix-vector ones too, which gemv would serve in
  // IEEE), with no operand copies: its 4-byte-copy instances take unaligned operands and
  // its checked loop a ragged K at full width, so a copy would buy little (docs/design.md).
  const auto* fixed_row = std::get_if<FixedTf32x3>(&variant);
  if (fixed_row || (auto_select && precision == Precision::Tf32x3)) {
    const auto any_row_takes = [&] {
      for (int r = 0; r < kNumTf32x3Rows; ++r)
        if (tf32x3_row_takes(r, out.key)) return true;
      return false;
    };
    TORCH_INTERNAL_ASSERT(fixed_row || any_row_takes(),
                          "vecgemm: 3xTF32 planned where the rules refuse it: ",
                          tf32x3_row_for(problem.device).reason.value_or(""));
    // The 3xTF32 plan of `choice` for the problem `key`.
    const auto tf32x3_plan = [&](const ProblemKey& key, const Tf32x3Estimate& choice) {
      Plan p = out;
      p.key = key;
      p.family = Family::Tf32x3;
      p.tf32x3 = choice.tiling;
      p.tf32x3.splits = k_slices(key.k, p.tf32x3.splits, kTf32x3Rows[p.tf32x3.row].bk).count;  // as it will run
      p.predicted_ns = choice.ns;
      return p;
    };
    if (fixed_row) return tf32x3_plan(out.key, tf32x3_cheapest_split(out.key, fixed_row->row));
    Plan ieee = make_plan(problem, variant, Precision::Ieee, allow_copies);
    const int64_t fp32_sum = fp32_sum_of(out.key, ieee);
    const std::optional<Tf32x3Estimate> given = fastest_tf32x3_row(out.key, fp32_sum);
    const std::optional<Tf32x3Estimate> flipped = tf32x3_transposed_choice(out.key, fp32_sum);
    // The transpose where it is predicted faster, the problem as given on a tie.
    const bool transpose = flipped && (!given || flipped->ns < given->ns);
    if (Reason why = tf32x3_declined(out.key, transpose ? flipped : given, ieee, transpose)) {
      ieee.tf32x3_declined = std::move(why);
      return ieee;
    }
    if (!transpose) return tf32x3_plan(out.key, *given);
    Plan transposed = tf32x3_plan(transposed_key(out.key), *flipped);
    transposed.transposed = true;
    transposed.untransposed = std::make_shared<const Plan>(
        given && !tf32x3_declined(out.key, given, ieee) ? tf32x3_plan(out.key, *given) : std::move(ieee));
    return transposed;
  }
  if (std::holds_alternative<MatrixVector>(variant) ||
      (auto_select && gemv_fits(out.key.m, out.key.n, out.key.la, out.key.lb))) {
    out.family = Family::Gemv;
    out.gemv_splits = gemv_k_splits(out.key);
    return out;
  }
  if (auto_select) out.predicted_ns = allow_copies ? plan_copies(problem, out) : model_best_ns(out.key);
  if (out.copy_a.made || out.copy_b.made)
    out.without_copies = std::make_shared<const Plan>(make_plan(problem, variant, precision, false));

  std::optional<int> only_config;
  if (const auto* fixed = std::get_if<FixedConfig>(&variant)) only_config = fixed->config;
  // Under torch.use_deterministic_algorithms(True) the choice depends on the problem alone:
  // the cost model's, never a timing (autotuned entries differ between processes).
  const bool timed_choices = auto_select && !at::globalContext().deterministicAlgorithms();
  const std::optional<TunedChoice> tuned = timed_choices ? tuned_choice(out.key) : std::nullopt;
  out.tiling = tuned ? tuned->tiling : model_choice(out.key, only_config);
  out.autotune_pending = timed_choices && !tuned && autotune_enabled();

  const KernelConfig& config = kKernelConfigs[out.tiling.config];
  out.family = config.mainloop.family == MainloopFamily::CpAsync ? Family::Async : Family::Tiled;
  out.tiling.splits = k_slices(out.key.k, out.tiling.splits, config.tiling.bk).count;  // as it will run
  if (out.tiling.stream_k && out.tiling.splits == 1) out.stream_k = stream_k_schedule(out.key, out.tiling.config);
  out.tiling.stream_k = out.stream_k.has_value();
  // Where autotune timed this problem, its measurement hands it to torch or keeps it, not the rule.
  if (tuned && tuned->torch_faster) out.torch_faster = "torch.matmul was timed faster (autotune)";
  if (auto_select && !tuned && !out.autotune_pending) out.torch_faster = torch_faster(out);
  return out;
}

}  // namespace

std::string describe(const Plan& plan) {
  switch (plan.family) {
    case Family::Empty:
      return "empty product";
    case Family::Vectorized:
      return kVectorized;
    case Family::Gemv:
      return plan.gemv_splits > 1 ? std::string(kGemv) + " split-k " + std::to_string(plan.gemv_splits) : kGemv;
    case Family::Tf32x3: {
      const Tf32x3Tiling& t = plan.tf32x3;
      const Tf32x3Row& row = kTf32x3Rows[t.row];
      std::string text = row.name;
      if (t.splits > 1) text += " split-k " + std::to_string(t.splits);
      // The kernel's operands are then B^T and A^T: "split pass of A" is of B^T.
      if (plan.transposed) text += " on the transpose (B^T A^T)";
      // ", split pass of A B": the operands split into TF32 parts before the kernel.
      if (row.kernel_can_split == nullptr || (t.kernel_splits.a && t.kernel_splits.b)) return text;
      return text + ", split pass of" + (t.kernel_splits.a ? "" : " A") + (t.kernel_splits.b ? "" : " B");
    }
    case Family::Tiled:
    case Family::Async:
      break;
  }
  std::string text = kernel_config_name(plan.tiling.config);
  if (plan.tiling.splits > 1) text += " split-k " + std::to_string(plan.tiling.splits);
  if (plan.stream_k) text += " stream-K tail";
  // "copy of A (column-major) B": the operands copied, with the order where it changed.
  std::string copied;
  for (const auto& [name, copy, given] : {std::tuple{"A", plan.copy_a, plan.given_a}, {"B", plan.copy_b, plan.given_b}}) {
    if (!copy.made) continue;
    copied += std::string(" ") + name;
    if (copy.order != given) copied += copy.order == Layout::RowMajor ? " (row-major)" : " (column-major)";
  }
  return copied.empty() ? text : text + ", copy of" + copied;
}

}  // namespace vecgemm
