// Reference encoder for the tokenizer tests: the @lenml/tokenizers port of
// transformers.js, an implementation independent of specd.
//
// Usage: node encode.mjs DIR [--add-special] < strings.json > ids.json
//   DIR holds tokenizer.json (and optionally tokenizer_config.json).
//   stdin: a JSON array of strings; stdout: a JSON array with, per string,
//   {"ids": [...], "decoded": "..."} (decoded = decode(ids), special tokens kept).
import { readFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { TokenizerLoader } from "@lenml/tokenizers";

const args = process.argv.slice(2);
const dir = args.find((a) => !a.startsWith("--"));
if (!dir) {
  process.stderr.write("usage: node encode.mjs DIR [--add-special] < strings.json\n");
  process.exit(2);
}
const addSpecial = args.includes("--add-special");
const tokenizerJSON = JSON.parse(readFileSync(join(dir, "tokenizer.json"), "utf8"));
const configPath = join(dir, "tokenizer_config.json");
const tokenizerConfig = existsSync(configPath) ? JSON.parse(readFileSync(configPath, "utf8")) : {};
const tokenizer = TokenizerLoader.fromPreTrained({ tokenizerJSON, tokenizerConfig });

const strings = JSON.parse(readFileSync(0, "utf8"));
const out = strings.map((s) => {
  const ids = tokenizer.encode(s, { add_special_tokens: addSpecial });
  const decoded = ids.length ? tokenizer.decode(ids, { skip_special_tokens: false }) : "";
  return { ids, decoded };
});
process.stdout.write(JSON.stringify(out) + "\n");
