// Generates gpt_oss_cases.json: the expected renderings of gpt-oss's
// "harmony" chat template (gpt_oss.jinja) over a set of conversations. Run
// offline, once; its output is committed and the C++ test
// (tests/serve/test_chat_template.cpp, GptOssHarmony) never runs node or
// python.
//
//   mkdir /tmp/tpl && cd /tmp/tpl && npm init -y && npm install @huggingface/jinja@0.5.13 &&
//     node /work/main/tests/serve/chat_templates/make_gpt_oss.mjs
//
// Source of gpt_oss.jinja: the template of openai/gpt-oss-120b (and -20b) as
// the standard engine keeps it, ggml-org/llama.cpp
// models/templates/openai-gpt-oss-120b.jinja (commit b204a5a, "gpt-oss:
// implement harmony parsing"), byte for byte.
//
// Reference: Python Jinja2 configured as transformers configures it
// (render_jinja2.py, as make.mjs), each case also rendered with
// @huggingface/jinja and differences printed; cases keep Python's output.
// The template dates its system message with strftime_now("%Y-%m-%d"):
// Python renders today's date, which is replaced by kDate, the date the C++
// test sets the template's clock to (in @huggingface/jinja's output too,
// whose strftime_now also reads the clock).
import fs from 'fs';
import path from 'path';
import { createRequire } from 'module';
import { execFileSync } from 'child_process';
import { fileURLToPath } from 'url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(process.cwd(), 'noop.js'));
const { Template } = await import(require.resolve('@huggingface/jinja'));
const kDate = '2031-06-15';

const source = fs.readFileSync(path.join(here, 'gpt_oss.jinja'), 'utf8');
const m = (role, content, extra = {}) => ({ role, content, ...extra });
const weather = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Get the current weather in a given location',
    parameters: {
      type: 'object',
      properties: {
        location: { type: 'string', description: 'The city and state, e.g. San Francisco, CA' },
        unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
      },
      required: ['location'],
    },
  },
};
const call = { id: 'call12345', type: 'function', function: { name: 'get_weather', arguments: { location: 'Paris' } } };

const cases = [];
const add = (name, messages, extra) => cases.push({ template: 'gpt_oss', name, variables: { messages, ...extra } });
const sua = [m('system', 'You are terse.'), m('user', 'Hi there'), m('assistant', 'Hello!')];
add('system_user_assistant', sua, { add_generation_prompt: false });
add('system_user_assistant_user', [...sua, m('user', 'And now?')], { add_generation_prompt: true });
add('user_only', [m('user', 'Hi')], { add_generation_prompt: true });
add('developer_first', [m('developer', 'Answer in French.'), m('user', 'Hi')], { add_generation_prompt: true });
add('reasoning_high_identity', [m('user', 'Hi')],
    { add_generation_prompt: true, reasoning_effort: 'high', model_identity: 'You are weft-test.' });
add('thinking_last_assistant', [m('user', '2+2?'), m('assistant', '4', { thinking: 'Add them.' })],
    { add_generation_prompt: false });
add('thinking_dropped_in_history', [m('user', '2+2?'), m('assistant', '4', { thinking: 'Add them.' }), m('user', 'Thanks')],
    { add_generation_prompt: true });
add('tools', [m('user', 'Weather in Paris?')], { tools: [weather], add_generation_prompt: true });
add('tool_call', [m('user', 'Weather in Paris?'), m('assistant', '', { tool_calls: [call] }),
                  m('tool', '{"temperature": 21}'), m('assistant', 'It is 21 degrees.')],
    { tools: [weather], add_generation_prompt: true });
add('channel_tags_in_content', [m('user', 'x'), m('assistant', '<|channel|>final<|message|>y')],
    { add_generation_prompt: true });

const d = new Date();
const today = `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, '0')}-${String(d.getDate()).padStart(2, '0')}`;
const python = JSON.parse(execFileSync('/usr/bin/python3', [path.join(here, 'render_jinja2.py')], {
  input: JSON.stringify({ templates: { gpt_oss: source }, cases }),
}).toString());
const out = [];
cases.forEach((c, i) => {
  const py = python[i];
  let js;
  try {
    js = { output: new Template(source).render(c.variables).replace(`Current date: ${today}\n`, `Current date: ${kDate}\n`) };
  } catch (e) {
    js = { error: String(e.message) };
  }
  const entry = { template: c.template, name: c.name, variables: c.variables };
  if ('output' in py) {
    entry.expected = py.output.replace(`Current date: ${today}\n`, `Current date: ${kDate}\n`);
    if (js.output !== entry.expected) console.log(`${c.name}: @huggingface/jinja differs: ${JSON.stringify(js).slice(0, 200)}`);
  } else {
    entry.expected_error_substring = py.error.slice(0, 60);
    if (!('error' in js)) console.log(`${c.name}: @huggingface/jinja renders where Python raises`);
  }
  out.push(entry);
});
fs.writeFileSync(path.join(here, 'gpt_oss_cases.json'), JSON.stringify(out, null, 1) + '\n');
console.log(`${out.length} cases written`);
