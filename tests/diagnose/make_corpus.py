#!/usr/bin/env python3
"""Writes the diagnose test corpus: realistic multi-rank crash logs (*.log) and
what `specd diagnose` must find in each (*.expected.json).

Run from anywhere: python3 tests/diagnose/make_corpus.py. Output is
deterministic, so re-running it reproduces the committed files. The cases
about which of several failures is the cause live in cause_order_cases.py.

Expected-file keys (all optional except "found"): found, type, message_contains,
process, rank, signature, stage, function, file_contains, min_same_way,
min_consequences, missing_ranks, reversed, truncated, is_consequence.
"""
import json
import os
import random

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
SG = "/sgl-workspace/sglang/python/sglang/srt"


def write(name, text, expected, binary=False):
    mode = "wb" if binary else "w"
    with open(os.path.join(OUT, name + ".log"), mode) as f:
        f.write(text)
    with open(os.path.join(OUT, name + ".expected.json"), "w") as f:
        json.dump(expected, f, indent=2, sort_keys=True)
        f.write("\n")


def interleave(streams):
    """Round-robin merge of per-rank line lists, as a shared pipe would mix them."""
    out, idx = [], [0] * len(streams)
    while any(i < len(s) for i, s in zip(idx, streams)):
        for k, s in enumerate(streams):
            if idx[k] < len(s):
                out.append(s[idx[k]])
                idx[k] += 1
    return out


def keyerror12_story():
    streams = []
    for r in range(8):
        p = f"[TP{r}] "
        t = f"2026-12-02 10:40:{20 + (r % 3)},{101 + r:03d}"
        s = [
            p + f"{t} INFO scheduler.py:312 Init torch distributed begin.",
            p + f"{t} INFO model_runner.py:201 Load weight begin. avail mem=138.12 GB",
            p + f"{t} INFO model_runner.py:244 Load weight end. type=Qwen3MoeForCausalLM, dtype=torch.bfloat16, mem usage=29.51 GB.",
            p + f"2026-12-02 10:40:27,{100 + r * 7:03d} ERROR scheduler.py:2312 Scheduler hit an exception:",
            p + "Traceback (most recent call last):",
            p + f'  File "{SG}/managers/scheduler.py", line 2301, in run_scheduler_process',
            p + "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)",
            p + f'  File "{SG}/managers/scheduler.py", line 311, in __init__',
            p + "    self.tp_worker = TpWorkerClass(",
            p + f'  File "{SG}/model_executor/model_runner.py", line 268, in initialize',
            p + "    self.init_cuda_graphs()",
            p + '  File "/usr/local/lib/python3.12/dist-packages/torch/utils/_contextlib.py", line 116, in decorate_context',
            p + "    return func(*args, **kwargs)",
            p + f'  File "{SG}/layers/moe/fused_moe_triton/fused_moe.py", line 912, in get_default_config',
            p + "    config = _SM_TUNED_CONFIGS[device_capability[0]][dtype]",
            p + "             ~~~~~~~~~~~~~~~~~^^^^^^^^^^^^^^^^^^^^^^",
            p + "KeyError: 12",
            p + "",
            p + "--- Logging error ---",
            p + "Traceback (most recent call last):",
            p + '  File "/usr/lib/python3.12/logging/__init__.py", line 1160, in emit',
            p + "    msg = self.format(record)",
            p + '  File "/usr/lib/python3.12/logging/__init__.py", line 999, in format',
            p + "    return fmt.format(record)",
            p + '  File "/usr/lib/python3.12/logging/__init__.py", line 392, in getMessage',
            p + "    msg = msg % self.args",
            p + "          ~~~~^~~~~~~~~~~",
            p + "TypeError: not all arguments converted during string formatting",
            p + "Call stack:",
            p + '  File "/usr/lib/python3.12/multiprocessing/process.py", line 314, in _bootstrap',
            p + "    self.run()",
            p + f'  File "{SG}/managers/scheduler.py", line 2312, in run_scheduler_process',
            p + '    logger.error("Scheduler hit an exception", traceback, e)',
            p + "Message: 'Scheduler hit an exception'",
            p + "Arguments: ('Traceback (most recent call last):\\n ...', KeyError(12))",
        ]
        streams.append(s)
    head = [
        "[2026-12-02 10:40:12] server_args=ServerArgs(model_path='Qwen/Qwen3-235B-A22B', tp_size=8, port=30000)",
        "[2026-12-02 10:40:14] Using default HuggingFace chat template with detected content format: string",
    ]
    tail = [
        "[2026-12-02 10:40:28] Received sigquit from a child process. It usually means the child failed.",
        "[2026-12-02 10:40:28] Received sigquit from a child process. It usually means the child failed.",
        "Killed",
    ]
    # rank 0 gets the earliest ERROR stamp; shuffle the order a pipe delivers ranks in
    order = [3, 0, 6, 1, 7, 2, 5, 4]
    lines = head + interleave([streams[r] for r in order]) + tail
    write("keyerror12_sglang_tp8", "\n".join(lines) + "\n", {
        "found": True, "type": "KeyError", "message_contains": "12", "process": "TP0",
        "rank": 0, "signature": "unsupported_gpu_arch", "function": "get_default_config",
        "file_contains": "fused_moe.py", "min_same_way": 8, "min_consequences": 2})


def keyerror_120a_vllm():
    lines = ["INFO 12-02 10:40:01 [__init__.py:239] Automatically detected platform cuda.",
             "INFO 12-02 10:40:03 [api_server.py:1043] vLLM API server version 0.9.1"]
    streams = []
    for k, pid in enumerate([4711, 4712, 4713]):
        p = f"(VllmWorkerProcess pid={pid}) "
        st = f"ERROR 12-02 10:40:2{7 + k} [multiproc_worker_utils.py:239] "
        dp = "/usr/local/lib/python3.12/dist-packages"
        streams.append([
            p + f"INFO 12-02 10:40:1{k} [parallel_state.py:1065] rank {k + 1} in world size 4 is assigned as DP rank 0, PP rank 0, TP rank {k + 1}",
            p + st + "Exception in worker VllmWorkerProcess while processing method load_model.",
            p + st + "Traceback (most recent call last):",
            p + st + f'  File "{dp}/vllm/executor/multiproc_worker_utils.py", line 233, in _run_worker_process',
            p + st + "    output = run_method(worker, method, args, kwargs)",
            p + st + f'  File "{dp}/vllm/model_executor/layers/quantization/utils/fp8_utils.py", line 412, in get_w8a8_block_fp8_configs',
            p + st + "    return _ARCH_CONFIGS[current_platform.get_device_arch()]",
            p + st + "KeyError: '120a'",
        ])
    lines += interleave(streams)
    lines += ["ERROR 12-02 10:40:31 [engine.py:165] RuntimeError('Worker failed with error \\'\\'120a\\'\\', please check the stack trace above for the root cause')",
              "ERROR 12-02 10:40:31 [multiproc_worker_utils.py:120] Worker VllmWorkerProcess pid 4712 died, exit code: -15",
              "INFO 12-02 10:40:31 [multiproc_worker_utils.py:124] Killing local vLLM worker processes"]
    write("keyerror_120a_vllm", "\n".join(lines) + "\n", {
        "found": True, "type": "KeyError", "message_contains": "120a",
        "process": "VllmWorkerProcess pid=4711", "signature": "unsupported_gpu_arch",
        "function": "get_w8a8_block_fp8_configs", "file_contains": "fp8_utils.py", "min_same_way": 3})


def no_kernel_image_torchrun():
    streams = []
    for r in range(4):
        p = f"[rank{r}]: "
        streams.append([
            p + "Traceback (most recent call last):",
            p + '  File "/home/ci/bench/train_tp.py", line 88, in <module>',
            p + "    main()",
            p + '  File "/home/ci/bench/train_tp.py", line 61, in main',
            p + "    out = model(x)",
            p + '  File "/opt/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1751, in _wrapped_call_impl',
            p + "    return self._call_impl(*args, **kwargs)",
            p + '  File "/home/ci/bench/kernels/rmsnorm.py", line 40, in forward',
            p + "    return rmsnorm_cuda.forward(x, self.weight, self.eps)",
            p + "RuntimeError: CUDA error: no kernel image is available for execution on the device",
            p + "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
            p + "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
            p + "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
            p + "",
        ])
    lines = ["W1202 10:40:20.123000 140 torch/distributed/run.py:766] Setting OMP_NUM_THREADS environment variable for each process to be 1"]
    lines += interleave(streams)
    lines += ["[rank0]:[W1202 10:40:29.456 ProcessGroupNCCL.cpp:1479] Warning: WARNING: destroy_process_group() was not called before program exit",
              "E1202 10:40:30.001000 140 torch/distributed/elastic/multiprocessing/api.py:874] failed (exitcode: 1) local_rank: 0 (pid: 311) of binary: /opt/venv/bin/python3"]
    write("no_kernel_image_torchrun", "\n".join(lines) + "\n", {
        "found": True, "type": "RuntimeError", "message_contains": "no kernel image",
        "process": "rank0", "rank": 0, "signature": "no_kernel_image", "function": "forward",
        "file_contains": "rmsnorm.py", "min_same_way": 4})


def cuda_oom_ray():
    a = "(RayWorkerWrapper pid=8812, ip=10.0.0.2) "
    b = "(RayWorkerWrapper pid=8813, ip=10.0.0.3) "
    lines = [
        "2026-12-02 10:40:01,001 INFO worker.py:1832 -- Started a local Ray instance.",
        a + "INFO 12-02 10:40:12 [gpu_model_runner.py:1595] Model loading took 61.0 GiB and 42.1 seconds",
        b + "INFO 12-02 10:40:12 [gpu_model_runner.py:1595] Model loading took 61.0 GiB and 42.3 seconds",
        a + "ERROR 12-02 10:40:27 [worker_base.py:620] Error executing method 'determine_available_memory'. This might cause deadlock in distributed execution.",
        a + "ERROR 12-02 10:40:27 [worker_base.py:620] Traceback (most recent call last):",
        a + 'ERROR 12-02 10:40:27 [worker_base.py:620]   File "/srv/app/vllm/worker/worker_base.py", line 612, in execute_method',
        a + "ERROR 12-02 10:40:27 [worker_base.py:620]     return run_method(self, method, args, kwargs)",
        a + 'ERROR 12-02 10:40:27 [worker_base.py:620]   File "/srv/app/vllm/v1/worker/gpu_model_runner.py", line 2011, in _dummy_sampler_run',
        a + "ERROR 12-02 10:40:27 [worker_base.py:620]     logits = self.model.compute_logits(hidden_states, None)",
        a + "ERROR 12-02 10:40:27 [worker_base.py:620] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 7.83 GiB. GPU 0 has a total capacity of 79.19 GiB of which 3.12 GiB is free.",
        b + "ERROR 12-02 10:40:29 [worker_base.py:620] Error executing method 'determine_available_memory'.",
        b + "ERROR 12-02 10:40:29 [worker_base.py:620] Traceback (most recent call last):",
        b + 'ERROR 12-02 10:40:29 [worker_base.py:620]   File "/srv/app/vllm/distributed/device_communicators/cuda_communicator.py", line 88, in all_reduce',
        b + "ERROR 12-02 10:40:29 [worker_base.py:620]     torch.distributed.all_reduce(input_, group=self.device_group)",
        b + "ERROR 12-02 10:40:29 [worker_base.py:620] ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.",
        "2026-12-02 10:40:30,555 ERROR worker.py:420 -- Unhandled error (suppress with 'RAY_IGNORE_UNHANDLED_ERRORS=1'): The actor died unexpectedly before finishing this task.",
    ]
    write("cuda_oom_ray", "\n".join(lines) + "\n", {
        "found": True, "type": "torch.OutOfMemoryError", "message_contains": "CUDA out of memory",
        "process": "RayWorkerWrapper pid=8812", "signature": "cuda_oom",
        "function": "_dummy_sampler_run", "min_consequences": 1})


def nccl_watchdog_timeout():
    lines = []
    for r in [0, 1, 3]:
        lines.append(f"[rank{r}]:[E1202 10:50:27.{100 + r}000 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=812, OpType=ALLREDUCE, NumelIn=4096, NumelOut=4096, Timeout(ms)=600000) ran for 600015 milliseconds before timing out.")
    lines.append("[rank0]:[E1202 10:50:27.300000 ProcessGroupNCCL.cpp:1664] [PG ID 0 PG GUID 0(default_pg) Rank 0] monitoredBarrier: Rank 2 failed to pass monitoredBarrier in 600000 ms")
    for r in [0, 1, 3]:
        p = f"[rank{r}]: "
        lines += [
            p + "Traceback (most recent call last):",
            p + '  File "/work/llm/serve.py", line 140, in decode_step',
            p + "    dist.all_reduce(logits, group=tp_group)",
            p + f"torch.distributed.DistBackendError: [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=812, OpType=ALLREDUCE) ran for 600015 milliseconds before timing out.",
        ]
    lines.append("E1202 10:50:40.000000 140 torch/distributed/elastic/multiprocessing/api.py:732] Sending process 2202 closing signal SIGTERM")
    write("nccl_watchdog_timeout", "\n".join(lines) + "\n", {
        "found": True, "signature": "collective_timeout", "missing_ranks": [2],
        "is_consequence": True, "message_contains": "Watchdog caught collective operation timeout"})


def address_in_use_compose():
    c = "vllm-1  | "
    w = "webui-1 | "
    lines = [
        w + "INFO:     Started server process [1]",
        c + "INFO 12-02 10:40:01 [api_server.py:1043] vLLM API server version 0.9.1",
        c + "ERROR 12-02 10:40:05 [launcher.py:41] Error while attempting to bind on address ('0.0.0.0', 8000)",
        c + "Traceback (most recent call last):",
        c + '  File "/opt/serve/entrypoints/launcher.py", line 38, in serve_http',
        c + "    sock.bind((host, port))",
        c + "OSError: [Errno 98] Address already in use",
        w + "ERROR:    connection to http://vllm:8000/v1/models failed: Connection refused",
        "vllm-1 exited with code 1",
    ]
    write("address_in_use_compose", "\n".join(lines) + "\n", {
        "found": True, "type": "OSError", "message_contains": "Address already in use",
        "process": "vllm-1", "signature": "address_in_use", "function": "serve_http"})


def weights_size_mismatch():
    ts = "2026-12-02T10:40:27.{:06d}Z stderr F "
    body = [
        "Loading checkpoint shards:  50% Completed | 1/2 [00:03<00:03,  3.10s/it]",
        "Traceback (most recent call last):",
        '  File "/app/server/load.py", line 77, in load_model',
        "    model.load_state_dict(state, strict=True)",
        '  File "/usr/local/lib/python3.11/site-packages/torch/nn/modules/module.py", line 2593, in load_state_dict',
        "    raise RuntimeError(",
        "RuntimeError: Error(s) in loading state_dict for LlamaForCausalLM:",
        "\tsize mismatch for model.embed_tokens.weight: copying a param with shape torch.Size([128256, 4096]) from checkpoint, the shape in current model is torch.Size([32000, 4096]).",
        "\tMissing key(s) in state_dict: \"lm_head.weight\".",
    ]
    lines = [ts.format(i * 10) + b for i, b in enumerate(body)]
    write("weights_size_mismatch", "\n".join(lines) + "\n", {
        "found": True, "type": "RuntimeError", "message_contains": "loading state_dict",
        "signature": "weights_mismatch", "function": "load_model"})


def oom_killer_signal9():
    lines = [
        "Dec  2 10:40:20 node7 python3[2344]: [rank0] loading shard 0/4",
        "Dec  2 10:40:27 node7 kernel: Out of memory: Killed process 2345 (python3) total-vm:412001232kB, anon-rss:250331220kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:490124kB oom_score_adj:0",
        "[2026-12-02 10:40:27,900] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -9) local_rank: 1 (pid: 2345) of binary: /usr/bin/python3",
        "[rank0]: Traceback (most recent call last):",
        '[rank0]:   File "/work/llm/serve.py", line 140, in decode_step',
        "[rank0]:     dist.all_reduce(logits, group=tp_group)",
        "[rank0]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356, remote process exited or there was a network error, NCCL version 2.21.5",
        "[rank0]: ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
        "[rank2]: RuntimeError: [2] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: Connection reset by peer",
        "[2026-12-02 10:40:28,100] torch.distributed.elastic.multiprocessing.api: [WARNING] Sending process 2346 closing signal SIGTERM",
        "[2026-12-02 10:40:28,101] torch.distributed.elastic.multiprocessing.api: [WARNING] Sending process 2347 closing signal SIGTERM",
    ]
    write("oom_killer_signal9", "\n".join(lines) + "\n", {
        "found": True, "signature": "oom_killed", "message_contains": "Killed process 2345",
        "rank": 1, "process": "rank1", "min_consequences": 2})


def chained_during_handling():
    lines = [
        "2026-12-02 10:40:27,001 INFO loader: reading /models/llama/config.json",
        "Traceback (most recent call last):",
        '  File "/app/server/config.py", line 52, in rope_params',
        "    scaling = cfg[\"rope_scaling\"][\"factor\"]",
        "KeyError: 'factor'",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):",
        '  File "/app/server/main.py", line 12, in <module>',
        "    engine = build_engine(args)",
        '  File "/app/server/config.py", line 55, in rope_params',
        "    raise RuntimeError(f\"bad rope_scaling in {path}\")",
        "RuntimeError: bad rope_scaling in /models/llama/config.json",
    ]
    write("chained_during_handling", "\n".join(lines) + "\n", {
        "found": True, "type": "KeyError", "message_contains": "factor", "signature": None,
        "function": "rope_params"})


def chained_direct_cause():
    lines = [
        "Traceback (most recent call last):",
        '  File "/app/tok/load.py", line 20, in read_vocab',
        "    with open(path) as f:",
        "FileNotFoundError: [Errno 2] No such file or directory: '/models/qwen/tokenizer.json'",
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        "Traceback (most recent call last):",
        '  File "/app/main.py", line 30, in <module>',
        "    tok = load_tokenizer(args.model)",
        '  File "/app/tok/load.py", line 25, in load_tokenizer',
        "    raise OSError(f\"Can't load tokenizer for '{name}'\") from e",
        "OSError: Can't load tokenizer for '/models/qwen'",
    ]
    write("chained_direct_cause", "\n".join(lines) + "\n", {
        "found": True, "type": "FileNotFoundError", "message_contains": "tokenizer.json",
        "function": "read_vocab"})


def reversed_order():
    lines = []
    for r in range(2):
        p = f"2026-12-02T10:40:2{r}.000Z [rank{r}]: "
        lines.append(p + "INFO starting worker")
    lines += [
        "2026-12-02T10:40:27.100Z [rank1]: Traceback (most recent call last):",
        '2026-12-02T10:40:27.100Z [rank1]:   File "/app/llm/tuning.py", line 33, in lookup_tile_config',
        "2026-12-02T10:40:27.100Z [rank1]:     return TILE_CONFIGS[torch.cuda.get_device_capability()[0]]",
        "2026-12-02T10:40:27.101Z [rank1]: KeyError: 12",
        "2026-12-02T10:40:57.000Z [rank0]: Traceback (most recent call last):",
        '2026-12-02T10:40:57.000Z [rank0]:   File "/app/llm/tp.py", line 90, in all_reduce',
        "2026-12-02T10:40:57.000Z [rank0]:     dist.all_reduce(x)",
        "2026-12-02T10:40:57.001Z [rank0]: torch.distributed.DistBackendError: [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1) ran for 30000 milliseconds before timing out.",
        "2026-12-02T10:40:58.000Z [rank0]: INFO shutting down",
    ]
    lines.reverse()  # the collector prints newest first
    write("reversed_order", "\n".join(lines) + "\n", {
        "found": True, "type": "KeyError", "message_contains": "12", "process": "rank1",
        "rank": 1, "signature": "unsupported_gpu_arch", "reversed": True,
        "function": "lookup_tile_config", "min_consequences": 1})


def container_sglang_multiline():
    c = "sglang-1  | "
    lines = [
        c + "[2026-12-02 10:40:20 TP0] Load weight end. type=LlamaForCausalLM",
        c + "[2026-12-02 10:40:20 TP1] Load weight end. type=LlamaForCausalLM",
        c + "[2026-12-02 10:40:27 TP1] Scheduler hit an exception: Traceback (most recent call last):",
        c + f'  File "{SG}/managers/scheduler.py", line 2301, in run_scheduler_process',
        c + "    scheduler.event_loop_overlap()",
        c + f'  File "{SG}/mem_cache/memory_pool.py", line 190, in alloc',
        c + "    buffer = torch.empty(size, dtype=dtype, device=device)",
        c + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. GPU 1 has a total capacity of 79.10 GiB of which 2.25 GiB is free.",
        c + "",
        c + "[2026-12-02 10:40:28] Received sigquit from a child process. It usually means the child failed.",
    ]
    write("container_sglang_multiline", "\n".join(lines) + "\n", {
        "found": True, "type": "torch.OutOfMemoryError", "process": "sglang-1/TP1", "rank": 1,
        "signature": "cuda_oom", "function": "alloc", "min_consequences": 1})


def vllm_error_stamps():
    st = "ERROR 12-02 10:40:27 [core.py:515] "
    dp = "/usr/local/lib/python3.12/dist-packages"
    lines = [
        "INFO 12-02 10:40:20 [core.py:61] Initializing a V1 LLM engine (v0.9.1) with config: model='meta-llama/Llama-3.1-8B'",
        st + "EngineCore failed to start.",
        st + "Traceback (most recent call last):",
        st + f'  File "{dp}/vllm/v1/engine/core.py", line 506, in run_engine_core',
        st + "    engine_core = EngineCoreProc(*args, **kwargs)",
        st + f'  File "{dp}/vllm/v1/core/kv_cache_utils.py", line 565, in check_enough_kv_cache_memory',
        st + "    raise ValueError(",
        st + "ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache is needed, which is larger than the available KV cache memory (9.25 GiB). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
        "Process EngineCore_0:",
        "Traceback (most recent call last):",
        f'  File "{dp}/vllm/v1/engine/core_client.py", line 420, in __init__',
        "    self._wait_for_engine_startup()",
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
    ]
    write("vllm_error_stamps", "\n".join(lines) + "\n", {
        "found": True, "type": "ValueError", "message_contains": "max seq len",
        "function": "check_enough_kv_cache_memory", "min_consequences": 1})


def truncated_traceback():
    lines = [
        "[TP2] 2026-12-02 10:40:20,000 INFO loading",
        "[TP2] Traceback (most recent call last):",
        '[TP2]   File "/app/llm/runner.py", line 301, in capture_graphs',
        "[TP2]     graph.replay()",
        '[TP2]   File "/app/llm/kernels/attn.py", line 77, in paged_attention',
        "[TP2]     _kernel[grid](q, k, v, out)",
    ]
    write("truncated_traceback", "\n".join(lines), {
        "found": True, "truncated": True, "process": "TP2", "rank": 2,
        "function": "paged_attention", "file_contains": "attn.py"})


def no_error():
    lines = [
        "2026-12-02T10:40:27.000Z INFO  rank=0 [load weights] loaded 291 tensors in 1.8 s",
        "2026-12-02T10:40:27.100Z WARN  rank=0 [platform] no tuned entry for x86-avx512bf16: using generic defaults",
        "INFO 12-02 10:40:28 [metrics.py:455] Avg prompt throughput: 0.0 tokens/s, 0 errors",
        "WARNING 12-02 10:40:29 [scheduler.py:1200] error rate below threshold; retrying request 12",
        "[TP0] Decode batch. #running-req: 1, #token: 123, gen throughput (token/s): 88.1",
        "all good",
    ]
    write("no_error", "\n".join(lines) + "\n", {"found": False})


def healthy_noisy_words():
    # A healthy run whose unstamped output is full of words that name errors:
    # metric names, zero counters, handler registrations. No failure.
    lines = [
        "server started on port 8000",
        "metrics: requests=120 error_rate=0.0 errors_total=0 p99_ms=41",
        "Decode batch. #running-req: 3, #token: 512, gen throughput (token/s): 92.6, timeout_errors=0",
        "health check ok; failed_requests: 0; exception_count: 0",
        '{"level": "info", "msg": "stats", "error_rate": 0.0, "errors_total": 0, "oom_kills": 0}',
        "Exception handler registered for SIGTERM",
        "RuntimeError counters: 0",
        "Error: none",
        "validation: 0 errors, 0 failures, exit code 0",
        "step 5 loss=1.2 grad_norm=0.9 error=0.0",
        "Killed_requests=0 signal_9_count=0",
    ]
    write("healthy_noisy_words", "\n".join(lines) + "\n", {"found": False})


def empty():
    write("empty", "", {"found": False})


def binary_garbage():
    rnd = random.Random(1234)
    data = bytes(rnd.randrange(256) for _ in range(20000))
    write("binary_garbage", data, {"found": False}, binary=True)


def binary_then_error():
    rnd = random.Random(99)
    data = bytes(rnd.randrange(256) for _ in range(5000)) + b"\n"
    data += b"".join(l.encode() + b"\n" for l in [
        "Traceback (most recent call last):",
        '  File "/app/serve.py", line 10, in start',
        "    bind(port)",
        "OSError: [Errno 98] Address already in use",
    ])
    write("binary_then_error", data, {
        "found": True, "type": "OSError", "signature": "address_in_use", "function": "start"},
        binary=True)


def long_lines():
    lines = ["INFO prompt: " + "x" * 200000,
             "Traceback (most recent call last):",
             '  File "/app/llm/tokenize.py", line 5, in encode',
             "    ids = vocab[piece]",
             "KeyError: '" + "y" * 100000 + "'"]
    write("long_lines", "\n".join(lines) + "\n", {
        "found": True, "type": "KeyError", "function": "encode", "signature": None})


def specd_text():
    lines = [
        "2026-12-02T10:40:26.900Z INFO  rank=0 [comm init] shm region /specd-4411 (4 ranks, 64 MiB)",
        "2026-12-02T10:40:57.210Z ERROR rank=0 [comm init] DeadlineExceeded: waiting for rank 1 in barrier #1 after 30 s: missing ranks: 1",
        "2026-12-02T10:40:26.950Z INFO  rank=1 [load weights] opening /models/llama-3-8b",
        "2026-12-02T10:40:27.123Z ERROR rank=1 [load weights] NotFound: /models/llama-3-8b/model-00002-of-00004.safetensors: tensor 'model.layers.17.mlp.down_proj.weight' not found (hint: the checkpoint is incomplete; re-download shard 2)",
        "2026-12-02T10:40:57.220Z ERROR rank=2 [comm init] DeadlineExceeded: waiting for rank 1 in barrier #1 after 30 s: missing ranks: 1",
        "2026-12-02T10:40:57.230Z ERROR rank=3 [comm init] DeadlineExceeded: waiting for rank 1 in barrier #1 after 30 s: missing ranks: 1",
    ]
    write("specd_text", "\n".join(lines) + "\n", {
        "found": True, "type": "NotFound", "message_contains": "down_proj", "process": "rank1",
        "rank": 1, "stage": "load weights", "signature": "weights_mismatch",
        "hint_contains": "re-download", "min_consequences": 3, "missing_ranks": [1]})


def specd_json():
    def j(ts, level, rank, stage, msg, hint=None):
        d = {"ts": ts, "level": level, "rank": rank, "stage": stage, "msg": msg}
        if hint:
            d["hint"] = hint
        return json.dumps(d, separators=(",", ":"))
    lines = [
        j("2026-12-02T10:40:26.900Z", "info", 0, "comm init", "shm region /specd-4411"),
        j("2026-12-02T10:40:57.210Z", "error", 0, "comm init", "DeadlineExceeded: waiting for rank 1 in barrier #1 after 30 s: missing ranks: 1"),
        j("2026-12-02T10:40:57.220Z", "error", 2, "comm init", "Unavailable: peer rank 1 died (shm heartbeat stopped)"),
        j("2026-12-02T10:40:27.123Z", "error", 1, "load weights", "NotFound: model.safetensors: tensor 'lm_head.weight' not found", "check the checkpoint"),
        j("2026-12-02T10:40:57.230Z", "error", 3, "comm init", "DeadlineExceeded: waiting for rank 1 in barrier #1 after 30 s: missing ranks: 1"),
    ]
    write("specd_json", "\n".join(lines) + "\n", {
        "found": True, "type": "NotFound", "message_contains": "lm_head", "process": "rank1",
        "rank": 1, "stage": "load weights", "min_consequences": 3, "missing_ranks": [1]})


def newest_first(records, stamp):
    """A log exported newest first, as cloud consoles export it: each record is
    (seconds, lines); the record's first line gets the stamp, its continuation
    lines keep their order below it, and the records are listed newest first."""
    out = []
    for t, lines in sorted(records, key=lambda r: -r[0]):
        out.append(stamp(t) + lines[0])
        out += lines[1:]
    return out


def gcp_stamp(t):
    return "2026-12-02 10:%02d:%06.3f UTC  " % (40 + int(t) // 60, t % 60)


def iso_stamp(t):
    return "2026-12-02T10:%02d:%06.3fZ " % (40 + int(t) // 60, t % 60)


VL = "/usr/local/lib/python3.12/dist-packages/vllm"


def reversed_records_killed():
    # vLLM worker whose stderr lines are one record each (so its traceback is
    # exported upside down), and the engine's multi-line record that quotes a
    # consequence traceback in normal order; the last record is "Killed".
    w = "(VllmWorker rank=1 pid=412) "
    tb = [
        w + "ERROR 12-02 10:40:27 [multiproc_executor.py:527] WorkerProc hit an exception.",
        w + "ERROR 12-02 10:40:27 [multiproc_executor.py:527] Traceback (most recent call last):",
        w + f'ERROR 12-02 10:40:27 [multiproc_executor.py:527]   File "{VL}/v1/worker/gpu_worker.py", line 232, in determine_available_memory',
        w + "ERROR 12-02 10:40:27 [multiproc_executor.py:527]     self.model_runner.profile_run()",
        w + f'ERROR 12-02 10:40:27 [multiproc_executor.py:527]   File "{VL}/v1/worker/gpu_model_runner.py", line 2210, in profile_run',
        w + "ERROR 12-02 10:40:27 [multiproc_executor.py:527]     hidden_states = self._dummy_run(self.max_num_tokens)",
        w + "ERROR 12-02 10:40:27 [multiproc_executor.py:527] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 1 has a total capacity of 79.19 GiB of which 1.02 GiB is free.",
    ]
    records = [(20.0, ["INFO 12-02 10:40:20 [core.py:61] Initializing a V1 LLM engine (v0.9.1) with config: model='meta-llama/Llama-3.1-70B', tensor_parallel_size=2"]),
               (24.5, [w + "INFO 12-02 10:40:24 [gpu_model_runner.py:1595] Model loading took 65.9 GiB and 40.2 seconds"])]
    records += [(27.1 + 0.001 * i, [l]) for i, l in enumerate(tb)]
    records += [
        (27.9, ["ERROR 12-02 10:40:27 [core.py:586] EngineCore failed to start.",
                "Traceback (most recent call last):",
                f'  File "{VL}/v1/executor/multiproc_executor.py", line 241, in collective_rpc',
                "    raise RuntimeError(\"Worker failed with error 'CUDA out of memory', please check the stack trace above for the root cause\")",
                "RuntimeError: Worker failed with error 'CUDA out of memory', please check the stack trace above for the root cause"]),
        (28.4, ["ERROR 12-02 10:40:28 [multiproc_executor.py:140] Worker proc VllmWorker-0 died unexpectedly, shutting down executor."]),
        (31.0, ["Killed"]),
    ]
    write("reversed_records_killed", "\n".join(newest_first(records, gcp_stamp)) + "\n", {
        "found": True, "type": "torch.OutOfMemoryError", "message_contains": "Tried to allocate 3.50 GiB",
        "signature": "cuda_oom", "function": "profile_run", "reversed": True,
        "process": "VllmWorker rank=1 pid=412", "rank": 1, "min_consequences": 1})


def reversed_interleaved_ranks():
    # torchrun ranks writing to one stream, exported newest first with ISO
    # stamps: rank 2 fails a lookup, ranks 0, 1 and 3 time out in the next
    # collective, the agent reports a ChildFailedError in one multi-line record.
    records = []
    for r in range(4):
        records.append((20.0 + 0.01 * r, [f"[rank{r}]: INFO loading shard {r}/4"]))
    rank2 = [
        "[rank2]: Traceback (most recent call last):",
        '[rank2]:   File "/srv/llm/serve_tp.py", line 210, in <module>',
        "[rank2]:     engine = build_engine(args)",
        '[rank2]:   File "/srv/llm/moe/config.py", line 57, in expert_tile_config',
        "[rank2]:     return TUNED[(n_experts, device_name)]",
        "[rank2]: KeyError: (64, 'NVIDIA H20')",
    ]
    records += [(27.0 + 0.001 * i, [l]) for i, l in enumerate(rank2)]
    for r in (0, 1, 3):
        base = 57.0 + 0.1 * r
        lines = [
            f"[rank{r}]: Traceback (most recent call last):",
            f'[rank{r}]:   File "/srv/llm/tp.py", line 90, in all_reduce',
            f"[rank{r}]:     dist.all_reduce(x, group=group)",
            f"[rank{r}]: torch.distributed.DistBackendError: [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=14, OpType=ALLREDUCE) ran for 30000 milliseconds before timing out.",
        ]
        records += [(base + 0.001 * i, [l]) for i, l in enumerate(lines)]
    records.append((60.5, [
        "E1202 10:41:00.500000 140 torch/distributed/elastic/multiprocessing/api.py:874] failed (exitcode: 1) local_rank: 2 (pid: 5123) of binary: /usr/bin/python3",
        "Traceback (most recent call last):",
        '  File "/usr/local/bin/torchrun", line 8, in <module>',
        "    sys.exit(main())",
        '  File "/usr/local/lib/python3.11/site-packages/torch/distributed/launcher/api.py", line 263, in launch_agent',
        "    raise ChildFailedError(",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "============================================================",
        "serve_tp.py FAILED",
        "------------------------------------------------------------",
        "Root Cause (first observed failure):",
        "[0]:",
        "  rank      : 2 (local_rank: 2)",
        "  exitcode  : 1 (pid: 5123)",
        "============================================================"]))
    write("reversed_interleaved_ranks", "\n".join(newest_first(records, iso_stamp)) + "\n", {
        "found": True, "type": "KeyError", "message_contains": "NVIDIA H20", "process": "rank2",
        "rank": 2, "function": "expert_tile_config", "reversed": True, "min_consequences": 3})


def reversed_sglang_multiline_record():
    # SGLang's scheduler exception logged as one multi-line record (the
    # collector keeps continuation lines with their record) among one-line
    # records, exported newest first: the record reads top to bottom, the
    # records bottom to top.
    records = [
        (20.0, ["[2026-12-02 10:40:20 TP0] Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=51.20 GB"]),
        (20.5, ["[2026-12-02 10:40:20 TP1] Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=51.18 GB"]),
        (27.0, ["[2026-12-02 10:40:27 TP1] Scheduler hit an exception: Traceback (most recent call last):",
                f'  File "{SG}/managers/scheduler.py", line 2301, in run_scheduler_process',
                "    scheduler.event_loop_overlap()",
                f'  File "{SG}/model_executor/cuda_graph_runner.py", line 388, in capture',
                "    self.capture_one_batch_size(bs, forward)",
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.25 GiB. GPU 1 has a total capacity of 79.10 GiB of which 612.00 MiB is free."]),
        (27.5, ["[2026-12-02 10:40:27] Received sigquit from a child process. It usually means the child failed."]),
        (28.0, ["Killed"]),
    ]
    write("reversed_sglang_multiline_record", "\n".join(newest_first(records, gcp_stamp)) + "\n", {
        "found": True, "type": "torch.OutOfMemoryError", "message_contains": "1.25 GiB",
        "process": "TP1", "rank": 1, "signature": "cuda_oom", "function": "capture"})


def reversed_truncated_export():
    # A newest-first export cut at the console's row limit: the oldest records,
    # among them the traceback's header and outer frames, are missing.
    lines = [
        '[rank0]:   File "/srv/llm/kernels/attn.py", line 77, in paged_attention',
        "[rank0]:     _kernel[grid](q, k, v, out)",
        "[rank0]: RuntimeError: CUDA error: an illegal memory access was encountered",
        "[rank0]: CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
        "[rank0]: For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
        "E1202 10:40:40.000000 140 torch/distributed/elastic/multiprocessing/api.py:874] failed (exitcode: -6) local_rank: 0 (pid: 733) of binary: /usr/bin/python3",
    ]
    records = [(30.0 + 0.001 * i, [l]) for i, l in enumerate(lines)]
    write("reversed_truncated_export", "\n".join(newest_first(records, iso_stamp)) + "\n", {
        "found": True, "message_contains": "illegal memory access", "rank": 0})


def healthy_reversed_noisy():
    # A healthy server's log exported newest first: many words that name
    # errors, no error-level record and no traceback.
    records = [
        (20.0, ["INFO 12-02 10:40:20 [api_server.py:1043] vLLM API server version 0.9.1"]),
        (21.0, ["INFO 12-02 10:40:21 [config.py:1604] Using max model len 8192; errors='ignore' for the tokenizer"]),
        (22.0, ["INFO 12-02 10:40:22 [launcher.py:29] Available routes are: /health, /v1/completions, /metrics (errors_total, request_failure_count)"]),
        (30.0, ["INFO 12-02 10:40:30 [loggers.py:118] Engine 000: Avg prompt throughput: 812.0 tokens/s, Avg generation throughput: 95.2 tokens/s, Running: 3 reqs, Waiting: 0 reqs, Errored: 0, Killed: 0"]),
        (31.0, ["INFO:     10.0.0.7:51234 - \"POST /v1/completions HTTP/1.1\" 200 OK"]),
        (32.0, ["INFO 12-02 10:40:32 [metrics.py:455] timeout_count=0 oom_count=0 exception_count=0 nan_count=0"]),
        (33.0, ["INFO:     10.0.0.7:51240 - \"GET /health HTTP/1.1\" 200 OK"]),
        (34.0, ["INFO 12-02 10:40:34 [engine.py:300] Traceback capture enabled for slow requests (none so far)"]),
    ]
    write("healthy_reversed_noisy", "\n".join(newest_first(records, gcp_stamp)) + "\n", {"found": False})


def torchrun_childfailed_forward():
    # Forward order: rank 1's own exception, then the launcher's
    # ChildFailedError summary (a consequence) and its traceback.
    lines = [
        "W1202 10:40:10.000000 140 torch/distributed/run.py:766] Setting OMP_NUM_THREADS environment variable for each process to be 1",
        "[rank1]: Traceback (most recent call last):",
        '[rank1]:   File "/srv/llm/serve_tp.py", line 120, in <module>',
        "[rank1]:     main()",
        '[rank1]:   File "/srv/llm/weights.py", line 64, in shard_weights',
        "[rank1]:     raise ValueError(f\"hidden size {h} is not divisible by tp {tp}\")",
        "[rank1]: ValueError: hidden size 5120 is not divisible by tp 3",
        "W1202 10:40:21.000000 140 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 5120 closing signal SIGTERM",
        "E1202 10:40:21.500000 140 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) local_rank: 1 (pid: 5121) of binary: /usr/bin/python3",
        "Traceback (most recent call last):",
        '  File "/usr/local/bin/torchrun", line 8, in <module>',
        "    sys.exit(main())",
        '  File "/usr/local/lib/python3.11/site-packages/torch/distributed/launcher/api.py", line 263, in launch_agent',
        "    raise ChildFailedError(",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "============================================================",
        "serve_tp.py FAILED",
        "------------------------------------------------------------",
        "Root Cause (first observed failure):",
        "[0]:",
        "  time      : 2026-12-02_10:40:21",
        "  rank      : 1 (local_rank: 1)",
        "  exitcode  : 1 (pid: 5121)",
        "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
        "============================================================",
    ]
    write("torchrun_childfailed_forward", "\n".join(lines) + "\n", {
        "found": True, "type": "ValueError", "message_contains": "not divisible by tp 3",
        "process": "rank1", "rank": 1, "function": "shard_weights", "min_consequences": 1})


def healthy_cri_noisy():
    # A healthy pod log (Kubernetes CRI prefixes) whose lines name errors,
    # failures, timeouts and kills without any error-level record or traceback.
    ts = "2026-12-02T10:40:%02d.%06dZ stderr F "
    body = [
        "INFO 12-02 10:40:01 [__init__.py:239] Automatically detected platform cuda.",
        "NCCL INFO NET/IB : No device found; using NET/Socket (fallback after init error is expected on this node)",
        "WARNING 12-02 10:40:05 [config.py:3211] Casting torch.bfloat16 to torch.float16; an error in precision of 1e-3 is expected",
        "INFO 12-02 10:40:09 [gpu_worker.py:227] Available KV cache memory: 31.2 GiB (no OOM risk at this batch size)",
        "WARNING 12-02 10:40:12 [scheduler.py:1200] Request cmpl-7 timed out in queue after 30 s; retrying (attempt 2/3)",
        "INFO 12-02 10:40:15 [loggers.py:118] Engine 000: Running: 2 reqs, Waiting: 0 reqs, Errored: 0, Killed: 0, Exception: none",
        "INFO:     10.0.0.9:40210 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK",
        "INFO 12-02 10:40:20 [launcher.py:80] Shutting down FastAPI HTTP server (SIGTERM received; graceful, 0 failed requests).",
    ]
    lines = [ts % (i * 2 + 1, i * 1000) + b for i, b in enumerate(body)]
    write("healthy_cri_noisy", "\n".join(lines) + "\n", {"found": False})


def reversed_cloudwatch_csv():
    # A CloudWatch Logs Insights CSV export (@timestamp,@message), newest
    # first, one record per stderr line; messages with commas or quotes are
    # quoted with doubled quotes. Rank 1 hits an NCCL error while rank 0's
    # collective then times out.
    import csv
    import io
    rank1 = [
        "[rank1]: Traceback (most recent call last):",
        '[rank1]:   File "/srv/llm/serve_tp.py", line 210, in <module>',
        "[rank1]:     engine.warmup()",
        '[rank1]:   File "/srv/llm/comm.py", line 41, in init_nccl',
        "[rank1]:     self.comm = PyNcclCommunicator(group, device=dev)",
        "[rank1]: RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
    ]
    rows = [(20.0, "[rank0]: INFO NCCL_P2P_LEVEL=NVL, 2 ranks"), (20.1, "[rank1]: INFO NCCL_P2P_LEVEL=NVL, 2 ranks")]
    rows += [(27.0 + 0.001 * i, l) for i, l in enumerate(rank1)]
    rank0 = [
        "[rank0]: Traceback (most recent call last):",
        '[rank0]:   File "/srv/llm/tp.py", line 90, in all_reduce',
        "[rank0]:     dist.all_reduce(x, group=group)",
        "[rank0]: torch.distributed.DistBackendError: [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.",
    ]
    rows += [(47.0 + 0.001 * i, l) for i, l in enumerate(rank0)]
    rows.append((50.0, "Killed"))
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["@timestamp", "@message"])
    for t, msg in sorted(rows, key=lambda r: -r[0]):
        w.writerow(["2026-12-02 10:%02d:%06.3f" % (40 + int(t) // 60, t % 60), msg])
    write("reversed_cloudwatch_csv", out.getvalue(), {
        "found": True, "type": "RuntimeError", "message_contains": "unhandled cuda error",
        "process": "rank1", "rank": 1, "function": "init_nccl", "reversed": True,
        "min_consequences": 1})


if __name__ == "__main__":
    import cause_order_cases
    os.makedirs(OUT, exist_ok=True)
    for fn in [keyerror12_story, keyerror_120a_vllm, no_kernel_image_torchrun, cuda_oom_ray,
               nccl_watchdog_timeout, address_in_use_compose, weights_size_mismatch,
               oom_killer_signal9, chained_during_handling, chained_direct_cause, reversed_order,
               container_sglang_multiline, vllm_error_stamps, truncated_traceback, no_error, healthy_noisy_words,
               empty, binary_garbage, binary_then_error, long_lines, specd_text, specd_json,
               reversed_records_killed, reversed_interleaved_ranks,
               reversed_sglang_multiline_record, reversed_truncated_export,
               healthy_reversed_noisy, torchrun_childfailed_forward, healthy_cri_noisy,
               reversed_cloudwatch_csv]:
        fn()
    for fn in cause_order_cases.ALL:
        fn(write)
