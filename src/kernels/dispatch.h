// Which ISA path each kernel family uses. Defaults come from the platform
// probe (GetKernelPaths(): best supported path, or SPECD_KERNEL_ISA); tests
// and benchmarks may switch paths to compare every variant the CPU supports.
//
// Not synchronized with running kernels: switch paths only while no kernel
// runs (test setup, between benchmark runs).
#pragma once

#include <cstdint>

#include "platform/cpu_features.h"

namespace specd::kernels {

QuantDotIsa ActiveQuantDotIsa();
// Selects the Q8_0/Q4_0 path, and with it the Q4_BF16 kernel (avx512vnni ->
// AVX-512, avx2/avxvnni -> AVX2, scalar) and the dequantizer of the other
// ggml block types (AVX2 on every path but scalar). Returns false and changes nothing
// when this CPU (or this build) lacks it.
bool SetQuantDotIsa(QuantDotIsa isa);

// Whether Q8_0/Q4_0 matmuls of many tokens use the AMX-INT8 tile kernels
// (they need the avx512vnni quantized path).
bool AmxActive();
// Turns the AMX kernels on or off. Turning them on returns false and changes
// nothing when the CPU, the OS or this build cannot run them.
bool SetAmx(bool on);

// How the ggml block types without an integer kernel (Q4_1 ... IQ4_XS) are
// dequantized now: "avx2" (every quantized path but scalar, on a CPU with
// AVX2) or "portable". Either gives the same values (cpu/dequant_matmul.h).
const char* ActiveDequantPath();

Bf16DotPath ActiveBf16Path();
// Returns false and changes nothing when the CPU lacks AVX512-BF16.
bool SetBf16Path(Bf16DotPath path);

// Restricts the Highway float ops to the given HWY_* target bits (one bit
// forces that target); 0 restores the probe's choice.
void SetFloatTargets(int64_t hwy_targets);
// The Highway target the float ops use now ("AVX3", "AVX2", "EMU128", ...).
const char* ActiveFloatTarget();

// How a matmul's output rows are split across the pool's threads: dynamic
// (default) hands out row chunks from a shared counter so a thread that wakes
// late or is preempted takes less; static gives each thread one equal range.
enum class MatMulSplit { kDynamic, kStatic };
MatMulSplit ActiveMatMulSplit();
void SetMatMulSplit(MatMulSplit split);

// Whether the one-token (decode) quantized kernels prefetch weight rows ahead
// of use in software (default on; off is the A/B baseline).
bool WeightPrefetchEnabled();
void SetWeightPrefetch(bool on);

// Whether one-token matmuls read the weights one row at a time, front to back
// (default on: each thread's weight traffic is then one sequential stream,
// which some machines read much faster than 4 rows side by side;
// docs/performance.md, "Stream decode"), or 4 rows side by side with software
// prefetch (the A/B baseline). Results are the same for f32/f16/bf16 and
// differ in f32 rounding only for q4_0. Q4_BF16 decode always reads 4 rows
// side by side (cpu/int4_kernels.h).
bool StreamDecodeEnabled();
void SetStreamDecode(bool on);
// Bytes the stream decode kernels prefetch ahead along a row (default 0: none;
// the model runner sets it from CalibrateStreamPrefetch(), read_calibration.h).
int StreamPrefetchBytes();
void SetStreamPrefetchBytes(int bytes);

// Batch invariance: a token's matmul outputs are bitwise the same whether it
// is multiplied alone or inside a batch of any size at any offset. Q8_0, Q4_0
// (every kernel sums in one order, cpu/quant_kernels.h), Q4_BF16, F32 and F16
// matmuls, the other ggml block types (dequantized rows through the F32
// kernel, cpu/dequant_matmul.h), attention and RMSNorm are so in every mode, and so is BF16 on
// AVX512-BF16 and Highway. Batch-invariant mode (default off;
// SPECD_DETERMINISTIC=1 or --deterministic turns it on) additionally keeps
// BF16 matmuls of several tokens off the AMX-BF16 tiles, which sum in another
// order than the one-token kernel.
bool BatchInvariantEnabled();
void SetBatchInvariant(bool on);

// Whether the model loader repacks matrices into 16-row groups
// (kernels::RepackForMatMul). Default: Q4_0 / Q8_0 where the active quantized
// path is AVX512-VNNI without AMX, BF16 where the BF16 path is AVX512-BF16
// without AMX-BF16 (the kernels that read that layout fastest); --no-repack
// turns it off (the A/B baseline).
// Contract: repacking never changes a bit of any product under the kernel
// paths active at load. Q4_0 / Q8_0: every path (scalar, AVX2, AVX-VNNI,
// AVX512-VNNI, AMX-INT8) sums in one order over either layout. BF16: only the
// AVX512-BF16 group kernel reads the groups, in the order of the AVX512-BF16
// row kernel; so BF16 is repacked only on that path and never where the
// AMX-BF16 tiles take the many-token products of the file's rows (AMX on,
// not batch-invariant), which sum in another order: there, and on the
// portable path, a BF16 matrix keeps its rows even when repacking is forced.
// true: every dtype that has a kernel over the groups, within that contract.
bool RepackEnabled();
void SetRepack(bool on);
void ResetRepack();  // back to the default above

// Applies the probe's choice (and logs it once). Every kernel entry point calls
// this; it is cheap after the first call.
void EnsureKernelPathsInitialized();

}  // namespace specd::kernels
