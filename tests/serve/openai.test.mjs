// `weft serve` end to end through the official `openai` npm client (and
// plain fetch where the client has no method), against running servers:
//
//   node openai.test.mjs --base URL [--workers N]
//       [--queue-base URL] [--auth-base URL --key-file FILE]
//       [--weft BINARY --model FILE]
//
//   --base        the main server: --parallel 4 (or more), --ctx-size of
//                 4 x 4096, --alias weft-test
//   --workers N   the main server splits its layers over N workers: its
//                 /metrics must show traffic to each
//   --queue-base  a server started with --parallel 1 --max-queue 1 (the 429 checks)
//                 on the same model file, all on this CPU: the reference the
//                 main server's greedy text must equal
//   --auth-base   a server started with --host 0.0.0.0 --api-key-file FILE
//                 --max-tokens 64 (reached at 127.0.0.1), FILE given as --key-file
//   --weft, --model  run `weft serve --host 0.0.0.0` without a key file, which
//                 must exit non-zero naming --api-key-file
//   --tools-base, --tool-prompts  a server started with --chat-template
//                 chat_templates/qwen2_5.jinja, and tool_prompts/tool_prompts.json:
//                 the prompts Python's Jinja2 renders for the chats sent with tools
//
// Run from a folder where `openai` resolves (scripts/install-test-node.sh;
// tests/serve/run_openai.sh does it all). The model is a tiny random-weight
// one: its text is gibberish, so the checks compare the server with itself
// (stream against whole, batched against alone, seed against seed) and,
// given --queue-base, its greedy text with the queue server's: with
// --workers, the split server with an unsplit one on the same model.
// Prints one line per check; exits 1 when any fails (2 on bad usage).
import {spawnSync} from 'node:child_process';
import fs from 'node:fs';
import {isDeepStrictEqual, parseArgs} from 'node:util';
import OpenAI from 'openai';

const {values: opt} = parseArgs({
  options: {
    'base': {type: 'string'},
    'workers': {type: 'string'},
    'queue-base': {type: 'string'},
    'auth-base': {type: 'string'},
    'key-file': {type: 'string'},
    'weft': {type: 'string'},
    'model': {type: 'string'},
    'tools-base': {type: 'string'},
    'tool-prompts': {type: 'string'},
  },
});
if (!opt.base || (opt['auth-base'] && !opt['key-file']) || (!opt.weft !== !opt.model) ||
    (!opt['tools-base'] !== !opt['tool-prompts'])) {
  console.error('usage: node openai.test.mjs --base URL [--workers N] [--queue-base URL] ' +
                '[--auth-base URL --key-file FILE] [--weft BINARY --model FILE] ' +
                '[--tools-base URL --tool-prompts FILE]');
  process.exit(2);
}
const BASE = opt.base.replace(/\/$/, '');
const WORKERS = opt.workers ? Number(opt.workers) : 0;
const TIMEOUT = 30000;  // ms, any one request
const started = Date.now();

// The whole run's watchdog: a hung server must fail the test, not stall it.
const watchdog = setTimeout(() => {
  console.log('FAIL the test did not finish in 240 s');
  process.exit(1);
}, 240000);

let failures = 0;
let checks = 0;
function check(ok, what, detail = '') {
  checks++;
  if (!ok) failures++;
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}${detail ? ': ' + detail : ''}`);
  return ok;
}
const show = (v) => {
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  return JSON.stringify(s.length > 160 ? s.slice(0, 160) + '…' : s);
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Runs one part; an exception fails it and the run goes on with the next.
async function part(name, fn) {
  const t0 = Date.now();
  console.log(`# ${name}`);
  try {
    await fn();
  } catch (e) {
    check(false, `${name}: unexpected exception`, e?.stack ?? String(e));
  }
  console.log(`# ${name}: ${((Date.now() - t0) / 1000).toFixed(2)} s`);
}

function client(base, apiKey = 'none', extra = {}) {
  return new OpenAI({baseURL: base + '/v1', apiKey, maxRetries: 0, timeout: TIMEOUT, ...extra});
}

async function fetchJson(url, {method = 'GET', body, key} = {}) {
  const headers = {};
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (key) headers.Authorization = `Bearer ${key}`;
  const r = await fetch(url, {
    method, headers, body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    signal: AbortSignal.timeout(TIMEOUT),
  });
  const text = await r.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return {status: r.status, headers: r.headers, text, json};
}

// /metrics as {name or name{labels}: value}.
async function metrics(base, key) {
  const r = await fetchJson(base + '/metrics', {key});
  if (r.status !== 200) throw new Error(`GET /metrics: ${r.status} ${r.text}`);
  const out = {};
  for (const line of r.text.split('\n')) {
    const m = /^([a-zA-Z_:][^ ]*) ([^ ]+)$/.exec(line);
    if (m) out[m[1]] = Number(m[2]);
  }
  return out;
}
const health = async (base) => (await fetchJson(base + '/health')).json;

// Polls cond() (async, truthy when done) every 50 ms for at most ms.
async function waitFor(cond, ms) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await cond();
    if (v) return v;
    if (Date.now() > end) return v;
    await sleep(50);
  }
}

// A request streamed to its end: the text, its chunks and the usage chunk.
async function streamChat(c, body) {
  const s = await c.chat.completions.create({...body, stream: true, stream_options: {include_usage: true}});
  const out = {text: '', chunks: [], usage: null, finish: null, roles: [], logprobs: [], afterUsage: 0};
  for await (const ch of s) {
    out.chunks.push(ch);
    if (out.usage) out.afterUsage++;
    if (ch.usage) out.usage = ch.usage;
    const choice = ch.choices[0];
    if (!choice) continue;
    if (choice.delta?.role) out.roles.push([out.chunks.length - 1, choice.delta.role]);
    if (typeof choice.delta?.content === 'string') out.text += choice.delta.content;
    if (choice.logprobs?.content) out.logprobs.push(...choice.logprobs.content);
    if (choice.finish_reason) out.finish = choice.finish_reason;
  }
  return out;
}
async function streamCompletion(c, body) {
  const s = await c.completions.create({...body, stream: true, stream_options: {include_usage: true}});
  const out = {text: '', chunks: [], usage: null, finish: null};
  for await (const ch of s) {
    out.chunks.push(ch);
    if (ch.usage) out.usage = ch.usage;
    const choice = ch.choices[0];
    if (!choice) continue;
    out.text += choice.text ?? '';
    if (choice.finish_reason) out.finish = choice.finish_reason;
  }
  return out;
}
const sameCounts = (a, b) => a && b && a.prompt_tokens === b.prompt_tokens &&
  a.completion_tokens === b.completion_tokens && a.total_tokens === b.total_tokens;

// Expects fn() to throw the client's error class cls with the given status.
// With param, e.param must be it and (unless inMessage is false) the
// message must name it.
async function expectError(what, fn, cls, status, param, inMessage = true) {
  try {
    const r = await fn();
    check(false, what, `succeeded: ${show(r)}`);
    return null;
  } catch (e) {
    const shaped = e instanceof cls && e.status === status && typeof e.error?.message === 'string' &&
                   typeof e.error?.type === 'string';
    const named = param === undefined ||
                  (e.param === param && (!inMessage || new RegExp(`\\b${param}\\b`).test(e.error?.message ?? '')));
    check(shaped && named, what,
          `${e.constructor.name} ${e.status} param=${e.param} type=${e.type} message=${show(e.error?.message ?? e.message)}`);
    return e;
  }
}

const api = client(BASE);
let MODEL = 'weft-test';

await part('models and health', async () => {
  const h = await health(BASE);
  check(h?.status === 'ok' && Number.isInteger(h.slots_idle) && h.slots_processing === 0 && h.queue_length === 0,
        'GET /health is ok and idle', show(h));
  const list = await api.models.list();
  const ids = list.data.map((m) => m.id);
  check(ids.length === 1 && ids[0] === 'weft-test' && list.data[0].object === 'model', 'GET /v1/models lists the alias',
        show(ids));
  MODEL = ids[0] ?? MODEL;
  if (WORKERS) {
    const m = await metrics(BASE);
    const sent = Object.entries(m).filter(([k]) => k.startsWith('weft_worker_bytes_sent_total{'));
    check(sent.length === WORKERS && sent.every(([, v]) => v > 0), `/metrics shows traffic to ${WORKERS} workers`,
          show(sent));
  }
});

const chatBody = (content, extra = {}) => ({
  model: MODEL, messages: [{role: 'system', content: 'You are terse.'}, {role: 'user', content}], ...extra,
});

// Against another server, not itself: the queue server loads the same model
// file with all its layers on this CPU, one slot and a smaller context.
// Greedy text (16 tokens, chat and completions) must be the same token for
// token, so a split (--workers) that computes wrong numbers yet agrees with
// itself fails here (a worker reading rms_norm's eps wrongly did). The
// chats' logprobs too, within LOGPROB_TOLERANCE: on a tiny random model a
// wrong number can leave every greedy choice alone (a worker reading rope's
// freq_base doubled did) while it moves the probabilities. One request at a
// time, while no other part loads either server.
const LOGPROB_TOLERANCE = 1e-3;  // room for f32 sums in another order; measured 0 (local and split)
if (opt['queue-base']) {
  await part(WORKERS ? 'the split server against a local one' : 'the server against another local one', async () => {
    const local = client(opt['queue-base'].replace(/\/$/, ''));
    const same = async (what, create, textOf) => {
      const mine = await create(api);
      const theirs = await create(local);
      const [a, b] = [textOf(mine), textOf(theirs)];
      check(a === b && mine.usage?.completion_tokens === 16 && theirs.usage?.completion_tokens === 16,
            `${what}: 16 greedy tokens, the same text as the local server's`, `${show(a)} vs ${show(b)}`);
      const [la, lb] = [mine.choices?.[0]?.logprobs?.content, theirs.choices?.[0]?.logprobs?.content];
      if (la === undefined && lb === undefined) return;  // completions: text only
      const worst = la?.length === 16 && lb?.length === 16
        ? Math.max(...la.map((t, i) => Math.abs(t.logprob - lb[i].logprob))) : Infinity;
      check(worst <= LOGPROB_TOLERANCE, `${what}: each token's logprob within ${LOGPROB_TOLERANCE} of the local server's`,
            `largest difference ${worst}`);
    };
    for (const content of ['Say hello.', 'Tell me a story about a fox.', 'Count to ten.']) {
      const body = chatBody(content, {temperature: 0, max_tokens: 16, ignore_eos: true, logprobs: true});
      await same(`chat ${show(content)}`, (c) => c.chat.completions.create(body), (r) => r.choices?.[0]?.message?.content);
    }
    for (const prompt of ['Once upon a time, in a land far away,', 'The quick brown fox', '1, 2, 3,']) {
      const body = {model: MODEL, prompt, temperature: 0, max_tokens: 16, ignore_eos: true};
      await same(`completion ${show(prompt)}`, (c) => c.completions.create(body), (r) => r.choices?.[0]?.text);
    }
  });
}

await part('chat completions', async () => {
  const r = await api.chat.completions.create(chatBody('Say hello.', {temperature: 0, max_tokens: 24}));
  const ch = r.choices?.[0];
  check(r.object === 'chat.completion' && typeof r.id === 'string' && r.choices.length === 1, 'chat: one choice',
        show(r));
  check(ch?.message?.role === 'assistant' && typeof ch.message.content === 'string', 'chat: content is a string',
        show(ch?.message));
  check(['stop', 'length'].includes(ch?.finish_reason), 'chat: finish_reason', ch?.finish_reason);
  const u = r.usage;
  check(u && u.prompt_tokens > 0 && u.total_tokens === u.prompt_tokens + u.completion_tokens &&
        u.completion_tokens <= 24 && Number.isInteger(u.prompt_tokens_details?.cached_tokens) &&
        u.prompt_tokens_details.cached_tokens <= u.prompt_tokens, 'chat: usage is consistent', show(u));
  check(ch?.finish_reason !== 'length' || u.completion_tokens === 24, 'chat: "length" means max_tokens tokens',
        show(u));
  check(r.timings && typeof r.timings.prompt_ms === 'number' && r.timings.predicted_n === u.completion_tokens,
        'chat: timings', show(r.timings));

  const e = await api.chat.completions.create(chatBody('Count to ten.', {max_tokens: 8, ignore_eos: true}));
  check(e.usage?.completion_tokens === 8 && e.choices[0].finish_reason === 'length',
        'chat: ignore_eos + max_tokens 8 gives 8 tokens and "length"',
        `${e.usage?.completion_tokens} ${e.choices[0].finish_reason}`);
  const m = await api.chat.completions.create(chatBody('Count to ten.', {max_completion_tokens: 5, ignore_eos: true}));
  check(m.usage?.completion_tokens === 5 && m.choices[0].finish_reason === 'length',
        'chat: max_completion_tokens 5 gives 5 tokens', `${m.usage?.completion_tokens} ${m.choices[0].finish_reason}`);

  // The same request again: its prompt is in a slot's cache now.
  const again = await api.chat.completions.create(chatBody('Say hello.', {temperature: 0, max_tokens: 24}));
  check(again.choices[0].message.content === ch?.message?.content, 'chat: greedy is repeatable',
        `${show(again.choices[0].message.content)} vs ${show(ch?.message?.content)}`);
  check(again.usage.prompt_tokens_details?.cached_tokens > 0, 'chat: a repeated prompt reuses the cache',
        show(again.usage));
});

await part('chat streaming', async () => {
  const body = chatBody('Tell me a story about a fox.', {temperature: 0, max_tokens: 40, ignore_eos: true});
  const whole = await api.chat.completions.create(body);
  const s = await streamChat(api, body);
  check(s.text === whole.choices[0].message.content, 'chat stream: deltas concatenated equal the whole reply',
        `${show(s.text)} vs ${show(whole.choices[0].message.content)}`);
  check(s.roles.length === 1 && s.roles[0][0] === 0 && s.roles[0][1] === 'assistant',
        'chat stream: the first chunk alone has role "assistant"', show(s.roles));
  check(s.chunks.every((c) => c.object === 'chat.completion.chunk' && c.id === s.chunks[0].id),
        'chat stream: chunks share an id and object');
  check(s.finish === whole.choices[0].finish_reason && s.finish === 'length', 'chat stream: finish_reason',
        `${s.finish} vs ${whole.choices[0].finish_reason}`);
  const last = s.chunks[s.chunks.length - 1];
  check(s.usage && last.choices.length === 0 && s.afterUsage === 0, 'chat stream: include_usage adds a last chunk',
        show(last));
  check(sameCounts(s.usage, whole.usage), 'chat stream: usage equals the whole reply\'s',
        `${show(s.usage)} vs ${show(whole.usage)}`);
  const withUsage = s.chunks.filter((c) => c.usage).length;
  check(withUsage === 1, 'chat stream: exactly one chunk carries usage', String(withUsage));
  check(s.chunks.length > 3, 'chat stream: the text came in several chunks', String(s.chunks.length));

  // Without include_usage: no usage chunk.
  const plain = await api.chat.completions.create({...body, stream: true});
  let n = 0, usage = 0, text = '';
  for await (const c of plain) {
    n++;
    if (c.usage) usage++;
    text += c.choices[0]?.delta?.content ?? '';
  }
  check(usage === 0 && text === s.text, 'chat stream without include_usage: no usage chunk, same text',
        `${usage} usage chunks of ${n}`);
});

await part('completions', async () => {
  const prompt = 'Once upon a time, in a land far away,';
  const body = {model: MODEL, prompt, temperature: 0, max_tokens: 32, ignore_eos: true};
  const whole = await api.completions.create(body);
  const c = whole.choices?.[0];
  check(whole.object === 'text_completion' && typeof c?.text === 'string' && c.text.length > 0,
        'completion: text is a string', show(c));
  check(c?.finish_reason === 'length' && whole.usage?.completion_tokens === 32 &&
        whole.usage.total_tokens === whole.usage.prompt_tokens + 32, 'completion: 32 tokens, "length", usage',
        show(whole.usage));
  const s = await streamCompletion(api, body);
  check(s.text === c?.text, 'completion stream: pieces concatenated equal the whole text',
        `${show(s.text)} vs ${show(c?.text)}`);
  check(s.finish === 'length' && sameCounts(s.usage, whole.usage), 'completion stream: finish_reason and usage',
        `${s.finish} ${show(s.usage)}`);
  check(s.chunks[s.chunks.length - 1].choices.length === 0, 'completion stream: the usage chunk comes last');

  const tok = await fetchJson(BASE + '/tokenize', {method: 'POST', body: {content: prompt, add_special: true}});
  const ids = tok.json?.tokens;
  check(Array.isArray(ids) && ids.length === whole.usage.prompt_tokens,
        'completion: /tokenize with add_special counts the prompt tokens', `${ids?.length} vs ${whole.usage.prompt_tokens}`);
  const byIds = await api.completions.create({...body, prompt: ids});
  check(byIds.choices[0].text === c?.text && byIds.usage.prompt_tokens === whole.usage.prompt_tokens,
        'completion: the prompt as token ids gives the same text', `${show(byIds.choices[0].text)}`);
  const s2 = await streamCompletion(api, {...body, prompt: ids});
  check(s2.text === c?.text, 'completion stream: the prompt as token ids gives the same text', show(s2.text));
  const batch1 = await api.completions.create({...body, prompt: [prompt]});
  check(batch1.choices[0].text === c?.text, 'completion: a one-element prompt array gives the same text');
});

await part('stop strings', async () => {
  for (const [kind, make, run] of [
    ['chat', (extra) => chatBody('Write a long poem.', extra),
     async (b) => {
       const r = await api.chat.completions.create(b);
       return {text: r.choices[0].message.content, finish: r.choices[0].finish_reason, usage: r.usage};
     }],
    ['chat stream', (extra) => chatBody('Write a long poem.', extra),
     async (b) => streamChat(api, b)],
    ['completion', (extra) => ({model: MODEL, prompt: 'The list of words:', ...extra}),
     async (b) => {
       const r = await api.completions.create(b);
       return {text: r.choices[0].text, finish: r.choices[0].finish_reason, usage: r.usage};
     }],
    ['completion stream', (extra) => ({model: MODEL, prompt: 'The list of words:', ...extra}),
     async (b) => streamCompletion(api, b)],
  ]) {
    const greedy = {temperature: 0, max_tokens: 48, ignore_eos: true};
    const full = await run(make(greedy));
    const text = full.text;
    // A stop string from the middle of the text, of whole characters and
    // not starting at its first character.
    const chars = [...text];
    let at = Math.floor(chars.length / 2), stop = '';
    for (; at < chars.length - 4 && !stop; at++) {
      const cand = chars.slice(at, at + 4).join('');
      if (!cand.includes('\uFFFD') && cand.trim().length >= 2 && text.indexOf(cand) > 0) stop = cand;
    }
    if (!check(stop !== '', `${kind}: a stop string from the greedy text`, show(text))) continue;
    const expected = text.slice(0, text.indexOf(stop));
    const r = await run(make({...greedy, stop}));
    check(r.text === expected && r.finish === 'stop', `${kind}: stop ${JSON.stringify(stop)} ends the text before it`,
          `${show(r.text)} (${r.finish}) vs ${show(expected)}`);
    const arr = await run(make({...greedy, stop: ['\u0001never\u0001', stop]}));
    check(arr.text === expected && arr.finish === 'stop', `${kind}: stop as an array`, `${show(arr.text)} (${arr.finish})`);
    check(r.usage && r.usage.completion_tokens < full.usage.completion_tokens,
          `${kind}: a stopped reply counts fewer tokens`, `${r.usage?.completion_tokens} vs ${full.usage?.completion_tokens}`);
    // A stop string the reply starts with: an empty reply, "stop".
    const head = chars.slice(0, 3).join('');
    if (!head.includes('\uFFFD')) {
      const h = await run(make({...greedy, stop: head}));
      check(h.text === '' && h.finish === 'stop', `${kind}: stop ${JSON.stringify(head)} the reply starts with`,
            `${show(h.text)} (${h.finish})`);
    }
  }
});

await part('seed', async () => {
  const body = (seed) => chatBody('Invent a word.', {temperature: 1.0, seed, max_tokens: 16, ignore_eos: true});
  const a = (await api.chat.completions.create(body(1234))).choices[0].message.content;
  const b = (await api.chat.completions.create(body(1234))).choices[0].message.content;
  check(a === b, 'seed 1234 twice at temperature 1 gives the same text', `${show(a)} vs ${show(b)}`);
  const s = await streamChat(api, body(1234));
  check(s.text === a, 'seed 1234 streamed gives the same text', show(s.text));
  const others = [];
  for (const seed of [1, 99, 4321]) others.push((await api.chat.completions.create(body(seed))).choices[0].message.content);
  check(others.some((t) => t !== a), 'another seed gives another text', show(others));
});

await part('sampling parameters', async () => {
  const text = async (extra) => (await api.chat.completions.create(
    chatBody('Say something.', {max_tokens: 24, ignore_eos: true, ...extra}))).choices[0].message.content;
  const greedy = await text({temperature: 0});
  for (const [name, extra] of [['top_k 1', {top_k: 1}], ['top_p 0', {top_p: 0}], ['min_p 1', {min_p: 1}]]) {
    const t = await text({temperature: 1, seed: 7, ...extra});
    check(t === greedy, `${name} at temperature 1 is greedy`, t === greedy ? '' : `${show(t)} vs ${show(greedy)}`);
  }
  const free = await text({temperature: 1, seed: 7});
  check(free !== greedy, 'temperature 1 without a cut is not greedy', show(free));
  for (const [name, extra] of [['presence_penalty 2', {presence_penalty: 2}],
                               ['frequency_penalty 2', {frequency_penalty: 2}],
                               ['repetition_penalty 3', {repetition_penalty: 3}]]) {
    const t = await text({temperature: 0, ...extra});
    check(t !== greedy, `${name} changes the greedy text`, show(t));
  }
  const same = await text({temperature: 0, presence_penalty: 0, frequency_penalty: 0, repetition_penalty: 1});
  check(same === greedy, 'neutral penalties leave the greedy text alone');
});

await part('context limits', async () => {
  const slot = (await api.models.list()).data[0]?.meta?.n_ctx_slot;
  check(Number.isInteger(slot) && slot >= 4000, '/v1/models meta.n_ctx_slot', String(slot));
  // A prompt of slot - 40 tokens and max_tokens of the whole slot: the
  // reply ends where the slot's context does, as "length".
  const promptLen = slot - 40;
  const prompt = Array.from({length: promptLen}, (_, i) => 300 + (i % 200));
  const body = {model: MODEL, prompt, temperature: 0, max_tokens: slot, ignore_eos: true};
  const r = await api.completions.create(body);
  const u = r.usage;
  check(r.choices[0].finish_reason === 'length' && u.prompt_tokens === promptLen && u.completion_tokens >= 40 &&
        u.prompt_tokens + u.completion_tokens <= slot + 1, 'a reply ends at the slot\'s context as "length"', show(u));
  const s = await streamCompletion(api, body);
  check(s.text === r.choices[0].text && s.finish === 'length' && sameCounts(s.usage, u),
        'streamed, it ends at the same place', show(s.usage));
  const after = await api.chat.completions.create(chatBody('And now?', {max_tokens: 4, ignore_eos: true}));
  check(after.usage.completion_tokens === 4, 'the server serves after a full slot');
});

await part('multi-turn chat', async () => {
  const msgs = [{role: 'system', content: 'Be brief.'}, {role: 'user', content: 'Name a fruit.'}];
  const first = await api.chat.completions.create({model: MODEL, messages: msgs, temperature: 0, max_tokens: 12,
                                                   ignore_eos: true});
  msgs.push(first.choices[0].message, {role: 'user', content: 'Another one?'});
  const second = await api.chat.completions.create({model: MODEL, messages: msgs, temperature: 0, max_tokens: 12,
                                                    ignore_eos: true});
  check(second.usage.prompt_tokens > first.usage.prompt_tokens + first.usage.completion_tokens - 2,
        'the second turn\'s prompt holds the first turn', `${first.usage.prompt_tokens} + ${first.usage.completion_tokens}` +
        ` -> ${second.usage.prompt_tokens}`);
  check(second.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens - 1,
        'the second turn reuses the first turn\'s cache', show(second.usage));
  const fresh = await streamChat(api, {model: MODEL, messages: msgs, temperature: 0, max_tokens: 12, ignore_eos: true});
  check(fresh.text === second.choices[0].message.content, 'the second turn, streamed, gives the same text');
});

await part('logprobs', async () => {
  const body = chatBody('Pick a colour.', {temperature: 0, max_tokens: 12, ignore_eos: true, logprobs: true, top_logprobs: 3});
  const r = await api.chat.completions.create(body);
  const content = r.choices[0].logprobs?.content;
  check(Array.isArray(content) && content.length === r.usage.completion_tokens,
        'logprobs: one entry per generated token', `${content?.length} vs ${r.usage.completion_tokens}`);
  let shaped = true, sorted = true, greedyTop = true;
  for (const t of content ?? []) {
    if (typeof t.token !== 'string' || !(t.logprob <= 0) || !Array.isArray(t.bytes) || t.top_logprobs?.length !== 3 ||
        !t.top_logprobs.every((x) => typeof x.token === 'string' && x.logprob <= 0)) shaped = false;
    const lp = t.top_logprobs?.map((x) => x.logprob) ?? [];
    for (let i = 1; i < lp.length; i++) if (lp[i] > lp[i - 1]) sorted = false;
    if (!(Math.abs(t.logprob - lp[0]) <= 1e-5)) greedyTop = false;
  }
  check(shaped, 'logprobs: token, logprob <= 0, bytes and 3 top_logprobs each', show(content?.[0]));
  check(sorted, 'logprobs: top_logprobs sorted by logprob, descending');
  check(greedyTop, 'logprobs: at temperature 0 the chosen token is the top one',
        show(content?.map((t) => [t.logprob, t.top_logprobs?.[0]?.logprob])));
  check((content ?? []).map((t) => t.token).join('') === r.choices[0].message.content,
        'logprobs: the tokens spell the content', show(r.choices[0].message.content));
  const s = await streamChat(api, body);
  check(isDeepStrictEqual(s.logprobs, content), 'logprobs: streamed logprobs equal the whole reply\'s',
        `${s.logprobs.length} entries`);
  const plain = await api.chat.completions.create({...body, logprobs: undefined, top_logprobs: undefined});
  check(plain.choices[0].logprobs === null, 'logprobs: null when not asked', show(plain.choices[0].logprobs));
  const comp = await api.completions.create({model: MODEL, prompt: 'Colours:', temperature: 0, max_tokens: 6,
                                             ignore_eos: true, logprobs: 2});
  const lp = comp.choices[0].logprobs;
  check(lp && lp.tokens?.length === 6 && lp.token_logprobs?.length === 6 && lp.top_logprobs?.length === 6 &&
        lp.top_logprobs.every((m) => Object.keys(m).length >= 1 && Object.keys(m).length <= 2) &&
        lp.token_logprobs.every((x) => x <= 0), 'completion logprobs: 6 tokens with top 2 maps', show(lp));
});

await part('8 concurrent streams', async () => {
  const prompts = ['apples', 'the sea', 'a robot', 'winter', 'music', 'a city at night', 'mountains', 'time']
                    .map((p) => `Write about ${p}.`);
  // Even streams greedy, odd ones sampled at temperature 1 with a seed of
  // their own: each slot's sampler must keep to its request.
  const body = (p, i) => chatBody(p, {max_tokens: 120, ignore_eos: true,
                                      ...(i % 2 ? {temperature: 1, seed: 100 + i} : {temperature: 0})});
  const before = await metrics(BASE);
  let busyMax = 0, queueMax = 0, sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const m = await metrics(BASE);
      busyMax = Math.max(busyMax, m.weft_slots_busy ?? 0);
      queueMax = Math.max(queueMax, m.weft_queue_length ?? 0);
      await sleep(20);
    }
  })();
  const t0 = Date.now();
  const results = await Promise.allSettled(prompts.map((p, i) => streamChat(api, body(p, i))));
  const together = Date.now() - t0;
  sampling = false;
  await sampler;
  const done = results.filter((r) => r.status === 'fulfilled' && r.value.finish === 'length');
  check(done.length === 8, 'all 8 concurrent streams completed',
        results.map((r) => (r.status === 'fulfilled' ? r.value.finish : String(r.reason))).join(', '));
  const after = await metrics(BASE);
  check(busyMax > 1, 'the streams overlapped (weft_slots_busy > 1 seen)', `max busy ${busyMax}, max queue ${queueMax}`);
  check(after.weft_requests_finished_total - before.weft_requests_finished_total >= 8,
        'weft_requests_finished_total counted them',
        `${before.weft_requests_finished_total} -> ${after.weft_requests_finished_total}`);
  check(after.weft_generated_tokens_total - before.weft_generated_tokens_total >= 8 * 40,
        'weft_generated_tokens_total counted their tokens',
        `${before.weft_generated_tokens_total} -> ${after.weft_generated_tokens_total}`);
  const t1 = Date.now();
  for (let i = 0; i < prompts.length; i++) {
    const alone = await api.chat.completions.create(body(prompts[i], i));
    const r = results[i];
    const text = r.status === 'fulfilled' ? r.value.text : null;
    check(text === alone.choices[0].message.content,
          `stream ${i} (${i % 2 ? 'seeded' : 'greedy'}) equals the same request made alone`,
          text === alone.choices[0].message.content ? '' : `${show(text)} vs ${show(alone.choices[0].message.content)}`);
  }
  console.log(`# 8 streams together: ${together} ms; the same 8 one after another: ${Date.now() - t1} ms`);
});

await part('cancellation', async () => {
  const before = await metrics(BASE);
  const s = await api.chat.completions.create(chatBody('Go on forever.', {max_tokens: 2000, ignore_eos: true, stream: true}));
  const it = s[Symbol.asyncIterator]();
  let got = 0;
  for (; got < 3; got++) if ((await it.next()).done) break;
  check(got === 3, 'cancellation: the long stream started', `${got} chunks`);
  const busy = await health(BASE);
  check(busy.slots_processing >= 1, 'cancellation: a slot is processing it', show(busy));
  s.controller.abort();
  const t0 = Date.now();
  const m = await waitFor(async () => {
    const x = await metrics(BASE);
    return x.weft_requests_cancelled_total > before.weft_requests_cancelled_total ? x : null;
  }, 5000);
  check(m !== null, 'cancellation: weft_requests_cancelled_total increased', `after ${Date.now() - t0} ms`);
  const h = await waitFor(async () => {
    const x = await health(BASE);
    return x.slots_processing === 0 ? x : null;
  }, 5000);
  check(h !== null, 'cancellation: /health shows no slot processing', show(h ?? await health(BASE)));
  const g1 = (await metrics(BASE)).weft_generated_tokens_total;
  await sleep(300);
  const g2 = (await metrics(BASE)).weft_generated_tokens_total;
  check(g1 === g2, 'cancellation: generation stopped', `${g1} -> ${g2}`);
  check(g2 === (await metrics(BASE)).weft_generated_tokens_total &&
        (m ?? {}).weft_requests_finished_total === before.weft_requests_finished_total,
        'cancellation: it stopped before its end (not counted as finished)',
        `${g2 - before.weft_generated_tokens_total} tokens generated`);
  const r = await api.chat.completions.create(chatBody('Still there?', {max_tokens: 4, ignore_eos: true}));
  check(r.usage.completion_tokens === 4, 'cancellation: the next request is served');
});

await part('cancellation of a whole (non-stream) request', async () => {
  // A client that gives up on a request answered whole must free its slot
  // too: the server has nobody to send the text to.
  const before = await metrics(BASE);
  const ac = new AbortController();
  // Settled at once into a value: its rejection must not go unhandled.
  const pending = api.chat.completions.create(chatBody('Go on forever, whole.', {max_tokens: 4000, ignore_eos: true}),
                                              {signal: ac.signal}).then((r) => ({r}), (e) => ({e}));
  const busy = await waitFor(async () => ((await health(BASE)).slots_processing >= 1), 5000);
  check(busy, 'whole-request cancellation: a slot is processing it');
  ac.abort();
  const {e} = await pending;
  check(e instanceof OpenAI.APIUserAbortError, 'whole-request cancellation: the client gave up',
        e ? e.constructor.name : 'it finished first');
  const m = await waitFor(async () => {
    const x = await metrics(BASE);
    return x.weft_requests_cancelled_total > before.weft_requests_cancelled_total ? x : null;
  }, 3000);
  const now = await metrics(BASE);
  check(m !== null, 'whole-request cancellation: weft_requests_cancelled_total increased',
        `cancelled ${before.weft_requests_cancelled_total} -> ${now.weft_requests_cancelled_total}, ` +
        `finished ${before.weft_requests_finished_total} -> ${now.weft_requests_finished_total}`);
  const idle = await waitFor(async () => ((await health(BASE)).slots_processing === 0), 10000);
  const end = await metrics(BASE);
  check(idle && end.weft_requests_finished_total === before.weft_requests_finished_total,
        'whole-request cancellation: it stopped before its end (not counted as finished)',
        `${end.weft_generated_tokens_total - before.weft_generated_tokens_total} tokens generated`);
});

// The seed of choice i of a request seeded with seed: seed for choice 0,
// else SplitMix64's output for seed + i (a reference of weft's choice_seed).
function choiceSeed(seed, i) {
  if (i === 0) return BigInt(seed);
  const M = (1n << 64n) - 1n;
  let z = (BigInt(seed) + BigInt(i) * 0x9e3779b97f4a7c15n) & M;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & M;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & M;
  return z ^ (z >> 31n);
}
// A body with a seed beyond 2^53 (JSON numbers in JavaScript lose it): as text.
const withSeed = (body, seed) => JSON.stringify({...body, seed: 0}).replace('"seed":0', `"seed":${seed}`);

// A stream's chunks by choice index: text, roles, finish_reasons.
async function streamChoices(s) {
  const by = {};
  let usage = null;
  for await (const ch of s) {
    if (ch.usage) usage = ch.usage;
    for (const c of ch.choices) {
      const b = (by[c.index] ??= {text: '', roles: 0, finishes: []});
      b.text += c.delta?.content ?? c.text ?? '';
      if (c.delta?.role) b.roles++;
      if (c.finish_reason) b.finishes.push(c.finish_reason);
    }
  }
  return {by, usage};
}

await part('n choices', async () => {
  const body = chatBody('Invent a word.', {temperature: 1, seed: 77, max_tokens: 12, ignore_eos: true});
  const r = await api.chat.completions.create({...body, n: 3});
  check(r.choices.length === 3 && r.choices.every((c, i) => c.index === i && typeof c.message?.content === 'string' &&
                                                          c.finish_reason === 'length'),
        'chat n 3: three choices, indexed 0-2', show(r.choices));
  const texts = r.choices.map((c) => c.message.content);
  check(new Set(texts).size > 1, 'chat n 3 at temperature 1: the choices differ', show(texts));
  const one = await api.chat.completions.create(body);
  check(texts[0] === one.choices[0].message.content, 'chat n 3: choice 0 is the n 1 reply of the same seed',
        `${show(texts[0])} vs ${show(one.choices[0].message.content)}`);
  for (const i of [1, 2]) {
    const alone = await fetchJson(BASE + '/v1/chat/completions', {method: 'POST', body: withSeed(body, choiceSeed(77, i))});
    check(alone.status === 200 && alone.json.choices[0].message.content === texts[i],
          `chat n 3: choice ${i} is the reply of seed SplitMix64(77 + ${i}·φ) = ${choiceSeed(77, i)}`,
          `${show(alone.json?.choices?.[0]?.message?.content ?? alone.text)} vs ${show(texts[i])}`);
  }
  check(r.usage.prompt_tokens === one.usage.prompt_tokens && r.usage.completion_tokens === 36 &&
        r.usage.total_tokens === r.usage.prompt_tokens + 36, 'chat n 3: usage counts the prompt once, every choice\'s tokens',
        show(r.usage));

  const s = await streamChoices(await api.chat.completions.create(
    {...body, n: 3, stream: true, stream_options: {include_usage: true}}));
  check([0, 1, 2].every((i) => s.by[i]?.text === texts[i]), 'chat n 3 streamed: each index\'s deltas equal its choice',
        show(Object.values(s.by).map((b) => b.text)));
  check(Object.keys(s.by).length === 3 && Object.values(s.by).every((b) => b.roles === 1 && b.finishes.length === 1 &&
                                                                        b.finishes[0] === 'length'),
        'chat n 3 streamed: one role and one finish_reason per choice', show(s.by));
  check(sameCounts(s.usage, r.usage), 'chat n 3 streamed: the usage chunk counts all choices', show(s.usage));

  const cbody = {model: MODEL, prompt: 'Once upon a time', temperature: 1, seed: 5, max_tokens: 10, ignore_eos: true};
  const c = await api.completions.create({...cbody, n: 2});
  check(c.choices.length === 2 && c.choices[0].index === 0 && c.choices[1].index === 1 &&
        c.usage.completion_tokens === 20, 'completion n 2: two choices', show(c.choices));
  const c0 = await api.completions.create(cbody);
  check(c.choices[0].text === c0.choices[0].text, 'completion n 2: choice 0 is the n 1 text');
  const alone = await fetchJson(BASE + '/v1/completions', {method: 'POST', body: withSeed(cbody, choiceSeed(5, 1))});
  check(alone.json?.choices?.[0]?.text === c.choices[1].text, 'completion n 2: choice 1 is the text of its derived seed',
        `${show(alone.json?.choices?.[0]?.text)} vs ${show(c.choices[1].text)}`);
  const cs = await streamChoices(await api.completions.create({...cbody, n: 2, stream: true}));
  check(cs.by[0]?.text === c.choices[0].text && cs.by[1]?.text === c.choices[1].text &&
        cs.by[0].finishes.length === 1 && cs.by[1].finishes.length === 1, 'completion n 2 streamed: each index\'s text',
        show(cs.by));
  const greedy = await api.chat.completions.create({...chatBody('Hi.'), temperature: 0, max_tokens: 8, n: 2});
  check(greedy.choices[0].message.content === greedy.choices[1].message.content,
        'chat n 2 at temperature 0: both choices are the greedy reply');
});

await part('errors', async () => {
  const chat = (extra) => () => api.chat.completions.create({...chatBody('hi'), max_tokens: 4, ...extra});
  await expectError('temperature 5 is a 400 naming temperature', chat({temperature: 5}), OpenAI.BadRequestError, 400,
                    'temperature');
  await expectError('n 9 (over --max-choices 8) is a 400 naming n', chat({n: 9}), OpenAI.BadRequestError, 400, 'n');
  await expectError('n 0 is a 400 naming n', chat({n: 0}), OpenAI.BadRequestError, 400, 'n');
  await expectError('missing messages is a 400 naming messages',
                    () => api.chat.completions.create({model: MODEL, max_tokens: 4}), OpenAI.BadRequestError, 400,
                    'messages');
  await expectError('max_tokens -1 is a 400 naming max_tokens', chat({max_tokens: -1}), OpenAI.BadRequestError, 400,
                    'max_tokens');
  await expectError('top_p 1.5 is a 400 naming top_p', chat({top_p: 1.5}), OpenAI.BadRequestError, 400, 'top_p');
  await expectError('stop 7 is a 400 naming stop', chat({stop: 7}), OpenAI.BadRequestError, 400, 'stop');
  await expectError('top_logprobs 21 is a 400 naming top_logprobs', chat({logprobs: true, top_logprobs: 21}),
                    OpenAI.BadRequestError, 400, 'top_logprobs');
  await expectError('17 stop strings are a 400 naming stop', chat({stop: Array.from({length: 17}, (_, i) => `s${i}`)}),
                    OpenAI.BadRequestError, 400, 'stop');
  await expectError('a message whose content is a number is a 400 with param messages',
                    () => api.chat.completions.create({model: MODEL, messages: [{role: 'user', content: 5}], max_tokens: 4}),
                    OpenAI.BadRequestError, 400, 'messages', false);
  await expectError('messages not an array is a 400 naming messages',
                    () => api.chat.completions.create({model: MODEL, messages: 'hi', max_tokens: 4}),
                    OpenAI.BadRequestError, 400, 'messages');
  await expectError('a stream with temperature 5 is a 400 too', chat({temperature: 5, stream: true}),
                    OpenAI.BadRequestError, 400, 'temperature');
  await expectError('missing prompt is a 400 naming prompt',
                    () => api.completions.create({model: MODEL, max_tokens: 4}), OpenAI.BadRequestError, 400, 'prompt');
  await expectError('a prompt token out of the vocabulary is a 400',
                    () => api.completions.create({model: MODEL, prompt: [1, 1000000], max_tokens: 4}),
                    OpenAI.BadRequestError, 400, 'prompt');
  await expectError('a prompt longer than a slot is a 400',
                    () => api.completions.create({model: MODEL, prompt: Array(5000).fill(5), max_tokens: 4}),
                    OpenAI.BadRequestError, 400);
  await expectError('GET /v1/nope is a 404 (client)', () => api.get('/nope'), OpenAI.NotFoundError, 404);
  const nf = await fetchJson(BASE + '/v1/nope');
  check(nf.status === 404 && /json/.test(nf.headers.get('content-type') ?? '') &&
        typeof nf.json?.error?.message === 'string' && typeof nf.json?.error?.type === 'string',
        'GET /v1/nope is a 404 JSON error', `${nf.status} ${show(nf.text)}`);
  const bad = await fetchJson(BASE + '/v1/chat/completions', {method: 'POST', body: '{"messages": ['});
  check(bad.status === 400 && typeof bad.json?.error?.message === 'string', 'a body that is not JSON is a 400',
        `${bad.status} ${show(bad.text)}`);
  const ok = await api.chat.completions.create(chatBody('hi', {max_tokens: 2}));
  check(ok.choices.length === 1, 'the server still serves after the errors');
});

await part('tokenize', async () => {
  for (const content of ['Hello world, this is weft.', ' leading space and  two', 'ünïcödé ✓ 字']) {
    const t = await fetchJson(BASE + '/tokenize', {method: 'POST', body: {content}});
    const ids = t.json?.tokens;
    check(t.status === 200 && Array.isArray(ids) && ids.length > 0 && ids.every(Number.isInteger),
          `/tokenize ${JSON.stringify(content)}`, show(t.json));
    const d = await fetchJson(BASE + '/detokenize', {method: 'POST', body: {tokens: ids}});
    check(d.status === 200 && d.json?.content === content, `/detokenize gives ${JSON.stringify(content)} back`,
          show(d.json));
  }
  const withBos = await fetchJson(BASE + '/tokenize', {method: 'POST', body: {content: 'Hi', add_special: true}});
  check(withBos.json?.tokens?.[0] === 1, '/tokenize add_special starts with BOS', show(withBos.json));
  const bad = await fetchJson(BASE + '/detokenize', {method: 'POST', body: {tokens: [-1]}});
  check(bad.status === 400 && bad.json?.error?.param === 'tokens', '/detokenize of a bad id is a 400', bad.text);
});

await part('embeddings', async () => {
  // The model's vectors are checked against a float64 forward pass in
  // tests/serve/test_embeddings.cpp; here the API's shape through the client.
  const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
  const diff = (a, b) => Math.max(...Array.from(a, (x, i) => Math.abs(x - b[i])));
  const texts = ['The quick brown fox', 'Once upon a time', 'weft'];
  // The client asks for base64 by default and decodes it into floats.
  const b64 = await api.embeddings.create({model: MODEL, input: texts});
  const flt = await api.embeddings.create({model: MODEL, input: texts, encoding_format: 'float'});
  check(b64.object === 'list' && b64.data.length === 3 && b64.data.every((d, i) => d.object === 'embedding' && d.index === i),
        'embeddings.create: a list of 3 embeddings in order', show({...b64, data: b64.data.map((d) => d.index)}));
  check(b64.data.every((d) => d.embedding.length === 128 && Math.abs(norm(d.embedding) - 1) < 1e-5),
        'each of the model\'s width (128) and unit L2 norm', b64.data.map((d) => `${d.embedding.length}:${norm(d.embedding)}`).join(' '));
  check(b64.data.every((d, i) => diff(d.embedding, flt.data[i].embedding) === 0),
        'base64 (the client\'s default) decodes to exactly the float encoding');
  let tokens = 0;
  const ids = [];
  for (const content of texts) {
    const t = await fetchJson(BASE + '/tokenize', {method: 'POST', body: {content, add_special: true}});
    ids.push(t.json.tokens);
    tokens += t.json.tokens.length;
  }
  check(b64.usage?.prompt_tokens === tokens && b64.usage.total_tokens === tokens,
        'usage.prompt_tokens: every input\'s tokens (BOS included)', `${show(b64.usage)} vs ${tokens}`);
  const alone = await api.embeddings.create({model: MODEL, input: texts[1], encoding_format: 'float'});
  check(alone.data.length === 1 && diff(alone.data[0].embedding, flt.data[1].embedding) < 1e-5,
        'one string alone = the same string in a batch', `${diff(alone.data[0].embedding, flt.data[1].embedding)}`);
  const byIds = await api.embeddings.create({model: MODEL, input: ids, encoding_format: 'float'});
  check(byIds.data.every((d, i) => diff(d.embedding, flt.data[i].embedding) < 1e-5),
        'token arrays = the texts they encode');
  const one = await api.embeddings.create({model: MODEL, input: ids[0], encoding_format: 'float'});
  check(one.data.length === 1 && diff(one.data[0].embedding, flt.data[0].embedding) < 1e-5, 'one token array: one vector');
  const mean = await fetchJson(BASE + '/v1/embeddings', {method: 'POST', body: {input: texts[0], pooling: 'mean'}});
  check(mean.status === 200 && diff(mean.json.data[0].embedding, flt.data[0].embedding) > 1e-3 &&
        Math.abs(norm(mean.json.data[0].embedding) - 1) < 1e-5, 'pooling "mean" (weft\'s field): another unit vector',
        mean.text.slice(0, 100));
  const same = await api.embeddings.create({model: MODEL, input: texts[0], dimensions: 128});
  check(same.data[0].embedding.length === 128, 'dimensions 128 (the model\'s width) is taken');
  const emb = (extra) => () => api.embeddings.create({model: MODEL, input: 'x', ...extra});
  await expectError('dimensions 64 is a 400 naming dimensions', emb({dimensions: 64}), OpenAI.BadRequestError, 400,
                    'dimensions');
  await expectError('an empty input is a 400 naming input', emb({input: ''}), OpenAI.BadRequestError, 400, 'input');
  await expectError('an empty array is a 400 naming input', emb({input: []}), OpenAI.BadRequestError, 400, 'input');
  await expectError('a number as input is a 400 naming input', emb({input: 5}), OpenAI.BadRequestError, 400, 'input');
  await expectError('encoding_format "int8" is a 400 naming encoding_format', emb({encoding_format: 'int8'}),
                    OpenAI.BadRequestError, 400, 'encoding_format');
  const long = await expectError('an input longer than a slot (5000 tokens) is a 400 naming input',
                                 emb({input: Array(5000).fill(5)}), OpenAI.BadRequestError, 400, 'input');
  check(/5000 tokens, more than a slot's context of 4096/.test(long?.error?.message ?? ''),
        'the 400 names the length and the slot\'s context', long?.error?.message);
  await expectError('2049 inputs are a 400 naming input', emb({input: Array(2049).fill('a')}),
                    OpenAI.BadRequestError, 400, 'input');
  await expectError('a token outside the vocabulary is a 400 naming input', emb({input: [1, 1000000]}),
                    OpenAI.BadRequestError, 400, 'input');
  // Embeddings and generations together: both answered, the stream whole.
  const [stream, during] = await Promise.all([
    api.chat.completions.create(chatBody('hello', {max_tokens: 32, temperature: 0})),
    api.embeddings.create({model: MODEL, input: texts, encoding_format: 'float'}),
  ]);
  check(stream.choices[0].message.content.length > 0 && during.data.every((d, i) => diff(d.embedding, flt.data[i].embedding) < 1e-5),
        'embeddings served while a chat runs: the same vectors');
});

await part('pool', async () => {
  // GET /v1/pool against what the run started: 4 layers over this CPU and
  // WORKERS workers (--split 1,1,1), traffic to each, and counters equal
  // to /metrics' after the requests above.
  const p = await fetchJson(BASE + '/v1/pool');
  const devs = p.json?.devices ?? [];
  check(p.status === 200 && devs.length === WORKERS + 1 && devs[0].label === 'host' && devs[0].remote === false &&
        typeof devs[0].simd === 'string' && devs[0].threads === 1 &&
        devs.slice(1).every((d) => d.remote && d.simd === devs[0].simd && d.threads === 1),
        `/v1/pool: the host and ${WORKERS} workers (on this machine: the same kernels; 1 thread each, as started)`,
        show(devs.map((d) => [d.label, d.simd, d.threads])));
  const bounds = devs.map((d) => d.layers);
  check(bounds[0][0] === 0 && bounds.at(-1)[1] === 4 && bounds.every((b, i) => i === 0 || b[0] === bounds[i - 1][1]) &&
        (WORKERS === 0 || bounds.every((b) => b[1] > b[0])),
        'the layers: [0, 4) cut in order over the devices, each holding some when split', show(bounds));
  check(devs.every((d) => d.weight_bytes > 0 && d.kv_cache_bytes > 0 && d.used_bytes >= d.weight_bytes + d.kv_cache_bytes &&
                          d.lost === false),
        'each device: its weights, KV cache and memory used', show(devs.map((d) => d.used_bytes)));
  check(devs.slice(1).every((d) => d.link.bytes_sent > 0 && d.link.bytes_received > 0 && d.link.round_trips > 0),
        'each worker\'s link carried traffic', show(devs.map((d) => d.link)));
  const m = await metrics(BASE);
  const e = p.json.engine;
  check(e.slots === 4 && e.generated_tokens > 0 && e.generated_tokens <= m.weft_generated_tokens_total &&
        e.steps <= m.weft_steps_total && e.measured_ms_per_step > 0 && e.recoveries === 0 && e.embeddings > 0,
        'engine counters: 4 slots, tokens and steps (at most /metrics\' a moment later), ms per step', show(e));
  check(p.json.uptime_seconds > 0 && typeof p.json.policy === 'string', 'uptime and the placement policy',
        show({uptime: p.json.uptime_seconds, policy: p.json.policy}));
});

if (opt['queue-base']) {
  await part('429 when the queue is full', async () => {
    const QB = opt['queue-base'].replace(/\/$/, '');
    const q = client(QB);
    const h0 = await health(QB);
    check(h0?.slots_idle === 1 && h0.slots_processing === 0, 'queue server: 1 idle slot', show(h0));
    const before = await metrics(QB);
    const long = (content) => chatBody(content, {max_tokens: 3000, ignore_eos: true, stream: true});
    const s1 = await q.chat.completions.create(long('First.'));
    const it1 = s1[Symbol.asyncIterator]();
    await it1.next();
    const s2 = await q.chat.completions.create(long('Second.'));
    const queued = await waitFor(async () => {
      const h = await health(QB);
      return h.slots_processing === 1 && h.queue_length === 1 ? h : null;
    }, 5000);
    check(queued !== null, 'queue server: one request processing, one queued', show(queued ?? await health(QB)));
    const e = await expectError('the third request is a 429',
                                () => q.chat.completions.create(chatBody('Third.', {max_tokens: 4})),
                                OpenAI.RateLimitError, 429);
    const retry = e?.headers?.get?.('retry-after');
    check(retry != null && /^\d+$/.test(retry.trim()), '429 has a Retry-After header', String(retry));
    check(e?.type === 'rate_limit_error', '429 error type is rate_limit_error', String(e?.type));
    await expectError('a third streamed request is a 429 too',
                      () => q.chat.completions.create(chatBody('Third.', {max_tokens: 4, stream: true})),
                      OpenAI.RateLimitError, 429);
    const raw = await fetchJson(QB + '/v1/completions', {method: 'POST', body: {prompt: 'x', max_tokens: 1}});
    check(raw.status === 429 && raw.headers.get('retry-after') && typeof raw.json?.error?.message === 'string',
          'a raw 429 is a JSON error with Retry-After', `${raw.status} ${raw.text}`);
    const m = await metrics(QB);
    check(m.weft_requests_rejected_total - before.weft_requests_rejected_total === 3,
          'weft_requests_rejected_total counted the three', `${before.weft_requests_rejected_total} -> ${m.weft_requests_rejected_total}`);
    s1.controller.abort();
    s2.controller.abort();
    const idle = await waitFor(async () => {
      const h = await health(QB);
      return h.slots_processing === 0 && h.queue_length === 0 ? h : null;
    }, 5000);
    check(idle !== null, 'queue server: idle again after both streams were aborted', show(idle ?? await health(QB)));
    const m2 = await waitFor(async () => {
      const x = await metrics(QB);
      return x.weft_requests_cancelled_total - before.weft_requests_cancelled_total === 2 ? x : null;
    }, 3000);
    check(m2 !== null, 'weft_requests_cancelled_total counted both aborted streams (the running and the queued)',
          `${before.weft_requests_cancelled_total} -> ${(await metrics(QB)).weft_requests_cancelled_total}`);
    const r = await q.chat.completions.create(chatBody('Fourth.', {max_tokens: 3, ignore_eos: true}));
    check(r.usage.completion_tokens === 3, 'queue server: serves again');
    // n choices take a slot or queue place each: 1 slot and 1 place hold 2.
    const two = await q.chat.completions.create(chatBody('Fifth.', {max_tokens: 3, ignore_eos: true, n: 2}));
    check(two.choices.length === 2, 'queue server: n 2 fits its one slot and one queue place');
    const e3 = await expectError('queue server: n 3 is a 429 (more choices than slots and queue places)',
                                 () => q.chat.completions.create(chatBody('Sixth.', {max_tokens: 3, n: 3})),
                                 OpenAI.RateLimitError, 429);
    check(/choices/.test(e3?.error?.message ?? ''), 'the 429 says the choices do not fit', show(e3?.error?.message));
  });
}

if (opt['auth-base']) {
  await part('API key', async () => {
    const AB = opt['auth-base'].replace(/\/$/, '');
    const key = fs.readFileSync(opt['key-file'], 'utf8').trim();
    const h = await fetchJson(AB + '/health');
    check(h.status === 200 && h.json?.status === 'ok', '/health needs no key', h.text);
    const none = await fetchJson(AB + '/v1/models');
    check(none.status === 401 && none.json?.error?.type === 'authentication_error' &&
          typeof none.json.error.message === 'string', 'no key: 401 JSON error', `${none.status} ${none.text}`);
    check(/bearer/i.test(none.headers.get('www-authenticate') ?? ''), 'no key: WWW-Authenticate: Bearer',
          String(none.headers.get('www-authenticate')));
    const noKey = client(AB, 'unused', {defaultHeaders: {Authorization: null}});
    await expectError('no key: the client throws AuthenticationError',
                      () => noKey.chat.completions.create(chatBody('hi', {max_tokens: 2})), OpenAI.AuthenticationError, 401);
    const wrong = client(AB, key + 'x');
    await expectError('wrong key: 401', () => wrong.chat.completions.create(chatBody('hi', {max_tokens: 2})),
                      OpenAI.AuthenticationError, 401);
    await expectError('wrong key, streamed: 401',
                      () => wrong.chat.completions.create(chatBody('hi', {max_tokens: 2, stream: true})),
                      OpenAI.AuthenticationError, 401);
    const prefix = client(AB, key.slice(0, -1));
    await expectError('a prefix of the key: 401', () => prefix.models.list(), OpenAI.AuthenticationError, 401);
    const m = await fetchJson(AB + '/metrics');
    check(m.status === 401, '/metrics needs the key', String(m.status));
    const t = await fetchJson(AB + '/tokenize', {method: 'POST', body: {content: 'hi'}});
    check(t.status === 401, '/tokenize needs the key', String(t.status));
    const right = client(AB, key);
    const list = await right.models.list();
    check(list.data.length === 1, 'right key: /v1/models', show(list.data.map((x) => x.id)));
    const r = await right.chat.completions.create(chatBody('hi', {max_tokens: 3, ignore_eos: true}));
    check(r.usage.completion_tokens === 3, 'right key: chat');
    const s = await streamChat(right, chatBody('hi', {max_tokens: 3, ignore_eos: true}));
    check(s.usage?.completion_tokens === 3, 'right key: chat streamed');
    await expectError('max_tokens over --max-tokens 64 is a 400 naming max_tokens',
                      () => right.chat.completions.create(chatBody('hi', {max_tokens: 65})), OpenAI.BadRequestError, 400,
                      'max_tokens');
    const capped = await right.chat.completions.create(chatBody('hi', {max_tokens: 64, ignore_eos: true}));
    check(capped.usage.completion_tokens === 64, 'max_tokens 64 under --max-tokens 64 is served');
    const tk = await fetchJson(AB + '/tokenize', {method: 'POST', body: {content: 'hi'}, key});
    check(tk.status === 200, 'right key: /tokenize', tk.text);
  });
}

if (opt['tools-base']) {
  await part('tools', async () => {
    const TB = opt['tools-base'].replace(/\/$/, '');
    const t = client(TB);
    const fx = JSON.parse(fs.readFileSync(opt['tool-prompts'], 'utf8'));
    const {weather, clock} = fx.tools;
    // The history as an OpenAI client sends it: arguments as JSON text, content null.
    const history = fx.history.map((m) => m.tool_calls ? {
      ...m, content: null,
      tool_calls: m.tool_calls.map((c) => ({...c, function: {...c.function, arguments: JSON.stringify(c.function.arguments)}})),
    } : m);
    const tokens = async (text) => (await fetchJson(TB + '/tokenize', {
      method: 'POST', body: {content: text, add_special: true, parse_special: true}})).json.tokens.length;
    const base = {model: MODEL, messages: fx.question, temperature: 0, max_tokens: 16};
    const cases = [
      ['no tools', {}, 'plain'],
      ['tools', {tools: [weather, clock]}, 'tools'],
      ['tool_choice "auto"', {tools: [weather, clock], tool_choice: 'auto'}, 'tools'],
      ['tool_choice "required"', {tools: [weather, clock], tool_choice: 'required'}, 'tools'],
      ['tool_choice naming get_time', {tools: [weather, clock], tool_choice: {type: 'function', function: {name: 'get_time'}}},
       'named'],
      ['tool_choice "none"', {tools: [weather, clock], tool_choice: 'none'}, 'plain'],
      ['parallel_tool_calls false', {tools: [weather, clock], parallel_tool_calls: false}, 'tools'],
      ['a tool call and its result in the history', {messages: history, tools: [weather, clock]}, 'history'],
    ];
    const counts = {};
    for (const [what, extra, prompt] of cases) {
      const r = await t.chat.completions.create({...base, ...extra});
      const expected = await tokens(fx.prompts[prompt]);
      counts[prompt] = expected;
      check(r.usage.prompt_tokens === expected,
            `tools: ${what}: the prompt is the reference rendering (${prompt}, ${expected} tokens)`,
            `${r.usage.prompt_tokens} vs ${expected}`);
      const m = r.choices[0].message;
      // The tiny random model writes no call: its reply comes back as text.
      check(typeof m.content === 'string' && m.tool_calls === undefined &&
            ['stop', 'length'].includes(r.choices[0].finish_reason), `tools: ${what}: a reply without a call is text`,
            show(r.choices[0]));
    }
    check(counts.tools > counts.named && counts.named > counts.plain, 'tools: the tools make the prompt longer',
          show(counts));
    const body = {...base, tools: [weather, clock], max_tokens: 24, ignore_eos: true};
    const whole = await t.chat.completions.create(body);
    const s = await streamChat(t, body);
    check(s.text === whole.choices[0].message.content && s.finish === whole.choices[0].finish_reason &&
          s.chunks.every((c) => c.choices[0]?.delta?.tool_calls === undefined),
          'tools streamed: text deltas equal the whole reply, no tool_calls', `${show(s.text)} vs ${show(whole.choices[0].message.content)}`);
    const chat = (extra) => () => t.chat.completions.create({...base, ...extra});
    await expectError('tools: tools not an array is a 400 naming tools', chat({tools: 'x'}), OpenAI.BadRequestError, 400,
                      'tools');
    await expectError('tools: a tool without a function is a 400 naming tools', chat({tools: [{type: 'function'}]}),
                      OpenAI.BadRequestError, 400, 'tools', false);
    await expectError('tools: tool_choice naming no tool is a 400 naming tool_choice',
                      chat({tools: [weather], tool_choice: {type: 'function', function: {name: 'nope'}}}),
                      OpenAI.BadRequestError, 400, 'tool_choice');
    await expectError('tools: parallel_tool_calls "yes" is a 400 naming it', chat({tools: [weather], parallel_tool_calls: 'yes'}),
                      OpenAI.BadRequestError, 400, 'parallel_tool_calls');
    const ok = await t.chat.completions.create({...base, max_tokens: 2});
    check(ok.choices.length === 1, 'tools: the server still serves after the errors');
  });
}

// Constrained output: response_format json_schema / json_object and
// llama.cpp's grammar field. Every reply must parse and validate (the
// validator below knows the few keywords the schema uses); bad and hostile
// schemas are 400s naming the fault, and the server keeps serving.
await part('constrained output', async () => {
  const schema = {
    type: 'object',
    properties: {
      name: {type: 'string', maxLength: 8},
      age: {type: 'integer'},
      tags: {type: 'array', items: {enum: ['red', 'green', 'blue']}, maxItems: 3},
      ok: {type: 'boolean'},
      note: {type: ['string', 'null'], maxLength: 4},
    },
    required: ['name', 'age', 'tags', 'ok'],
    additionalProperties: false,
  };
  const chars = (s) => [...s].length;  // code points, as JSON Schema counts
  const valid = (v) => v !== null && typeof v === 'object' && !Array.isArray(v) &&
      Object.keys(v).every((k) => k in schema.properties) &&
      typeof v.name === 'string' && chars(v.name) <= 8 && Number.isInteger(v.age) &&
      Array.isArray(v.tags) && v.tags.length <= 3 && v.tags.every((t) => ['red', 'green', 'blue'].includes(t)) &&
      typeof v.ok === 'boolean' && (!('note' in v) || v.note === null || (typeof v.note === 'string' && chars(v.note) <= 4));
  const parsed = (text) => {
    try {
      return {ok: true, v: JSON.parse(text)};
    } catch {
      return {ok: false};
    }
  };
  const body = {model: MODEL, messages: [{role: 'user', content: 'A person, as JSON.'}], max_tokens: 600, temperature: 1,
                response_format: {type: 'json_schema', json_schema: {name: 'person', schema, strict: true}}};
  for (const seed of [1, 2, 3, 4]) {
    const r = await api.chat.completions.create({...body, seed});
    const text = r.choices[0].message.content;
    const p = parsed(text);
    check(p.ok && valid(p.v) && r.choices[0].finish_reason === 'stop',
          `json_schema (seed ${seed}): the reply parses, validates and ends with "stop"`, show(text));
  }
  const whole = await api.chat.completions.create({...body, seed: 9});
  const s = await streamChat(api, {...body, seed: 9});
  check(s.text === whole.choices[0].message.content && valid(parsed(s.text).v ?? null),
        'json_schema streamed: the deltas make the whole reply', `${show(s.text)} vs ${show(whole.choices[0].message.content)}`);
  const many = await api.chat.completions.create({...body, seed: 5, n: 3});
  check(many.choices.length === 3 && many.choices.every((c) => valid(parsed(c.message.content).v ?? null)),
        'json_schema with n = 3: every choice validates', show(many.choices.map((c) => c.message.content)));
  const obj = await api.chat.completions.create({...body, seed: 6, max_tokens: 64, response_format: {type: 'json_object'}});
  const ot = obj.choices[0].message.content;
  check(ot.startsWith('{') && (obj.choices[0].finish_reason === 'length' || parsed(ot).ok),
        'json_object: the reply is a JSON object (or its start, when max_tokens ran out)', show(ot));
  const yn = await api.completions.create({model: MODEL, prompt: 'Answer:', max_tokens: 8, seed: 3, temperature: 1,
                                           grammar: 'root ::= ("yes" | "no") "!"'});
  check(['yes!', 'no!'].includes(yn.choices[0].text), 'grammar (GBNF) on completions: the text is a sentence of it',
        show(yn.choices[0].text));

  const plain = {model: MODEL, messages: body.messages, max_tokens: 4};
  const chat = (extra) => () => api.chat.completions.create({...plain, ...extra});
  const fmt = (schema) => ({response_format: {type: 'json_schema', json_schema: {name: 'x', schema}}});
  const refused = async (what, extra, param, needle) => {
    const e = await expectError(what, chat(extra), OpenAI.BadRequestError, 400, param);
    check((e?.error?.message ?? '').includes(needle), `${what}: the message says ${show(needle)}`,
          show(e?.error?.message ?? ''));
  };
  await refused('json_schema with an unsupported keyword is a 400 naming it and its place',
                fmt({type: 'object', properties: {a: {type: 'string', pattern: 'x+'}}}), 'response_format',
                "at /properties/a/pattern: 'pattern' is not supported");
  await refused('json_schema of an unknown type is a 400', fmt({type: 'strin'}), 'response_format', "unknown type 'strin'");
  await refused('json_schema without a schema is a 400', {response_format: {type: 'json_schema', json_schema: {name: 'x'}}},
                'response_format', 'json_schema.schema');
  await refused('an unknown response_format type is a 400', {response_format: {type: 'yaml'}}, 'response_format', 'yaml');
  await refused('a GBNF grammar with an undefined rule is a 400 naming the rule and its position',
                {grammar: 'root ::= "a" b'}, 'grammar', "line 1, column 14: rule 'b' is used but never defined");
  await refused('a left-recursive grammar is a 400', {grammar: 'root ::= root "a" | "b"'}, 'grammar', 'left-recursive');
  let deep = {type: 'string'};
  for (let i = 0; i < 50; i++) deep = {type: 'array', items: deep};
  await refused('hostile: a schema nested 50 deep is refused', fmt(deep), 'response_format',
                'subschemas nested deeper than 32');
  for (let i = 0; i < 150; i++) deep = {type: 'array', items: deep};
  await expectError('hostile: a schema nested 200 deep is refused (the body is too deep)', chat(fmt(deep)),
                    OpenAI.BadRequestError, 400);
  await refused('hostile: an enum of 5000 values is refused', fmt({enum: Array.from({length: 5000}, (_, i) => i)}),
                'response_format', 'more than the limit');
  await refused('hostile: maxItems 1e9 is refused', fmt({type: 'array', maxItems: 1000000000}), 'response_format',
                'beyond the limit');
  await refused('hostile: a grammar repeating 1e9 times is refused', {grammar: 'root ::= "a"{1000000000}'}, 'grammar',
                'repetition count beyond the limit');
  const after = await api.chat.completions.create({...body, seed: 7});
  check(valid(parsed(after.choices[0].message.content).v ?? null), 'the server still serves constrained requests after them',
        show(after.choices[0].message.content));
});

if (opt.weft) {
  await part('non-loopback host without a key', async () => {
    const r = spawnSync(opt.weft, ['serve', '-m', opt.model, '--host', '0.0.0.0', '--port', '0', '-t', '1'],
                        {encoding: 'utf8', timeout: 20000});
    const out = (r.stdout ?? '') + (r.stderr ?? '');
    if (r.error) throw r.error;
    check(r.signal === null && r.status !== 0, 'weft serve --host 0.0.0.0 without --api-key-file exits non-zero',
          `status ${r.status} signal ${r.signal}`);
    check(out.includes('--api-key-file'), 'its message names --api-key-file', show(out.trim()));
  });
}

clearTimeout(watchdog);
console.log(`${failures ? 'FAIL' : 'PASS'}: ${checks - failures}/${checks} checks passed${WORKERS ? ` (${WORKERS} workers)` : ''} ` +
            `in ${((Date.now() - started) / 1000).toFixed(1)} s`);
process.exit(failures ? 1 : 0);
