// Reference chat-template renderer for specd's chat template tests:
// @huggingface/jinja, the renderer transformers.js and the Hugging Face Hub
// use (HF settings: trim_blocks and lstrip_blocks on).
//
// Usage: node render_template.mjs < cases.json > results.json
//   stdin: a JSON array of {"template": "...", "context": {...}} where context
//     holds the template variables (messages, add_generation_prompt,
//     bos_token, eos_token, tools, ...).
//   stdout: a JSON array with, per case, {"ok": true, "text": "..."} or
//     {"ok": false, "error": "..."} (a parse error or a raise_exception).
// A single object instead of an array renders one case and prints the text
// itself (handy by hand: exit status 1 and the error on stderr on failure).
import { readFileSync } from "node:fs";
import { Template } from "@huggingface/jinja";

const input = JSON.parse(readFileSync(0, "utf8"));
const compiled = new Map();

function render(c) {
  try {
    let t = compiled.get(c.template);
    if (t === undefined) {
      t = new Template(c.template);
      compiled.set(c.template, t);
    }
    return { ok: true, text: t.render(c.context ?? {}) };
  } catch (e) {
    return { ok: false, error: String(e && e.message !== undefined ? e.message : e) };
  }
}

if (Array.isArray(input)) {
  process.stdout.write(JSON.stringify(input.map(render)) + "\n");
} else {
  const r = render(input);
  if (!r.ok) {
    process.stderr.write(r.error + "\n");
    process.exit(1);
  }
  process.stdout.write(r.text);
}
