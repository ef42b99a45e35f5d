"""Generates tool_prompts.json: the prompts a real chat template (Qwen2.5's,
tests/serve/chat_templates/qwen2_5.jinja) renders for the chats that
tests/serve/openai.test.mjs sends with tools, rendered by Python Jinja2 as
Hugging Face transformers configures it (../chat_templates/render_jinja2.py).
The test tokenizes each expected prompt with the server's /tokenize and checks
that the request's usage.prompt_tokens equals it: the tools (and earlier tool
calls and results) reached the prompt exactly as the reference renders them.
Run once, offline; its output is committed:

    python3 tests/serve/tool_prompts/make.py > tests/serve/tool_prompts/tool_prompts.json

Hugging Face's chat format holds a call's arguments as an object; the test
sends them as OpenAI does, as JSON text."""
import json
import os
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
templates = os.path.join(here, "..", "chat_templates")

weather = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
clock = {"type": "function", "function": {
    "name": "get_time", "description": "The time in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
question = [{"role": "system", "content": "You are terse."},
            {"role": "user", "content": "What is the weather in Paris?"}]
history = question + [
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "{\"temperature\": 22}"}]

cases = {
    "plain": {"messages": question},
    "tools": {"messages": question, "tools": [weather, clock]},
    "named": {"messages": question, "tools": [clock]},
    "history": {"messages": history, "tools": [weather, clock]},
}
source = open(os.path.join(templates, "qwen2_5.jinja")).read()
request = {"templates": {"qwen2_5": source},
           "cases": [{"template": "qwen2_5",
                      "variables": dict(v, add_generation_prompt=True, bos_token="<s>", eos_token="</s>")}
                     for v in cases.values()]}
out = subprocess.run([sys.executable, os.path.join(templates, "render_jinja2.py")], input=json.dumps(request),
                     capture_output=True, text=True, check=True)
results = json.loads(out.stdout)
fixture = {"template": "qwen2_5.jinja", "tools": {"weather": weather, "clock": clock},
           "question": question, "history": history, "prompts": {}}
for name, r in zip(cases, results):
    if "output" not in r:
        sys.exit(f"{name}: {r['error']}")
    fixture["prompts"][name] = r["output"]
json.dump(fixture, sys.stdout, ensure_ascii=False, indent=1)
print()
