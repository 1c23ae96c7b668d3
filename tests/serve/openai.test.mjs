// offkv serve against the official openai client (and raw fetch for what a
// client library would not send): completions equal to `offkv run --temp
// 0`, stop strings, streaming chat with usage, 8 concurrent requests (same
// text alone, together, in any slot), prompt reuse, every error status, a
// dropped stream, /metrics and SIGTERM.
import { need, requireNpm, startServer, stopServer, post, metrics, runGreedy, check, eq, done, sleep } from './lib.mjs';

need('shared');
const STEP = s => { if (process.env.OKV_TRACE) console.log('step:', s); };
const { default: OpenAI } = requireNpm('openai');

const srv = await startServer(['--parallel', '4', '--queue', '16', '-c', '1024']);
const client = new OpenAI({ baseURL: srv.url + '/v1', apiKey: 'none', maxRetries: 0, timeout: 60000 });
try {
  // health, models
  STEP(`health, models`);
  const h = await fetch(srv.url + '/health');
  eq([h.status, await h.json()], [200, { status: 'ok' }], 'GET /health');
  const models = await client.models.list();
  eq(models.data.map(m => m.id), ['stories260K.gguf'], '/v1/models ids');

  // completions: greedy text equal to offkv run --temp 0
  STEP(`completions: greedy text equal to offkv run --temp 0`);
  const prompt = 'Once upon a time';
  const want = runGreedy(prompt, 40);
  const c = await client.completions.create({ model: 'x', prompt, max_tokens: 40, temperature: 0 });
  eq(c.choices[0].text, want, 'greedy completion = offkv run --temp 0');
  eq(c.object, 'text_completion', 'completion object');
  check(/^cmpl-/.test(c.id) && typeof c.created === 'number' && c.model === 'stories260K.gguf', 'id, created, model');
  eq(c.choices[0].finish_reason, 'length', 'finish_reason at max_tokens');
  eq([c.usage.prompt_tokens, c.usage.completion_tokens, c.usage.total_tokens],
    [c.usage.prompt_tokens, 40, c.usage.prompt_tokens + 40], 'usage counts');
  check(c.usage.prompt_tokens_details && typeof c.usage.prompt_tokens_details.cached_tokens === 'number',
    'usage.prompt_tokens_details.cached_tokens present');
  // max_completion_tokens is the newer name
  STEP(`max_completion_tokens is the newer name`);
  const c2 = await post(srv, '/v1/completions', { prompt, max_completion_tokens: 5, temperature: 0 });
  eq(c2.json.usage.completion_tokens, 5, 'max_completion_tokens');

  // a prompt array: one choice per prompt, each its own greedy text
  STEP(`a prompt array: one choice per prompt, each its own greedy text`);
  const arr = await client.completions.create({ model: 'x', prompt: [prompt, 'Tom had a dog'], max_tokens: 12, temperature: 0 });
  eq(arr.choices.map(ch => ch.text), [runGreedy(prompt, 12), runGreedy('Tom had a dog', 12)], 'prompt array');
  // usage: each prompt once however many choices it has (n), as OpenAI
  // counts it; every choice's completion tokens
  STEP(`usage counts each prompt once, whatever n`);
  const tom = await client.completions.create({ model: 'x', prompt: 'Tom had a dog', max_tokens: 1, temperature: 0 });
  const arr2 = await client.completions.create({ model: 'x', prompt: [prompt, 'Tom had a dog'], max_tokens: 12, temperature: 0, n: 2 });
  eq(arr2.choices.map(ch => ch.finish_reason), ['length', 'length', 'length', 'length'], 'four choices, each cut at max_tokens');
  eq([arr2.usage.prompt_tokens, arr2.usage.completion_tokens, arr2.usage.total_tokens],
    [c.usage.prompt_tokens + tom.usage.prompt_tokens, 48, c.usage.prompt_tokens + tom.usage.prompt_tokens + 48],
    'usage of two prompts with n 2: each prompt once, 4 x 12 completion tokens');

  // stop strings: the text up to the stop, the stop text not returned
  STEP(`stop strings: the text up to the stop, the stop text not returned`);
  const stopAt = want.indexOf('Lily');
  check(stopAt > 0, 'the greedy text has the stop word');
  const s1 = await client.completions.create({ model: 'x', prompt, max_tokens: 40, temperature: 0, stop: 'Lily' });
  eq([s1.choices[0].text, s1.choices[0].finish_reason], [want.slice(0, stopAt), 'stop'], 'stop string');
  const s2 = await client.completions.create({ model: 'x', prompt, max_tokens: 40, temperature: 0, stop: ['zzz', 'park', 'Lily'] });
  eq(s2.choices[0].text, want.slice(0, stopAt), 'stop array: the first one met');
  // a stop string spanning tokens, streamed: nothing of it leaks
  STEP(`a stop string spanning tokens, streamed: nothing of it leaks`);
  const span = want.slice(stopAt - 3, stopAt + 3);
  const st = await client.completions.create({ model: 'x', prompt, max_tokens: 40, temperature: 0, stop: [span], stream: true });
  let streamed = '';
  for await (const ch of st) streamed += ch.choices[0]?.text ?? '';
  eq(streamed, want.slice(0, stopAt - 3), 'streamed stop string across tokens');

  // streaming chat with usage = the same chat not streamed
  STEP(`streaming chat with usage = the same chat not streamed`);
  const messages = [{ role: 'system', content: 'You tell stories.' }, { role: 'user', content: 'Tell me about a cat.' }];
  const plain = await client.chat.completions.create({ model: 'x', messages, max_tokens: 30, temperature: 0 });
  eq(plain.object, 'chat.completion', 'chat object');
  eq(plain.choices[0].message.role, 'assistant', 'chat message role');
  const stream = await client.chat.completions.create({ model: 'x', messages, max_tokens: 30, temperature: 0, stream: true,
    stream_options: { include_usage: true } });
  let text = '', chunks = 0, usage = null, finish = null, roleFirst = null;
  for await (const ch of stream) {
    chunks++;
    if (ch.usage) usage = ch.usage;
    const d = ch.choices[0];
    if (!d) continue;
    if (roleFirst === null) roleFirst = d.delta.role ?? '';
    if (d.delta.content) text += d.delta.content;
    if (d.finish_reason) finish = d.finish_reason;
  }
  eq(text, plain.choices[0].message.content, 'streamed chat text = plain chat text');
  eq(roleFirst, 'assistant', 'first chunk carries the role');
  check(chunks >= plain.usage.completion_tokens + 2, `a chunk per token, the finish and the usage (${chunks} chunks)`);
  check(usage && usage.completion_tokens === plain.usage.completion_tokens && usage.prompt_tokens === plain.usage.prompt_tokens,
    'stream usage');
  eq(finish, plain.choices[0].finish_reason, 'stream finish_reason');
  // raw SSE framing
  STEP(`raw SSE framing`);
  const raw = await fetch(srv.url + '/v1/chat/completions', { method: 'POST', body: JSON.stringify({ messages, max_tokens: 3, stream: true }) });
  eq(raw.headers.get('content-type'), 'text/event-stream', 'SSE content type');
  const rawText = await raw.text();
  check(/^(data: \{.*\}\n\n)+data: \[DONE\]\n\n$/s.test(rawText), 'SSE framing: data: {chunk}\\n\\n ... data: [DONE]\\n\\n');

  // return_progress (llama.cpp's extension): chunks without choices that say
  // how far the prompt's reading has got, read in steps of --chunk (128)
  // prompt tokens: the latest report when the stream looks (a slow reader
  // skips some), the last with processed = total, all before the first
  // token; the text as without them
  STEP(`return_progress: prompt_progress chunks while a long prompt is read`);
  const progressOf = async (body) => {
    const st = await client.completions.create({ model: 'x', max_tokens: 4, temperature: 0, stream: true,
      stream_options: { include_usage: true }, return_progress: true, ...body });
    const ev = [], text = {};
    let usage = null, textBeforeProgress = false;
    for await (const ch of st) {
      if (ch.usage) usage = ch.usage;
      if (ch.prompt_progress) {
        eq(ch.choices, [], 'a progress chunk has no choice');
        if (String(ch.prompt_progress.index) in text) textBeforeProgress = true;
        ev.push(ch.prompt_progress);
      }
      for (const c of ch.choices) text[c.index] = (text[c.index] ?? '') + c.text;
    }
    check(!textBeforeProgress, 'no progress after the prompt\'s first text');
    return { ev, text, usage };
  };
  const checkSteps = (ev, total, cache, what) => {
    check(ev.length >= 1, `${what}: reports`);
    eq(ev.at(-1).processed, total, `${what}: the last report has read the whole prompt`);
    for (let i = 0; i < ev.length; i++) {
      const e = ev[i];
      check(e.total === total && e.cache === cache && e.processed >= cache && typeof e.time_ms === 'number' && e.time_ms >= 0,
        `${what}: report ${i} ${JSON.stringify(e)} (total ${total}, cache ${cache})`);
      check(e.processed === total || (e.processed - cache) % 128 === 0, `${what}: report ${i} ends a step of 128 (${e.processed})`);
      if (i) check(e.processed > ev[i - 1].processed && e.time_ms >= ev[i - 1].time_ms, `${what}: report ${i} moves on`);
    }
  };
  const longPrompt = Array(12).fill('The little bird sang a song in the tall green tree.').join(' ');
  const p1 = await progressOf({ prompt: longPrompt });
  check(p1.usage.prompt_tokens > 256, `a prompt of three steps or more (${p1.usage.prompt_tokens} tokens)`);
  checkSteps(p1.ev, p1.usage.prompt_tokens, p1.usage.prompt_tokens_details.cached_tokens, 'a new prompt');
  // the same prompt again: all but its last token come from the cache
  const p2 = await progressOf({ prompt: longPrompt });
  eq(p2.usage.prompt_tokens_details.cached_tokens, p2.usage.prompt_tokens - 1, 'the prompt again: reused');
  checkSteps(p2.ev, p2.usage.prompt_tokens, p2.usage.prompt_tokens - 1, 'a reused prompt');
  const noProgress = await client.completions.create({ model: 'x', prompt: longPrompt, max_tokens: 4, temperature: 0 });
  eq([p1.text[0], p2.text[0]], [noProgress.choices[0].text, noProgress.choices[0].text], 'the text with progress = without');
  // two prompts: each its own reports, by the index of its choice
  const p3 = await progressOf({ prompt: ['Tom had a dog. ' + longPrompt, 'The sun was up. ' + longPrompt] });
  for (const i of [0, 1]) {
    const ev = p3.ev.filter(e => e.index === i);
    check(ev.length >= 1 && ev.at(-1).processed === ev[0].total && ev[0].total > 256, `prompt ${i}: its own reports`);
  }
  // a chat with two choices: the second forks from the first's cache, and
  // the prompt's reports all come before either choice's first text
  const forked = await client.chat.completions.create({ model: 'x', max_tokens: 3, temperature: 0, n: 2, stream: true,
    return_progress: true, messages: [{ role: 'user', content: 'Again: ' + longPrompt }] });
  const order = [];
  for await (const ch of forked) {
    if (ch.prompt_progress) order.push(['p', ch.prompt_progress.processed === ch.prompt_progress.total]);
    for (const c of ch.choices) if (c.delta?.content) order.push(['t', c.index]);
  }
  const lastP = order.map(o => o[0]).lastIndexOf('p'), firstT = order.map(o => o[0]).indexOf('t');
  check(lastP >= 0 && order[lastP][1] && firstT > lastP && order.some(o => o[0] === 't' && o[1] === 1),
    `n 2: the whole prompt reported before any choice's text (${JSON.stringify(order)})`);
  // not asked, or not a stream: no report
  const quiet = await (await fetch(srv.url + '/v1/completions', { method: 'POST',
    body: JSON.stringify({ prompt: longPrompt + ' Again.', max_tokens: 2, stream: true }) })).text();
  check(quiet.includes('"text"') && !quiet.includes('prompt_progress'), 'a stream that did not ask has no progress');
  const plainProgress = await post(srv, '/v1/completions', { prompt: longPrompt, max_tokens: 2, return_progress: true });
  check(plainProgress.status === 200 && !('prompt_progress' in plainProgress.json), 'an answer not streamed has no progress');
  const badProgress = await post(srv, '/v1/completions', { prompt: 'x', return_progress: 'yes' });
  eq([badProgress.status, badProgress.json.error.param], [400, 'return_progress'], 'return_progress must be a boolean');

  // 8 concurrent: each text as when alone, whatever runs beside it or in which slot
  STEP(`8 concurrent: each text as when alone, whatever runs beside it or in which slot`);
  const prompts = ['Once upon a time', 'The little bird', 'Tom and Sue went', 'One day, a big',
    'Once upon a time', 'The sun was', 'Lily wanted to', 'The little bird'];
  const alone = [];
  for (const p of prompts) alone.push((await client.completions.create({ model: 'x', prompt: p, max_tokens: 24, temperature: 0 })).choices[0].text);
  const together = await Promise.all(prompts.map(p => client.completions.create({ model: 'x', prompt: p, max_tokens: 24, temperature: 0 })));
  eq(together.map(r => r.choices[0].text), alone, '8 concurrent greedy requests = each alone');
  for (let i = 0; i < prompts.length; i++) eq(alone[i], runGreedy(prompts[i], 24), `prompt ${i} = offkv run`);
  // in another slot: the sequence it would take is busy with a long stream
  const hold = new AbortController();
  const busy = await fetch(srv.url + '/v1/completions', { method: 'POST', signal: hold.signal,
    body: JSON.stringify({ prompt: prompts[1], max_tokens: 900, stream: true }) });
  await busy.body.getReader().read();
  const other = await client.completions.create({ model: 'x', prompt: prompts[1], max_tokens: 24, temperature: 0 });
  eq(other.choices[0].text, alone[1], 'the same request in another slot, beside a stream');
  hold.abort();

  // prompt reuse: the same conversation continued reuses the cache
  STEP(`prompt reuse: the same conversation continued reuses the cache`);
  const convo = [{ role: 'user', content: 'Tell me a story about a frog who finds a shiny stone in the pond.' }];
  const first = await client.chat.completions.create({ model: 'x', messages: convo, max_tokens: 8, temperature: 0 });
  const again = await client.chat.completions.create({ model: 'x', messages: convo, max_tokens: 8, temperature: 0 });
  eq(again.usage.prompt_tokens_details.cached_tokens, again.usage.prompt_tokens - 1, 'the same prompt again: all but its last token cached');
  eq(again.choices[0].message.content, first.choices[0].message.content, 'reused cache, same text');
  const longer = [...convo, { role: 'assistant', content: first.choices[0].message.content }, { role: 'user', content: 'And then?' }];
  const cont = await client.chat.completions.create({ model: 'x', messages: longer, max_tokens: 8, temperature: 0 });
  check(cont.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens,
    `a continued conversation reuses its prefix (${cont.usage.prompt_tokens_details.cached_tokens} of ${cont.usage.prompt_tokens})`);

  // errors: OpenAI's shape, with the status
  STEP(`errors: OpenAI's shape, with the status`);
  const shape = (r, status, what, param) => {
    check(r.status === status, `${what}: status ${r.status}, want ${status} (${r.text})`);
    const e = r.json && r.json.error;
    check(e && typeof e.message === 'string' && typeof e.type === 'string' && 'param' in e && 'code' in e, `${what}: error shape`);
    if (param !== undefined) eq(e && e.param, param, `${what}: param`);
  };
  shape(await post(srv, '/v1/completions', '{"prompt": "x",'), 400, 'malformed JSON');
  shape(await post(srv, '/v1/completions', '{"prompt": "x"} trailing'), 400, 'bytes after the JSON');
  shape(await post(srv, '/v1/completions', '[1,2]'), 400, 'not an object');
  shape(await post(srv, '/v1/completions', { prompt: 5 }), 400, 'prompt of the wrong type', 'prompt');
  shape(await post(srv, '/v1/completions', {}), 400, 'no prompt', 'prompt');
  shape(await post(srv, '/v1/chat/completions', { messages: 'hi' }), 400, 'messages not an array', 'messages');
  shape(await post(srv, '/v1/chat/completions', { messages: [{ role: 'wizard', content: 'x' }] }), 400, 'unknown role', 'messages');
  shape(await post(srv, '/v1/completions', { prompt: 'x', temperature: 'hot' }), 400, 'temperature of the wrong type', 'temperature');
  shape(await post(srv, '/v1/completions', { prompt: 'x', temperature: 3 }), 400, 'temperature out of range', 'temperature');
  shape(await post(srv, '/v1/completions', { prompt: 'x', top_p: 0 }), 400, 'top_p 0', 'top_p');
  shape(await post(srv, '/v1/completions', { prompt: 'x', top_k: -1 }), 400, 'top_k < 0', 'top_k');
  shape(await post(srv, '/v1/completions', { prompt: 'x', max_tokens: 0 }), 400, 'max_tokens 0', 'max_tokens');
  shape(await post(srv, '/v1/completions', { prompt: 'x', max_tokens: 1.5 }), 400, 'max_tokens not an integer', 'max_tokens');
  shape(await post(srv, '/v1/completions', { prompt: 'x', n: 17 }), 400, 'n 17', 'n');
  shape(await post(srv, '/v1/completions', { prompt: 'x', stop: 7 }), 400, 'stop of the wrong type', 'stop');
  shape(await post(srv, '/v1/completions', { prompt: 'x', stop: ['a', 'b', 'c', 'd', 'e'] }), 400, 'five stops', 'stop');
  shape(await post(srv, '/v1/completions', { prompt: 'x', stream: 'yes' }), 400, 'stream of the wrong type', 'stream');
  shape(await post(srv, '/v1/completions', { prompt: 'once '.repeat(1200) }), 400, 'a prompt longer than the context', 'prompt');
  try {
    await client.completions.create({ model: 'x', prompt: 'x', temperature: 5 });
    check(false, 'the client sees a 400 as an error');
  } catch (e) {
    eq(e.status, 400, 'the openai client reports the 400');
  }
  shape({ status: (await fetch(srv.url + '/nowhere')).status, json: await (await fetch(srv.url + '/nowhere')).json() }, 404, 'unknown path');
  const m405 = await fetch(srv.url + '/v1/completions');
  shape({ status: m405.status, json: await m405.json(), text: '' }, 405, 'GET on a POST endpoint');
  // Allow names what the path takes (it said "GET, POST" for every path)
  eq(m405.headers.get('allow'), 'POST', 'GET on a POST endpoint: Allow');
  const p405 = await fetch(srv.url + '/health', { method: 'POST', body: '{}' });
  eq(p405.status, 405, 'POST on a GET endpoint');
  eq(p405.headers.get('allow'), 'GET, HEAD', 'POST on a GET endpoint: Allow');

  // A dropped request stops its generation and frees its sequence: a
  // stream, and a plain request, whose close looks like a half-close (an
  // end of file) until the server writes, so it probes with a 100 Continue
  // (a kept sequence ran to max_tokens, holding its slot).
  for (const stream of [true, false]) {
    const what = `a dropped ${stream ? 'stream' : 'plain request'}`;
    STEP(`${what} stops its generation and frees its sequence`);
    const before = await metrics(srv);
    const ac = new AbortController();
    const answer = fetch(srv.url + '/v1/completions', { method: 'POST', signal: ac.signal,
      body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: 1000, temperature: 0, ignore_eos: true, stream }) });
    if (stream) await (await answer).body.getReader().read();
    else for (let i = 0; i < 100 && (await metrics(srv)).offkv_sequences_active === 0; i++) await sleep(10);
    ac.abort();
    await answer.catch(e => e);
    let freed = false, m = null;
    for (let i = 0; i < 100 && !freed; i++) {
      await sleep(50);
      m = await metrics(srv);
      freed = m.offkv_sequences_active === 0;
    }
    check(freed, `${what} frees its sequence`);
    const made = m.offkv_generated_tokens_total - before.offkv_generated_tokens_total;
    check(made < 900, `${what} stops generating (${made} of 1000 tokens made)`);
  }

  // /metrics
  STEP(`/metrics`);
  const mt = await (await fetch(srv.url + '/metrics')).text();
  for (const name of ['offkv_requests_total{status="200"}', 'offkv_requests_total{status="400"}', 'offkv_prompt_tokens_total',
    'offkv_generated_tokens_total', 'offkv_tokens_per_second', 'offkv_sequences_active', 'offkv_sequences_queued',
    'offkv_cache_bytes{kind="flat"}', 'offkv_cache_bytes{kind="ring"}'])
    check(mt.includes(name + ' '), `/metrics has ${name}`);
  const mm = await metrics(srv);
  check(mm['offkv_requests_total{status="400"}'] >= 18, 'the 400s are counted');
  check(mm['offkv_cache_bytes{kind="flat"}'] > 0, 'cache bytes reported');

  // The log: a line per generation (its tokens and times) and per error
  // answer, with the client's address; every 400 counted once.
  STEP(`the log: a line per generation and per error answer`);
  // a client's words in an error (a logit_bias key) cannot forge a line
  eq((await post(srv, '/v1/completions', { prompt: 'a', logit_bias: { 'x\nFORGED line': 1 } })).status, 400,
    'a logit_bias key with a newline: 400');
  await sleep(50);
  const logged = srv.stderr.split('\n');
  check(!logged.some(l => l.startsWith('FORGED')) && logged.some(l => l.includes("'x.FORGED line'")),
    'the newline is a dot in the log');
  const n400 = (await metrics(srv))['offkv_requests_total{status="400"}'];
  check(logged.some(l => /^offkv serve: 127\.0\.0\.1 200 chat: 1 choice, prompt [1-9]\d* tokens \(\d+ cached\), \d+ generated, (stop|length); first token [\d.]+ s, done [\d.]+ s \([\d.]+ t\/s\)$/.test(l)),
    'a chat answer\'s line');
  check(logged.some(l => /^offkv serve: 127\.0\.0\.1 200 stream completion: \d+ choices?, prompt \d+ tokens/.test(l)),
    'a streamed completion\'s line');
  check(logged.some(l => /^offkv serve: 127\.0\.0\.1 400 invalid_request_error( \(\w+\))?: \S/.test(l)), 'a 400\'s line, naming why');
  eq(logged.filter(l => /^offkv serve: \S+ 400 /.test(l)).length, n400, 'every 400 answer logged once');

  // SIGTERM while a stream runs: the stream ends with [DONE], exit 0
  STEP(`SIGTERM while a stream runs: the stream ends with [DONE], exit 0`);
  const live = await fetch(srv.url + '/v1/completions', { method: 'POST',
    body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: 1000, temperature: 0, stream: true }) });
  const rd = live.body.getReader();
  await rd.read();
  srv.proc.kill('SIGTERM');
  let tail = '';
  const dec = new TextDecoder();
  for (;;) {
    const { value, done: end } = await rd.read();
    if (end) break;
    tail += dec.decode(value);
  }
  check(tail.endsWith('data: [DONE]\n\n'), 'SIGTERM ends a running stream with [DONE]');
  const ex = await stopServer(srv);
  eq(ex, { code: 0, signal: null }, 'SIGTERM: exit 0');
  check(/stopped/.test(srv.stderr), 'the server says it stopped');
} finally {
  await stopServer(srv);
}

// Prompt reuse over ring layers: tiny-gemma3 slides 5 of its 6 layers over 8
// positions; with --chunk 16 a ring holds 8 + 16 - 1 = 23 rows.  A short
// answer leaves what a rewind needs in the rings (reused); a long one
// overwrites it, and the prompt is evaluated again -- with the same text.
{
  const s = await startServer(['--parallel', '1', '--chunk', '16', '-c', '512'],
    { model: `${process.env.OKV_SHARED}/models/tiny-gemma3.gguf` });
  try {
    const prompt = 'the cat sat on the mat and looked at the dog who was sleeping in the sun by the door';
    const ask = async n => (await post(s, '/v1/completions', { prompt, max_tokens: n, temperature: 0, ignore_eos: true })).json;
    const a = await ask(5);
    const b = await ask(5);
    eq(b.usage.prompt_tokens_details.cached_tokens, b.usage.prompt_tokens - 1, 'rings still hold the prompt: reused');
    eq(b.choices[0].text, a.choices[0].text, 'reused over rings: same text');
    const c = await ask(40);
    const d = await ask(40);
    eq(d.usage.prompt_tokens_details.cached_tokens, 0, 'rings overwritten: the prompt is evaluated again');
    eq(d.choices[0].text, c.choices[0].text, 'evaluated again: same text');
    check(c.choices[0].text.startsWith(a.choices[0].text), 'the longer answer begins with the shorter');
  } finally {
    eq(await stopServer(s), { code: 0, signal: null }, 'gemma3 server exits 0');
  }
}

// --quiet: no line per answer.
{
  const s = await startServer(['--quiet', '--parallel', '1']);
  try {
    eq((await post(s, '/v1/completions', { prompt: 'Once', max_tokens: 2 })).status, 200, '--quiet: answers');
    eq((await post(s, '/v1/completions', { prompt: 5 })).status, 400, '--quiet: refuses');
  } finally {
    eq(await stopServer(s), { code: 0, signal: null }, '--quiet server exits 0');
  }
  check(!/^offkv serve: 127\.0\.0\.1 /m.test(s.stderr), `--quiet: no answer's line in\n${s.stderr}`);
}

// UTF-8 in streams: tiny-llama's random weights pick stories260K's byte
// tokens (<0xE2> ...) often, so characters span tokens.  Every event must be
// valid UTF-8 on its own (a piece waits for its character's last byte), and
// the pieces must add up to the text of the same request not streamed.
{
  const s = await startServer(['--parallel', '2', '-c', '1024'], { model: `${process.env.OKV_SHARED}/models/tiny-llama.gguf` });
  try {
    const body = { prompt: 'Once upon a time', max_tokens: 400, temperature: 1, seed: 5, ignore_eos: true };
    const whole = (await post(s, '/v1/completions', body)).json.choices[0].text;
    const r = await fetch(s.url + '/v1/completions', { method: 'POST', body: JSON.stringify({ ...body, stream: true }) });
    const bytes = Buffer.from(await r.arrayBuffer());
    const strict = new TextDecoder('utf-8', { fatal: true });
    let pieces = '', events = 0, broken = 0, multibyte = 0;
    for (let at = 0; at < bytes.length;) {
      const end = bytes.indexOf('\n\n', at);
      const ev = bytes.subarray(at, end);
      at = end + 2;
      let text;
      try { text = strict.decode(ev); } catch { broken++; continue; }
      if (text === 'data: [DONE]') continue;
      events++;
      const piece = JSON.parse(text.slice(6)).choices[0]?.text ?? '';
      if (/[^\x00-\x7f]/.test(piece)) multibyte++;
      pieces += piece;
    }
    eq(broken, 0, 'every event is valid UTF-8');
    check(multibyte > 0, `some pieces carry characters of several bytes (${multibyte} of ${events})`);
    eq(pieces, whole, 'the streamed pieces add up to the plain text');
  } finally {
    eq(await stopServer(s), { code: 0, signal: null }, 'tiny-llama server exits 0');
  }
}

// --api-key: 401 without or with a wrong key; the right one works
{
  const s = await startServer(['--api-key', 'sekrit', '--max-body', '1024', '--parallel', '1', '--queue', '0', '-c', '2048']);
  try {
    const r1 = await post(s, '/v1/completions', { prompt: 'x', max_tokens: 2 });
    eq([r1.status, r1.json?.error?.type], [401, 'authentication_error'], 'no key: 401');
    const r2 = await post(s, '/v1/completions', { prompt: 'x', max_tokens: 2 }, { Authorization: 'Bearer wrong' });
    eq(r2.status, 401, 'a wrong key: 401');
    const ok = new OpenAI({ baseURL: s.url + '/v1', apiKey: 'sekrit', maxRetries: 0 });
    eq((await ok.completions.create({ model: 'x', prompt: 'x', max_tokens: 2 })).usage.completion_tokens, 2, 'the right key');
    const bad = new OpenAI({ baseURL: s.url + '/v1', apiKey: 'nope', maxRetries: 0 });
    try { await bad.models.list(); check(false, 'a wrong key fails'); } catch (e) { eq(e.status, 401, 'client sees 401'); }
    // 413: a body over --max-body
    const big = await post(s, '/v1/completions', { prompt: 'a'.repeat(2000) }, { Authorization: 'Bearer sekrit' });
    eq([big.status, big.json?.error?.type], [413, 'invalid_request_error'], 'body over --max-body: 413');
    // 503: the one sequence busy, no queue
    const ac = new AbortController();
    const long = await fetch(s.url + '/v1/completions', { method: 'POST', signal: ac.signal,
      headers: { Authorization: 'Bearer sekrit' },
      body: JSON.stringify({ prompt: 'Once', max_tokens: 2000, stream: true }) });
    await long.body.getReader().read();
    const busy = await post(s, '/v1/completions', { prompt: 'x', max_tokens: 2 }, { Authorization: 'Bearer sekrit' });
    eq([busy.status, busy.json?.error?.type], [503, 'server_busy'], 'all sequences busy, no queue: 503');
    ac.abort();
  } finally {
    eq(await stopServer(s), { code: 0, signal: null }, 'second server exits 0');
  }
}
done();
