// What the end-to-end client tests share (tests/serve/*.test.mjs): one line
// per check, parts that survive an exception, a watchdog for the whole
// run, and the closing summary with the exit status.
//
//   import {check, part, finish, watchdog} from './harness.mjs';
//   watchdog(240000);
//   await part('chat', async () => { check(r.ok, 'chat answers', detail); });
//   finish();  // prints PASS/FAIL and exits 0 or 1

let failures = 0;
let checks = 0;
const started = Date.now();
let timer = null;

// Prints ok/FAIL with what was checked; returns ok.
export function check(ok, what, detail = '') {
  checks++;
  if (!ok) failures++;
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}${detail ? ': ' + detail : ''}`);
  return ok;
}

// A value as at most 200 characters of JSON, for a check's detail.
export function show(v) {
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  return JSON.stringify(s !== undefined && s.length > 200 ? s.slice(0, 200) + '…' : s);
}

// Runs one part; an exception fails it and the run goes on with the next.
export async function part(name, fn) {
  const t0 = Date.now();
  console.log(`# ${name}`);
  try {
    await fn();
  } catch (e) {
    check(false, `${name}: unexpected exception`, e?.stack ?? String(e));
  }
  console.log(`# ${name}: ${((Date.now() - t0) / 1000).toFixed(2)} s`);
}

// A hung server must fail the test, not stall it.
export function watchdog(ms) {
  timer = setTimeout(() => {
    console.log(`FAIL the test did not finish in ${ms / 1000} s`);
    process.exit(1);
  }, ms);
}

// What an async call throws (null when it returns).
export async function thrown(fn) {
  try {
    await fn();
    return null;
  } catch (e) {
    return e;
  }
}

// A request by plain fetch: status, headers, text and the JSON when it parses.
export async function request(url, {method = 'POST', body, headers = {}, timeout = 30000} = {}) {
  const r = await fetch(url, {
    method, headers: {'Content-Type': 'application/json', ...headers},
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    signal: AbortSignal.timeout(timeout),
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

// The summary line; exits 1 when any check failed.
export function finish(note = '') {
  if (timer) clearTimeout(timer);
  console.log(`${failures ? 'FAIL' : 'PASS'}: ${checks - failures}/${checks} checks passed${note} in ` +
              `${((Date.now() - started) / 1000).toFixed(1)} s`);
  process.exit(failures ? 1 : 0);
}
