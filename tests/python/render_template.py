"""Reference chat-template renderer for specd's chat template tests: jinja2
set up exactly as transformers' apply_chat_template sets it up (an
ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, the
loopcontrols extension, a `{% generation %}` block that renders its body,
`tojson` as json.dumps without HTML escaping, and the `raise_exception` and
`strftime_now` globals).

Usage: python render_template.py < cases.json > results.json
  stdin: a JSON array of {"template": "...", "context": {...}} where context
    holds the template variables (messages, add_generation_prompt,
    bos_token, eos_token, tools, ...).
  stdout: a JSON array with, per case, {"ok": true, "text": "..."} or
    {"ok": false, "error": "..."} (a parse error or a raise_exception).
A single object instead of an array renders one case and prints the text
itself (exit status 1 and the error on stderr on failure).
"""
import json
import sys
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment


class GenerationBlock(Extension):
    """`{% generation %}...{% endgeneration %}`: renders its body (transformers
    also records where it was, for assistant masks, which is not compared)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationBlock, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main() -> int:
    env = make_env()
    compiled = {}

    def render(case):
        try:
            source = case["template"]
            t = compiled.get(source)
            if t is None:
                t = compiled[source] = env.from_string(source)
            return {"ok": True, "text": t.render(**(case.get("context") or {}))}
        except Exception as e:  # a template or render error is a result, not a crash
            return {"ok": False, "error": str(e)}

    data = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    if isinstance(data, list):
        sys.stdout.write(json.dumps([render(c) for c in data], ensure_ascii=False) + "\n")
        return 0
    r = render(data)
    if not r["ok"]:
        print(r["error"], file=sys.stderr)
        return 1
    sys.stdout.write(r["text"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
