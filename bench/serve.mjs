// bench/serve: offkv serve under 1, 4 and 8 concurrent streaming requests
// (128 tokens each, end-of-sequence ignored so that every answer has its
// 128) from a bounded client on 127.0.0.1.  Reports aggregate generated
// tokens/s (all tokens / wall time from the first request to the last
// token) and the mean time to first token.
//
//   node bench/serve.mjs BUILD_DIR MODEL.gguf [threads]     (make bench-serve)
import { spawn } from 'node:child_process';
import path from 'node:path';

const [bin, model, threads = '2'] = process.argv.slice(2);
if (!bin || !model) {
  console.error('usage: node bench/serve.mjs BUILD_DIR MODEL.gguf [threads]');
  process.exit(2);
}
const TOKENS = 128, LEVELS = [1, 4, 8], REPEAT = Number(process.env.REPEAT || 2);

const proc = spawn(path.join(bin, 'offkv'), ['serve', '-m', model, '--port', '0', '--parallel', '8', '-c', '512',
  '-t', threads], { stdio: ['ignore', 'pipe', 'inherit'] });
const url = await new Promise((resolve, reject) => {
  let out = '';
  proc.stdout.on('data', d => { out += d; const m = out.match(/listening on (\S+)/); if (m) resolve(m[1]); });
  proc.on('exit', () => reject(new Error('the server exited')));
});

async function one(i) {
  const t0 = performance.now();
  const r = await fetch(url + '/v1/completions', { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt: `Request ${i}: once upon a time`, max_tokens: TOKENS, temperature: 0,
      ignore_eos: true, stream: true, stream_options: { include_usage: true } }) });
  const reader = r.body.getReader(), dec = new TextDecoder();
  let buf = '', first = 0, tokens = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let k;
    while ((k = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, k); buf = buf.slice(k + 2);
      if (ev === 'data: [DONE]') continue;
      const j = JSON.parse(ev.slice(6));
      if (j.usage) tokens = j.usage.completion_tokens;
      else if (!first && j.choices[0].text) first = performance.now();
    }
  }
  return { ttft: (first || performance.now()) - t0, tokens, end: performance.now() };
}

// The server's own counters: the time its decode thread spent in
// okv_batch_eval, to tell the engine's scaling from the server's overhead.
async function counters() {
  const t = await (await fetch(url + '/metrics')).text();
  const get = name => Number((t.match(new RegExp(`^${name} (\\S+)$`, 'm')) || [])[1] || 0);
  return { tokens: get('offkv_generated_tokens_total'), steps: get('offkv_eval_steps_total'),
    evalSeconds: get('offkv_eval_seconds_total') };
}

// Warm up (page in the weights).
await one(-1);
const rows = [];
for (const n of LEVELS) {
  let best = null;
  for (let rep = 0; rep < REPEAT; rep++) {
    const c0 = await counters();
    const t0 = performance.now();
    const rs = await Promise.all(Array.from({ length: n }, (_, i) => one(i + 100 * rep)));
    const wall = (Math.max(...rs.map(r => r.end)) - t0) / 1000;
    const c1 = await counters();
    const tokens = rs.reduce((a, r) => a + r.tokens, 0);
    const row = { n, tps: tokens / wall, ttft: rs.reduce((a, r) => a + r.ttft, 0) / n, tokens,
      evalTps: (c1.tokens - c0.tokens) / (c1.evalSeconds - c0.evalSeconds), steps: c1.steps - c0.steps };
    if (!best || row.tps > best.tps) best = row;
  }
  rows.push(best);
}
proc.kill('SIGTERM');
const single = rows[0].tps;
console.log(`offkv serve, ${path.basename(model)}, -t ${threads}, ${TOKENS} tokens per request, best of ${REPEAT}`);
console.log('| concurrent | aggregate tokens/s | vs 1 | mean time to first token | tokens/s in okv_batch_eval | eval steps |');
console.log('|---:|---:|---:|---:|---:|---:|');
for (const r of rows)
  console.log(`| ${r.n} | ${r.tps.toFixed(1)} | ${(r.tps / single).toFixed(2)}x | ${r.ttft.toFixed(0)} ms | ` +
    `${r.evalTps.toFixed(1)} | ${r.steps} |`);
await new Promise(r => proc.on('exit', r));
