// The chat page of `weft serve` (src/serve/chat_page.cpp) in headless
// Chromium, against a running server:
//
//   node chat_page.test.mjs http://127.0.0.1:PORT OUT_DIR
//
// Run from a folder where `puppeteer-core` resolves (scripts/install-test-node.sh;
// tests/serve/run_chat_page.sh does it all). The page must show the model's
// name and enable Send; a greedy reply streamed into the page must equal the
// same request answered whole (the request the page sent, replayed with
// stream: false); the reply shows its speed; Stop must end a long reply as
// "stopped" and leave the page usable; the page must log no errors.
// The pool view (#pool-toggle) must list /v1/pool's devices and, while a
// request runs, show tokens/s above zero, a busy slot and a drawn chart.
// Prints one line per check; exits 1 when any fails. Saves a screenshot
// after the first reply as OUT_DIR/chat_page.png, and of the pool view
// as OUT_DIR/pool_view.png.
// Environment: CHROMIUM (default /usr/bin/chromium), STOP_MAX_TOKENS (the
// max tokens of the reply stopped, default 400).
import fs from 'node:fs';
import path from 'node:path';
import {isDeepStrictEqual} from 'node:util';
import puppeteer from 'puppeteer-core';

const [base, outDir] = process.argv.slice(2);
if (!base || !outDir) {
  console.error('usage: node chat_page.test.mjs BASE_URL OUT_DIR');
  process.exit(2);
}
fs.mkdirSync(outDir, {recursive: true});
const chromium = process.env.CHROMIUM || '/usr/bin/chromium';
const stopMaxTokens = process.env.STOP_MAX_TOKENS || '400';
const TIMEOUT = 60000;

let failures = 0;
function check(ok, what, detail = '') {
  if (!ok) failures++;
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}${detail ? ': ' + detail : ''}`);
  return ok;
}
const show = (s) => JSON.stringify(s.length > 200 ? s.slice(0, 200) + '…' : s);

const browser = await puppeteer.launch({
  executablePath: chromium,
  headless: true,
  args: ['--no-sandbox', '--headless=new', '--disable-gpu', '--disable-dev-shm-usage'],
});
try {
  const page = await browser.newPage();
  await page.setViewport({width: 1000, height: 760});
  const pageErrors = [];
  page.on('console', (m) => {
    const url = m.location()?.url ?? '';
    // The browser's own request for /favicon.ico has a check of its own below.
    if (m.type() === 'error' && !url.endsWith('/favicon.ico')) pageErrors.push(`console: ${m.text()} (${url})`);
  });
  page.on('pageerror', (e) => pageErrors.push(`pageerror: ${e.message}`));
  const chatBodies = [];  // the bodies of the page's chat requests
  page.on('request', (r) => {
    if (r.method() === 'POST' && new URL(r.url()).pathname === '/v1/chat/completions') chatBodies.push(r.postData());
  });

  // A reply's end: the state and text of the last assistant message once it
  // stops streaming.
  const lastReply = async () => {
    await page.waitForFunction(() => {
      const all = document.querySelectorAll('.msg.assistant');
      return all.length && all[all.length - 1].dataset.state !== 'streaming';
    }, {timeout: TIMEOUT});
    return page.evaluate(() => {
      const all = document.querySelectorAll('.msg.assistant');
      const m = all[all.length - 1];
      const q = (s) => m.querySelector(s)?.textContent ?? '';
      return {state: m.dataset.state, text: q('.text'), speed: q('.speed'), error: q('.error'), count: all.length};
    });
  };
  const setField = (sel, value) => page.$eval(sel, (e, v) => {
    e.value = v;
    e.dispatchEvent(new Event('change', {bubbles: true}));
  }, value);

  await page.goto(base + '/', {waitUntil: 'load'});
  await page.waitForSelector('#send:not([disabled])', {timeout: TIMEOUT});
  check(true, 'page loaded and Send is enabled');

  const models = await (await fetch(base + '/v1/models')).json();
  const modelId = models.data[0].id;
  await page.waitForFunction((id) => document.querySelector('#model')?.textContent === id, {timeout: 10000}, modelId)
    .then(() => check(true, 'header shows the model', modelId))
    .catch(async () => check(false, 'header shows the model',
                             `want ${show(modelId)}, got ${show(await page.$eval('#model', (e) => e.textContent))}`));

  // 1. A greedy reply: streamed in the page, and the same request answered whole.
  await setField('#temperature', '0');
  await setField('#max-tokens', '24');
  await setField('#system-prompt', '');
  const question = 'Hello! What is weft?';
  await page.type('#input', question);
  await page.click('#send');
  const first = await lastReply();
  check(first.state === 'done', 'first reply ends in data-state "done"', first.state + (first.error ? ' ' + first.error : ''));
  check(first.text.length > 0, 'first reply has text', show(first.text));
  const userText = await page.$eval('.msg.user .bubble', (e) => e.textContent);
  check(userText === question, 'user bubble shows the message', show(userText));

  const sent = JSON.parse(chatBodies[0] ?? '{}');
  check(sent.stream === true && sent.stream_options?.include_usage === true && sent.temperature === 0 &&
        sent.max_tokens === 24 && isDeepStrictEqual(sent.messages, [{role: 'user', content: question}]),
        'page sent the request asked', JSON.stringify(sent));
  const whole = {...sent, stream: false};
  delete whole.stream_options;
  const r = await fetch(base + '/v1/chat/completions', {
    method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(whole)});
  const answer = await r.json();
  const wholeText = answer.choices?.[0]?.message?.content;
  check(r.status === 200 && first.text === wholeText, 'streamed text equals the non-streamed reply',
        `page ${show(first.text)}, whole ${show(String(wholeText))}`);

  const m = /^(\d+) tokens? · (\d+(?:\.\d+)?) tokens\/s$/.exec(first.speed);
  check(m !== null && Number(m[2]) > 0, 'reply shows its speed', show(first.speed));
  const tokens = answer.usage?.completion_tokens;
  if (m && typeof tokens === 'number') check(Number(m[1]) === tokens, 'speed counts the reply\'s tokens', `${m[1]} vs usage ${tokens}`);

  const shot = path.join(outDir, 'chat_page.png');
  await page.screenshot({path: shot});
  check(fs.statSync(shot).size > 0, 'screenshot saved', shot);

  // 2. Stop: a long reply stopped once its first text arrives. The click is
  // made in the page the moment text appears, so a fast server cannot
  // finish first.
  await setField('#max-tokens', stopMaxTokens);
  await page.evaluate(() => {
    new MutationObserver((_, obs) => {
      const all = document.querySelectorAll('.msg.assistant');
      const m = all[all.length - 1];
      if (all.length === 2 && m.querySelector('.text').textContent) {
        obs.disconnect();
        window.__stopClicked = m.dataset.state;
        document.querySelector('#stop').click();
      }
    }).observe(document.querySelector('#messages'), {childList: true, subtree: true, characterData: true});
  });
  await page.type('#input', 'Tell me a long story.');
  await page.click('#send');
  await page.waitForSelector('#stop:not([hidden])', {timeout: 5000}).catch(() => {});
  const stopped = await lastReply();
  const clickedWhile = await page.evaluate(() => window.__stopClicked);
  check(clickedWhile === 'streaming', 'Stop clicked while the reply streamed', String(clickedWhile));
  check(stopped.state === 'stopped', 'stopped reply ends in data-state "stopped"',
        stopped.state + (stopped.error ? ' ' + stopped.error : ''));
  check(stopped.text.length > 0, 'stopped reply keeps its text', show(stopped.text));
  // Greedy, so the whole reply to the same request starts with the stopped text.
  const stopBody = {...JSON.parse(chatBodies[1] ?? '{}'), stream: false};
  delete stopBody.stream_options;
  const full = await (await fetch(base + '/v1/chat/completions', {
    method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(stopBody)})).json();
  const fullText = full.choices?.[0]?.message?.content ?? '';
  check(fullText.startsWith(stopped.text) && fullText.length > stopped.text.length,
        'stopped text is a proper prefix of the whole reply',
        `${stopped.text.length} of ${fullText.length} characters`);
  const controls = await page.evaluate(() => ({
    send: !document.querySelector('#send').disabled && !document.querySelector('#send').hidden,
    stop: document.querySelector('#stop').hidden,
  }));
  check(controls.send && controls.stop, 'after Stop, Send is back and Stop hidden', JSON.stringify(controls));

  // 3. The page is still usable: a third message, typed over two lines
  // (Shift+Enter) and sent with Enter, with the conversation so far as context.
  await setField('#max-tokens', '8');
  await page.type('#input', 'And');
  await page.keyboard.down('Shift');
  await page.keyboard.press('Enter');
  await page.keyboard.up('Shift');
  await page.type('#input', 'now?');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.querySelectorAll('.msg.assistant').length === 3, {timeout: 10000});
  const third = await lastReply();
  check(third.state === 'done' && third.text.length > 0, 'a message after Stop gets a reply',
        `${third.state} ${show(third.text)} ${third.error}`);
  const context = JSON.parse(chatBodies[2] ?? '{}').messages ?? [];
  check(isDeepStrictEqual(context.map((x) => x.role), ['user', 'assistant', 'user', 'assistant', 'user']) &&
        context[1].content === first.text && context[3].content === stopped.text && context[4].content === 'And\nnow?',
        'the conversation so far is sent as context', JSON.stringify(context.map((x) => x.role)));

  // 4. New chat clears the conversation.
  await page.click('#new-chat');
  const left = await page.$$eval('#messages .msg', (all) => all.length);
  check(left === 0, 'New chat clears the conversation', `${left} messages left`);

  // 5. The pool view: /v1/pool's devices in a table, and while a request
  // runs, tokens/s above zero, a busy slot and the chart drawing it.
  const hiddenBefore = await page.$eval('#pool', (e) => e.hidden);
  await page.click('#pool-toggle');
  check(hiddenBefore && !(await page.$eval('#pool', (e) => e.hidden)), 'the Pool button shows the pool view');
  const poolDoc = await (await fetch(base + '/v1/pool')).json();
  await page.waitForSelector('#pool-devices tr.pool-device', {timeout: 5000}).catch(() => {});
  const shown = await page.$$eval('#pool-devices tr.pool-device', (all) => all.map((tr) => ({
    label: tr.dataset.label, cells: Array.from(tr.cells, (c) => c.textContent)})));
  check(shown.length === poolDoc.devices?.length && shown.length >= 1 && shown[0].label === 'host' &&
        shown[0].cells[1] === `${poolDoc.devices[0].simd} / ${poolDoc.devices[0].threads}` &&
        shown[0].cells[2] === `0-${poolDoc.devices[0].layers[1] - 1}`,
        'a row per device of /v1/pool: host, its kernels and threads, its layers', JSON.stringify(shown));
  // Requests one after another until the view has seen them (a tiny model
  // finishes one in well under the view's 1 s poll).
  let generating = true;
  const busy = (async () => {
    while (generating) {
      await (await fetch(base + '/v1/chat/completions', {
        method: 'POST', headers: {'Content-Type': 'application/json'},
        body: JSON.stringify({messages: [{role: 'user', content: 'Go on.'}], max_tokens: 1500, ignore_eos: true,
                              temperature: 1})})).text();
    }
  })();
  const live = await page.waitForFunction(() => {
    const tps = Number(document.querySelector('#pool-tps')?.textContent);
    const slots = document.querySelector('#pool-slots')?.textContent ?? '';
    return tps > 0 && /^[1-9]/.test(slots) && Number(document.querySelector('#pool-chart').dataset.points) >= 2 &&
      {tps, slots, step: document.querySelector('#pool-step').textContent};
  }, {timeout: 20000, polling: 100}).then((h) => h.jsonValue()).catch(() => null);
  check(live !== null && Number.parseFloat(live.step) > 0, 'while a request runs: tokens/s > 0, a slot busy, ms/step > 0',
        JSON.stringify(live));
  const inked = await page.$eval('#pool-chart', (c) => {
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 3; i < d.length; i += 4) n += d[i] > 0 ? 1 : 0;
    return n;
  });
  check(inked > 50, 'the tokens/s chart is drawn', `${inked} pixels`);
  const poolShot = path.join(outDir, 'pool_view.png');
  await page.screenshot({path: poolShot});
  check(fs.statSync(poolShot).size > 0, 'pool view screenshot saved', poolShot);
  generating = false;
  await busy;

  check(pageErrors.length === 0, 'no errors logged by the page', pageErrors.join(' | '));
  // Browsers fetch /favicon.ico for every page without an icon; a 404 there
  // shows as an error in the page's console.
  const icon = await fetch(base + '/favicon.ico');
  check(icon.status < 400, 'server answers /favicon.ico', `HTTP ${icon.status}`);
} catch (e) {
  check(false, 'test ran to the end', e.stack || String(e));
} finally {
  await browser.close();
}
console.log(failures ? `${failures} check(s) failed` : 'all checks passed');
process.exit(failures ? 1 : 0);
