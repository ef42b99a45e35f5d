// The chat page's pool view (chat_page.h, pool_view_script): a script the
// page loads from /pool.js that fills #pool with this host and each worker
// from GET /v1/pool, polled every second, and a live tokens/s chart.
//
// Elements the test (tests/serve/chat_page.test.mjs) relies on: #pool
// (shown by #pool-toggle), #pool-summary with #pool-tps (tokens/s over the
// last poll), #pool-slots ("busy/slots, queued"), #pool-step (measured ms
// per step and the predicted ms per token), #pool-recoveries; #pool-chart
// (a canvas, data-points = samples drawn); #pool-devices, a table with one
// tr.pool-device per device whose data-label is its label. Numbers reach
// the DOM through textContent only.
#include "serve/chat_page.h"

namespace weft::serve {

namespace {

constexpr char kScript[] = R"JS((() => {
'use strict';
const $ = (id) => document.getElementById(id);
const pool = $('pool'), toggle = $('pool-toggle');
if (!pool || !toggle) return;
const el = (tag, attrs = {}, text) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
};
const summary = el('div', {id: 'pool-summary'});
const stat = (id, label) => {
  const s = el('span', {class: 'pool-stat'});
  s.append(el('span', {class: 'pool-label'}, label + ' '), el('b', {id}, '-'));
  summary.append(s);
};
stat('pool-tps', 'tokens/s');
stat('pool-slots', 'slots');
stat('pool-step', 'ms/step (predicted ms/token)');
stat('pool-recoveries', 'recoveries');
const chart = el('canvas', {id: 'pool-chart', width: '600', height: '90', 'data-points': '0'});
const table = el('table', {id: 'pool-devices'});
const head = el('tr');
for (const h of ['device', 'kernels / threads', 'layers', 'memory used / free', 'predicted ms/token', 'link B/s',
                 'measured ms/step'])
  head.append(el('th', {}, h));
table.append(el('thead'), el('tbody'));
table.tHead.append(head);
const note = el('div', {id: 'pool-error', class: 'pool-note'});
pool.append(summary, chart, table, note);

const bytes = (n) => n >= 1 << 30 ? (n / (1 << 30)).toFixed(1) + ' GiB' : n >= 1 << 20 ? (n / (1 << 20)).toFixed(1) + ' MiB'
                   : n >= 1024 ? (n / 1024).toFixed(1) + ' KiB' : n + ' B';
const history = [];  // tokens/s per poll, the last 60
let last = null;
function draw() {
  const ctx = chart.getContext('2d');
  const w = chart.width, h = chart.height;
  ctx.clearRect(0, 0, w, h);
  const max = Math.max(1, ...history);
  ctx.strokeStyle = getComputedStyle(document.body).getPropertyValue('--user').trim() || '#2563eb';
  ctx.lineWidth = 2;
  ctx.beginPath();
  history.forEach((v, i) => {
    const x = history.length > 1 ? i * (w - 2) / (history.length - 1) + 1 : w / 2;
    const y = h - 2 - v / max * (h - 14);
    i ? ctx.lineTo(x, y) : ctx.moveTo(x, y);
  });
  ctx.stroke();
  ctx.fillStyle = getComputedStyle(document.body).getPropertyValue('--muted').trim() || '#888';
  ctx.font = '11px system-ui';
  ctx.fillText('max ' + max.toFixed(1) + ' tokens/s', 4, 11);
  chart.dataset.points = String(history.length);
}
function rows(doc, dt) {
  const body = table.tBodies[0];
  body.replaceChildren();
  for (const d of doc.devices) {
    const tr = el('tr', {class: 'pool-device', 'data-label': d.label});
    const prev = last?.devices.find((p) => p.label === d.label);
    const moved = (x) => x.link ? x.link.bytes_sent + x.link.bytes_received : 0;
    const rate = prev && dt > 0 ? (moved(d) - moved(prev)) / dt : 0;
    const layers = d.layers[1] > d.layers[0] ? d.layers[0] + '-' + (d.layers[1] - 1) : 'none';
    const parts = [d.heads[1] > d.heads[0] ? ' heads ' + d.heads[0] + '-' + (d.heads[1] - 1) : '',
                   d.experts > 0 ? ' ' + d.experts + ' experts' : ''];
    const cells = [d.label + (d.lost ? ' (lost)' : ''), (d.simd ?? 'worker') + ' / ' + (d.threads ?? '?'),
                   layers + parts.join(''), bytes(d.used_bytes) + ' / ' + (d.free_bytes ? bytes(d.free_bytes) : '?'),
                   d.predicted_ms_per_token.toFixed(2), d.remote ? bytes(Math.round(rate)) + '/s' : '-',
                   d.measured_ms_per_step != null ? d.measured_ms_per_step.toFixed(2) : '-'];
    for (const c of cells) tr.append(el('td', {}, c));
    body.append(tr);
  }
}
async function poll() {
  try {
    const key = $('api-key')?.value.trim();
    const r = await fetch('/v1/pool', {headers: key ? {Authorization: 'Bearer ' + key} : {}});
    const doc = await r.json();
    if (!r.ok) throw new Error(doc?.error?.message ?? r.status);
    const e = doc.engine, now = doc.uptime_seconds;
    const dt = last ? now - last.uptime_seconds : 0;
    const tokens = e.prompt_tokens + e.generated_tokens;
    const tps = last && dt > 0 ? (tokens - last.engine.prompt_tokens - last.engine.generated_tokens) / dt : 0;
    if (last) history.push(tps);
    if (history.length > 60) history.shift();
    $('pool-tps').textContent = tps.toFixed(1);
    $('pool-slots').textContent = e.slots_busy + '/' + e.slots + ', ' + e.queue_length + ' queued';
    $('pool-step').textContent = e.measured_ms_per_step.toFixed(2) + ' (' + doc.predicted_ms_per_token.toFixed(2) + ')';
    $('pool-recoveries').textContent = String(e.recoveries) + (e.devices_lost.length ? ' (lost ' + e.devices_lost.join(', ') + ')' : '');
    rows(doc, dt);
    note.textContent = doc.policy ? 'placement: ' + doc.policy : '';
    last = doc;
    draw();
  } catch (err) {
    note.textContent = 'pool: ' + err.message;
  }
}
toggle.addEventListener('click', () => {
  pool.hidden = !pool.hidden;
  toggle.setAttribute('aria-expanded', String(!pool.hidden));
});
poll();
setInterval(poll, 1000);
})();
)JS";

}  // namespace

std::string_view pool_view_script() { return {kScript, sizeof kScript - 1}; }

}  // namespace weft::serve
