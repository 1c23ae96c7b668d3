// POST /completion, llama.cpp's own completion endpoint (also /completions):
// /v1/completions' request, llama.cpp's answer ({content, stop, stop_type,
// tokens_predicted, tokens_evaluated, timings}; an array for several
// prompts; a stream of content events ending in stop: true, no [DONE]).
// The reference for the text is `offkv run --temp 0` on the same prompt
// (whose logits are checked against llama.cpp's elsewhere).
import { need, startServer, stopServer, post, check, eq, done, runGreedy } from './lib.mjs';

need('shared');
const srv = await startServer([]);
try {
  const a = 'Once upon a time', b = 'The cat sat';
  const r = await post(srv, '/completion', { prompt: a, n_predict: 8, temperature: 0 });
  eq(r.status, 200, `/completion: ${r.text}`);
  eq(r.json.content, runGreedy(a, 8), 'content: offkv run\'s greedy text');
  check(r.json.stop === true && r.json.stop_type === 'limit' && r.json.tokens_predicted === 8,
    `stop, stop_type limit, tokens_predicted: ${r.text}`);
  check(r.json.tokens_evaluated > 4 && typeof r.json.timings?.predicted_ms === 'number', 'tokens_evaluated, timings');
  const alias = await post(srv, '/completions', { prompt: a, n_predict: 8, temperature: 0 });
  eq(alias.json.content, r.json.content, '/completions is the same endpoint');

  // Several prompts: an array, in order.
  const m = await post(srv, '/completion', { prompt: [a, b], n_predict: 6, temperature: 0 });
  check(Array.isArray(m.json) && m.json.length === 2, `two prompts: an array of two: ${m.text.slice(0, 200)}`);
  if (Array.isArray(m.json)) {
    eq(m.json[0].content, runGreedy(a, 6), 'the first prompt\'s answer');
    eq(m.json[1].content, runGreedy(b, 6), 'the second prompt\'s answer');
    eq(m.json.map(x => x.index), [0, 1], 'indexes');
  }

  // A stream: events, their content the answer, the last one stop: true.
  const s = await fetch(srv.url + '/completion', { method: 'POST',
    body: JSON.stringify({ prompt: a, n_predict: 8, temperature: 0, stream: true }) });
  const text = await s.text();
  const ev = text.split('\n\n').filter(e => e.startsWith('data: ')).map(e => JSON.parse(e.slice(6)));
  eq(ev.map(e => e.content).join(''), r.json.content, 'stream: the pieces join to the answer');
  check(ev.length >= 2 && ev.slice(0, -1).every(e => e.stop === false) && ev[ev.length - 1].stop === true,
    'stream: stop false, then true');
  check(!text.includes('[DONE]'), 'stream: no [DONE]');

  // A stop word and the end of the text.
  const w = r.json.content.trim().split(/\s+/)[1];
  const rw = await post(srv, '/completion', { prompt: a, n_predict: 8, temperature: 0, stop: [w] });
  check(rw.json.stop_type === 'word' && rw.json.stopping_word === w && !rw.json.content.includes(w),
    `stop ${JSON.stringify(w)}: ${rw.text.slice(0, 200)}`);

  // Bad requests: OpenAI's error shape, naming the field.
  const e = await post(srv, '/completion', { n_predict: 4 });
  check(e.status === 400 && e.json?.error?.param === 'prompt', `no prompt: ${e.status} ${e.text}`);
} finally {
  await stopServer(srv);
}
done();
