// offkv serve against a hostile (or merely odd) client, over raw sockets
// where the HTTP clients would not send such bytes (issue 15):
//  - slow clients: 200 connections with half a head hold no thread each and
//    do not lock out /health or other clients; they get a 408 after
//    --timeout; binary garbage gets a 400 at once; a trickled body ends;
//    a body that stops gets a 408 after --timeout;
//  - a client that half-closes after its request (shutdown(SHUT_WR)) gets
//    its whole answer, plain or streamed; one that half-closes inside the
//    head gets a 400 at once;
//  - \u0000 in a prompt or message is refused naming the field, a raw NUL
//    byte as the invalid JSON it is;
//  - a 4 MB prompt for a 128-position context is refused in well under a
//    second (it was tokenized twice: 15 s);
//  - a bad Content-Length (too large, -1, 10abc) gets one status line and
//    an OpenAI-shaped JSON body (it went out twice, with HTML);
//  - "bearer" is a Bearer; duplicate keys are refused; %00 does not cut a
//    path; an absolute-form target is served;
//  - SIGTERM: a queued request gets 503 with Retry-After, a running stream
//    an error event saying the server is shutting down (no finish_reason
//    "stop"), then [DONE];
//  - a model whose logits are NaN gets an error naming NaN, not tokens.
import net from 'node:net';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { need, startServer, stopServer, post, metrics, check, eq, done, sleep, raw, rawRequest as req, MODEL } from './lib.mjs';

need('shared');
const STEP = what => { if (process.env.OKV_TRACE) console.log('--', what); };

const isError = (body, what) => {
  let j = null;
  try { j = JSON.parse(body); } catch { /* below */ }
  const e = j && j.error;
  check(e && typeof e.message === 'string' && typeof e.type === 'string' && 'param' in e && 'code' in e,
    `${what}: an OpenAI-shaped JSON error body (got ${JSON.stringify(body.slice(0, 200))})`);
  return e || {};
};

const threads = pid => Number((readFileSync(`/proc/${pid}/status`, 'utf8').match(/Threads:\s+(\d+)/) || [])[1]);

// Dechunks an HTTP/1.1 chunked body (a stream's SSE text).
const dechunk = b => {
  let out = '';
  for (let i = 0; ;) {
    const nl = b.indexOf('\r\n', i);
    if (nl < 0) break;
    const n = parseInt(b.slice(i, nl), 16);
    if (!n) break;
    out += b.slice(nl + 2, nl + 2 + n);
    i = nl + 2 + n + 2;
  }
  return out;
};

const srv = await startServer(['--parallel', '2', '-c', '128', '--timeout', '2', '--max-per-client', '16',
  '--api-key', 'sesame']);
const port = Number(new URL(srv.url).port);
const auth = { Authorization: 'Bearer sesame' };
try {
  // ---- item 3: slow clients ----
  STEP('slow clients');
  const held = [], slow = [];
  for (let i = 0; i < 200; i++)
    slow.push(raw(port, 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Le', { keep: held, timeoutMs: 15000 }));
  await sleep(300);
  const t = threads(srv.proc.pid);
  check(t < 40, `200 half-sent heads hold no thread each (${t} threads in the server)`);
  let t0 = Date.now();
  const health = await fetch(srv.url + '/health');
  eq(health.status, 200, '/health from the same address while 200 slow clients are held');
  check(Date.now() - t0 < 1500, `/health answered at once (${Date.now() - t0} ms)`);
  const other = await raw(port, req('POST', '/v1/completions', JSON.stringify({ prompt: 'Once upon a time', max_tokens: 4 }),
    'Authorization: Bearer sesame\r\n'), { localAddress: '127.0.0.2' });
  eq(other.status, 200, 'a completion from another address while slow clients are held');
  const garbage = await raw(port, Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03, 0xff]),
    { timeoutMs: 5000 });
  eq(garbage.status, 400, 'binary garbage: a 400');
  check(garbage.ms < 1000, `binary garbage answered at once (${garbage.ms} ms)`);
  isError(garbage.body, 'binary garbage');
  // Every slow one ends: the oldest dropped for newer ones, the rest after --timeout.
  const slowDone = await Promise.all(slow);
  check(slowDone.every(r => !r.timedOut), `every slow client was closed by the server (${slowDone.filter(r => r.timedOut).length} still open after 15 s)`);
  const s408 = slowDone.filter(r => r.status === 408);
  check(s408.length >= 16, `slow clients got 408s (${s408.length})`);
  if (s408.length) isError(s408[0].body, 'a slow client\'s 408');
  check(Math.max(...slowDone.map(r => r.ms)) < 2000 + 4000, 'the last slow client is closed soon after --timeout');
  // A body trickled slower than --timeout: the connection ends.
  const trickle = new Promise(resolve => {
    const s = net.connect({ port, host: '127.0.0.1' });
    const t1 = Date.now();
    let got = '';
    s.on('connect', async () => {
      s.write('POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sesame\r\nContent-Length: 100\r\n\r\n{"pro');
      for (let i = 0; i < 12 && !s.destroyed; i++) { await sleep(700); if (!s.destroyed) s.write(' '); }
    });
    s.on('data', d => { got += d; });
    s.on('error', () => {});
    const cap = setTimeout(() => s.destroy(), 15000);
    s.on('close', () => { clearTimeout(cap); resolve({ ms: Date.now() - t1, got }); });
  });
  const tr = await trickle;
  check(tr.ms < 8000, `a trickled body is cut off (after ${tr.ms} ms)`);
  if (tr.got) check(/^HTTP\/1\.1 408/.test(tr.got), `a trickled body's answer is a 408 (${tr.got.slice(0, 40)})`);
  // A body that stops: a 408 saying so after --timeout, not a silent close.
  const stalled = await raw(port, 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sesame\r\n' +
    'Content-Length: 100\r\n\r\n{"prompt": "Once', { timeoutMs: 15000 });
  check(!stalled.timedOut && stalled.ms < 2000 + 4000, `a stalled body is closed soon after --timeout (${stalled.ms} ms)`);
  eq(stalled.status, 408, `a stalled body's answer (${JSON.stringify(stalled.text.slice(0, 60))})`);
  if (stalled.status === 408) check(/stopped arriving/.test(isError(stalled.body, 'a stalled body').message || ''),
    'the 408 says the body stopped arriving');

  // ---- item 6: half-close after the request ----
  STEP('half-close');
  const plain = await raw(port, req('POST', '/v1/completions', JSON.stringify({ prompt: 'Once upon a time', max_tokens: 8,
    temperature: 0 }), 'Authorization: Bearer sesame\r\n'), { halfClose: true });
  eq(plain.status, 200, 'half-closed after a plain request: 200');
  let pj = null;
  try { pj = JSON.parse(plain.body); } catch { /* below */ }
  check(pj && pj.choices && pj.choices[0].text.length > 0, `half-closed: the whole answer (${plain.body.slice(0, 120)})`);
  const streamed = await raw(port, req('POST', '/v1/completions', JSON.stringify({ prompt: 'Once upon a time', max_tokens: 8,
    temperature: 0, stream: true }), 'Authorization: Bearer sesame\r\n'), { halfClose: true });
  eq(streamed.status, 200, 'half-closed after a stream request: 200');
  const sse = /transfer-encoding: chunked/i.test(streamed.head) ? dechunk(streamed.body) : streamed.body;
  check(sse.endsWith('data: [DONE]\n\n'), `half-closed: the stream ends with [DONE] (${JSON.stringify(sse.slice(-60))})`);
  // Half a head, then the client's end: a head that cannot come now is a
  // 400 at once, not a 408 after --timeout (the gate peeks, so it saw the
  // end only through the poll's hang-up flag).
  const cut = await raw(port, 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Le', { halfClose: true, timeoutMs: 5000 });
  eq(cut.status, 400, `half a head, then the client's end: a 400 (${JSON.stringify(cut.text.slice(0, 60))})`);
  check(cut.ms < 1000, `half a head, then the client's end: answered at once (${cut.ms} ms; --timeout is 2 s)`);
  if (cut.status === 400) check(/closed its side/.test(isError(cut.body, 'a cut head').message || ''),
    'the 400 says the client closed before the head was whole');

  // ---- item 5: NUL ----
  STEP('NUL');
  let r = await post(srv, '/v1/completions', '{"prompt":"Once\\u0000 upon a time","max_tokens":2}', auth);
  eq(r.status, 400, 'a prompt with \\u0000: 400');
  eq(r.json && r.json.error && r.json.error.param, 'prompt', 'a prompt with \\u0000: param');
  r = await post(srv, '/v1/chat/completions', '{"messages":[{"role":"user","content":"hi\\u0000there"}],"max_tokens":2}', auth);
  eq(r.status, 400, 'a message with \\u0000: 400');
  eq(r.json && r.json.error && r.json.error.param, 'messages', 'a message with \\u0000: param');
  // a raw NUL byte (JSON allows no raw control byte in a string) cut the
  // text at it: a prompt, a message, a stop string, even a key
  for (const [path, body] of [['/v1/completions', '{"prompt":"Once\0 upon a time there was","max_tokens":3}'],
    ['/v1/chat/completions', '{"messages":[{"role":"user","content":"hi\0 the rest"}]}'], ['/tokenize', '{"content":"a\0b"}'],
    ['/v1/completions', '{"prompt":"Once","max_tokens\0zzz":3}']]) {
    r = await post(srv, path, body, auth);
    eq(r.status, 400, `${path} with a raw NUL: 400`);
    check(/raw control byte 0x00/.test((r.json && r.json.error && r.json.error.message) || ''),
      `${path} with a raw NUL: the error names the byte (${JSON.stringify(r.json)})`);
  }
  r = await post(srv, '/v1/completions', '{"prompt":"a \\\\u0000 is six characters here","max_tokens":2}', auth);
  eq(r.status, 200, 'an escaped backslash before u0000 is text, not a NUL');
  // /tokenize and /detokenize read their bodies as strictly as the completions
  // (a NUL cut the text there, a repeated key took its first value)
  r = await post(srv, '/tokenize', '{"content":"Once\\u0000 upon a time"}', auth);
  eq(r.status, 400, '/tokenize content with \\u0000: 400');
  eq(r.json && r.json.error && r.json.error.param, 'content', '/tokenize content with \\u0000: param');
  r = await post(srv, '/tokenize', '{"content":"Once","content":"upon"}', auth);
  eq(r.status, 400, '/tokenize with a key given twice: 400');
  eq(r.json && r.json.error && r.json.error.param, 'content', '/tokenize with a key given twice: param');
  r = await post(srv, '/detokenize', '{"tokens":[1,2]} x', auth);
  eq(r.status, 400, '/detokenize with bytes after the JSON: 400');
  r = await post(srv, '/tokenize', '{"content":"Once upon a time"}', auth);
  check(r.status === 200 && r.json && Array.isArray(r.json.tokens) && r.json.tokens.length > 0,
    `/tokenize of plain text: 200 with tokens (${r.status})`);
  // an error quoting 42 bytes of a client's key cut it inside a character:
  // the 400's body was not UTF-8 (Node's r.text() hides that; decode strictly)
  {
    const resp = await fetch(srv.url + '/v1/completions', { method: 'POST', headers: { 'Content-Type': 'application/json', ...auth },
      body: JSON.stringify({ prompt: 'x', max_tokens: 2, logit_bias: { ['\u20ac'.repeat(14)]: 1 } }) });
    const bytes = new Uint8Array(await resp.arrayBuffer());
    let text = null;
    try { text = new TextDecoder('utf-8', { fatal: true }).decode(bytes); } catch { /* below */ }
    eq(resp.status, 400, 'a logit_bias key of 14 euro signs: 400');
    check(text !== null && JSON.parse(text).error.message.includes('\u20ac'),
      `its error body is UTF-8 JSON quoting whole characters (${text === null ? 'not UTF-8' : text.slice(0, 120)})`);
  }
  // <0x00> byte tokens (id 3 here) in the answer: a NUL ended the JSON string
  // there and what followed was lost; each now shows as U+FFFD
  r = await post(srv, '/v1/completions', { prompt: 'Once', max_tokens: 4, temperature: 0, logit_bias: { 3: 100 } }, auth);
  eq(r.json && r.json.choices && r.json.choices[0].text, '\ufffd'.repeat(4), 'four <0x00> tokens: four U+FFFD');
  r = await post(srv, '/detokenize', { tokens: [3, 3] }, auth);
  eq(r.json && r.json.content, '\ufffd\ufffd', '/detokenize of two <0x00>: two U+FFFD');
  // repeat_last_n above the context is the whole context (it sized a 4 GiB history)
  r = await post(srv, '/v1/completions', { prompt: 'Once', max_tokens: 3, temperature: 0, repeat_penalty: 1.1,
    repeat_last_n: 1 << 30 }, auth);
  eq(r.status, 200, 'repeat_last_n 2^30: 200');

  // ---- item 4: a 4 MB prompt for 128 positions ----
  STEP('oversized prompt');
  t0 = Date.now();
  r = await post(srv, '/v1/completions', JSON.stringify({ prompt: 'Once upon a time '.repeat(250000), max_tokens: 2 }), auth);
  const ms = Date.now() - t0;
  eq(r.status, 400, 'a 4 MB prompt for 128 positions: 400');
  eq(r.json && r.json.error && r.json.error.param, 'prompt', 'a 4 MB prompt: param');
  check(ms < 3000, `a 4 MB prompt refused quickly (${ms} ms; tokenizing it all took 15 s)`);

  // ---- item 12: bad Content-Length ----
  STEP('bad Content-Length');
  for (const cl of ['99999999999999999999999', '-1', '10abc', '']) {
    const a = await raw(port, `POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: ${cl}\r\n\r\n{}`);
    check(a.status === 400 || a.status === 413, `Content-Length '${cl}': 400 or 413 (${a.status})`);
    eq(a.heads, 1, `Content-Length '${cl}': one status line`);
    check(/content-type: application\/json/i.test(a.head), `Content-Length '${cl}': a JSON body`);
    isError(a.body, `Content-Length '${cl}'`);
  }
  const te = await raw(port, 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n');
  eq(te.heads, 1, 'an unknown Transfer-Encoding: one status line');
  isError(te.body, 'an unknown Transfer-Encoding');

  // ---- item 13 ----
  STEP('item 13');
  eq((await fetch(srv.url + '/v1/models', { headers: { Authorization: 'bearer sesame' } })).status, 200, '"bearer KEY" is a Bearer');
  eq((await fetch(srv.url + '/v1/models', { headers: { Authorization: 'BEARER  sesame' } })).status, 200, '"BEARER  KEY" too');
  eq((await fetch(srv.url + '/v1/models', { headers: { Authorization: 'Basic sesame' } })).status, 401, 'Basic is not');
  r = await post(srv, '/v1/completions', '{"prompt":"x","max_tokens":2,"max_tokens":-5}', auth);
  eq(r.status, 400, 'a duplicate key: 400');
  eq(r.json && r.json.error && r.json.error.param, 'max_tokens', 'a duplicate key: param names it');
  r = await post(srv, '/v1/chat/completions', '{"messages":[{"role":"user","content":"a","content":"b"}]}', auth);
  eq(r.status, 400, 'a duplicate key inside a message: 400');
  const nul = await raw(port, req('POST', '/v1/completions%00', '{"prompt":"x","max_tokens":2}', 'Authorization: Bearer sesame\r\n'));
  eq(nul.status, 404, 'POST /v1/completions%00: 404, not /v1/completions');
  const abs = await raw(port, `GET http://127.0.0.1:${port}/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
  eq(abs.status, 200, 'an absolute-form target is served');
  const absPost = await raw(port, req('POST', `http://127.0.0.1:${port}/v1/completions`,
    JSON.stringify({ prompt: 'Once', max_tokens: 2 }), 'Authorization: Bearer sesame\r\n'));
  eq(absPost.status, 200, 'an absolute-form POST is served');
  for (const h of held) h.destroy();
} finally {
  eq(await stopServer(srv), { code: 0, signal: null }, 'exit 0 after SIGTERM');
  check(!/Sanitizer|runtime error/i.test(srv.stderr), `no sanitizer report in the server log:\n${srv.stderr}`);
}

// ---- item 7: SIGTERM with a running stream and queued requests ----
{
  STEP('SIGTERM');
  const s = await startServer(['--parallel', '1', '--queue', '4', '-c', '32768']);
  const sport = Number(new URL(s.url).port);
  try {
    // more answers than sequences and queue together: a 400 naming n (a
    // 503 "try again" never helped)
    for (const [body, param] of [[{ prompt: 'Once', max_tokens: 2, n: 6 }, 'n'],
      [{ prompt: ['a', 'b', 'c'], max_tokens: 2, n: 2 }, 'n'], [{ prompt: ['a', 'b', 'c', 'd', 'e', 'f'], max_tokens: 2 }, 'prompt']]) {
      const r = await post(s, '/v1/completions', body);
      eq(r.status, 400, `${JSON.stringify(body)} on --parallel 1 --queue 4: 400`);
      eq(r.json && r.json.error && r.json.error.param, param, `${JSON.stringify(body)}: the error names '${param}'`);
    }
    eq((await post(s, '/v1/completions', { prompt: 'Once', max_tokens: 2, n: 5 })).status, 200, 'n = parallel + queue fits');
    // a stream with n above --parallel answers at once (its status line
    // waited for every choice to have a sequence: the later ones wait for
    // the first to end, and proxies cut a stream silent that long)
    {
      const ac = new AbortController();
      const r = await fetch(s.url + '/v1/completions', { method: 'POST', signal: ac.signal,
        body: JSON.stringify({ prompt: 'Once', max_tokens: 20000, ignore_eos: true, stream: true, n: 2 }) });
      eq(r.status, 200, 'a stream of n 2 on --parallel 1: 200');
      eq((await metrics(s)).offkv_sequences_queued, 1, 'its status line came while the second choice still waits');
      ac.abort();
      for (let i = 0; i < 200 && ((await metrics(s)).offkv_sequences_active || (await metrics(s)).offkv_sequences_queued); i++)
        await sleep(20);
    }
    const long = JSON.stringify({ prompt: 'Once upon a time', max_tokens: 30000, ignore_eos: true, stream: true });
    const live = await fetch(s.url + '/v1/completions', { method: 'POST', body: long });
    const rd = live.body.getReader();
    await rd.read();
    const queuedPlain = raw(sport, req('POST', '/v1/completions', JSON.stringify({ prompt: 'Once', max_tokens: 4 })));
    const queuedStream = raw(sport, req('POST', '/v1/completions', JSON.stringify({ prompt: 'Once', max_tokens: 4, stream: true })));
    let queued = 0;
    for (let i = 0; i < 200 && queued < 2; i++) {
      await sleep(20);
      queued = (await metrics(s)).offkv_sequences_queued;
    }
    eq(queued, 2, 'two requests queued behind the running stream');
    s.proc.kill('SIGTERM');
    let tail = '';
    const dec = new TextDecoder();
    for (;;) {
      const { value, done: end } = await rd.read();
      if (end) break;
      tail += dec.decode(value);
    }
    check(tail.endsWith('data: [DONE]\n\n'), 'the cut-off stream still ends with [DONE]');
    const events = tail.split('\n\n').filter(e => e.startsWith('data: {')).map(e => JSON.parse(e.slice(6)));
    const err = events.find(e => e.error);
    check(err && /shutting down/.test(err.error.message), `the cut-off stream gets an error event saying so (${JSON.stringify(err)})`);
    check(!events.some(e => e.choices && e.choices.some(c => c.finish_reason === 'stop')), 'no finish_reason "stop" in a cut-off stream');
    for (const [what, p] of [['a queued plain request', queuedPlain], ['a queued stream', queuedStream]]) {
      const a = await p;
      eq(a.status, 503, `${what}: 503 on SIGTERM`);
      check(/retry-after: \d+/i.test(a.head), `${what}: Retry-After`);
      const e = isError(a.body, what);
      check(/shutting down/.test(e.message || ''), `${what}: says the server is shutting down`);
    }
    eq(await stopServer(s), { code: 0, signal: null }, 'SIGTERM: exit 0');
  } finally {
    await stopServer(s);
  }
}
// ---- a model computing NaN logits: an error naming it, not tokens drawn from noise ----
{
  STEP('NaN logits');
  // The offset of a tensor's data in a GGUF file (little-endian, v2/v3).
  const tensorOffset = (b, want) => {
    let p = 8;
    const u32 = () => { const v = b.readUInt32LE(p); p += 4; return v; };
    const u64 = () => { const v = Number(b.readBigUInt64LE(p)); p += 8; return v; };
    const str = () => { const n = u64(); const s = b.toString('utf8', p, p + n); p += n; return s; };
    const size = [1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8];
    const skip = t => { if (t === 8) str(); else if (t === 9) { const et = u32(), n = u64(); for (let i = 0; i < n; i++) skip(et); } else p += size[t]; };
    const nT = u64(), nKV = u64();
    let align = 32, found = -1;
    for (let i = 0; i < nKV; i++) {
      const key = str(), t = u32();
      if (key === 'general.alignment') { align = b.readUInt32LE(p); }
      skip(t);
    }
    for (let i = 0; i < nT; i++) {
      const name = str(), nd = u32();
      p += 8 * nd;
      const type = u32(), off = u64();
      if (name === want) found = type === 0 ? off : -2; // f32 only
    }
    return found < 0 ? found : Math.ceil(p / align) * align + found;
  };
  const bytes = readFileSync(MODEL());
  const at = tensorOffset(bytes, 'output_norm.weight');
  check(at >= 0, `stories260K's output_norm.weight is an f32 tensor (${at})`);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'offkv-serve-nan-'));
  const broken = path.join(dir, 'nan.gguf');
  bytes.writeFloatLE(NaN, at);
  writeFileSync(broken, bytes);
  const s = await startServer(['--parallel', '1', '-c', '64'], { model: broken });
  try {
    for (const temperature of [0, 0.8]) {
      const r = await post(s, '/v1/completions', { prompt: 'Once upon a time', max_tokens: 4, temperature });
      check(r.status >= 500 || (r.json && r.json.error), `temperature ${temperature}: an error (got ${r.status} ${r.text.slice(0, 200)})`);
      check(/NaN/.test(r.text), `temperature ${temperature}: the error names NaN logits (${r.text.slice(0, 200)})`);
      check(!(r.json && r.json.choices), `temperature ${temperature}: no choices drawn from NaN`);
    }
  } finally {
    await stopServer(s);
    rmSync(dir, { recursive: true, force: true });
  }
}
// ---- the model options reach the model (a list of any length, not a fixed four) ----
{
  STEP('model options');
  const s = await startServer(['--sliding-window', '8', '-c', '64']);
  try {
    const r = await post(s, '/v1/completions', { prompt: 'Once upon a time', max_tokens: 4 });
    eq(r.status, 200, '--sliding-window: a completion');
    const m = await metrics(s);
    check(m['offkv_cache_bytes{kind="ring"}'] > 0, `--sliding-window 8 makes ring layers (${m['offkv_cache_bytes{kind="ring"}']} bytes)`);
  } finally {
    await stopServer(s);
  }
}
done();
