// Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens),
// driven by Anthropic's own client (@anthropic-ai/sdk from npm).  The
// reference for the request's translation is a plain one written here: each
// Anthropic conversation beside the OpenAI chat messages it means (system
// turn, text blocks, an assistant's thinking / text / tool_use, a user's
// tool_result and text), sent to /v1/chat/completions, whose rendering the
// template tests check against Python's jinja2.  Both must evaluate the same
// prompt (count_tokens equals the chat answer's prompt_tokens) and, greedy,
// answer the same text.  Qwen3's real template (it renders reasoning_content
// and tool calls) on tiny-qwen2, random weights.
//
// Answers: a plain message's and a stream's blocks (the client accumulates
// the events into the same message), the events' order and indices, a
// forced tool call (input passing the tool's schema in ajv, stop_reason
// tool_use, one block with disable_parallel_tool_use), stop_sequences
// (stop_reason "stop_sequence" naming the one that matched, the text cut
// before it, as the greedy answer without it shows), max_tokens, an
// assistant prefill (continued, against the template's rendering cut by
// hand), usage (input_tokens + cache_read_input_tokens is the prompt, a repeat reads
// from the cache), errors in Anthropic's shape and x-api-key (the pings of
// --keepalive: keepalive.test.mjs).
import path from 'node:path';
import { need, requireNpm, startServer, stopServer, post, check, eq, done, SHARED, WEATHER_SCHEMA, PICK_SCHEMA } from './lib.mjs';

need('shared');
const { default: Anthropic } = requireNpm('@anthropic-ai/sdk');
const { default: OpenAI } = requireNpm('openai');
const Ajv2020 = requireNpm('ajv/dist/2020').default;

const weather = WEATHER_SCHEMA;
const validWeather = new Ajv2020({ strict: true }).compile(weather);
const tools = [{ name: 'get_weather', description: 'Weather forecast', input_schema: weather }];
const openaiTools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather forecast', parameters: weather } }];

// One conversation in both APIs' words.
const anthropicTurns = {
  system: [{ type: 'text', text: 'You are terse.' }, { type: 'text', text: 'Answer in English.' }],
  messages: [
    { role: 'user', content: [{ type: 'text', text: 'Weather in Paris' }, { type: 'text', text: 'for 3 days?' }] },
    { role: 'assistant', content: [
      { type: 'thinking', thinking: 'The user wants a forecast.', signature: 'sig' },
      { type: 'text', text: 'Let me look.' },
      { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris', days: 3 } },
    ] },
    { role: 'user', content: [
      { type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: 'Sunny,' }, { type: 'text', text: '21 C' }] },
      { type: 'text', text: 'And tomorrow?' },
    ] },
  ],
};
const openaiTurns = [
  { role: 'system', content: 'You are terse.\nAnswer in English.' },
  { role: 'user', content: 'Weather in Paris\nfor 3 days?' },
  { role: 'assistant', content: 'Let me look.', reasoning_content: 'The user wants a forecast.',
    tool_calls: [{ id: 'toolu_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris","days":3}' } }] },
  { role: 'tool', tool_call_id: 'toolu_1', name: 'get_weather', content: 'Sunny,\n21 C' },
  { role: 'user', content: 'And tomorrow?' },
];
// An agent's loop: the last turn only the tool's result, so the template
// (Qwen3 shows reasoning after the last user query) renders the thinking.
const anthropicLoop = { system: 'Use tools.', messages: [
  { role: 'user', content: 'Weather in Lima?' },
  { role: 'assistant', content: [
    { type: 'thinking', thinking: 'I should call the tool.', signature: '' },
    { type: 'tool_use', id: 'toolu_2', name: 'get_weather', input: { city: 'Lima', days: 1 } },
  ] },
  { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_2', content: 'Fog' }] },
] };
const openaiLoop = [
  { role: 'system', content: 'Use tools.' },
  { role: 'user', content: 'Weather in Lima?' },
  { role: 'assistant', content: '', reasoning_content: 'I should call the tool.',
    tool_calls: [{ id: 'toolu_2', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Lima","days":1}' } }] },
  { role: 'tool', tool_call_id: 'toolu_2', name: 'get_weather', content: 'Fog' },
];

const template = path.join(SHARED, 'templates', 'src', 'Qwen-Qwen3-0.6B.jinja');
const srv = await startServer(['--chat-template-file', template, '-c', '2048', '--api-key', 'sekrit'],
  { model: path.join(SHARED, 'models', 'tiny-qwen2.gguf') });
const client = new Anthropic({ baseURL: srv.url, apiKey: 'sekrit', maxRetries: 0, timeout: 120000 });
const openai = new OpenAI({ baseURL: srv.url + '/v1', apiKey: 'sekrit', maxRetries: 0, timeout: 120000 });
const textOf = m => m.content.filter(b => b.type === 'text').map(b => b.text).join('');

try {
  // The translation against the hand-written OpenAI form: one prompt, one greedy answer.
  // (Anthropic's API thinks only when asked: the template's enable_thinking
  // is false unless thinking is enabled.)
  const thinkingOn = { thinking: { type: 'enabled', budget_tokens: 1024 } };
  const counts = {};
  for (const [what, a, o, think] of [
    ['a string turn', { messages: [{ role: 'user', content: 'Hello there' }] }, [{ role: 'user', content: 'Hello there' }], false],
    ['a string turn, thinking', { ...thinkingOn, messages: [{ role: 'user', content: 'Hello there' }] },
      [{ role: 'user', content: 'Hello there' }], true],
    ['the tool conversation', anthropicTurns, openaiTurns, false],
    ["an agent's loop", anthropicLoop, openaiLoop, false],
    ["an agent's loop, thinking", { ...thinkingOn, ...anthropicLoop }, openaiLoop, true],
  ]) {
    const withTools = what.includes('tool') || what.includes('agent');
    const count = await client.messages.countTokens({ model: 'x', ...a, ...(withTools ? { tools, tool_choice: { type: 'none' } } : {}) });
    const ref = await openai.chat.completions.create({ model: 'x', messages: o, ...(withTools ? { tools: openaiTools } : {}),
      max_tokens: 24, temperature: 0, tool_choice: 'none', chat_template_kwargs: { enable_thinking: think } });
    eq(count.input_tokens, ref.usage.prompt_tokens, `${what}: count_tokens against the OpenAI form's prompt_tokens`);
    counts[what] = count.input_tokens;
    const m = await client.messages.create({ model: 'x', ...a, ...(withTools ? { tools, tool_choice: { type: 'none' } } : {}),
      max_tokens: 24, temperature: 0 });
    eq(m.usage.input_tokens + m.usage.cache_read_input_tokens, ref.usage.prompt_tokens, `${what}: usage's prompt`);
    eq(textOf(m), ref.choices[0].message.content ?? '', `${what}: the greedy answer against the OpenAI form's`);
    eq([m.type, m.role, m.id.startsWith('msg_')], ['message', 'assistant', true], `${what}: the message's head`);
    eq(m.usage.output_tokens, ref.usage.completion_tokens, `${what}: output_tokens`);
  }

  // GET /v1/models as Anthropic's list (the page the client walks).
  const models = [];
  for await (const m of client.models.list()) models.push(m);
  eq(models.map(m => [m.type, m.id, m.display_name]), [['model', 'tiny-qwen2.gguf', 'tiny-qwen2.gguf']], 'models.list()');
  check(!Number.isNaN(Date.parse(models[0]?.created_at)), `created_at is a date: ${models[0]?.created_at}`);

  check(counts['a string turn'] !== counts['a string turn, thinking'],
    `thinking on and off render differently (Qwen3's empty think block): ${JSON.stringify(counts)}`);

  // A repeat reads its prompt from the cache.
  const again = await client.messages.create({ model: 'x', ...anthropicTurns, tools, tool_choice: { type: 'none' },
    max_tokens: 4, temperature: 0 });
  check(again.usage.cache_read_input_tokens > 0, `a repeated prompt: cache_read_input_tokens ${again.usage.cache_read_input_tokens}`);

  // Forced tool calls, plain and streamed: valid input, stop_reason tool_use.
  // (Anthropic's API has no seed: each try samples anew; one call each, so
  // that several cannot outgrow max_tokens.)
  for (const [seed, temperature] of [[1, 1], [2, 1.5], [3, 0.7]]) {
    const tool_choice = seed === 2 ? { type: 'tool', name: 'get_weather', disable_parallel_tool_use: true }
      : { type: 'any', disable_parallel_tool_use: true };
    const req = { model: 'x', messages: [{ role: 'user', content: 'Weather in Lima?' }], tools, tool_choice, max_tokens: 400,
      temperature, metadata: { user_id: 'u1' } };
    for (const [how, m] of [['plain', await client.messages.create(req)], ['stream', await client.messages.stream(req).finalMessage()]]) {
      const uses = m.content.filter(b => b.type === 'tool_use');
      eq(m.stop_reason, 'tool_use', `try ${seed} ${how}: stop_reason`);
      check(uses.length === 1, `try ${seed} ${how}: one tool_use block: ${JSON.stringify(m.content)}`);
      for (const u of uses) {
        eq(u.name, 'get_weather', `try ${seed} ${how}: the tool`);
        check(validWeather(u.input), `try ${seed} ${how}: input ${JSON.stringify(u.input)} passes the schema`);
        check(typeof u.id === 'string' && u.id.length > 0, `try ${seed} ${how}: an id`);
      }
    }
  }

  // Structured output (output_config.format): every answer parses and
  // passes the schema, from a random model.
  const shape = PICK_SCHEMA;
  const validShape = new Ajv2020({ strict: true }).compile(shape);
  for (const temperature of [1, 1.5]) {
    const m = await client.messages.create({ model: 'x', max_tokens: 200, temperature,
      messages: [{ role: 'user', content: 'Pick a city' }], output_config: { format: { type: 'json_schema', schema: shape } } });
    let v = null;
    try { v = JSON.parse(textOf(m)); } catch { /* checked below */ }
    check(v !== null && validShape(v), `structured output at T ${temperature}: ${textOf(m)} passes the schema`);
    eq(m.stop_reason, 'end_turn', `structured output at T ${temperature}: ends by itself`);
  }

  // Errors, in Anthropic's shape, through the client and raw.
  const refused = async (req, status, type, words, what) => {
    try {
      await client.messages.create(req);
      check(false, `${what}: accepted`);
    } catch (e) {
      eq([e.status, e.error?.type, e.error?.error?.type], [status, 'error', type], `${what}: status and shape`);
      check(String(e.error?.error?.message).includes(words), `${what}: the message names ${words}: ${e.error?.error?.message}`);
    }
  };
  // Agents' tool schemas use keywords the converter does not know (format
  // "uri", uniqueItems): under tool_choice auto the call grammar takes them
  // as no constraint, saying so in the log; forced, they are a 400.
  const fetchTool = { name: 'fetch', description: 'Fetch a page', input_schema: { type: 'object', properties: {
    url: { type: 'string', format: 'uri' }, tags: { type: 'array', uniqueItems: true, items: { type: 'string' } } },
    required: ['url'] } };
  // (two tools: the log names each, not the grammar's rule tool-K)
  const tagger = { name: 'tagger', input_schema: { type: 'object', propertyNames: { pattern: '^a' } } };
  const auto = await client.messages.create({ model: 'x', max_tokens: 8, tools: [fetchTool, tagger],
    messages: [{ role: 'user', content: 'Fetch example.com' }] });
  eq(auto.type, 'message', 'tool_choice auto with format uri and uniqueItems: answered');
  const autoChat = await post(srv, '/v1/chat/completions', { max_tokens: 8, messages: [{ role: 'user', content: 'x' }],
    tools: [{ type: 'function', function: { name: 'fetch', parameters: fetchTool.input_schema } }] },
    { Authorization: 'Bearer sekrit' });
  eq(autoChat.status, 200, 'the same tool on the chat endpoint, auto: 200');
  check(/note: tool_choice auto holds calls to their tools' schemas but for fetch#\/properties\/url: format 'uri', fetch#\/properties\/tags: keyword 'uniqueItems'/
    .test(srv.stderr) && /but for fetch#\/properties\/url: format 'uri', fetch#\/properties\/tags: keyword 'uniqueItems', tagger#: keyword 'propertyNames'/
    .test(srv.stderr), `the log says what is not held: ${srv.stderr.split('\n').filter(l => l.includes('note:'))[0]}`);
  await refused({ model: 'x', max_tokens: 8, tools: [fetchTool], tool_choice: { type: 'any' },
    messages: [{ role: 'user', content: 'x' }] }, 400, 'invalid_request_error', "format 'uri'", 'format uri, forced');

  await refused({ model: 'x', messages: [{ role: 'user', content: 'hi' }] }, 400, 'invalid_request_error', 'max_tokens',
    'no max_tokens');
  await refused({ model: 'x', max_tokens: 5, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64',
    media_type: 'image/png', data: 'AA==' } }] }] }, 400, 'invalid_request_error', "'image'", 'an image block');
  await refused({ model: 'x', max_tokens: 5, tools: [{ type: 'web_search_20250305', name: 'web_search' }],
    messages: [{ role: 'user', content: 'hi' }] }, 400, 'invalid_request_error', 'web_search_20250305', 'a server tool');
  await refused({ model: 'x', max_tokens: 5, messages: [{ role: 'system', content: 'hi' }] }, 400, 'invalid_request_error',
    "top-level 'system'", 'a system role in messages');
  await refused({ model: 'x', max_tokens: 5, messages: [{ role: 'user', content: [{ type: 'tool_use', id: 'a', name: 'b',
    input: {} }] }] }, 400, 'invalid_request_error', "'tool_use' block cannot be in a user turn", 'tool_use from the user');
  await refused({ model: 'x', max_tokens: null, messages: [{ role: 'user', content: 'hi' }] }, 400,
    'invalid_request_error', 'max_tokens', 'max_tokens null');
  await refused({ model: 'x', max_tokens: 5, messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'a',
    content: [{ type: 'image', source: {} }] }] }] }, 400, 'invalid_request_error', "'image'", 'an image in a tool result');
  await refused({ model: 'x', max_tokens: 5, stop_sequences: ['a', 'b', 'c', 'd', 'e'], messages: [{ role: 'user',
    content: 'hi' }] }, 400, 'invalid_request_error', 'stop_sequences', 'five stop sequences');
  await refused({ model: 'x', max_tokens: 5, tools, tool_choice: { type: 'tool', name: 'nope' },
    messages: [{ role: 'user', content: 'hi' }] }, 400, 'invalid_request_error', "'nope'", 'a tool_choice naming no tool');

  const noKey = await post(srv, '/v1/messages', { model: 'x', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] });
  eq([noKey.status, noKey.json?.type, noKey.json?.error?.type], [401, 'error', 'authentication_error'], 'no key: 401, Anthropic-shaped');
  // (Claude Code asks /v1/messages?beta=true: the query names the same endpoint)
  const xKey = await post(srv, '/v1/messages?beta=true', { model: 'x', max_tokens: 5, messages: [{ role: 'user',
    content: 'hi' }] }, { 'x-api-key': 'sekrit', 'anthropic-version': '2023-06-01' });
  eq([xKey.status, xKey.json?.type, xKey.json?.content?.[0]?.type], [200, 'message', 'text'], 'x-api-key: 200');
  const badJson = await post(srv, '/v1/messages', '{"max_tokens": 5,', { 'x-api-key': 'sekrit' });
  eq([badJson.status, badJson.json?.type, badJson.json?.error?.type], [400, 'error', 'invalid_request_error'], 'malformed JSON');
  const nowhere = await post(srv, '/v1/messages/batches', {}, { 'x-api-key': 'sekrit' });
  eq([nowhere.status, nowhere.json?.type, nowhere.json?.error?.type], [404, 'error', 'not_found_error'],
    'a path beside /v1/messages: 404, Anthropic-shaped');
  const huge = await fetch(srv.url + '/v1/messages', { method: 'POST', headers: { 'x-api-key': 'sekrit' },
    body: 'x'.repeat(9 << 20) }).then(async r => [r.status, (await r.json()).error?.type]).catch(e => [String(e)]);
  eq(huge, [413, 'request_too_large'], 'a body over --max-body: 413, Anthropic-shaped');
  const get = await fetch(srv.url + '/v1/messages', { headers: { 'x-api-key': 'sekrit' } });
  const getJson = await get.json();
  eq([get.status, getJson.type, getJson.error?.type], [405, 'error', 'invalid_request_error'], 'GET /v1/messages: 405');
  const oaiErr = await post(srv, '/v1/chat/completions', { messages: 'x' }, { Authorization: 'Bearer sekrit' });
  check(oaiErr.status === 400 && oaiErr.json?.error?.message && oaiErr.json?.type === undefined,
    `the OpenAI endpoints keep OpenAI's error shape: ${oaiErr.text}`);
} finally {
  await stopServer(srv);
}
check(/ 200 messages: 1 choice, prompt \d+ tokens/.test(srv.stderr), 'the log has a messages line');
check(/ 200 stream messages: /.test(srv.stderr), 'the log has a streamed messages line');

// Streams and stop sequences on a model whose greedy answer is varied text
// (tiny-qwen2's is newlines): stories260K, the built-in template.
const srv2 = await startServer(['-c', '512']);
const client2 = new Anthropic({ baseURL: srv2.url, apiKey: 'none', maxRetries: 0, timeout: 120000 });
try {
  // Streams: the events in order, and the client's accumulated message equals the plain answer.
  const plain = await client2.messages.create({ model: 'x', messages: [{ role: 'user', content: 'Tell me a story' }],
    max_tokens: 30, temperature: 0 });
  const stream = client2.messages.stream({ model: 'x', messages: [{ role: 'user', content: 'Tell me a story' }],
    max_tokens: 30, temperature: 0 });
  const events = [];
  stream.on('streamEvent', e => events.push(e));
  const streamed = await stream.finalMessage();
  eq(streamed.content, plain.content, 'a stream accumulates to the plain answer');
  eq([streamed.stop_reason, plain.stop_reason], ['max_tokens', 'max_tokens'], 'stop_reason at max_tokens');
  eq(streamed.usage.output_tokens, 30, 'a stream: output_tokens');
  eq(events[0]?.type, 'message_start', 'the first event');
  eq(events.at(-1)?.type, 'message_stop', 'the last event');
  eq(events.at(-2)?.type, 'message_delta', 'message_delta before message_stop');
  let open = -1, started = 0, order = true;
  for (const e of events.slice(1, -2)) {
    if (e.type === 'content_block_start') { order &&= open === -1 && e.index === started; open = e.index; started++; }
    else if (e.type === 'content_block_delta') order &&= e.index === open;
    else if (e.type === 'content_block_stop') { order &&= e.index === open; open = -1; }
    else order = false;
  }
  check(order && open === -1 && started > 0, `blocks start, grow and stop in index order: ${JSON.stringify(events.map(e => [e.type, e.index]))}`);

  // stop_sequences: the greedy answer cut before the first that matches.
  const full = textOf(plain);
  let at = 3;
  while (at < full.length - 2 && full.indexOf(full.slice(at, at + 2)) !== at) at++;
  const seq = full.slice(at, at + 2);
  check(at < full.length - 2, `a stop sequence from the answer ${JSON.stringify(full)}`);
  const cut = await client2.messages.create({ model: 'x', messages: [{ role: 'user', content: 'Tell me a story' }],
    max_tokens: 30, temperature: 0, stop_sequences: ['\u0001never', seq] });
  eq([cut.stop_reason, cut.stop_sequence, textOf(cut)], ['stop_sequence', seq, full.slice(0, full.indexOf(seq))],
    `stop_sequences [.., ${JSON.stringify(seq)}]`);
  const cutStream = await client2.messages.stream({ model: 'x', messages: [{ role: 'user', content: 'Tell me a story' }],
    max_tokens: 30, temperature: 0, stop_sequences: [seq] }).finalMessage();
  eq([cutStream.stop_reason, cutStream.stop_sequence], ['stop_sequence', seq], 'a stream names its stop sequence');
  eq(plain.stop_sequence, null, 'no stop sequence: null');


  // Hostile sizes: a turn of many text blocks, and many tool results after
  // as many calls, cost in proportion (n and 4n: linear is 4x the time,
  // the quadratic versions were 16x: 100 000 blocks took 55 s, 40 000
  // results 34 s, now about 1 s).
  const blocks = n => ({ messages: [{ role: 'user', content: Array.from({ length: n }, () => ({ type: 'text', text: 'a' })) }] });
  const results = n => ({ messages: [{ role: 'user', content: 'q' },
    { role: 'assistant', content: Array.from({ length: n }, (_, i) => ({ type: 'tool_use', id: `t${i}`, name: 'f', input: {} })) },
    { role: 'user', content: Array.from({ length: n }, (_, i) => ({ type: 'tool_result', tool_use_id: `t${n - 1 - i}` })) }] });
  for (const [what, make, n] of [['text blocks in a turn', blocks, 20000], ['tool results', results, 10000]]) {
    const secs = [];
    for (const k of [n, 4 * n]) {
      const t0 = Date.now();
      const r = await client2.messages.countTokens({ model: 'x', ...make(k) });
      secs.push((Date.now() - t0) / 1000);
      check(r.input_tokens > k, `${k} ${what}: counted (${r.input_tokens} tokens)`);
    }
    check(secs[1] < 10 * Math.max(secs[0], 0.05), `${what}: 4x the blocks took ${(secs[1] / secs[0]).toFixed(1)}x the time (${secs})`);
  }

  // A final assistant turn is a prefill: the answer continues its text.  The
  // reference: the template's whole rendering (/apply-template, no new
  // turn) cut by hand after that text, continued greedily by /v1/completions.
  const convo = [{ role: 'user', content: 'Tell me a story' }, { role: 'assistant', content: 'Once upon a time' }];
  const whole = (await post(srv2, '/apply-template', { messages: convo, add_generation_prompt: false })).json.prompt;
  const cutPrompt = whole.slice(0, whole.lastIndexOf('Once upon a time') + 'Once upon a time'.length);
  check(cutPrompt.length < whole.length, `the rendering ends the turn after the prefill: ${JSON.stringify(whole)}`);
  const refText = (await post(srv2, '/v1/completions', { prompt: cutPrompt, max_tokens: 12, temperature: 0 })).json
    .choices[0].text;
  const pre = await client2.messages.create({ model: 'x', messages: convo, max_tokens: 12, temperature: 0 });
  eq(textOf(pre), refText, 'a prefill: the answer continues it, as the cut prompt does');
  const preCount = await client2.messages.countTokens({ model: 'x', messages: convo });
  eq(preCount.input_tokens, pre.usage.input_tokens + pre.usage.cache_read_input_tokens, 'a prefill: count_tokens');
  const chatPre = (await post(srv2, '/v1/chat/completions', { messages: convo, max_tokens: 12, temperature: 0,
    continue_final_message: true })).json;
  eq(chatPre.choices?.[0]?.message?.content, refText, 'continue_final_message on the chat endpoint');
  const both = await post(srv2, '/v1/chat/completions', { messages: convo, max_tokens: 2, continue_final_message: true,
    add_generation_prompt: true });
  eq([both.status, both.json?.error?.param], [400, 'continue_final_message'], 'continue_final_message with add_generation_prompt');
} finally {
  await stopServer(srv2);
}

done();
