// Prefill/decode tok/s of llama.cpp (node-llama-cpp's prebuilt CPU build) on a
// GGUF file, the same workload as bench/decode_table.sh: 64 prompt token ids,
// then N greedy tokens. Prints one JSON line.
//   node llama_bench.mjs MODEL.gguf THREADS [N_GEN] [mmap|no-mmap]
import { getLlama } from "node-llama-cpp";
const [model_path, threads_s, ngen_s, mmap_s] = process.argv.slice(2);
const threads = Number(threads_s);
const nGen = Number(ngen_s ?? 64);
const llama = await getLlama({ gpu: false, build: "never", logLevel: "error" });
const model = await llama.loadModel({ modelPath: model_path, useMmap: mmap_s === "mmap", gpuLayers: 0 });
const ctx = await model.createContext({ contextSize: 512, threads, batchSize: 512, flashAttention: false });
const seq = ctx.getSequence();
const prompt = Array.from({ length: 64 }, (_, i) => 1000 + 37 * i);
const t0 = performance.now();
let n = 0, tFirst = 0;
for await (const tok of seq.evaluate(prompt, { temperature: 0 })) {
  if (n === 0) tFirst = performance.now();
  if (++n >= nGen + 1) break;
}
const tEnd = performance.now();
console.log(JSON.stringify({ engine: "llama.cpp", build: llama.buildType ?? null, threads,
  prefill_tok_s: 64 / ((tFirst - t0) / 1000), decode_tok_s: (n - 1) / ((tEnd - tFirst) / 1000) }));
await ctx.dispose(); await model.dispose(); await llama.dispose();
