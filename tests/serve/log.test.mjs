// The request log's lines for clients that leave (offkv serve writes one
// line per generation on stderr): a plain answer whose client is gone
// before it went out ("-"), a stream its client cut ("200 stream (cut: the
// client went away)"), for OpenAI's chat and Anthropic's messages.  The
// clients leave while the server reads a long prompt (2000 tokens, one a
// step with --chunk 1: most of a second even in a release build), so a
// plain answer's client is seen gone before any answer is due (a stream's
// at the stream's next write, which --keepalive 0.1 makes a ping before the
// prompt is read: so no token is made for any of them).
// In /metrics a plain answer whose client left is no 200; a stream, whose
// status went out, is.
import { need, startServer, stopServer, check, done, sleep, metrics } from './lib.mjs';

need('shared');
const srv = await startServer(['--chunk', '1', '-c', '4096', '--keepalive', '0.1']);
const words = (n, tag) => tag + ' ' + Array.from({ length: n }, (_, i) => `w${i % 97} the cat sat.`).join(' ');

// Sends body to path and aborts after ms; resolves once the abort is done.
async function leave(path, body, ms) {
  const ac = new AbortController();
  const t0 = Date.now();
  const p = fetch(srv.url + path, { method: 'POST', signal: ac.signal, headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body) }).then(async r => { await r.text(); return 'answered'; }).catch(() => 'aborted');
  await sleep(ms);
  ac.abort();
  const how = await p;
  return [how, Date.now() - t0];
}

// Waits up to 10 s for a log line matching re.
async function logLine(re) {
  for (let i = 0; i < 200; i++) {
    const m = srv.stderr.split('\n').find(l => re.test(l));
    if (m) return m;
    await sleep(50);
  }
  return null;
}

try {
  const before = await metrics(srv);
  for (const [what, path, body, want] of [
    ['a plain chat', '/v1/chat/completions', { max_tokens: 4, messages: [{ role: 'user', content: words(350, 'a') }] },
      / - chat: 1 choice, prompt \d+ tokens \(\d+ cached\), 0 generated, cancelled/],
    ['a streamed chat', '/v1/chat/completions', { max_tokens: 4, stream: true,
      messages: [{ role: 'user', content: words(350, 'b') }] },
      / 200 stream \(cut: the client went away\) chat: 1 choice, prompt \d+ tokens \(\d+ cached\), 0 generated, cancelled/],
    ["a plain Anthropic message", '/v1/messages', { max_tokens: 4, messages: [{ role: 'user', content: words(350, 'c') }] },
      / - messages: 1 choice, .*cancelled/],
    ['a streamed Anthropic message', '/v1/messages', { max_tokens: 4, stream: true,
      messages: [{ role: 'user', content: words(350, 'd') }] },
      / 200 stream \(cut: the client went away\) messages: .* 0 generated, cancelled/],
  ]) {
    const [how, ms] = await leave(path, body, 150);
    check(how === 'aborted', `${what}: the client left after ${ms} ms (${how})`);
    const line = await logLine(want);
    check(line !== null, `${what}: the log has ${want}; it has:\n${srv.stderr}`);
  }
  const after = await metrics(srv);
  // (the first /metrics read counts itself once it has gone out)
  const ok200 = after['offkv_requests_total{status="200"}'] - before['offkv_requests_total{status="200"}'] - 1;
  check(ok200 === 2, `the two streams count as 200s (their status went out), the plain answers do not: ${ok200}`);
  let idle = after;
  for (let i = 0; i < 40 && (idle.offkv_sequences_active || idle.offkv_sequences_queued); i++) {
    await sleep(50);
    idle = await metrics(srv);
  }
  check(idle.offkv_sequences_active === 0 && idle.offkv_sequences_queued === 0, 'every sequence freed');
} finally {
  await stopServer(srv);
}
check(!/ 200 chat: /.test(srv.stderr) && !/ 200 messages: /.test(srv.stderr), 'no answer line for a client that left');
done();
