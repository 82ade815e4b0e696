// The seed's kernel ("Vectorized Memory Access: 128-bit Loads and Stores"), kept as the
// baseline every other variant is measured against. Names follow the seed text.
//
// Contract (checked on the host by vectorized_violation() before any launch, never here):
// A, B, C row-major and dense (lda = K, ldb = ldc = N), 16-byte aligned, M % BM == 0,
// N % BN == 0, K % BK == 0. Computes C = alpha * A @ B + beta * C in place.
//
// Departures from the seed, each needed for BLAS semantics or large inputs:
//  - beta == 0 does not read C, so NaN/Inf already in C cannot leak into the result;
//  - blockIdx.z walks a batch (strides in elements; 0 broadcasts an operand);
//  - block offsets are 64-bit, so matrices past 2^31 elements index correctly.
#pragma once
#include <cstdint>

namespace vecgemm {

template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM * BN) / (TM * TN))
    sgemm_vectorized(int M, int N, int K, float alpha, const float* A, const float* B,
                     float beta, float* C, int64_t batchStrideA, int64_t batchStrideB,
                     int64_t batchStrideC) {
  static_assert(BK % 4 == 0 && BN % 4 == 0 && TN % 4 == 0, "float4 paths need multiples of 4");
  static_assert((BM * BN) / (TM * TN) * 4 == BM * BK, "one float4 of A per thread per tile");
  static_assert((BM * BN) / (TM * TN) * 4 == BN * BK, "one float4 of B per thread per tile");

  const int cRow = blockIdx.y;
  const int cCol = blockIdx.x;

  // A is stored transposed ([BK][BM]) so that a thread's TM values of a column of the
  // tile are contiguous and load as LDS.128; B is already [BK][BN], the way it is read.
  __shared__ float As[BK * BM];
  __shared__ float Bs[BK * BN];

  const int threadCol = threadIdx.x % (BN / TN);
  const int threadRow = threadIdx.x / (BN / TN);

  A += blockIdx.z * batchStrideA + int64_t(cRow) * BM * K;
  B += blockIdx.z * batchStrideB + int64_t(cCol) * BN;
  C += blockIdx.z * batchStrideC + int64_t(cRow) * BM * N + int64_t(cCol) * BN;

  // Global reads stay coalesced: the column index is the fast-moving lane index.
  const int innerRowA = threadIdx.x / (BK / 4);
  const int innerColA = threadIdx.x % (BK / 4);
  const int innerRowB = threadIdx.x / (BN / 4);
  const int innerColB = threadIdx.x % (BN / 4);

  float threadResults[TM * TN] = {0.0f};
  float regM[TM] = {0.0f};
  float regN[TN] = {0.0f};

  for (int bkIdx = 0; bkIdx < K; bkIdx += BK) {
    // Four scalar stores scatter one float4 of A across four rows of As: the price of
    // the transpose, paid once per tile, against LDS.128 reads BK times per tile.
    const float4 tmp = reinterpret_cast<const float4*>(&A[int64_t(innerRowA) * K + innerColA * 4])[0];
    As[(innerColA * 4 + 0) * BM + innerRowA] = tmp.x;
    As[(innerColA * 4 + 1) * BM + innerRowA] = tmp.y;
    As[(innerColA * 4 + 2) * BM + innerRowA] = tmp.z;
    As[(innerColA * 4 + 3) * BM + innerRowA] = tmp.w;

    reinterpret_cast<float4*>(&Bs[innerRowB * BN + innerColB * 4])[0] =
        reinterpret_cast<const float4*>(&B[int64_t(innerRowB) * N + innerColB * 4])[0];
    __syncthreads();

    A += BK;
    B += int64_t(BK) * N;

    for (int dotIdx = 0; dotIdx < BK; ++dotIdx) {
      // Scalar loops on purpose, as in the seed: the addresses are contiguous and
      // 16-byte aligned, and ptxas fuses each group of four into one LDS.128 (checked
      // with cuobjdump --dump-sass on sm_90: 4 LDS.128 and 64 FFMA per dotIdx).
      for (int i = 0; i < TM; ++i) regM[i] = As[dotIdx * BM + threadRow * TM + i];
      for (int i = 0; i < TN; ++i) regN[i] = Bs[dotIdx * BN + threadCol * TN + i];
      for (int resIdxM = 0; resIdxM < TM; ++resIdxM)
        for (int resIdxN = 0; resIdxN < TN; ++resIdxN)
          threadResults[resIdxM * TN + resIdxN] += regM[resIdxM] * regN[resIdxN];
    }
    __syncthreads();
  }

  // A thread's TN outputs in a row are contiguous in C: read-modify-write as float4.
  for (int resIdxM = 0; resIdxM < TM; ++resIdxM) {
    for (int resIdxN = 0; resIdxN < TN; resIdxN += 4) {
      float* cPtr = &C[int64_t(threadRow * TM + resIdxM) * N + threadCol * TN + resIdxN];
      float4 tmp = make_float4(0.f, 0.f, 0.f, 0.f);
      if (beta != 0.0f) tmp = reinterpret_cast<float4*>(cPtr)[0];
      tmp.x = alpha * threadResults[resIdxM * TN + resIdxN + 0] + beta * tmp.x;
      tmp.y = alpha * threadResults[resIdxM * TN + resIdxN + 1] + beta * tmp.y;
      tmp.z = alpha * threadResults[resIdxM * TN + resIdxN + 2] + beta * tmp.z;
      tmp.w = alpha * threadResults[resIdxM * TN + resIdxN + 3] + beta * tmp.w;
      reinterpret_cast<float4*>(cPtr)[0] = tmp;
    }
  }
}

}  // namespace vecgemm
