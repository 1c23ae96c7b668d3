// Shared by the server's node tests: start `offkv serve` on a free loopback
// port, wait for "listening on", stop it, and small HTTP helpers.  Every
// test exits 77 (ctest: skipped) with a message when what it needs is
// missing, and stops its servers itself.
import { spawn, spawnSync } from 'node:child_process';
import net from 'node:net';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

export const BIN = process.env.OKV_BIN;
export const SHARED = process.env.OKV_SHARED;

export function skip(why) {
  console.log(`skipped: ${why}`);
  process.exit(77);
}

export function need(...what) {
  if (!BIN) skip('OKV_BIN not set (ctest sets it to the build folder)');
  if (what.includes('shared') && !(SHARED && existsSync(path.join(SHARED, 'README.md'))))
    skip('../shared not found');
}

// A package installed by tests/serve/npm-setup.sh under BUILD/npm.
export function requireNpm(name) {
  const req = createRequire(path.join(BIN, 'npm', 'package.json'));
  try {
    return req(name);
  } catch {
    skip(`npm package ${name} not installed under ${BIN}/npm (npm missing or offline: see the serve_npm_setup test)`);
  }
}

export const MODEL = () => path.join(SHARED, 'models', 'stories260K.gguf');

// Schemas the API tests share (anthropic, responses): a forecast tool's
// parameters, and a small structured answer.
export const WEATHER_SCHEMA = {
  type: 'object',
  properties: { city: { enum: ['Paris', 'Tokyo', 'Lima'] }, days: { type: 'integer', minimum: 1, maximum: 7 } },
  required: ['city', 'days'],
  additionalProperties: false,
};
export const PICK_SCHEMA = { type: 'object', properties: { city: { enum: ['Paris', 'Lima'] }, n: { type: 'integer',
  minimum: 0, maximum: 9 } }, required: ['city', 'n'], additionalProperties: false };

let failures = 0, passes = 0;
export function check(cond, what) {
  if (cond) passes++;
  else {
    failures++;
    console.error(`FAIL: ${what}`);
  }
}
export function eq(got, want, what) {
  const ok = JSON.stringify(got) === JSON.stringify(want);
  check(ok, `${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
}
export function done() {
  console.log(`${passes} passed, ${failures} failed`);
  process.exit(failures ? 1 : 0);
}

// Starts the server; resolves once it prints its address.
export function startServer(args, { timeoutMs = 60000, model = MODEL() } = {}) {
  return new Promise((resolve, reject) => {
    const proc = spawn(path.join(BIN, 'offkv'), ['serve', '-m', model, '--host', '127.0.0.1', '--port', '0',
      '-t', '1', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    const srv = { proc, stderr: '', stdout: '', url: null, exited: null };
    const timer = setTimeout(() => { proc.kill('SIGKILL'); reject(new Error(`server did not start: ${srv.stderr}`)); }, timeoutMs);
    proc.stderr.on('data', d => { srv.stderr += d; });
    proc.stdout.on('data', d => {
      srv.stdout += d;
      const m = srv.stdout.match(/listening on (http:\/\/\S+)/);
      if (m && !srv.url) {
        srv.url = m[1];
        clearTimeout(timer);
        resolve(srv);
      }
    });
    srv.exit = new Promise(res => proc.on('exit', (code, signal) => { srv.exited = { code, signal }; res(srv.exited); }));
    proc.on('exit', () => { if (!srv.url) { clearTimeout(timer); reject(new Error(`server exited: ${srv.stderr}`)); } });
  });
}

// SIGTERM, then waits (SIGKILL after limitMs); resolves to {code, signal}.
export async function stopServer(srv, limitMs = 20000) {
  if (srv.exited) return srv.exited;
  srv.proc.kill('SIGTERM');
  const t = setTimeout(() => srv.proc.kill('SIGKILL'), limitMs);
  const r = await srv.exit;
  clearTimeout(t);
  return r;
}

export async function post(srv, p, body, headers = {}) {
  const r = await fetch(srv.url + p, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* checked by the caller */ }
  return { status: r.status, text, json };
}

export async function metrics(srv) {
  const t = await (await fetch(srv.url + '/metrics')).text();
  const m = {};
  for (const line of t.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    m[line.slice(0, i)] = Number(line.slice(i + 1));
  }
  return m;
}

// What `offkv run --temp 0` prints for the prompt (without the prompt).
export function runGreedy(prompt, n, extra = []) {
  const r = spawnSync(path.join(BIN, 'offkv'), ['run', '-m', MODEL(), '-p', prompt, '-n', String(n), '--temp', '0',
    '--no-display-prompt', '-t', '1', ...extra], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`offkv run failed: ${r.stderr}`);
  return r.stdout.replace(/\n$/, '');
}

export function rssKiB(pid) {
  const m = readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/);
  return m ? Number(m[1]) : 0;
}

export const sleep = ms => new Promise(r => setTimeout(r, ms));

// Sends data on a raw connection to 127.0.0.1:port (then half-closes when
// asked: shutdown(SHUT_WR)) and resolves with what was read until the
// server closed, or until timeoutMs (then timedOut): {text, status, heads
// (status lines seen), head, body, ms, timedOut, interim (1xx answers
// skipped before text)}.  keep collects the sockets.
export function raw(port, data, { localAddress, halfClose = false, timeoutMs = 20000, keep } = {}) {
  return new Promise(resolve => {
    const s = net.connect({ port, host: '127.0.0.1', localAddress });
    const chunks = [];
    const t0 = Date.now();
    let timedOut = false;
    const timer = setTimeout(() => { timedOut = true; s.destroy(); }, timeoutMs);
    s.on('connect', () => {
      s.write(data);
      if (halfClose) s.end();
    });
    s.on('data', d => chunks.push(d));
    s.on('error', () => {});
    s.on('close', () => {
      clearTimeout(timer);
      // interim 1xx answers go before the answer (a client skips them)
      const all = Buffer.concat(chunks).toString('latin1');
      const interim = all.match(/^(HTTP\/1\.[01] 1\d\d[^\r\n]*\r\n(?:[^\r\n]+\r\n)*\r\n)*/)[0];
      const text = all.slice(interim.length);
      const m = text.match(/^HTTP\/1\.[01] (\d+)/);
      const at = text.indexOf('\r\n\r\n');
      resolve({ text, status: m ? Number(m[1]) : 0, heads: (text.match(/(^|\r\n)HTTP\/1\.[01] \d+/g) || []).length,
        head: at >= 0 ? text.slice(0, at) : text, body: at >= 0 ? text.slice(at + 4) : '', ms: Date.now() - t0, timedOut,
        interim });
    });
    if (keep) keep.push(s);
  });
}

// An HTTP/1.1 request's bytes with a JSON body.
export const rawRequest = (method, path, body = '', extra = '') =>
  `${method} ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${extra}` +
  `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
