// End-to-end check of `specd serve` with the official `openai` npm client,
// unmodified. Usage:
//   SPECD_BASE_URL=http://127.0.0.1:PORT/v1 SPECD_API_KEY=KEY SPECD_MODEL=NAME \
//     node tests/node/openai_e2e.mjs
// Prints one line per check and exits non-zero if any failed.
import OpenAI from "openai";

const baseURL = process.env.SPECD_BASE_URL;
const apiKey = process.env.SPECD_API_KEY;
const model = process.env.SPECD_MODEL;
if (!baseURL || !apiKey || !model) {
  console.error("set SPECD_BASE_URL, SPECD_API_KEY and SPECD_MODEL");
  process.exit(2);
}
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60000 });

let failed = 0;
function check(name, cond, detail) {
  if (cond) {
    console.log(`ok   ${name}`);
  } else {
    failed++;
    console.log(`FAIL ${name}: ${detail === undefined ? "" : JSON.stringify(detail)}`);
  }
}
async function expectError(name, fn, status, param) {
  try {
    await fn();
    check(name, false, "no error thrown");
  } catch (e) {
    const body = e.error ?? {};
    check(`${name}: status ${status}`, e.status === status, { status: e.status, body });
    check(`${name}: error object`, typeof body.message === "string" && "type" in body &&
          "param" in body && "code" in body, body);
    if (param !== undefined) check(`${name}: param ${param}`, body.param === param, body);
  }
}

const prompt = "It is a truth universally acknowledged, that";
const greedy = { temperature: 0, max_tokens: 24 };

// Models.
const models = await client.models.list();
check("models.list has the served model", models.data.some((m) => m.id === model), models.data);

// Completions, not streamed.
const c = await client.completions.create({ model, prompt, ...greedy });
check("completion object", c.object === "text_completion" && c.id.startsWith("cmpl-"), c);
check("completion model", c.model === model, c.model);
check("completion created", Number.isInteger(c.created) && c.created > 1.6e9, c.created);
check("completion text", typeof c.choices[0].text === "string" && c.choices[0].text.length > 0,
      c.choices[0]);
check("completion usage", c.usage.completion_tokens > 0 && c.usage.prompt_tokens > 0 &&
      c.usage.total_tokens === c.usage.prompt_tokens + c.usage.completion_tokens, c.usage);
check("completion finish_reason", ["stop", "length"].includes(c.choices[0].finish_reason),
      c.choices[0].finish_reason);

// Completions, streamed: the same greedy text, then [DONE] (the SDK ends the loop).
let streamed = "";
let finish = null;
let usage = null;
const cs = await client.completions.create({
  model, prompt, ...greedy, stream: true, stream_options: { include_usage: true },
});
for await (const chunk of cs) {
  if (chunk.usage) usage = chunk.usage;
  for (const ch of chunk.choices) {
    streamed += ch.text;
    if (ch.finish_reason) finish = ch.finish_reason;
  }
}
check("streamed completion equals non-streamed", streamed === c.choices[0].text,
      { streamed, full: c.choices[0].text });
check("streamed finish_reason", finish === c.choices[0].finish_reason, finish);
check("streamed include_usage", usage && usage.completion_tokens === c.usage.completion_tokens,
      usage);

// Logprobs on completions.
const lp = await client.completions.create({ model, prompt, ...greedy, max_tokens: 4, logprobs: 2 });
const l = lp.choices[0].logprobs;
check("completion logprobs", l && l.tokens.length === 4 && l.token_logprobs.every((x) => x <= 0) &&
      l.top_logprobs.every((m) => Object.keys(m).length >= 1), l);

// Stop strings: cut the greedy text at a later substring.
const text = c.choices[0].text;
const chars = Array.from(text);  // code points: never half a surrogate pair
const cut = Math.max(1, Math.floor(chars.length / 2));
const stopStr = chars.slice(cut, cut + 3).join("").trim() || chars.slice(cut, cut + 1).join("");
const expected = text.slice(0, text.indexOf(stopStr));
if (stopStr.length > 0 && expected.length < text.length) {
  const s = await client.completions.create({ model, prompt, ...greedy, stop: [stopStr] });
  check("stop string: text cut before it", s.choices[0].text === expected,
        { got: s.choices[0].text, expected, stopStr });
  check("stop string: finish_reason stop", s.choices[0].finish_reason === "stop",
        s.choices[0].finish_reason);
  let st = "";
  const ss = await client.completions.create({ model, prompt, ...greedy, stop: stopStr, stream: true });
  for await (const chunk of ss) for (const ch of chunk.choices) st += ch.text;
  check("stop string streamed", st === expected, { st, expected });
}

// Chat, not streamed and streamed.
const messages = [
  { role: "system", content: "You are terse." },
  { role: "user", content: "Tell me about Mr. Darcy." },
];
const chat = await client.chat.completions.create({ model, messages, temperature: 0,
                                                    max_completion_tokens: 16 });
check("chat object", chat.object === "chat.completion" && chat.id.startsWith("chatcmpl-"), chat);
check("chat message", chat.choices[0].message.role === "assistant" &&
      typeof chat.choices[0].message.content === "string", chat.choices[0]);
check("chat usage", chat.usage.completion_tokens === 16 || chat.choices[0].finish_reason === "stop",
      chat.usage);
let chatText = "";
let sawRole = false;
let chatUsage = null;
const chs = await client.chat.completions.create({
  model, messages, temperature: 0, max_tokens: 16, stream: true,
  stream_options: { include_usage: true },
});
for await (const chunk of chs) {
  check("chat chunk object", chunk.object === "chat.completion.chunk", chunk.object);
  if (chunk.usage) chatUsage = chunk.usage;
  for (const ch of chunk.choices) {
    if (ch.delta.role === "assistant") sawRole = true;
    if (ch.delta.content) chatText += ch.delta.content;
  }
}
check("streamed chat equals non-streamed", chatText === chat.choices[0].message.content,
      { chatText, full: chat.choices[0].message.content });
check("streamed chat role delta", sawRole);
check("streamed chat usage", chatUsage && chatUsage.total_tokens === chat.usage.total_tokens,
      chatUsage);

// Seeded sampling is reproducible.
const a = await client.completions.create({ model, prompt, temperature: 1, seed: 7, max_tokens: 12 });
const b = await client.completions.create({ model, prompt, temperature: 1, seed: 7, max_tokens: 12 });
check("same seed, same text", a.choices[0].text === b.choices[0].text,
      [a.choices[0].text, b.choices[0].text]);

// Errors.
await expectError("max_tokens wrong type",
  () => client.completions.create({ model, prompt, max_tokens: "ten" }), 400, "max_tokens");
await expectError("n > 1", () => client.completions.create({ model, prompt, n: 2 }), 400, "n");
await expectError("temperature < 0",
  () => client.chat.completions.create({ model, messages, temperature: -1 }), 400, "temperature");
await expectError("top_p > 1", () => client.completions.create({ model, prompt, top_p: 1.5 }),
  400, "top_p");
await expectError("prompt longer than the context",
  () => client.completions.create({ model, prompt: "word ".repeat(5000), max_tokens: 1 }), 400,
  "prompt");
await expectError("unknown model",
  () => client.completions.create({ model: "nope", prompt }), 404, "model");
const bad = new OpenAI({ baseURL, apiKey: apiKey + "x", maxRetries: 0 });
await expectError("wrong API key", () => bad.completions.create({ model, prompt }), 401);

// Concurrency: 16 streams at once give each the greedy text it gets alone.
async function streamText(p) {
  const st = await client.completions.create({ model, prompt: p, temperature: 0, max_tokens: 20,
                                              stream: true });
  let t = "";
  for await (const chunk of st) t += chunk.choices[0]?.text ?? "";
  return t;
}
const prompts = Array.from({ length: 16 }, (_, i) =>
  ["Elizabeth", "Mr. Bennet", "Her sister", "The ball", "Mrs. Jennings", "Emma",
   "Captain Wentworth", "Anne"][i % 8] + (i < 8 ? " said that" : " was not"));
const alone = [];
for (const p of prompts) alone.push(await streamText(p));
const together = await Promise.all(prompts.map(streamText));
check("16 concurrent streams equal each run alone",
      together.every((t, i) => t === alone[i] && t.length > 0),
      together.map((t, i) => (t === alone[i] ? "same" : { alone: alone[i], together: t })));

// Cancellation: a client that aborts its stream frees its KV pages.
const baseNoV1 = baseURL.replace(/\/v1\/?$/, "");
async function kvUsedPages() {
  const m = await (await fetch(`${baseNoV1}/metrics`)).text();
  const line = m.split("\n").find((l) => l.startsWith("specd_kv_cache_used_pages"));
  return line === undefined ? NaN : Number(line.split(/\s+/)[1]);
}
const longStream = await client.completions.create({ model, prompt, temperature: 0,
                                                      max_tokens: 400, ignore_eos: true,
                                                      stream: true });
// (The tiny test model may finish before /metrics is read, so only the end
// state is checked here; runtime's CancellationFreesKvPages checks a
// cancellation that certainly lands mid-generation.)
let gotChunks = 0;
for await (const chunk of longStream) {
  if (++gotChunks === 2) {
    longStream.controller.abort();
    break;
  }
}
let freed = false;
for (let i = 0; i < 100 && !freed; i++) {
  freed = (await kvUsedPages()) === 0;
  if (!freed) await new Promise((r) => setTimeout(r, 50));
}
check("aborted stream frees its KV pages", freed, await kvUsedPages());

console.log(failed === 0 ? "all checks passed" : `${failed} checks failed`);
process.exit(failed === 0 ? 0 : 1);
