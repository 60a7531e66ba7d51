// Load generator for `specd serve`: streamed /v1/completions at several
// concurrency levels; reports aggregate output tok/s and p50/p99 time to
// first token. Needs only Node 20 (global fetch).
//
//   specd serve --model small-170m-q4_0.gguf --port 8000 --max-batch 64 &
//   node bench/serve_bench.mjs --url http://127.0.0.1:8000 \
//       --concurrency 1,4,16,64 --prompt-tokens 32 --max-tokens 64
//
// Prompts are token ids (random fixtures have no tokenizer); ignore_eos keeps
// every request at exactly max_tokens. Each level runs `--requests-per-stream`
// requests per concurrent stream (default 2) after one warm-up request.
const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => {
    if (a.startsWith("--")) acc.push([a.slice(2), all[i + 1]]);
    return acc;
  }, []));
const url = (args.url ?? "http://127.0.0.1:8000").replace(/\/$/, "");
const levels = (args.concurrency ?? "1,4,16,64").split(",").map(Number);
const promptTokens = Number(args["prompt-tokens"] ?? 32);
const maxTokens = Number(args["max-tokens"] ?? 64);
const perStream = Number(args["requests-per-stream"] ?? 2);
const vocab = Number(args.vocab ?? 32000);
const apiKey = args["api-key"] ?? process.env.SPECD_API_KEY ?? "";
const model = args.model;

let seed = 12345;
function rand() {
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return seed;
}

async function one() {
  const prompt = Array.from({ length: promptTokens }, () => 1 + (rand() % (vocab - 1)));
  const body = { prompt, max_tokens: maxTokens, temperature: 0, stream: true, ignore_eos: true,
                 stream_options: { include_usage: true } };
  if (model) body.model = model;
  const t0 = performance.now();
  const res = await fetch(`${url}/v1/completions`, {
    method: "POST",
    headers: { "Content-Type": "application/json",
               ...(apiKey ? { Authorization: `Bearer ${apiKey}` } : {}) },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  let ttft = null;
  let tokens = 0;
  let buf = "";
  const decoder = new TextDecoder();
  for await (const part of res.body) {
    buf += decoder.decode(part, { stream: true });
    let idx;
    while ((idx = buf.indexOf("\n\n")) >= 0) {
      const ev = buf.slice(0, idx);
      buf = buf.slice(idx + 2);
      if (!ev.startsWith("data: ") || ev === "data: [DONE]") continue;
      const j = JSON.parse(ev.slice(6));
      if (j.error) throw new Error(j.error.message);
      if (ttft === null && j.choices?.length) ttft = performance.now() - t0;
      if (j.usage) tokens = j.usage.completion_tokens;
    }
  }
  return { ttft, tokens, total: performance.now() - t0 };
}

function pct(xs, p) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

await one();  // warm-up
console.log(`url ${url}, prompt ${promptTokens} tokens, max_tokens ${maxTokens}, ` +
            `${perStream} requests per stream`);
console.log("concurrency  requests  output_tok/s  ttft_p50_ms  ttft_p99_ms  req_latency_p50_ms");
const results = [];
for (const c of levels) {
  const t0 = performance.now();
  const all = [];
  await Promise.all(Array.from({ length: c }, async () => {
    for (let i = 0; i < perStream; ++i) all.push(await one());
  }));
  const wall = (performance.now() - t0) / 1000;
  const tokens = all.reduce((a, r) => a + r.tokens, 0);
  const row = {
    concurrency: c, requests: all.length, output_tok_s: tokens / wall,
    ttft_p50_ms: pct(all.map((r) => r.ttft), 50), ttft_p99_ms: pct(all.map((r) => r.ttft), 99),
    latency_p50_ms: pct(all.map((r) => r.total), 50),
  };
  results.push(row);
  console.log(`${String(c).padStart(11)}  ${String(all.length).padStart(8)}  ` +
              `${row.output_tok_s.toFixed(1).padStart(12)}  ${row.ttft_p50_ms.toFixed(0).padStart(11)}  ` +
              `${row.ttft_p99_ms.toFixed(0).padStart(11)}  ${row.latency_p50_ms.toFixed(0).padStart(18)}`);
}
if (args.json) console.log(JSON.stringify(results));
