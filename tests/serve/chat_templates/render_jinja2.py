"""The reference renderer for make.mjs: Python Jinja2, configured as Hugging Face
transformers configures it for chat templates (transformers/utils/chat_template_utils.py:
an ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and loopcontrols, a
json.dumps-based tojson, raise_exception and strftime_now). Reads
{"templates": {name: source}, "cases": [{template, variables}]} on stdin and writes
[{"output": text} | {"error": message}] on stdout, one per case."""
import json
import sys
from datetime import datetime

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format):
    return datetime.now().strftime(format)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = strftime_now

data = json.load(sys.stdin)
compiled = {name: env.from_string(source) for name, source in data["templates"].items()}
results = []
for case in data["cases"]:
    try:
        results.append({"output": compiled[case["template"]].render(**case["variables"])})
    except jinja2.exceptions.TemplateError as e:
        results.append({"error": str(e)})
json.dump(results, sys.stdout, ensure_ascii=False)
