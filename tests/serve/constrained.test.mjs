// offkv serve's constrained output and sampling controls, through the
// official openai client (stories260K: a tiny trained model whose JSON is
// anything but fluent, so only the grammar makes it valid):
// response_format json_schema answers validated by ajv (plain, streamed, n: 3),
// json_object, llama.cpp's grammar, logprobs (chat and completions shapes,
// against greedy decoding), seed reproducibility and n forks equal to single
// runs, logit_bias, stop strings with n, /tokenize /detokenize /props, and
// wrong types as 400s naming the field.
import { need, requireNpm, startServer, stopServer, post, metrics, check, eq, done } from './lib.mjs';

need('shared');
const STEP = s => { if (process.env.OKV_TRACE) console.log('step:', s); };
const { default: OpenAI } = requireNpm('openai');
const Ajv2020 = requireNpm('ajv/dist/2020').default;

const srv = await startServer(['--parallel', '4', '--queue', '16', '-c', '1024']);
const client = new OpenAI({ baseURL: srv.url + '/v1', apiKey: 'none', maxRetries: 0, timeout: 120000 });
const ajv = new Ajv2020({ strict: true, allErrors: true });
ajv.addFormat('date', /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$/);

const schema = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 8 },
    age: { type: 'integer', minimum: 0, maximum: 120 },
    color: { enum: ['red', 'green', 'blue'] },
    tags: { type: 'array', items: { type: 'boolean' }, maxItems: 2 },
    born: { type: 'string', format: 'date' },
    pet: { anyOf: [{ $ref: '#/$defs/pet' }, { type: 'null' }] },
  },
  required: ['name', 'age', 'color', 'pet'],
  additionalProperties: false,
  $defs: { pet: { type: 'object', properties: { kind: { const: 'cat' }, legs: { type: 'integer', minimum: 3, maximum: 4 } },
    required: ['kind'], additionalProperties: false } },
};
const validate = ajv.compile(schema);
const rf = { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } };
const messages = [{ role: 'user', content: 'Describe a person as JSON.' }];

function valid(text, what) {
  let v;
  try { v = JSON.parse(text); } catch (e) { check(false, `${what}: not JSON (${e.message}): ${text}`); return false; }
  const ok = validate(v);
  check(ok, `${what}: fails the schema ${JSON.stringify(validate.errors)}: ${text}`);
  return ok;
}

try {
  // json_schema: several seeds and temperatures, every answer valid
  STEP('json_schema answers');
  for (const [seed, temperature] of [[1, 1], [2, 1.5], [3, 0.7], [4, 0], [5, 2]]) {
    const r = await client.chat.completions.create({ model: 'x', messages, response_format: rf, seed, temperature, max_tokens: 600 });
    eq(r.choices[0].finish_reason, 'stop', `seed ${seed}: finishes`);
    valid(r.choices[0].message.content, `chat seed ${seed} T ${temperature}`);
  }
  // the same on /v1/completions, and streamed: the deltas join to a valid answer
  STEP('json_schema streamed');
  const st = await client.chat.completions.create({ model: 'x', messages, response_format: rf, seed: 9, max_tokens: 600, stream: true });
  let streamed = '';
  for await (const ch of st) streamed += ch.choices[0]?.delta?.content ?? '';
  valid(streamed, 'streamed json_schema');
  const cpl = await post(srv, '/v1/completions', { prompt: 'JSON:', response_format: rf, seed: 11, max_tokens: 600 });
  valid(cpl.json.choices[0].text, '/v1/completions json_schema');

  // n: 3 forks of one prompt: each valid, each the text a single request with its seed gives
  STEP('n: 3');
  const n3 = await client.chat.completions.create({ model: 'x', messages, response_format: rf, seed: 21, n: 3, max_tokens: 600 });
  eq(n3.choices.map(c => c.index), [0, 1, 2], 'three choices');
  n3.choices.forEach((c, i) => valid(c.message.content, `n 3 choice ${i}`));
  for (let i = 0; i < 3; i++) {
    const one = await client.chat.completions.create({ model: 'x', messages, response_format: rf, seed: 21 + i, max_tokens: 600 });
    eq(n3.choices[i].message.content, one.choices[0].message.content, `fork ${i} = a single run with seed ${21 + i}`);
  }
  check(new Set(n3.choices.map(c => c.message.content)).size > 1, 'the three choices differ');
  const n2s = await client.chat.completions.create({ model: 'x', messages, seed: 5, n: 2, max_tokens: 12, stream: true });
  const parts = ['', ''];
  for await (const ch of n2s) for (const c of ch.choices) parts[c.index] += c.delta?.content ?? '';
  const n2 = await client.chat.completions.create({ model: 'x', messages, seed: 5, n: 2, max_tokens: 12 });
  // A prompt no sequence holds: the second choice's prompt comes from the
  // first one's cache (a fork), not from a second prefill.
  const m0 = await metrics(srv);
  const fresh = await client.chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'A prompt seen once, for forks.' }],
    seed: 5, n: 2, max_tokens: 4 });
  const m1 = await metrics(srv);
  const reused = m1.offkv_prompt_tokens_cached_total - m0.offkv_prompt_tokens_cached_total;
  check(reused >= fresh.usage.prompt_tokens, `n 2 on a new prompt: the fork reused the whole prompt (${reused} cached, prompt ${fresh.usage.prompt_tokens})`);
  eq(parts, n2.choices.map(c => c.message.content), 'n 2 streamed = n 2 plain');

  // seed: same seed, same text; another seed, another text
  STEP('seed');
  const a = await client.completions.create({ model: 'x', prompt: 'Once upon a time', seed: 77, temperature: 1, max_tokens: 30 });
  const b = await client.completions.create({ model: 'x', prompt: 'Once upon a time', seed: 77, temperature: 1, max_tokens: 30 });
  const c = await client.completions.create({ model: 'x', prompt: 'Once upon a time', seed: 78, temperature: 1, max_tokens: 30 });
  eq(a.choices[0].text, b.choices[0].text, 'same seed, same text');
  check(a.choices[0].text !== c.choices[0].text, 'seeds 77 and 78 give different texts');

  // json_object: every finished answer is an object.  A story model writes
  // stories inside the strings; a bias towards '"' and '}' lets it finish.
  STEP('json_object');
  const qb = (await post(srv, '/tokenize', { content: 'a"}', add_special: false })).json.tokens.slice(-2);
  let finished = 0;
  for (let seed = 1; seed <= 6; seed++) {
    const r = await client.chat.completions.create({ model: 'x', messages, response_format: { type: 'json_object' }, seed,
      temperature: 1, max_tokens: 600, logit_bias: { [qb[0]]: 4, [qb[1]]: 9 } });
    const t = r.choices[0].message.content;
    if (r.choices[0].finish_reason !== 'stop') { check(t.startsWith('{'), `json_object seed ${seed} starts an object: ${t}`); continue; }
    finished++;
    let v = null;
    try { v = JSON.parse(t); } catch { /* reported below */ }
    check(v !== null && typeof v === 'object' && !Array.isArray(v), `json_object seed ${seed}: an object: ${t}`);
  }
  check(finished >= 3, `json_object answers finished: ${finished} of 6`);

  // llama.cpp's grammar
  STEP('grammar');
  const seen = new Set();
  for (let seed = 1; seed <= 8; seed++) {
    const r = await post(srv, '/v1/completions', { prompt: 'Is it?', grammar: 'root ::= ("yes" | "no" | "maybe") "."', seed, max_tokens: 20 });
    seen.add(r.json.choices[0].text);
    eq(r.json.choices[0].finish_reason, 'stop', `grammar seed ${seed} finishes`);
  }
  check([...seen].every(t => ['yes.', 'no.', 'maybe.'].includes(t)), `grammar answers: ${[...seen]}`);

  // logprobs: chat's shape; greedy picks the top alternative; tokens join to the text
  STEP('logprobs');
  const lp = await client.chat.completions.create({ model: 'x', messages, temperature: 0, max_tokens: 10, logprobs: true, top_logprobs: 3 });
  const content = lp.choices[0].logprobs.content;
  eq(content.length, 10, 'a logprob per token');
  eq(content.map(t => t.token).join(''), lp.choices[0].message.content, 'tokens join to the text');
  for (const t of content) {
    eq(t.top_logprobs.length, 3, 'three alternatives');
    eq(t.top_logprobs[0].token, t.token, 'greedy chose the most likely token');
    check(Math.abs(t.top_logprobs[0].logprob - t.logprob) < 1e-6, 'its logprob');
    check(t.logprob <= 0 && t.top_logprobs[1].logprob <= t.top_logprobs[0].logprob, 'ordered, <= 0');
    eq(Buffer.from(t.bytes).toString('utf8'), t.token, 'bytes are the token');
    check(t.top_logprobs.reduce((s, x) => s + Math.exp(x.logprob), 0) <= 1 + 1e-5, 'probabilities sum to at most 1');
  }
  const lps = await client.chat.completions.create({ model: 'x', messages, temperature: 0, max_tokens: 10, logprobs: true, stream: true });
  let lpStreamed = [];
  let lpAligned = true;
  for await (const ch of lps) {
    const c = ch.choices[0];
    lpStreamed = lpStreamed.concat(c?.logprobs?.content ?? []);
    // each chunk carries its own tokens' records (the first chunk carried all)
    if (c?.delta?.content) lpAligned &&= (c.logprobs?.content ?? []).map(t => t.token).join('') === c.delta.content;
  }
  eq(lpStreamed.map(t => [t.token, t.logprob]), content.map(t => [t.token, t.logprob]), 'streamed logprobs = plain');
  check(lpAligned, 'each streamed chat chunk carries the logprobs of its own text');
  {
    const cs = await client.completions.create({ model: 'x', prompt: 'Once upon a time', temperature: 0, max_tokens: 8, logprobs: 0,
      stream: true });
    let aligned = true, count = 0;
    for await (const ch of cs) {
      const c = ch.choices[0];
      if (!c) continue;
      count += c.logprobs ? c.logprobs.tokens.length : 0;
      if (c.text) aligned &&= c.logprobs && c.logprobs.tokens.join('') === c.text;
    }
    check(aligned, 'each streamed completion chunk carries the logprobs of its own text');
    eq(count, 8, 'the streamed completion carries 8 records in all');
  }
  const clp = await client.completions.create({ model: 'x', prompt: 'Once upon a time', temperature: 0, max_tokens: 8, logprobs: 2 });
  const L = clp.choices[0].logprobs;
  eq(L.tokens.join(''), clp.choices[0].text, 'completions: tokens join to the text');
  eq(L.text_offset, L.tokens.map((_, i) => L.tokens.slice(0, i).join('').length), 'text_offset');
  check(L.top_logprobs.every((t, i) => Object.keys(t).length === 2 && t[L.tokens[i]] === L.token_logprobs[i]), 'top_logprobs hold the chosen token');

  // logit_bias: +100 on one token makes greedy repeat it; -100 bans the greedy choice
  STEP('logit_bias');
  const tk = await post(srv, '/tokenize', { content: ' the', add_special: false });
  const the = tk.json.tokens[tk.json.tokens.length - 1];
  const de = await post(srv, '/detokenize', { tokens: [the, the] });
  eq(de.json.content, ' the the', '/detokenize');
  const forced = await client.completions.create({ model: 'x', prompt: 'Once', temperature: 0, max_tokens: 4, logit_bias: { [the]: 100 } });
  eq(forced.choices[0].text, ' the the the the', 'logit_bias +100');
  const g = await client.completions.create({ model: 'x', prompt: 'Once upon a time', temperature: 0, max_tokens: 1, logprobs: 0 });
  const tok = async t => (await post(srv, '/tokenize', { content: t, add_special: false })).json.tokens;
  const first = (await tok('Once upon a time' + g.choices[0].text)).slice((await tok('Once upon a time')).length);
  eq(first.length, 1, 'the greedy token, by tokenizing prompt + text');
  const banned = await client.completions.create({ model: 'x', prompt: 'Once upon a time', temperature: 0, max_tokens: 1, logit_bias: { [first[0]]: -100 } });
  check(banned.choices[0].text !== g.choices[0].text, `logit_bias -100 bans '${g.choices[0].text}'`);
  const pen = await post(srv, '/v1/completions', { prompt: 'Once upon a time', temperature: 0, max_tokens: 40, frequency_penalty: 2, presence_penalty: 2, repeat_penalty: 1.3, min_p: 0.05 });
  eq(pen.status, 200, 'penalties and min_p accepted');
  const plainT = await post(srv, '/v1/completions', { prompt: 'Once upon a time', temperature: 0, max_tokens: 40 });
  check(pen.json.choices[0].text !== plainT.json.choices[0].text, 'penalties change the greedy text');

  // stop strings with n: nothing past the stop in any choice
  STEP('stop with n');
  const want = plainT.json.choices[0].text;
  const stop = want.slice(12, 16);
  const sn = await client.completions.create({ model: 'x', prompt: 'Once upon a time', temperature: 0, max_tokens: 40, n: 2, stop: [stop], stream: true });
  const sp = ['', ''];
  for await (const ch of sn) for (const cc of ch.choices) sp[cc.index] += cc.text ?? '';
  eq(sp, [want.slice(0, want.indexOf(stop)), want.slice(0, want.indexOf(stop))], 'streamed stop in both choices');

  // /props
  STEP('props');
  const props = await (await fetch(srv.url + '/props')).json();
  eq([props.total_slots, props.default_generation_settings.n_ctx], [4, 1024], '/props slots and context');
  check(typeof props.chat_template === 'string' && props.bos_token === '<s>', '/props template and tokens');

  // wrong types: 400 naming the field; unknown fields ignored
  STEP('errors');
  const shape = (r, what, param) => {
    check(r.status === 400, `${what}: status ${r.status} (${r.text})`);
    eq(r.json && r.json.error && r.json.error.param, param, `${what}: param`);
  };
  shape(await post(srv, '/v1/chat/completions', { messages, response_format: 'json' }), 'response_format a string', 'response_format');
  shape(await post(srv, '/v1/chat/completions', { messages, response_format: { type: 'yaml' } }), 'unknown type', 'response_format');
  const uns = await post(srv, '/v1/chat/completions', { messages, response_format: { type: 'json_schema', json_schema: { schema: { type: 'string', format: 'email' } } } });
  shape(uns, 'unsupported format', 'response_format');
  check(/email/.test(uns.json?.error?.message), `names the format: ${uns.text}`);
  const mo = await post(srv, '/v1/chat/completions', { messages, response_format: { type: 'json_schema', json_schema: { schema: { type: 'integer', multipleOf: 3 } } } });
  check(/multipleOf/.test(mo.json?.error?.message), `names the keyword: ${mo.text}`);
  shape(await post(srv, '/v1/completions', { prompt: 'x', grammar: 5 }), 'grammar a number', 'grammar');
  const bg = await post(srv, '/v1/completions', { prompt: 'x', grammar: 'root ::= foo' });
  shape(bg, 'bad grammar', 'grammar');
  check(/line 1 column 10.*undefined rule 'foo'/.test(bg.json?.error?.message), `grammar error names line, column, rule: ${bg.text}`);
  shape(await post(srv, '/v1/chat/completions', { messages, logprobs: 'yes' }), 'logprobs a string', 'logprobs');
  shape(await post(srv, '/v1/chat/completions', { messages, top_logprobs: 2 }), 'top_logprobs without logprobs', 'top_logprobs');
  shape(await post(srv, '/v1/chat/completions', { messages, logprobs: true, top_logprobs: 21 }), 'top_logprobs 21', 'top_logprobs');
  shape(await post(srv, '/v1/completions', { prompt: 'x', logprobs: 6 }), 'completions logprobs 6', 'logprobs');
  shape(await post(srv, '/v1/completions', { prompt: 'x', logit_bias: { abc: 1 } }), 'logit_bias key', 'logit_bias');
  shape(await post(srv, '/v1/completions', { prompt: 'x', logit_bias: { 5: 'up' } }), 'logit_bias value', 'logit_bias');
  shape(await post(srv, '/v1/completions', { prompt: 'x', logit_bias: { 99999: 1 } }), 'logit_bias id past the vocabulary', 'logit_bias');
  shape(await post(srv, '/v1/completions', { prompt: 'x', presence_penalty: 3 }), 'presence_penalty 3', 'presence_penalty');
  shape(await post(srv, '/v1/completions', { prompt: 'x', frequency_penalty: 'x' }), 'frequency_penalty a string', 'frequency_penalty');
  shape(await post(srv, '/v1/completions', { prompt: 'x', min_p: 2 }), 'min_p 2', 'min_p');
  shape(await post(srv, '/v1/completions', { prompt: 'x', repeat_penalty: -1 }), 'repeat_penalty -1', 'repeat_penalty');
  shape(await post(srv, '/v1/completions', { prompt: 'x', n: 0 }), 'n 0', 'n');
  shape(await post(srv, '/v1/completions', { prompt: ['a', 'b', 'c'], n: 6 }), '18 choices', 'n');
  shape(await post(srv, '/v1/completions', { prompt: 'x', grammar: 'root ::= "a"', response_format: { type: 'json_object' } }), 'two constraints', 'grammar');
  shape(await post(srv, '/tokenize', { content: 5 }), '/tokenize content', 'content');
  shape(await post(srv, '/detokenize', { tokens: [1, 'x'] }), '/detokenize tokens', 'tokens');
  eq((await post(srv, '/v1/completions', { prompt: 'x', max_tokens: 2, some_future_field: { a: 1 }, user: 'u' })).status, 200, 'unknown fields ignored');
} finally {
  await stopServer(srv);
}
done();
