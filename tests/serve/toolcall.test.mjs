// Forced tool calls (issue 17): with tool_choice "required" or a named
// function, decoding follows a grammar of the template's call format with
// the tool's parameters schema as the arguments: Qwen 2.5's Hermes
// <tool_call> markup, Llama 3.2's {"name", "parameters"}, for Phi 3.5
// (no tool section) the generic {"tool_call": ...} form, and for DeepSeek
// V3.1 (no tool section either, but DeepSeek's calls in its history)
// DeepSeek's <｜tool▁calls▁begin｜> markup (each template via
// --chat-template-file).  tiny-qwen2 has random weights,
// so only the grammar can make its calls valid: every call's arguments must
// parse and pass ajv against the tool's own schema, plain and streamed, with
// finish_reason "tool_calls"; the named tool is the one called; the tool's
// result goes back (role tool) and the server answers.  A schema keyword the
// converter cannot honour is a 400 naming it and the tool.  parallel_tool_calls
// false gives exactly one call, true (the default) one or more.  With
// tool_choice "auto" the grammar is lazy: a logit_bias on the '{' token makes
// the random model open a Llama 3 call, and the rest of it must
// then be valid (plain, streamed, and with n: 2 forks).
import path from 'node:path';
import { need, requireNpm, startServer, stopServer, post, check, eq, done, SHARED } from './lib.mjs';

need('shared');
const { default: OpenAI } = requireNpm('openai');
const Ajv2020 = requireNpm('ajv/dist/2020').default;

const ajv = new Ajv2020({ strict: true, allErrors: true });

const weather = {
  type: 'object',
  properties: {
    city: { enum: ['Paris', 'Tokyo', 'Lima'] },
    days: { type: 'integer', minimum: 1, maximum: 7 },
    metric: { type: 'boolean' },
  },
  required: ['city', 'days'],
  additionalProperties: false,
};
const time = {
  type: 'object',
  properties: { zone: { type: 'string', maxLength: 6 } },
  required: ['zone'],
  additionalProperties: false,
};
const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather forecast', parameters: weather } },
  { type: 'function', function: { name: 'get_time', description: 'Time in a zone', parameters: time } },
];
const validators = { get_weather: ajv.compile(weather), get_time: ajv.compile(time) };
const messages = [{ role: 'user', content: 'What is the weather in Paris for 3 days?' }];

// A call is valid when its tool is offered and its arguments pass the tool's schema.
function validCallOf(call, what, only) {
  eq(call.type, 'function', `${what}: type`);
  const v = validators[call.function.name];
  check(v && (!only || call.function.name === only), `${what}: calls '${call.function.name}'${only ? `, want ${only}` : ''}`);
  if (!v) return false;
  let args;
  try { args = JSON.parse(call.function.arguments); } catch (e) {
    check(false, `${what}: arguments are not JSON (${e.message}): ${call.function.arguments}`);
    return false;
  }
  const ok = v(args);
  check(ok, `${what}: arguments fail the schema ${JSON.stringify(v.errors)}: ${call.function.arguments}`);
  check(/^call_/.test(call.id ?? ''), `${what}: id ${call.id}`);
  return ok;
}

// A streamed request's choices: the tool-call deltas joined, and finish_reason.
async function streamed(client, body) {
  const st = await client.chat.completions.create(body);
  const out = [];
  for await (const chunk of st) {
    for (const c of chunk.choices ?? []) {
      const o = (out[c.index] ??= { calls: [], finish: null });
      for (const d of c.delta?.tool_calls ?? []) {
        o.calls[d.index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } };
        if (d.id) o.calls[d.index].id = d.id;
        if (d.function?.name) o.calls[d.index].function.name += d.function.name;
        if (d.function?.arguments) o.calls[d.index].function.arguments += d.function.arguments;
      }
      if (c.finish_reason) o.finish = c.finish_reason;
    }
  }
  return out;
}

for (const family of ['Qwen-Qwen2.5-7B-Instruct', 'meta-llama-Llama-3.2-3B-Instruct', 'microsoft-Phi-3.5-mini-instruct',
  'deepseek-ai-DeepSeek-V3.1']) {
const template = path.join(SHARED, 'templates', 'src', `${family}.jinja`);
const srv = await startServer(['--chat-template-file', template, '-c', '2048'],
  { model: path.join(SHARED, 'models', 'tiny-qwen2.gguf') });
const client = new OpenAI({ baseURL: srv.url + '/v1', apiKey: 'none', maxRetries: 0, timeout: 120000 });
const validCall = (call, what, only) => validCallOf(call, `${family} ${what}`, only);
try {
  // required: several seeds and temperatures, each answer one valid call
  let first;
  for (const [seed, temperature] of [[1, 1], [2, 1.5], [3, 0.7], [4, 0], [5, 2]]) {
    const r = await client.chat.completions.create({ model: 'x', messages, tools, tool_choice: 'required', seed, temperature, max_tokens: 400,
      parallel_tool_calls: false });
    const ch = r.choices[0];
    eq(ch.finish_reason, 'tool_calls', `seed ${seed}: finish_reason`);
    check(ch.message.tool_calls?.length === 1, `seed ${seed}: one call, got ${JSON.stringify(ch.message)}`);
    if (ch.message.tool_calls?.length) validCall(ch.message.tool_calls[0], `seed ${seed} T ${temperature}`);
    first ??= ch.message;
  }

  // named: the call is to that tool
  for (const seed of [6, 7, 8]) {
    const r = await client.chat.completions.create({ model: 'x', messages, tools, seed, temperature: 1.5, max_tokens: 400,
      parallel_tool_calls: false, tool_choice: { type: 'function', function: { name: 'get_time' } } });
    eq(r.choices[0].finish_reason, 'tool_calls', `named seed ${seed}: finish_reason`);
    if (r.choices[0].message.tool_calls?.length) validCall(r.choices[0].message.tool_calls[0], `named seed ${seed}`, 'get_time');
    else check(false, `named seed ${seed}: no call: ${JSON.stringify(r.choices[0].message)}`);
  }

  // streamed: the deltas join to one valid call
  for (const seed of [9, 10]) {
    const [{ calls, finish }] = await streamed(client, { model: 'x', messages, tools, tool_choice: 'required', seed, temperature: 1,
      max_tokens: 400, stream: true, parallel_tool_calls: false });
    eq(finish, 'tool_calls', `stream seed ${seed}: finish_reason`);
    check(calls.length === 1, `stream seed ${seed}: one call, got ${JSON.stringify(calls)}`);
    if (calls.length) validCall(calls[0], `stream seed ${seed}`);
  }

  // cut by max_tokens inside the call: finish_reason "length", as OpenAI's
  // (it said "tool_calls" for a call whose arguments never closed)
  let cut = 0;
  for (let max_tokens = 8; max_tokens <= 160; max_tokens += 8) {
    const [{ calls, finish }] = await streamed(client, { model: 'x', messages, tools, tool_choice: 'required', seed: 11,
      temperature: 1, max_tokens, stream: true, parallel_tool_calls: false });
    let whole = calls.length > 0;
    for (const c of calls) try { JSON.parse(c.function.arguments); } catch { whole = false; }
    if (!whole) {
      cut++;
      eq(finish, 'length', `a streamed call cut at max_tokens ${max_tokens}: finish_reason`);
    }
  }
  check(cut > 0, 'some max_tokens cut the call');

  // parallel_tool_calls true: one or more calls, each valid (Hermes: each call
  // whole in its tags, so a cut at max_tokens leaves the earlier ones)
  if (family.startsWith('Qwen')) {
    const r = await client.chat.completions.create({ model: 'x', messages, tools, tool_choice: 'required', seed: 12, temperature: 1,
      max_tokens: 300 });
    const calls = r.choices[0].message.tool_calls ?? [];
    check(calls.length >= 1, `parallel: calls, got ${JSON.stringify(r.choices[0].message)}`);
    calls.forEach((c, i) => validCall(c, `parallel call ${i}`));
  }

  // auto: the lazy grammar.  Llama 3's call is a bare JSON object opening the
  // answer: a bias on the '{' token makes the random model open one, and the
  // grammar must then keep it valid.  (Generic's {"response": text} would
  // fill with the biased '{' to max_tokens: test_serve_toolgrammar checks it.)
  if (family.startsWith('meta')) {
    // 'x{': the vocabulary (SentencePiece) prefixes a lone '{' with a space
    const tk = await post(srv, '/tokenize', { content: 'x{', add_special: false });
    const brace = tk.json?.tokens?.at(-1);
    const dt = await post(srv, '/detokenize', { tokens: [brace] });
    eq(dt.json?.content, '{', `the '{' token ${brace}`);
    const logit_bias = { [brace]: 40 };
    const answers = [];
    for (const seed of [21, 22]) {
      const r = await client.chat.completions.create({ model: 'x', messages, tools, tool_choice: 'auto', seed, temperature: 1,
        max_tokens: 300, logit_bias, parallel_tool_calls: false });
      answers.push({ calls: r.choices[0].message.tool_calls ?? [], finish: r.choices[0].finish_reason, msg: r.choices[0].message });
    }
    // streamed, two forks of one prompt
    const forks = await streamed(client, { model: 'x', messages, tools, tool_choice: 'auto', seed: 23, temperature: 1,
      max_tokens: 300, logit_bias, parallel_tool_calls: false, stream: true, n: 2 });
    eq(forks.length, 2, 'auto stream n 2: choices');
    answers.push(...forks);
    answers.forEach(({ calls, finish, msg }, i) => {
      eq(finish, 'tool_calls', `auto answer ${i}: finish_reason`);
      check(calls.length === 1, `auto answer ${i}: one call, got ${JSON.stringify(msg ?? calls)}`);
      if (calls.length) validCall(calls[0], `auto answer ${i}`);
    });
  }
  // no bias: whatever the model writes, a call in it is valid
  const free = await client.chat.completions.create({ model: 'x', messages, tools, seed: 25, max_tokens: 40 });
  (free.choices[0].message.tool_calls ?? []).forEach((c, i) => validCall(c, `auto free call ${i}`));

  // round trip: the call and its result go back, the server answers and the
  // template shows the result to the model (Qwen's <tool_response>)
  if (first?.tool_calls?.length) {
    const call = first.tool_calls[0];
    // '' not null: Phi 3.5's template adds the content to a string
    const back = [...messages, { role: 'assistant', content: first.content ?? '', tool_calls: [call] },
      { role: 'tool', tool_call_id: call.id, content: '{"forecast": "sunny"}' }];
    const r = await client.chat.completions.create({ model: 'x', messages: back, tools, seed: 11, max_tokens: 16 });
    const ch = r.choices[0];
    eq(ch.message.role, 'assistant', 'round trip: an answer');
    check(['stop', 'length', 'tool_calls'].includes(ch.finish_reason), `round trip: finish_reason ${ch.finish_reason}`);
    const p = await post(srv, '/apply-template', { messages: back, tools });
    if (family.startsWith('Qwen')) check(p.status === 200 && p.json.prompt.includes('<tool_response>\n{"forecast": "sunny"}\n</tool_response>') &&
      p.json.prompt.includes(`<tool_call>\n{"name": "${call.function.name}", "arguments": `),
      `round trip: the prompt carries the call and its result: ${p.text.slice(0, 600)}`);
  }

  // a parameters schema the grammar cannot honour: a 400 naming the keyword and the tool
  const badTools = [tools[0], { type: 'function', function: { name: 'odd', parameters: { type: 'object', if: { required: ['a'] } } } }];
  const b = await post(srv, '/v1/chat/completions', { messages, tools: badTools, tool_choice: 'required' });
  check(b.status === 400 && /'if'/.test(b.json?.error?.message) && /'odd'/.test(b.json?.error?.message) && b.json?.error?.param === 'tools',
    `unsupported keyword: want a 400 naming 'if' and 'odd', got ${b.status} ${b.text}`);
  // the same with the one tool (the converter's place then has no rule name in it)
  const solo = await post(srv, '/v1/chat/completions', { messages, tool_choice: 'required',
    tools: [{ type: 'function', function: { name: 'solo', parameters: { type: 'object', properties: { a: { not: {} } } } } }] });
  check(solo.status === 400 && /'not'/.test(solo.json?.error?.message) && /'solo'/.test(solo.json?.error?.message) &&
    /#\/properties\/a/.test(solo.json?.error?.message) && !/tool-\d/.test(solo.json?.error?.message),
    `unsupported keyword, one tool: want a 400 naming 'not', 'solo' and its place, got ${solo.status} ${solo.text}`);
  // a forced call with a grammar of the client's: refused, not one of them ignored
  const g = await post(srv, '/v1/chat/completions', { messages, tools, tool_choice: 'required', response_format: { type: 'json_object' } });
  check(g.status === 400 && g.json?.error?.param === 'tool_choice', `grammar clash: want a 400 on tool_choice, got ${g.status} ${g.text}`);
} finally {
  await stopServer(srv);
}
}
done();
