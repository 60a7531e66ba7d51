"""Corpus cases about which of several failures is the cause (written by
make_corpus.py, which owns the output directory and the expected-file keys):

  * a kill or teardown that follows another process's exception is a
    consequence of it (killed_after_*);
"""

SG = "/sgl-workspace/sglang/python/sglang/srt"
VL = "/usr/local/lib/python3.12/dist-packages/vllm"
DP = "/usr/local/lib/python3.12/dist-packages"
CUDA_NOTES = [
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
]
C10_FRAMES = [
    "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x98 (0x7f2a1c96c1b6 in /usr/local/lib/python3.10/dist-packages/torch/lib/libc10.so)",
    "frame #1: c10::detail::torchCheckFail(char const*, char const*, unsigned int, std::string const&) + 0x64 (0x7f2a1c915a76 in /usr/local/lib/python3.10/dist-packages/torch/lib/libc10.so)",
    "frame #2: c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, int, bool) + 0x118 (0x7f2a1cdcc918 in /usr/local/lib/python3.10/dist-packages/torch/lib/libc10_cuda.so)",
    "frame #3: c10d::ProcessGroupNCCL::WorkNCCL::finishedGPUExecutionInternal() const + 0x56 (0x7f29d201c556 in /usr/local/lib/python3.10/dist-packages/torch/lib/libtorch_cuda.so)",
    "frame #4: c10d::ProcessGroupNCCL::watchdogHandler() + 0x213 (0x7f29d2026cf3 in /usr/local/lib/python3.10/dist-packages/torch/lib/libtorch_cuda.so)",
    "frame #5: <unknown function> + 0x94ac3 (0x7f2a1d294ac3 in /lib/x86_64-linux-gnu/libc.so.6)",
]


def killed_after_traceback_local_clock(write):
    # A Kubernetes pod log: containerd stamps every line with the node's
    # local offset (+08:00) while vLLM's own stamps are naive local time. The
    # engine's traceback comes first; the pod is killed a second later.
    def cri(t, stream, text):
        return "2025-04-07T19:%02d:%09.6f+08:00 %s F %s" % (t // 60, t % 60, stream, text)
    e = "ERROR 04-07 19:13:40 [core.py:387] "
    tb = [
        "EngineCore hit an exception: Traceback (most recent call last):",
        f'  File "{VL}/v1/engine/core.py", line 380, in run_engine_core',
        "    engine_core.run_busy_loop()",
        f'  File "{VL}/v1/engine/core.py", line 402, in run_busy_loop',
        "    outputs = step_fn()",
        f'  File "{VL}/v1/worker/gpu_model_runner.py", line 1101, in execute_model',
        "    hidden_states = self.model(",
        f'  File "{VL}/model_executor/layers/linear.py", line 474, in forward',
        "    output_parallel = self.quant_method.apply(self, input_, bias)",
        "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx( handle, opa, opb, m, n, k, &falpha, a, CUDA_R_16BF, lda, b, CUDA_R_16BF, ldb, &fbeta, c, CUDA_R_16BF, ldc, compute_type, CUBLAS_GEMM_DEFAULT_TENSOR_OP)`",
    ]
    lines = [
        cri(781.102934, "stdout", "INFO 04-07 19:13:01 [__init__.py:239] Automatically detected platform cuda."),
        cri(782.004511, "stdout", "INFO 04-07 19:13:02 [api_server.py:1043] vLLM API server version 0.8.4"),
        cri(803.771020, "stdout", "INFO 04-07 19:13:23 [gpu_model_runner.py:1329] Model loading took 14.99 GiB and 19.8 seconds"),
        cri(815.320118, "stdout", "INFO 04-07 19:13:35 [api_server.py:1090] Starting vLLM API server on http://0.0.0.0:8000"),
        cri(818.400201, "stdout", "INFO:     10.12.0.5:40112 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK"),
    ]
    lines += [cri(820.551872 + 0.00001 * i, "stderr", e + l) for i, l in enumerate(tb)]
    lines += [
        cri(820.601034, "stderr", "CRITICAL 04-07 19:13:40 [core_client.py:361] Got fatal signal from worker processes, shutting down. See stack trace above for root cause issue."),
        cri(821.100502, "stderr", "Killed"),
    ]
    write("killed_after_traceback_local_clock", "\n".join(lines) + "\n", {
        "found": True, "type": "RuntimeError", "message_contains": "CUBLAS_STATUS_EXECUTION_FAILED",
        "function": "forward", "is_consequence": False, "min_consequences": 1})


ALL = [
    killed_after_traceback_local_clock,
]
