// `weft serve`'s Ollama and Anthropic APIs end to end through the official
// `ollama` and `@anthropic-ai/sdk` npm clients (and plain fetch for what a
// client would not send), against the servers tests/serve/run_openai.sh
// starts (it runs this file with WEFT_NODE_TEST=compat.test.mjs):
//
//   node compat.test.mjs --base URL [--workers N] [--auth-base URL --key-file FILE] [...]
//
// The model is a tiny random-weight one: its text is gibberish, so every
// check compares the server with itself. The reference is the OpenAI
// endpoint of the same server: greedy replies must be the same text from
// the same number of tokens. Prints one line per check; exits 1 when any
// fails (2 on bad usage).
import fs from 'node:fs';
import {parseArgs} from 'node:util';
import Anthropic from '@anthropic-ai/sdk';
import {Ollama} from 'ollama';

import {check, finish, part, request, show, thrown, watchdog} from './harness.mjs';

const {values: opt} = parseArgs({
  options: {
    'base': {type: 'string'},
    'workers': {type: 'string'},
    'queue-base': {type: 'string'},
    'auth-base': {type: 'string'},
    'key-file': {type: 'string'},
    'weft': {type: 'string'},
    'model': {type: 'string'},
    // run_openai.sh passes every server it starts; the tools server is the
    // OpenAI test's alone.
    'tools-base': {type: 'string'},
    'tool-prompts': {type: 'string'},
  },
});
if (!opt.base || (opt['auth-base'] && !opt['key-file'])) {
  console.error('usage: node compat.test.mjs --base URL [--auth-base URL --key-file FILE]');
  process.exit(2);
}
const BASE = opt.base.replace(/\/$/, '');
const TIMEOUT = 30000;  // ms, any one request
watchdog(240000);
const raw = (url, o = {}) => request(url, {timeout: TIMEOUT, ...o});

const SYSTEM = 'You are terse.';
const ASK = 'Say hello.';
// The reference: the OpenAI endpoint's greedy reply to the same chat.
async function openaiChat(max, extra = {}, base = BASE, key) {
  const r = await raw(base + '/v1/chat/completions', {
    body: {messages: [{role: 'system', content: SYSTEM}, {role: 'user', content: ASK}], temperature: 0,
           max_tokens: max, ...extra},
    headers: key ? {Authorization: `Bearer ${key}`} : {},
  });
  if (r.status !== 200) throw new Error(`reference chat: ${r.status} ${r.text}`);
  return {text: r.json.choices[0].message.content, tokens: r.json.usage.completion_tokens,
          prompt: r.json.usage.prompt_tokens, finish: r.json.choices[0].finish_reason};
}
// A stop string from text, the latest 3 characters (no spaces) found first
// where they are: the reply with it must be text up to there.
function stopFrom(text) {
  for (let k = text.length - 3; k >= 1; k--) {
    const s = text.slice(k, k + 3);
    if (s.trim().length === 3 && text.indexOf(s) === k) return {stop: s, before: text.slice(0, k)};
  }
  return null;
}

const ollama = new Ollama({host: BASE});
const MODEL = 'weft-test';
const ref = await openaiChat(24);
console.log(`# reference (OpenAI endpoint, greedy): ${show(ref)}`);

await part('Ollama: version, tags, show', async () => {
  const v = await ollama.version();
  check(typeof v.version === 'string' && /^\d+\.\d+/.test(v.version), '/api/version', show(v));
  const list = await ollama.list();
  const m = list.models?.[0];
  check(list.models?.length === 1 && m.name === 'weft-test:latest' && m.model === m.name, '/api/tags lists NAME:latest',
        show(list));
  check(m?.details?.format === 'gguf' && m.details.family === 'llama' && /^\d+(\.\d+)?[KMB]$/.test(m.details.parameter_size) &&
        typeof m.details.quantization_level === 'string' && m.size > 0 && m.digest.length > 0,
        '/api/tags details', show(m?.details));
  const s = await ollama.show({model: 'weft-test:latest'});
  check(s.details?.family === 'llama' && s.model_info?.['general.architecture'] === 'llama' &&
        s.model_info['general.parameter_count'] > 0 && typeof s.template === 'string' &&
        s.capabilities?.includes('completion'), '/api/show', show(s));
  const e = await thrown(() => ollama.show({model: 'nope'}));
  check(e?.name === 'ResponseError' && e.status_code === 404 && /nope/.test(e.error), '/api/show of another model: 404',
        `${e?.status_code} ${e?.error}`);
});

await part('Ollama: chat and generate', async () => {
  const chat = {model: MODEL, messages: [{role: 'system', content: SYSTEM}, {role: 'user', content: ASK}]};
  const whole = await ollama.chat({...chat, options: {temperature: 0, num_predict: 24}});
  check(whole.message?.role === 'assistant' && whole.message.content === ref.text && whole.eval_count === ref.tokens,
        'chat (whole, greedy) = the OpenAI endpoint: same text, same token count',
        `${show(whole.message?.content)} ${whole.eval_count} vs ${show(ref.text)} ${ref.tokens}`);
  check(whole.done === true && whole.done_reason === (ref.finish === 'stop' ? 'stop' : 'length') &&
        whole.prompt_eval_count === ref.prompt && whole.total_duration > 0 && whole.eval_duration >= 0 &&
        whole.model === MODEL && !Number.isNaN(Date.parse(whole.created_at)),
        'chat: done, done_reason, counts and durations', show({...whole, message: undefined}));
  let text = '', lines = 0, last = null;
  for await (const part of await ollama.chat({...chat, stream: true, options: {temperature: 0, num_predict: 24}})) {
    lines++;
    text += part.message?.content ?? '';
    last = part;
  }
  check(text === ref.text && lines >= 2 && last?.done === true && last.eval_count === ref.tokens,
        'chat streamed as NDJSON: the same text, done last', `${lines} lines ${show(text)}`);
  const nd = await raw(BASE + '/api/chat', {body: {...chat, options: {temperature: 0, num_predict: 4}}});
  const ndLines = nd.text.trim().split('\n').map((l) => JSON.parse(l));
  check(/ndjson/.test(nd.headers.get('content-type') ?? '') && ndLines.length >= 2 && ndLines.at(-1).done === true &&
        ndLines.slice(0, -1).every((l) => l.done === false), 'without "stream": streamed by default (Ollama)',
        `${nd.headers.get('content-type')} ${ndLines.length} lines`);

  const gen = await ollama.generate({model: MODEL, system: SYSTEM, prompt: ASK, options: {temperature: 0, num_predict: 24}});
  check(gen.response === ref.text && gen.eval_count === ref.tokens, 'generate (templated) = the chat reply',
        show(gen.response));
  let gtext = '';
  for await (const part of await ollama.generate({model: MODEL, system: SYSTEM, prompt: ASK, stream: true,
                                                  options: {temperature: 0, num_predict: 24}}))
    gtext += part.response;
  check(gtext === ref.text, 'generate streamed: the same text', show(gtext));
  const rawGen = await ollama.generate({model: MODEL, prompt: 'Once upon a time', raw: true,
                                       options: {temperature: 0, num_predict: 12}});
  const cmpl = await raw(BASE + '/v1/completions', {body: {prompt: 'Once upon a time', temperature: 0, max_tokens: 12}});
  check(rawGen.response === cmpl.json?.choices?.[0]?.text && rawGen.eval_count === cmpl.json.usage.completion_tokens,
        'generate raw = /v1/completions on the same prompt', `${show(rawGen.response)} vs ${show(cmpl.json?.choices?.[0]?.text)}`);

  const cut = stopFrom(ref.text);
  if (check(cut !== null, 'a stop string can be taken from the reference', show(ref.text))) {
    const stopped = await ollama.chat({...chat, options: {temperature: 0, num_predict: 24, stop: [cut.stop]}});
    check(stopped.message.content === cut.before && stopped.done_reason === 'stop',
          `options.stop ${show(cut.stop)}: the text before it, done_reason stop`, show(stopped.message.content));
  }
  const short = await ollama.chat({...chat, options: {temperature: 0, num_predict: 3}});
  check(short.eval_count <= 3 && (short.done_reason === 'stop' || short.eval_count === 3),
        'options.num_predict 3 bounds the reply', `${short.eval_count} ${short.done_reason}`);
  const seeded = async () => (await ollama.chat({...chat, options: {temperature: 1, seed: 7, num_predict: 12}})).message.content;
  check(await seeded() === await seeded(), 'options.seed: the same sample twice');
  // A client that leaves mid-stream: its request is cancelled, the slot freed.
  const cancelled = async () => Number(/\nweft_requests_cancelled_total (\d+)/.exec(
    (await raw(BASE + '/metrics', {method: 'GET'})).text)?.[1]);
  const before = await cancelled();
  const long = await ollama.generate({model: MODEL, prompt: ASK, stream: true,
                                     options: {seed: 1, num_predict: 3000}});
  for await (const piece of long) {
    if (piece.response) break;  // leaving the loop aborts the stream
  }
  long.abort();
  let after = before;
  for (let i = 0; i < 100 && after === before; i++) {
    await new Promise((r) => setTimeout(r, 50));
    after = await cancelled();
  }
  const h = (await raw(BASE + '/health', {method: 'GET'})).json;
  check(after === before + 1 && h?.slots_processing === 0, 'an aborted stream is cancelled and its slot freed',
        `cancelled ${before} -> ${after}, ${show(h)}`);
  const load = await ollama.generate({model: MODEL, prompt: ''});
  check(load.done === true && load.done_reason === 'load', 'an empty prompt only loads (done_reason load)', show(load));
});

await part('Ollama: errors', async () => {
  const e = await thrown(() => ollama.chat({model: MODEL, messages: [{role: 'user', content: 'x'}],
                                            options: {temperature: 'hot'}}));
  check(e?.name === 'ResponseError' && e.status_code === 400 && /options\.temperature/.test(e.error),
        'options.temperature "hot": 400 naming it', `${e?.status_code} ${e?.error}`);
  const big = await thrown(() => ollama.chat({model: MODEL, messages: [{role: 'user', content: 'x'}],
                                              options: {num_predict: 1e30}}));
  check(big?.status_code === 400 && /options\.num_predict/.test(big.error), 'options.num_predict 1e30: 400 naming it',
        `${big?.status_code} ${big?.error}`);
  const bad = await raw(BASE + '/api/chat', {body: '{"messages": ['});
  check(bad.status === 400 && typeof bad.json?.error === 'string' && /JSON/.test(bad.json.error),
        'a body that is not JSON: 400 {"error": ...}', `${bad.status} ${bad.text}`);
  const noContent = await raw(BASE + '/api/chat', {body: {model: MODEL, messages: [{role: 'user', content: 5}]}});
  check(noContent.status === 400 && /messages\[0\]\.content/.test(noContent.json?.error), 'a number as content: 400',
        noContent.text);
  const ok = await ollama.chat({model: MODEL, messages: [{role: 'user', content: 'hi'}], options: {num_predict: 2}});
  check(ok.done === true, 'the server still serves after the errors');
});

await part('Ollama: embed', async () => {
  // The L2 norm of a vector; the largest componentwise difference of two.
  const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
  const diff = (a, b) => Math.max(...a.map((x, i) => Math.abs(x - b[i])));
  const one = await ollama.embed({model: MODEL, input: 'The quick brown fox'});
  const v = one.embeddings?.[0];
  check(Array.isArray(one.embeddings) && one.embeddings.length === 1 && v?.length === 128 &&
        Math.abs(norm(v) - 1) < 1e-5 && v.some((x) => x !== 0), 'one input: one unit vector of the model\'s width (128)',
        `${one.embeddings?.length} x ${v?.length}, norm ${v && norm(v)}`);
  check(one.model === MODEL && one.prompt_eval_count > 1 && one.total_duration > 0,
        'model, prompt_eval_count and total_duration', show({...one, embeddings: undefined}));
  const two = await ollama.embed({model: MODEL, input: ['The quick brown fox', 'Once upon a time']});
  check(two.embeddings?.length === 2 && diff(two.embeddings[0], v) < 1e-5 && diff(two.embeddings[1], v) > 1e-3,
        'two inputs: two vectors, the first the same text\'s', `${two.embeddings?.length}`);
  const oa = await raw(BASE + '/v1/embeddings', {body: {model: MODEL, input: 'The quick brown fox', encoding_format: 'float'}});
  check(oa.status === 200 && diff(oa.json.data[0].embedding, v) < 1e-6,
        '/api/embed = /v1/embeddings on the same text', `${oa.status}`);
  const e = await thrown(() => ollama.embed({model: MODEL, input: [5]}));
  check(e?.status_code === 400 && /input\[0\]/.test(e.error), 'a number as input: 400 naming input[0]',
        `${e?.status_code} ${e?.error}`);
  const empty = await thrown(() => ollama.embed({model: MODEL, input: ''}));
  check(empty?.status_code === 400 && /'input' is an empty string/.test(empty.error), 'an empty input: 400 naming it',
        `${empty?.status_code} ${empty?.error}`);
  const long = 'fox '.repeat(6000);
  const cut = await ollama.embed({model: MODEL, input: long});
  check(cut.embeddings?.[0]?.length === 128 && cut.prompt_eval_count === 4096,
        'longer than a slot: truncated to its 4096 tokens (Ollama\'s truncate: true)', `${cut.prompt_eval_count}`);
  const refused = await thrown(() => ollama.embed({model: MODEL, input: long, truncate: false}));
  check(refused?.status_code === 400 && /more than a slot's context/.test(refused.error),
        'truncate false: 400 naming the length', `${refused?.status_code} ${refused?.error}`);
});

const anthropic = new Anthropic({baseURL: BASE, apiKey: 'none', maxRetries: 0, timeout: TIMEOUT});
const msg = (extra = {}) => ({model: MODEL, system: SYSTEM, messages: [{role: 'user', content: ASK}], max_tokens: 24,
                              temperature: 0, ...extra});

await part('Anthropic: messages', async () => {
  const m = await anthropic.messages.create(msg());
  check(m.type === 'message' && m.role === 'assistant' && /^msg_/.test(m.id) && m.content?.[0]?.type === 'text',
        'a message with one text block', show(m));
  check(m.content[0].text === ref.text && m.usage.output_tokens === ref.tokens && m.usage.input_tokens === ref.prompt,
        'whole, greedy = the OpenAI endpoint: same text, same token counts',
        `${show(m.content[0].text)} ${m.usage.output_tokens} vs ${show(ref.text)} ${ref.tokens}`);
  check(m.stop_reason === (ref.finish === 'stop' ? 'end_turn' : 'max_tokens') && m.stop_sequence === null,
        'stop_reason', `${m.stop_reason} (OpenAI: ${ref.finish})`);
  const blocks = await anthropic.messages.create(msg({system: [{type: 'text', text: SYSTEM}],
                                                     messages: [{role: 'user', content: [{type: 'text', text: 'Say '},
                                                                                         {type: 'text', text: 'hello.'}]}]}));
  check(blocks.content[0].text === ref.text, 'system and content as text blocks: the same reply', show(blocks.content[0].text));

  const types = [];
  let text = '';
  const stream = await anthropic.messages.create(msg({stream: true}));
  let delta = null;
  for await (const ev of stream) {
    types.push(ev.type);
    if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta') text += ev.delta.text;
    if (ev.type === 'message_delta') delta = ev;
  }
  const order = types.filter((t, i) => t !== types[i - 1]);
  check(JSON.stringify(order) === JSON.stringify(['message_start', 'content_block_start', 'content_block_delta',
                                                  'content_block_stop', 'message_delta', 'message_stop']),
        'streamed events in Anthropic\'s order', show(order));
  check(text === ref.text && delta?.usage?.output_tokens === ref.tokens && delta.delta.stop_reason === m.stop_reason,
        'streamed: the same text, message_delta with stop_reason and usage', `${show(text)} ${show(delta)}`);
  const helper = await anthropic.messages.stream(msg()).finalMessage();
  check(helper.content[0].text === ref.text, 'the SDK\'s stream helper: finalMessage() has the text', show(helper.content[0].text));

  const cut = stopFrom(ref.text);
  if (cut) {
    const stopped = await anthropic.messages.create(msg({stop_sequences: ['zzzq', cut.stop]}));
    check(stopped.content[0].text === cut.before && stopped.stop_reason === 'stop_sequence' &&
          stopped.stop_sequence === cut.stop, `stop_sequences: the text before ${show(cut.stop)}, stop_sequence named`,
          show(stopped));
    let stext = '', sdelta = null;
    for await (const ev of await anthropic.messages.create(msg({stop_sequences: [cut.stop], stream: true}))) {
      if (ev.type === 'content_block_delta') stext += ev.delta.text;
      if (ev.type === 'message_delta') sdelta = ev.delta;
    }
    check(stext === cut.before && sdelta?.stop_reason === 'stop_sequence' && sdelta.stop_sequence === cut.stop,
          'stop_sequences streamed', `${show(stext)} ${show(sdelta)}`);
  }
  const two = await anthropic.messages.create(msg({max_tokens: 2}));
  check(two.usage.output_tokens <= 2 && (two.stop_reason === 'end_turn' || two.stop_reason === 'max_tokens'),
        'max_tokens 2 bounds the reply', show(two.usage));
});

await part('Anthropic: errors', async () => {
  const missing = await thrown(() => anthropic.messages.create({model: MODEL, messages: [{role: 'user', content: 'x'}]}));
  check(missing instanceof Anthropic.BadRequestError && missing.status === 400 &&
        missing.error?.type === 'error' && missing.error.error?.type === 'invalid_request_error' &&
        /max_tokens/.test(missing.error.error.message), 'missing max_tokens: 400 invalid_request_error naming it',
        `${missing?.constructor?.name} ${missing?.status} ${show(missing?.error)}`);
  const hot = await thrown(() => anthropic.messages.create(msg({temperature: 1.5})));
  check(hot instanceof Anthropic.BadRequestError && /temperature/.test(hot.error?.error?.message),
        'temperature 1.5: 400 naming it', show(hot?.error));
  const image = await thrown(() => anthropic.messages.create(msg({messages: [{role: 'user', content: [
    {type: 'image', source: {type: 'base64', media_type: 'image/png', data: 'AAAA'}}]}]})));
  check(image?.status === 400 && /image/.test(image.error?.error?.message), 'an image block: 400 naming it',
        show(image?.error));
  const bad = await raw(BASE + '/v1/messages', {body: '{"max_tokens": 3, "messages": ['});
  check(bad.status === 400 && bad.json?.type === 'error' && bad.json.error?.type === 'invalid_request_error' &&
        /JSON/.test(bad.json.error.message), 'a body that is not JSON: 400 in Anthropic\'s shape', bad.text);
  const ok = await anthropic.messages.create(msg({max_tokens: 2}));
  check(ok.type === 'message', 'the server still serves after the errors');
});

if (opt['auth-base']) {
  await part('API keys: x-api-key and Bearer', async () => {
    const AB = opt['auth-base'].replace(/\/$/, '');
    const key = fs.readFileSync(opt['key-file'], 'utf8').trim();
    const right = new Anthropic({baseURL: AB, apiKey: key, maxRetries: 0, timeout: TIMEOUT});
    const m = await right.messages.create(msg({max_tokens: 3}));
    check(m.type === 'message', 'x-api-key: the right key is served');
    const wrong = await thrown(() => new Anthropic({baseURL: AB, apiKey: key + 'x', maxRetries: 0})
                                   .messages.create(msg({max_tokens: 3})));
    check(wrong instanceof Anthropic.AuthenticationError && wrong.error?.type === 'error' &&
          wrong.error.error?.type === 'authentication_error', 'x-api-key: a wrong key is a 401 in Anthropic\'s shape',
          `${wrong?.constructor?.name} ${show(wrong?.error)}`);
    const bearer = new Ollama({host: AB, headers: {Authorization: `Bearer ${key}`}});
    const r = await bearer.chat({model: MODEL, messages: [{role: 'user', content: 'hi'}], options: {num_predict: 2}});
    check(r.done === true, 'Ollama client with Authorization: Bearer: served');
    const none = await thrown(() => new Ollama({host: AB}).list());
    check(none?.status_code === 401 && /API key/.test(none.error), 'Ollama client without a key: 401 {"error": ...}',
          `${none?.status_code} ${none?.error}`);
  });
}

finish(opt.workers ? ` (${opt.workers} workers)` : '');
