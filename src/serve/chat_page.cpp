// The chat page (chat_page.h): HTML, CSS and JavaScript in one document.
//
// Model and user text reach the DOM only through textContent (model output
// is untrusted). The page works under the server's Content-Security-Policy
// (default-src 'self', inline style and script): no external assets, no
// data: URLs. Elements the test (tests/serve/chat_page.test.mjs) relies on:
// #input, #send, #stop, #messages, #temperature, #max-tokens, #system-prompt,
// #api-key, #new-chat, #model, #pool-toggle and #pool (filled by
// /pool.js: pool_view.cpp); each reply is a .msg.assistant whose
// data-state is "streaming", then "done", "stopped" or "error", its text in
// .text and its speed in .speed.
#include "serve/chat_page.h"

namespace weft::serve {

namespace {

// Adjacent literals: markup and style, then the script.
constexpr char kPage[] = R"PAGE(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>weft chat</title>
<style>
:root{--bg:#f7f7f8;--fg:#1d1d1f;--muted:#6e6e73;--line:#d9d9de;--panel:#fff;--user:#2563eb;--user-fg:#fff;--bot:#ececf0;--err:#b42318;--err-bg:#fdecea}
@media (prefers-color-scheme:dark){:root{--bg:#16171a;--fg:#e8e8ea;--muted:#9a9aa2;--line:#33343a;--panel:#1f2024;--user:#3b6fe0;--bot:#2a2b31;--err:#ff8a80;--err-bg:#3a1f1f}}
*{box-sizing:border-box}
html,body{height:100%;margin:0}
body{display:flex;flex-direction:column;background:var(--bg);color:var(--fg);font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
header{display:flex;align-items:center;gap:.6rem;padding:.55rem 1rem;border-bottom:1px solid var(--line);background:var(--panel)}
header h1{font-size:1rem;margin:0}
#model{color:var(--muted);font-size:.85rem;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
#status{color:var(--muted);font-size:.85rem;display:flex;align-items:center;gap:.4rem}
#status progress{width:7rem}
.spacer{flex:1}
button{font:inherit;border:1px solid var(--line);background:var(--panel);color:var(--fg);border-radius:8px;padding:.35rem .8rem;cursor:pointer}
button:hover:not(:disabled){border-color:var(--muted)}
button:disabled{opacity:.5;cursor:default}
button.primary{background:var(--user);border-color:var(--user);color:var(--user-fg)}
#settings{display:grid;grid-template-columns:repeat(auto-fit,minmax(12rem,1fr));gap:.6rem 1rem;padding:.7rem 1rem;border-bottom:1px solid var(--line);background:var(--panel)}
#settings[hidden]{display:none}
#pool{padding:.6rem 1rem;border-bottom:1px solid var(--line);background:var(--panel);font-size:.85rem;overflow-x:auto}
#pool[hidden]{display:none}
#pool-summary{display:flex;flex-wrap:wrap;gap:.4rem 1.2rem;margin-bottom:.4rem}
.pool-label,.pool-note{color:var(--muted)}
#pool-chart{width:100%;max-width:600px;height:90px;display:block;border:1px solid var(--line);border-radius:6px}
#pool-devices{border-collapse:collapse;margin-top:.4rem}
#pool-devices th,#pool-devices td{text-align:left;padding:.15rem .7rem .15rem 0;white-space:nowrap}
#pool-devices th{color:var(--muted);font-weight:normal}
#settings label{display:flex;flex-direction:column;gap:.2rem;font-size:.8rem;color:var(--muted)}
#settings .wide{grid-column:1/-1}
input,textarea{font:inherit;color:var(--fg);background:var(--bg);border:1px solid var(--line);border-radius:8px;padding:.4rem .55rem}
textarea{resize:vertical}
input:focus,textarea:focus{outline:2px solid var(--user);outline-offset:-1px}
#messages{flex:1;overflow-y:auto;padding:1rem;display:flex;flex-direction:column;gap:.75rem}
#messages:empty::before{content:"Send a message to start.";color:var(--muted);margin:auto}
.msg{max-width:min(46rem,88%);display:flex;flex-direction:column;gap:.2rem}
.msg.user{align-self:flex-end;align-items:flex-end}
.msg.assistant{align-self:flex-start}
.bubble{padding:.5rem .8rem;border-radius:12px;white-space:pre-wrap;overflow-wrap:anywhere}
.user .bubble{background:var(--user);color:var(--user-fg);border-bottom-right-radius:4px}
.user.dropped .bubble{opacity:.55}
.assistant .bubble{background:var(--bot);border-bottom-left-radius:4px}
.assistant .bubble:has(.text:empty){min-width:2.5rem}
.assistant:not([data-state="streaming"]) .bubble:has(.text:empty){display:none}
.assistant[data-state="streaming"] .text::after{content:"\258D";animation:blink 1s steps(2) infinite;color:var(--muted)}
@keyframes blink{50%{opacity:0}}
.error{color:var(--err);background:var(--err-bg);border-radius:8px;padding:.35rem .6rem;font-size:.85rem;white-space:pre-wrap}
.meta{font-size:.75rem;color:var(--muted);display:flex;gap:.6rem}
footer{border-top:1px solid var(--line);background:var(--panel);padding:.6rem 1rem}
form{display:flex;gap:.5rem;align-items:flex-end}
#input{flex:1;resize:none;min-height:2.5rem;max-height:12rem}
</style>
</head>
<body>
<header>
  <h1>weft</h1>
  <span id="model" title="model"></span>
  <span id="status" role="status"></span>
  <span class="spacer"></span>
  <button id="settings-toggle" type="button" aria-expanded="false" aria-controls="settings">Settings</button>
  <button id="pool-toggle" type="button" aria-expanded="false" aria-controls="pool">Pool</button>
  <button id="new-chat" type="button">New chat</button>
</header>
<section id="settings" hidden>
  <label>Temperature<input id="temperature" type="number" min="0" max="2" step="0.1" placeholder="server default"></label>
  <label>Max tokens<input id="max-tokens" type="number" min="1" step="1" placeholder="server default"></label>
  <label>API key<input id="api-key" type="password" autocomplete="off" placeholder="none"></label>
  <label class="wide">System prompt<textarea id="system-prompt" rows="2" placeholder="none"></textarea></label>
</section>
<section id="pool" hidden></section>
<main id="messages" aria-live="polite"></main>
<footer>
  <form id="composer">
    <textarea id="input" rows="1" placeholder="Message (Enter sends, Shift+Enter for a new line)" aria-label="Message"></textarea>
    <button id="send" class="primary" type="submit" disabled>Send</button>
    <button id="stop" type="button" hidden disabled>Stop</button>
  </form>
</footer>
<script>
)PAGE"
                         R"PAGE('use strict';
const $ = (id) => document.getElementById(id);
const ui = {
  messages: $('messages'), input: $('input'), send: $('send'), stop: $('stop'), form: $('composer'),
  model: $('model'), status: $('status'), newChat: $('new-chat'),
  toggle: $('settings-toggle'), settings: $('settings'),
};
const fields = {temperature: $('temperature'), maxTokens: $('max-tokens'), system: $('system-prompt'), apiKey: $('api-key')};
const STORE = 'weft-chat-settings';
let history = [];    // finished turns sent as context: {role, content}
let ready = false;   // /health answered 200
let busy = null;     // the reply being streamed: {controller}
let healthTimer = 0;
let modelLoaded = false;

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function loadSettings() {
  try {
    const s = JSON.parse(localStorage.getItem(STORE) || '{}');
    for (const k in fields) if (typeof s[k] === 'string') fields[k].value = s[k];
  } catch (e) { /* storage unavailable: defaults */ }
}
function saveSettings() {
  const s = {};
  for (const k in fields) s[k] = fields[k].value;
  try { localStorage.setItem(STORE, JSON.stringify(s)); } catch (e) { /* not kept */ }
}

function headers(json) {
  const h = {};
  if (json) h['Content-Type'] = 'application/json';
  const key = fields.apiKey.value.trim();
  if (key) h['Authorization'] = 'Bearer ' + key;
  return h;
}

function updateControls() {
  ui.send.disabled = !ready || !!busy;
  ui.send.hidden = !!busy;
  ui.stop.hidden = !busy;
  ui.stop.disabled = !busy;
}

function setStatus(text, progress) {
  ui.status.replaceChildren();
  if (typeof progress === 'number') {
    const p = el('progress');
    p.max = 1;
    p.value = progress;
    ui.status.append(p);
  }
  if (text) ui.status.append(el('span', '', text));
}

async function pollHealth() {
  clearTimeout(healthTimer);
  let again = true;
  try {
    const r = await fetch('health', {cache: 'no-store'});
    const j = await r.json().catch(() => ({}));
    ready = r.ok;
    if (r.ok) {
      again = false;
      setStatus('');
      if (!modelLoaded) loadModel();
    } else if (j.status === 'loading') {
      const p = typeof j.progress === 'number' ? j.progress : undefined;
      setStatus('Loading model' + (p === undefined ? '\u2026' : ' ' + Math.round(p * 100) + '%'), p);
    } else if (j.status === 'error') {
      again = false;
      setStatus('The model failed to load' + (j.error ? ': ' + j.error : ''));
    } else {
      setStatus('Server not ready (HTTP ' + r.status + ')');
    }
  } catch (e) {
    ready = false;
    setStatus('Server unreachable');
  }
  updateControls();
  if (again) healthTimer = setTimeout(pollHealth, 1000);
}

async function loadModel() {
  try {
    const r = await fetch('v1/models', {headers: headers(false), cache: 'no-store'});
    if (r.status === 401) { ui.model.textContent = '(API key needed: see Settings)'; return; }
    if (!r.ok) return;
    const j = await r.json();
    const m = j && Array.isArray(j.data) && j.data[0];
    if (m && typeof m.id === 'string') {
      ui.model.textContent = m.id;
      ui.model.title = m.id;
      modelLoaded = true;
    }
  } catch (e) { /* the name stays blank */ }
}

function nearBottom() {
  const m = ui.messages;
  return m.scrollHeight - m.scrollTop - m.clientHeight < 60;
}
function scrollDown() { ui.messages.scrollTop = ui.messages.scrollHeight; }

function addUser(text) {
  const m = el('div', 'msg user');
  m.append(el('div', 'bubble', text));
  ui.messages.append(m);
  return m;
}
function addAssistant() {
  const m = el('div', 'msg assistant');
  m.dataset.state = 'streaming';
  const bubble = el('div', 'bubble');
  const text = el('span', 'text');
  bubble.append(text);
  const meta = el('div', 'meta');
  const speed = el('span', 'speed');
  const note = el('span', 'note');
  meta.append(speed, note);
  m.append(bubble, meta);
  ui.messages.append(m);
  return {m, text, speed, note};
}
function showError(view, message) {
  view.m.insertBefore(el('div', 'error', message), view.m.querySelector('.meta'));
}

async function httpError(r) {
  let msg = '';
  try {
    const t = await r.text();
    msg = t;
    try {
      const j = JSON.parse(t);
      if (j && typeof j.error === 'object' && j.error && j.error.message) msg = j.error.message;
      else if (j && typeof j.error === 'string') msg = j.error;
    } catch (e) { /* not JSON: the text itself */ }
  } catch (e) { /* no body */ }
  return 'HTTP ' + r.status + (msg ? ': ' + msg.trim() : '');
}

// Server-sent events: calls onData with each event's data (its data: lines
// joined); stops early when onData returns false. Events may arrive split
// across reads, so text is buffered up to each blank line.
async function readEvents(body, onData) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  const dispatch = (event) => {
    const data = event.split('\n').filter((l) => l.startsWith('data:'))
      .map((l) => l.slice(l.startsWith('data: ') ? 6 : 5)).join('\n');
    return data === '' || onData(data) !== false;
  };
  for (;;) {
    const {value, done} = await reader.read();
    buf += done ? decoder.decode() : decoder.decode(value, {stream: true});
    buf = buf.replace(/\r\n/g, '\n');
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const event = buf.slice(0, i);
      buf = buf.slice(i + 2);
      if (!dispatch(event)) { reader.cancel().catch(() => {}); return; }
    }
    if (done) { if (buf.trim()) dispatch(buf); return; }
  }
}

function speedText(timings, usage, seconds) {
  let n, rate;
  if (timings && typeof timings.predicted_n === 'number') {
    n = timings.predicted_n;
    rate = timings.predicted_per_second;
  } else if (usage && typeof usage.completion_tokens === 'number') {
    n = usage.completion_tokens;
    if (seconds > 0) rate = n / seconds;
  } else {
    return '';
  }
  let s = n + (n === 1 ? ' token' : ' tokens');
  if (typeof rate === 'number' && isFinite(rate)) s += ' \u00b7 ' + rate.toFixed(1) + ' tokens/s';
  return s;
}
function promptText(timings) {
  if (!timings || typeof timings.prompt_n !== 'number') return '';
  let s = 'prompt: ' + timings.prompt_n + ' tokens';
  if (typeof timings.prompt_ms === 'number') {
    s += ' in ' + timings.prompt_ms.toFixed(0) + ' ms';
    if (timings.prompt_ms > 0) s += ' (' + (timings.prompt_n * 1000 / timings.prompt_ms).toFixed(1) + ' tokens/s)';
  }
  return s;
}

// The request for the conversation in history (its last turn the question
// just asked): the system prompt and the settings' sampling fields.
function requestBody() {
  const messages = [];
  if (fields.system.value.trim()) messages.push({role: 'system', content: fields.system.value});
  messages.push(...history);
  const body = {messages, stream: true, stream_options: {include_usage: true}};
  const t = parseFloat(fields.temperature.value);
  if (isFinite(t)) body.temperature = t;
  const n = parseInt(fields.maxTokens.value, 10);
  if (isFinite(n)) body.max_tokens = n;
  return body;
}

// One streamed event's data taken into reply, its text shown in view as it
// grows (kept in sight when the view was scrolled to the bottom). Returns
// false to end the stream: at [DONE] or an error event.
function takeChunk(reply, view, data) {
  if (data === '[DONE]') { reply.sawDone = true; return false; }
  let j;
  try { j = JSON.parse(data); } catch (e) { return true; }
  if (j.error) {
    reply.error = (typeof j.error === 'object' && j.error.message) || String(j.error);
    return false;
  }
  const c = Array.isArray(j.choices) ? j.choices[0] : null;
  if (c) {
    const d = c.delta && c.delta.content;
    if (typeof d === 'string' && d) {
      if (!reply.first) reply.first = performance.now();
      const pinned = nearBottom();
      reply.text += d;
      view.text.textContent = reply.text;
      if (pinned) scrollDown();
    }
    if (c.finish_reason) reply.finish = c.finish_reason;
  }
  if (j.timings) reply.timings = j.timings;
  if (j.usage) reply.usage = j.usage;
  return true;
}

// Posts body and streams the answer into view until it ends, fails or
// controller aborts it. Resolves to the reply: its text, finish reason,
// timings, usage, error (a message, or null), sawDone and first (when the
// first text came, 0 if none). A 503 or a network failure sends the page
// back to waiting for /health.
async function streamReply(body, view, controller) {
  const reply = {text: '', finish: null, timings: null, usage: null, error: null, sawDone: false, first: 0};
  try {
    const r = await fetch('v1/chat/completions', {
      method: 'POST', headers: headers(true), body: JSON.stringify(body), signal: controller.signal});
    if (!r.ok) {
      reply.error = await httpError(r);
      if (r.status === 503) { ready = false; pollHealth(); }
    } else {
      await readEvents(r.body, (data) => takeChunk(reply, view, data));
    }
  } catch (e) {
    if (!controller.signal.aborted) {
      reply.error = 'Network error: ' + (e && e.message ? e.message : e);
      ready = false;  // Send waits for /health again
      pollHealth();
    }
  }
  return reply;
}

// How a turn ended: 'error', 'stopped' or 'done'. A stream that closed
// before its end is an error, set in reply.error.
function turnState(reply, aborted) {
  if (reply.error) return 'error';
  if (aborted) return 'stopped';
  if (reply.finish || reply.sawDone) return 'done';
  reply.error = 'The connection closed before the reply finished';
  return 'error';
}

// The turn's end in the page and the history: the answer joins the history
// when done or when any text came; otherwise the question leaves it (its
// message marked dropped). The meta line gets the speed and the note.
function finishTurn(reply, view, userMsg, aborted) {
  const state = turnState(reply, aborted);
  const pinned = nearBottom();
  if (reply.error) showError(view, reply.error);
  if (state === 'done' || reply.text) {
    history.push({role: 'assistant', content: reply.text});
  } else {
    history.pop();  // no reply: the question leaves the context
    userMsg.classList.add('dropped');
    userMsg.title = 'not part of the conversation sent next';
  }
  const seconds = reply.first ? (performance.now() - reply.first) / 1000 : 0;
  view.speed.textContent = speedText(reply.timings, reply.usage, seconds);
  view.speed.title = promptText(reply.timings);
  view.note.textContent = state === 'stopped' ? 'stopped' : reply.finish === 'length' ? 'max tokens reached' : '';
  view.m.dataset.state = state;
  if (pinned) scrollDown();
}

// Sends the input as the next question and streams the answer; Stop aborts
// it, New chat meanwhile leaves the old conversation's page and history be.
async function send() {
  const text = ui.input.value;
  if (!ready || busy || !text.trim()) return;
  ui.input.value = '';
  autosize();
  const userMsg = addUser(text);
  history.push({role: 'user', content: text});
  const chat = history;
  const body = requestBody();
  const view = addAssistant();
  scrollDown();
  const controller = new AbortController();
  busy = {controller};
  updateControls();
  const reply = await streamReply(body, view, controller);
  if (busy && busy.controller === controller) busy = null;
  updateControls();
  if (chat !== history) return;  // New chat was pressed meanwhile
  finishTurn(reply, view, userMsg, controller.signal.aborted);
  ui.input.focus();
}

function newChat() {
  if (busy) busy.controller.abort();
  busy = null;
  history = [];
  ui.messages.replaceChildren();
  updateControls();
  ui.input.focus();
}

function autosize() {
  ui.input.style.height = 'auto';
  ui.input.style.height = Math.min(ui.input.scrollHeight + 2, 192) + 'px';
}

ui.form.addEventListener('submit', (e) => { e.preventDefault(); send(); });
ui.input.addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); send(); }
});
ui.input.addEventListener('input', autosize);
ui.stop.addEventListener('click', () => { if (busy) busy.controller.abort(); });
ui.newChat.addEventListener('click', newChat);
ui.toggle.addEventListener('click', () => {
  ui.settings.hidden = !ui.settings.hidden;
  ui.toggle.setAttribute('aria-expanded', String(!ui.settings.hidden));
});
for (const k in fields) fields[k].addEventListener('change', saveSettings);
fields.apiKey.addEventListener('change', () => { if (ready) loadModel(); });

loadSettings();
updateControls();
pollHealth();
ui.input.focus();
</script>
<script src="/pool.js"></script>
</body>
</html>
)PAGE";

}  // namespace

std::string_view chat_page_html() { return {kPage, sizeof(kPage) - 1}; }

}  // namespace weft::serve
