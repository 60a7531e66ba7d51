"""Corpus cases about which of several failures is the cause (written by
make_corpus.py, which owns the output directory and the expected-file keys):

  * a kill or teardown that follows another process's exception is a
    consequence of it (killed_after_*);
  * newest-first exports that stamp every line order by those stamps, ties
    included, so a traceback reads top to bottom again (newest_first_line_*);
  * an exception logged with its traceback at WARNING and retried is handled,
    not the failure, once the run went on (handled_*);
  * tensor-parallel ranks in one file: a rank's own error beats the kill that
    ends the job (tp_rank_*).
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


def killed_after_cpp_abort_sglang(write):
    # A scheduler dies in C++ (no Python traceback, only the terminate
    # message and faulthandler's dump); the server then gets SIGQUIT from its
    # child and the shell reports the server killed.
    lines = [
        "[2025-04-07 19:13:01] server_args=ServerArgs(model_path='meta-llama/Llama-3.1-8B-Instruct', tp_size=1, port=30000, mem_fraction_static=0.88, chunked_prefill_size=8192)",
        "[2025-04-07 19:13:09 TP0] Load weight begin. avail mem=78.50 GB",
        "[2025-04-07 19:13:14 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.41 GB, mem usage=15.09 GB.",
        "[2025-04-07 19:13:15 TP0] KV Cache is allocated. #tokens: 421345, K size: 25.72 GB, V size: 25.72 GB",
        "[2025-04-07 19:13:22 TP0] Capture cuda graph end. Time elapsed: 6.81 s. mem usage=1.02 GB. avail mem=10.61 GB.",
        "[2025-04-07 19:13:23] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)",
        "[2025-04-07 19:13:40 TP0] Prefill batch. #new-seq: 4, #new-token: 8192, #cached-token: 0, token usage: 0.02, #running-req: 0, #queue-req: 12",
        "[2025-04-07 19:13:41 TP0] Decode batch. #running-req: 16, #token: 9344, token usage: 0.02, gen throughput (token/s): 612.40, #queue-req: 0",
        "terminate called after throwing an instance of 'c10::Error'",
        "  what():  CUDA error: an illegal memory access was encountered",
    ] + CUDA_NOTES + [
        "",
        "Exception raised from c10_cuda_check_implementation at /pytorch/c10/cuda/CUDAException.cpp:43 (most recent call first):",
    ] + C10_FRAMES + [
        "",
        "Fatal Python error: Aborted",
        "",
        "Thread 0x00007f28e3fff640 (most recent call first):",
        f'  File "{SG}/managers/scheduler.py", line 1432 in watchdog_thread',
        '  File "/usr/lib/python3.10/threading.py", line 953 in run',
        '  File "/usr/lib/python3.10/threading.py", line 1016 in _bootstrap_inner',
        "",
        "Extension modules: numpy.core._multiarray_umath, torch._C, psutil._psutil_linux, zmq.backend.cython.context (total: 84)",
        "[2025-04-07 19:13:42] Received sigquit from a child process. It usually means the child failed.",
        "Killed",
    ]
    write("killed_after_cpp_abort_sglang", "\n".join(lines) + "\n", {
        "found": True, "message_contains": "illegal memory access", "is_consequence": False,
        "min_consequences": 1})


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


def killed_after_torchrun_watchdog_abort(write):
    # torchrun: rank 1's NCCL watchdog aborts the process on a CUDA error
    # (SIGABRT, no Python traceback); rank 0 ignores SIGTERM and is killed.
    # The agent's summary lists rank 0's SIGKILL above the root cause.
    r1 = "[rank1]:"
    lines = [
        "W0407 19:13:01.000000 3120 torch/distributed/run.py:792] ",
        "W0407 19:13:01.000000 3120 torch/distributed/run.py:792] *****************************************",
        "W0407 19:13:01.000000 3120 torch/distributed/run.py:792] Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed.",
        "W0407 19:13:01.000000 3120 torch/distributed/run.py:792] *****************************************",
        "[rank0]: INFO 2025-04-07 19:13:30 serve_tp.py:88 rank 0 ready, 2 ranks, model=/models/mixtral-8x7b",
        "[rank1]: INFO 2025-04-07 19:13:30 serve_tp.py:88 rank 1 ready, 2 ranks, model=/models/mixtral-8x7b",
        r1 + "[E0407 19:14:22.318450 3188 ProcessGroupNCCL.cpp:1896] [PG ID 0 PG GUID 0(default_pg) Rank 1] Process group watchdog thread terminated with exception: CUDA error: an illegal memory access was encountered",
    ] + [r1 + " " + n for n in CUDA_NOTES] + [
        r1 + "terminate called after throwing an instance of 'c10::DistBackendError'",
        r1 + "  what():  [PG ID 0 PG GUID 0(default_pg) Rank 1] Process group watchdog thread terminated with exception: CUDA error: an illegal memory access was encountered",
        r1 + "Exception raised from c10_cuda_check_implementation at /pytorch/c10/cuda/CUDAException.cpp:43 (most recent call first):",
    ] + [r1 + f for f in C10_FRAMES] + [
        "W0407 19:14:23.100000 3120 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 3187 closing signal SIGTERM",
        "E0407 19:14:53.200000 3120 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -6) local_rank: 1 (pid: 3188) of binary: /usr/bin/python3",
        "Traceback (most recent call last):",
        '  File "/usr/local/bin/torchrun", line 8, in <module>',
        "    sys.exit(main())",
        '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/launcher/api.py", line 263, in launch_agent',
        "    raise ChildFailedError(",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "============================================================",
        "serve_tp.py FAILED",
        "------------------------------------------------------------",
        "Failures:",
        "[1]:",
        "  time      : 2025-04-07_19:14:53",
        "  host      : gpu-node-3",
        "  rank      : 0 (local_rank: 0)",
        "  exitcode  : -9 (pid: 3187)",
        "  error_file: <N/A>",
        "  traceback : Signal 9 (SIGKILL) received by PID 3187",
        "------------------------------------------------------------",
        "Root Cause (first observed failure):",
        "[0]:",
        "  time      : 2025-04-07_19:14:23",
        "  host      : gpu-node-3",
        "  rank      : 1 (local_rank: 1)",
        "  exitcode  : -6 (pid: 3188)",
        "  error_file: <N/A>",
        "  traceback : Signal 6 (SIGABRT) received by PID 3188",
        "============================================================",
    ]
    write("killed_after_torchrun_watchdog_abort", "\n".join(lines) + "\n", {
        "found": True, "message_contains": "illegal memory access", "process": "rank1",
        "rank": 1, "is_consequence": False, "min_consequences": 1})


def line_stamped_export(entries, severity_stamp):
    """A console export that stamps every line, newest first: `entries` are
    (milliseconds, severity, text) in the order the processes wrote them. The
    export sorts by the stamp alone, so lines that share a millisecond keep
    the order they arrived in."""
    order = sorted(range(len(entries)), key=lambda i: -entries[i][0])
    return [severity_stamp(entries[i][1], entries[i][0]) + entries[i][2] for i in order]


def gke_stamp(severity, ms):
    s = ms / 1000.0
    return "%s 2025-04-07T11:%02d:%06.3fZ " % (severity, 13 + int(s) // 60, s % 60)


def newest_first_line_stamps_gke(write):
    # GKE: vLLM's own INFO lines come from stdout (INFO); tqdm bars and the
    # uncaught traceback come from stderr (ERROR). The traceback was written
    # in one go, so its lines share a few milliseconds.
    entries = [
        (1100, "INFO", "INFO 04-07 11:13:01 [api_server.py:1043] vLLM API server version 0.8.3"),
        (1105, "INFO", "INFO 04-07 11:13:01 [api_server.py:1044] args: Namespace(model='Qwen/Qwen2.5-32B-Instruct', tensor_parallel_size=2, max_model_len=131072, gpu_memory_utilization=0.9)"),
        (4210, "INFO", "INFO 04-07 11:13:04 [config.py:689] This model supports multiple tasks: {'generate', 'embed'}. Defaulting to 'generate'."),
        (5002, "ERROR", "Loading safetensors checkpoint shards:   0% Completed | 0/17 [00:00<?, ?it/s]"),
        (21044, "ERROR", "Loading safetensors checkpoint shards: 100% Completed | 17/17 [00:16<00:00,  1.02it/s]"),
        (21311, "INFO", "INFO 04-07 11:13:21 [gpu_model_runner.py:1329] Model loading took 30.72 GiB and 17.4 seconds"),
        (29870, "INFO", "INFO 04-07 11:13:29 [kv_cache_utils.py:578] GPU KV cache size: 87,440 tokens"),
    ]
    tb = [
        "Traceback (most recent call last):",
        '  File "/usr/local/bin/vllm", line 8, in <module>',
        "    sys.exit(main())",
        f'  File "{VL}/entrypoints/cli/main.py", line 51, in main',
        "    args.dispatch_function(args)",
        f'  File "{VL}/entrypoints/cli/serve.py", line 27, in cmd',
        "    uvloop.run(run_server(args))",
        f'  File "{VL}/entrypoints/openai/api_server.py", line 1078, in run_server',
        "    async with build_async_engine_client(args) as engine_client:",
        f'  File "{VL}/v1/engine/core_client.py", line 380, in __init__',
        "    self._wait_for_engine_startup()",
        f'  File "{VL}/v1/core/kv_cache_utils.py", line 531, in check_enough_kv_cache_memory',
        "    raise ValueError(",
        "ValueError: To serve at least one request with the models's max seq len (131072), (32.00 GiB KV cache is needed, which is larger than the available KV cache memory (21.35 GiB). Based on the available memory, the estimated maximum model length is 87440. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
    ]
    entries += [(29912 + i // 5, "ERROR", l) for i, l in enumerate(tb)]
    entries += [
        (30550, "ERROR", "/usr/lib/python3.12/multiprocessing/resource_tracker.py:279: UserWarning: resource_tracker: There appear to be 1 leaked shared_memory objects to clean up at shutdown"),
    ]
    write("newest_first_line_stamps_gke", "\n".join(line_stamped_export(entries, gke_stamp)) + "\n", {
        "found": True, "type": "ValueError", "message_contains": "KV cache memory",
        "file_contains": "vllm", "reversed": True})


def newest_first_line_stamps_cloud_run(write):
    # Cloud Run: plain-text lines get the severity DEFAULT, structured ones
    # their own. SGLang's scheduler logs its exception as one record whose
    # continuation lines each became an entry.
    entries = [
        (2100, "DEFAULT", "[2025-04-07 11:13:02] server_args=ServerArgs(model_path='google/gemma-2-27b-it', tp_size=1, mem_fraction_static=0.95, port=8080)"),
        (9870, "DEFAULT", "[2025-04-07 11:13:09 TP0] Load weight begin. avail mem=78.71 GB"),
        (24311, "DEFAULT", "[2025-04-07 11:13:24 TP0] Load weight end. type=Gemma2ForCausalLM, dtype=torch.bfloat16, avail mem=27.85 GB, mem usage=50.86 GB."),
        (24400, "WARNING", "[2025-04-07 11:13:24 TP0] Disable cuda graph because the sliding window attention is not supported yet."),
        (25033, "DEFAULT", "[2025-04-07 11:13:25 TP0] Scheduler hit an exception: Traceback (most recent call last):"),
    ]
    tb = [
        f'  File "{SG}/managers/scheduler.py", line 1999, in run_scheduler_process',
        "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, dp_rank)",
        f'  File "{SG}/managers/scheduler.py", line 249, in __init__',
        "    self.tp_worker = TpWorkerClass(",
        f'  File "{SG}/model_executor/model_runner.py", line 215, in __init__',
        "    self.init_memory_pool(min_per_gpu_memory, server_args.max_running_requests, server_args.max_total_tokens)",
        f'  File "{SG}/model_executor/model_runner.py", line 802, in init_memory_pool',
        "    raise RuntimeError(",
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
    ]
    entries += [(25033 + (i + 1) // 4, "DEFAULT", l) for i, l in enumerate(tb)]
    entries += [
        (25090, "DEFAULT", ""),
        (25410, "ERROR", "[2025-04-07 11:13:25] Received sigquit from a child process. It usually means the child failed."),
        (26002, "DEFAULT", "Killed"),
        (26300, "ERROR", "Container called exit(137)."),
    ]
    write("newest_first_line_stamps_cloud_run", "\n".join(line_stamped_export(entries, gke_stamp)) + "\n", {
        "found": True, "type": "RuntimeError", "message_contains": "Not enough memory",
        "function": "init_memory_pool", "process": "TP0", "rank": 0, "reversed": True})


def newest_first_line_stamps_strict(write):
    # The same kind of export, but sorted by stamps at a finer resolution
    # than they print: lines that show the same millisecond are newest first
    # as well. The API server's and the engine's lines are merged.
    entries = [
        (1000, "INFO", "(APIServer pid=1) INFO 04-07 11:13:01 [api_server.py:1043] vLLM API server version 0.8.3"),
        (1002, "INFO", "(EngineCore_0 pid=245) INFO 04-07 11:13:01 [core.py:61] Initializing a V1 LLM engine (v0.8.3) with config: model='meta-llama/Llama-3.3-70B-Instruct'"),
        (31000, "INFO", "(APIServer pid=1) INFO:     10.4.0.9:51022 - \"GET /health HTTP/1.1\" 200 OK"),
    ]
    tb = [
        "Traceback (most recent call last):",
        f'  File "{VL}/entrypoints/openai/api_server.py", line 1078, in run_server',
        "    async with build_async_engine_client(args) as engine_client:",
        f'  File "{VL}/transformers_utils/tokenizer.py", line 244, in get_tokenizer',
        "    tokenizer = AutoTokenizer.from_pretrained(",
        "OSError: Can't load tokenizer for 'meta-llama/Llama-3.3-70B-Instruct'. If you were trying to load it from 'https://huggingface.co/models', make sure you don't have a local directory with the same name.",
    ]
    entries += [(30200 + i // 3, "ERROR", "(APIServer pid=1) " + l) for i, l in enumerate(tb)]
    exported = []
    for i in sorted(range(len(entries)), key=lambda i: (-entries[i][0], -i)):
        exported.append(gke_stamp(entries[i][1], entries[i][0]) + entries[i][2])
    write("newest_first_line_stamps_strict", "\n".join(exported) + "\n", {
        "found": True, "type": "OSError", "message_contains": "Can't load tokenizer",
        "function": "get_tokenizer", "reversed": True})


def handled_hub_retry_then_oom(write):
    # vLLM logs a failed shard download with its traceback at WARNING (every
    # line of the record carries the prefix) and retries; the download then
    # succeeds and the engine fails later, out of memory.
    w = "WARNING 04-07 19:13:15 [weight_utils.py:281] "
    retry = [
        "Error downloading model-00003-of-00008.safetensors, retrying (attempt 1 of 5)",
        "Traceback (most recent call last):",
        f'  File "{DP}/urllib3/response.py", line 748, in _error_catcher',
        "    yield",
        f'  File "{DP}/urllib3/response.py", line 873, in _raw_read',
        "    data = self._fp_read(amt, read1=read1) if not fp_closed else b\"\"",
        "TimeoutError: The read operation timed out",
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        "Traceback (most recent call last):",
        f'  File "{DP}/huggingface_hub/file_download.py", line 1724, in _download_to_tmp_and_move',
        "    http_get(",
        f'  File "{DP}/requests/models.py", line 820, in generate',
        "    raise ConnectionError(e)",
        "requests.exceptions.ReadTimeout: HTTPSConnectionPool(host='cdn-lfs-us-1.hf.co', port=443): Read timed out.",
    ]
    e = "ERROR 04-07 19:14:31 [core.py:390] "
    oom = [
        "EngineCore hit an exception: Traceback (most recent call last):",
        f'  File "{VL}/v1/engine/core.py", line 75, in __init__',
        "    num_gpu_blocks, num_cpu_blocks = self._initialize_kv_caches(vllm_config)",
        f'  File "{VL}/v1/worker/gpu_model_runner.py", line 1567, in _dummy_sampler_run',
        "    sampler_output = self.model.sample(logits=logits, sampling_metadata=dummy_metadata)",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.64 GiB. GPU 0 has a total capacity of 79.25 GiB of which 3.22 GiB is free.",
    ]
    lines = [
        "INFO 04-07 19:13:01 [api_server.py:1043] vLLM API server version 0.8.3",
        "INFO 04-07 19:13:05 [weight_utils.py:265] Using model weights format ['*.safetensors']",
    ] + [w + l for l in retry] + [
        "INFO 04-07 19:13:47 [weight_utils.py:270] Time spent downloading weights for Qwen/Qwen2.5-72B-Instruct: 41.802 seconds",
        "INFO 04-07 19:14:20 [gpu_model_runner.py:1329] Model loading took 67.78 GiB and 75.1 seconds",
    ] + [e + l for l in oom] + [
        "CRITICAL 04-07 19:14:31 [core_client.py:361] Got fatal signal from worker processes, shutting down. See stack trace above for root cause issue.",
        "Killed",
    ]
    write("handled_hub_retry_then_oom", "\n".join(lines) + "\n", {
        "found": True, "type": "torch.OutOfMemoryError", "message_contains": "Tried to allocate 4.64 GiB",
        "signature": "cuda_oom", "function": "_dummy_sampler_run"})


def handled_connection_refused_healthy(write):
    # Ray Serve: a replica probes its engine before it listens, logs the
    # refused connection with its traceback at WARNING, retries, and serves.
    p = "(ServeReplica:default:LLMServer pid=2233) "
    lines = [
        "2025-04-07 19:13:01,101\tINFO worker.py:1832 -- Started a local Ray instance. View the dashboard at http://127.0.0.1:8265 ",
        "(ServeController pid=2101) INFO 2025-04-07 19:13:04,220 controller 2101 -- Deploying new version of Deployment(name='LLMServer', app='default') (initial target replicas: 1).",
        p + "WARNING 2025-04-07 19:13:20,551 default_LLMServer q8s2k1 -- Health probe to http://127.0.0.1:8001/health failed; retrying in 2s (attempt 1/30)",
        p + "Traceback (most recent call last):",
        p + f'  File "{DP}/urllib3/connection.py", line 198, in _new_conn',
        p + "    sock = connection.create_connection(",
        p + f'  File "{DP}/urllib3/util/connection.py", line 73, in create_connection',
        p + "    sock.connect(sa)",
        p + "ConnectionRefusedError: [Errno 111] Connection refused",
        p + "",
        p + "The above exception was the direct cause of the following exception:",
        p + "",
        p + "Traceback (most recent call last):",
        p + f'  File "{DP}/urllib3/connectionpool.py", line 787, in urlopen',
        p + "    response = self._make_request(",
        p + f'  File "{DP}/urllib3/connection.py", line 213, in _new_conn',
        p + "    raise NewConnectionError(",
        p + "urllib3.exceptions.NewConnectionError: <urllib3.connection.HTTPConnection object at 0x7f3e1c2b5d90>: Failed to establish a new connection: [Errno 111] Connection refused",
        p + "INFO 2025-04-07 19:13:31,004 default_LLMServer q8s2k1 -- Engine is healthy after 6 attempts.",
        "(ServeController pid=2101) INFO 2025-04-07 19:13:31,220 controller 2101 -- Replica(id='q8s2k1', deployment='LLMServer', app='default') started successfully on node 'a91f0c'.",
        p + "INFO 2025-04-07 19:13:40,118 default_LLMServer q8s2k1 3d2f-77 -- POST /v1/chat/completions 200 412.3ms",
        p + "INFO 2025-04-07 19:13:44,730 default_LLMServer q8s2k1 9a01-12 -- POST /v1/chat/completions 200 388.9ms",
    ]
    write("handled_connection_refused_healthy", "\n".join(lines) + "\n", {"found": False})


def handled_retry_then_killed(write):
    # A server's own logger writes the traceback under a WARNING record and
    # retries; later the process is killed without another word.
    lines = [
        "2025-04-07 19:13:01,101 INFO server.py:40 loading tokenizer for meta-llama/Llama-3.1-8B-Instruct",
        "2025-04-07 19:13:11,223 WARNING hub.py:112 fetching tokenizer_config.json failed, will retry in 5s (1/3)",
        "Traceback (most recent call last):",
        f'  File "{DP}/huggingface_hub/utils/_http.py", line 406, in hf_raise_for_status',
        "    response.raise_for_status()",
        f'  File "{DP}/requests/models.py", line 1024, in raise_for_status',
        "    raise HTTPError(http_error_msg, response=self)",
        "requests.exceptions.HTTPError: 504 Server Error: Gateway Time-out for url: https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/resolve/main/tokenizer_config.json",
        "2025-04-07 19:13:16,330 INFO hub.py:118 fetched tokenizer_config.json on attempt 2",
        "2025-04-07 19:13:40,412 INFO loader.py:88 loading 4 shards into host memory (pinned)",
        "2025-04-07 19:13:58,003 INFO loader.py:97 shard 2/4 loaded (29.9 GiB resident)",
        "Killed",
    ]
    write("handled_retry_then_killed", "\n".join(lines) + "\n", {
        "found": True, "signature": "killed", "message_contains": "Killed"})


def tp_rank_error_line_then_killed(write):
    # Eight ranks behind a wrapper that labels every line "[TPn] ". Rank 5
    # logs its RuntimeError on one line and stops; the others time out in the
    # next all-reduce ten minutes later; the launcher is killed.
    streams = []
    for r in range(8):
        p = f"[TP{r}] "
        s = [
            p + f"2025-04-07 19:13:1{r % 4},{200 + r:03d} INFO model_runner.py:244 Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, mem usage=83.51 GB.",
            p + f"2025-04-07 19:13:40,{300 + r:03d} INFO scheduler.py:1022 Decode batch. #running-req: 24, #token: 30211, token usage: 0.11",
        ]
        if r == 5:
            s += [
                p + "2025-04-07 19:13:52,541 ERROR tp_worker.py:188 RuntimeError: CUDA error: uncorrectable ECC error encountered",
                p + "2025-04-07 19:13:52,542 INFO scheduler.py:2320 Scheduler exiting",
            ]
        else:
            s += [
                p + f"[E0407 19:23:52.{600 + r:03d}000 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9121, OpType=ALLREDUCE, NumelIn=7168, NumelOut=7168, Timeout(ms)=600000) ran for 600011 milliseconds before timing out.",
            ]
        streams.append(s)
    from make_corpus import interleave
    lines = ["[2025-04-07 19:13:01] server_args=ServerArgs(model_path='deepseek-ai/DeepSeek-V3', tp_size=8, port=30000)"]
    lines += interleave([streams[r] for r in (2, 5, 0, 7, 1, 4, 6, 3)])
    lines += [
        "[2025-04-07 19:23:53] Received sigquit from a child process. It usually means the child failed.",
        "Killed",
    ]
    write("tp_rank_error_line_then_killed", "\n".join(lines) + "\n", {
        "found": True, "message_contains": "uncorrectable ECC error", "process": "TP5", "rank": 5,
        "is_consequence": False, "min_consequences": 7})


def tp_rank_tail_cut_then_killed(write):
    # `kubectl logs --tail` cut rank 3's traceback above its exception line;
    # the other ranks keep logging until the launcher is killed.
    tail3 = [
        f'  File "{SG}/model_executor/model_runner.py", line 1104, in forward_decode',
        "    return self.model.forward(",
        f'  File "{SG}/layers/attention/flashinfer_backend.py", line 612, in forward_decode',
        "    o = decode_wrapper.forward(",
        "RuntimeError: CUDA error: an illegal memory access was encountered",
    ] + CUDA_NOTES
    streams = [[f"[TP3] {l}" for l in tail3]]
    for r in (0, 1, 2):
        streams.append([
            f"[TP{r}] Decode batch. #running-req: 31, #token: 40022, token usage: 0.19, gen throughput (token/s): 1207.11",
            f"[TP{r}] Decode batch. #running-req: 31, #token: 40146, token usage: 0.19, gen throughput (token/s): 1212.80",
        ])
    from make_corpus import interleave
    lines = interleave(streams)
    lines += [f"[TP{r}] [E0407 19:24:01.{100 + r:03d}000 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=40211, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600004 milliseconds before timing out." for r in (0, 1, 2)]
    lines += [
        "Received sigquit from a child process. It usually means the child failed.",
        "Killed",
    ]
    write("tp_rank_tail_cut_then_killed", "\n".join(lines) + "\n", {
        "found": True, "type": "RuntimeError", "message_contains": "illegal memory access",
        "process": "TP3", "rank": 3, "is_consequence": False, "min_consequences": 3})


ALL = [
    killed_after_cpp_abort_sglang,
    killed_after_traceback_local_clock,
    killed_after_torchrun_watchdog_abort,
    newest_first_line_stamps_gke,
    newest_first_line_stamps_cloud_run,
    newest_first_line_stamps_strict,
    handled_hub_retry_then_oom,
    handled_connection_refused_healthy,
    handled_retry_then_killed,
    tp_rank_error_line_then_killed,
    tp_rank_tail_cut_then_killed,
]
