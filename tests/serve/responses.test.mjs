// OpenAI's Responses API (POST /v1/responses), driven by OpenAI's own client
// (responses.create and responses.stream of openai from npm, whose stream
// helper checks the events' order and indices as it accumulates them).
// The reference for the request's translation is a plain one written here:
// each conversation beside the chat messages it means (instructions, input
// parts, reasoning before an assistant's text and calls, call outputs),
// sent to /v1/chat/completions, whose rendering the template tests check
// against Python's jinja2.  Both must evaluate the same prompt (input_tokens
// equals the chat answer's prompt_tokens) and, greedy, answer the same text.
// Qwen3's real template (it renders reasoning_content and tool calls) on
// tiny-qwen2, random weights.
//
// Answers: a plain response's and a stream's items (the stream's deltas add
// up to its final response, which equals the plain answer), forced tool
// calls (arguments passing the tool's schema in ajv, each call a
// function_call item), an agent's turn (the answer's output items sent back
// as input with the call's result), structured output (text.format json_schema),
// max_output_tokens (status incomplete), usage and the prompt cache,
// /v1/responses/input_tokens (the prompt's count), and errors in OpenAI's
// shape through the client.
import path from 'node:path';
import { need, requireNpm, startServer, stopServer, post, check, eq, done, SHARED, WEATHER_SCHEMA, PICK_SCHEMA } from './lib.mjs';

need('shared');
const { default: OpenAI } = requireNpm('openai');
const Ajv2020 = requireNpm('ajv/dist/2020').default;

const weather = WEATHER_SCHEMA;
const validWeather = new Ajv2020({ strict: true }).compile(weather);
const tools = [{ type: 'function', name: 'get_weather', description: 'Weather forecast', parameters: weather, strict: true }];
const chatTools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather forecast', parameters: weather,
  strict: true } }];

// One conversation in both APIs' words.
const input = [
  { role: 'user', content: [{ type: 'input_text', text: 'Weather in Paris ' }, { type: 'input_text', text: 'for 3 days?' }] },
  { type: 'reasoning', id: 'rs_1', summary: [], content: [{ type: 'reasoning_text', text: 'The user wants a forecast.' }] },
  { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Let me look.' }] },
  { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris","days":3}' },
  { type: 'function_call_output', call_id: 'call_1', output: 'Sunny, 21 C' },
  { role: 'user', content: 'And tomorrow?' },
];
const chatTurns = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'Weather in Paris for 3 days?' },
  { role: 'assistant', content: 'Let me look.', reasoning_content: 'The user wants a forecast.',
    tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris","days":3}' } }] },
  { role: 'tool', tool_call_id: 'call_1', name: 'get_weather', content: 'Sunny, 21 C' },
  { role: 'user', content: 'And tomorrow?' },
];
// An agent's loop: calls alone, then their outputs (Qwen3 renders the
// reasoning after the last user query).
const loopInput = [
  { role: 'user', content: 'Weather in Lima?' },
  { type: 'reasoning', summary: [{ type: 'summary_text', text: 'I should call the tool.' }] },
  { type: 'function_call', call_id: 'call_2', name: 'get_weather', arguments: '{"city":"Lima","days":1}' },
  { type: 'function_call_output', call_id: 'call_2', output: [{ type: 'input_text', text: 'Fog' }] },
];
const loopChat = [
  { role: 'user', content: 'Weather in Lima?' },
  { role: 'assistant', content: '', reasoning_content: 'I should call the tool.',
    tool_calls: [{ id: 'call_2', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Lima","days":1}' } }] },
  { role: 'tool', tool_call_id: 'call_2', name: 'get_weather', content: 'Fog' },
];

const template = path.join(SHARED, 'templates', 'src', 'Qwen-Qwen3-0.6B.jinja');
const srv = await startServer(['--chat-template-file', template, '-c', '2048', '--api-key', 'sekrit'],
  { model: path.join(SHARED, 'models', 'tiny-qwen2.gguf') });
const client = new OpenAI({ baseURL: srv.url + '/v1', apiKey: 'sekrit', maxRetries: 0, timeout: 120000 });
const textOf = r => r.output.filter(i => i.type === 'message').flatMap(i => i.content).map(p => p.text).join('');

try {
  // The translation against the hand-written chat form: one prompt, one greedy answer.
  for (const [what, req, chat] of [
    ['a string input', { input: 'Hello there' }, [{ role: 'user', content: 'Hello there' }]],
    ['the tool conversation', { instructions: 'You are terse.', input, tools }, chatTurns],
    ["an agent's loop", { input: loopInput, tools }, loopChat],
  ]) {
    const withTools = !!req.tools;
    const ref = await client.chat.completions.create({ model: 'x', messages: chat, ...(withTools ? { tools: chatTools } : {}),
      max_tokens: 24, temperature: 0, tool_choice: 'none' });
    const r = await client.responses.create({ model: 'x', ...req, max_output_tokens: 24, temperature: 0, tool_choice: 'none',
      store: false });
    eq(r.usage.input_tokens, ref.usage.prompt_tokens, `${what}: input_tokens against the chat form's prompt_tokens`);
    const count = await post(srv, '/v1/responses/input_tokens', { model: 'x', ...req, tool_choice: 'none' },
      { Authorization: 'Bearer sekrit' });
    eq([count.status, count.json?.object, count.json?.input_tokens], [200, 'response.input_tokens', ref.usage.prompt_tokens],
      `${what}: /v1/responses/input_tokens`);
    eq(r.output_text, ref.choices[0].message.content ?? '', `${what}: the greedy answer against the chat form's`);
    eq(r.usage.output_tokens, ref.usage.completion_tokens, `${what}: output_tokens`);
    eq([r.object, r.id.startsWith('resp_'), r.status], ['response', true,
      ref.choices[0].finish_reason === 'length' ? 'incomplete' : 'completed'], `${what}: the response's head`);
    if (r.status === 'incomplete') eq(r.incomplete_details, { reason: 'max_output_tokens' }, `${what}: why incomplete`);
    // streamed: the deltas add up to the final response, which is the plain one
    const s = client.responses.stream({ model: 'x', ...req, max_output_tokens: 24, temperature: 0, tool_choice: 'none' });
    let deltas = '';
    const types = [];
    s.on('response.output_text.delta', e => { deltas += e.delta; });
    s.on('event', e => types.push(e.type));
    const final = await s.finalResponse();
    eq(deltas, r.output_text, `${what}: the stream's deltas`);
    eq(types[0], 'response.created', `${what}: the stream opens with response.created`);
    eq(types.at(-1), r.status === 'incomplete' ? 'response.incomplete' : 'response.completed', `${what}: the stream's end`);
    if (r.status === 'completed') eq(final.output_text, r.output_text, `${what}: the stream's final response`);
  }

  // A repeat reads its prompt from the cache.
  const again = await client.responses.create({ model: 'x', instructions: 'You are terse.', input, tools, tool_choice: 'none',
    max_output_tokens: 4, temperature: 0 });
  check(again.usage.input_tokens_details.cached_tokens > 0,
    `a repeated prompt: cached_tokens ${again.usage.input_tokens_details.cached_tokens}`);

  // Forced tool calls, plain and streamed: function_call items whose
  // arguments pass the schema, and nothing else called.
  for (const [temperature, tool_choice] of [[1, 'required'], [1.5, { type: 'function', name: 'get_weather' }], [0.7, 'required']]) {
    const req = { model: 'x', input: 'Weather in Lima?', tools, tool_choice, parallel_tool_calls: false, max_output_tokens: 400,
      temperature };
    for (const [how, r] of [['plain', await client.responses.create(req)], ['stream', await client.responses.stream(req).finalResponse()]]) {
      const calls = r.output.filter(i => i.type === 'function_call');
      eq(r.status, 'completed', `T ${temperature} ${how}: status`);
      check(calls.length === 1, `T ${temperature} ${how}: one function_call item: ${JSON.stringify(r.output)}`);
      for (const c of calls) {
        eq(c.name, 'get_weather', `T ${temperature} ${how}: the tool`);
        let args = null;
        try { args = JSON.parse(c.arguments); } catch { /* checked below */ }
        check(args !== null && validWeather(args), `T ${temperature} ${how}: arguments ${c.arguments} pass the schema`);
        check(typeof c.call_id === 'string' && c.call_id.length > 0 && c.id.startsWith('fc_'), `T ${temperature} ${how}: ids`);
      }
    }
  }

  // An agent's turn: the answer's own output items sent back as input with
  // the call's result (as OpenAI's docs show: input.concat(r.output)), which
  // must mean the chat messages written from those items by hand.
  {
    const first = await client.responses.create({ model: 'x', input: 'Weather in Tokyo?', tools, tool_choice: 'required',
      parallel_tool_calls: false, max_output_tokens: 400, temperature: 1 });
    const call = first.output.find(i => i.type === 'function_call');
    check(call !== undefined, `an agent's turn: a call to answer: ${JSON.stringify(first.output)}`);
    const input2 = [{ role: 'user', content: 'Weather in Tokyo?' }, ...first.output,
      { type: 'function_call_output', call_id: call?.call_id, output: 'Rain' }];
    const again = await client.responses.create({ model: 'x', input: input2, tools, tool_choice: 'none', max_output_tokens: 16,
      temperature: 0 });
    const texts = k => first.output.filter(i => i.type === k).flatMap(i => i.content).map(p => p.text).join('');
    const assistant = { role: 'assistant', content: texts('message'),
      tool_calls: first.output.filter(i => i.type === 'function_call')
        .map(i => ({ id: i.call_id, type: 'function', function: { name: i.name, arguments: i.arguments } })) };
    if (texts('reasoning')) assistant.reasoning_content = texts('reasoning');
    const ref = await client.chat.completions.create({ model: 'x', tools: chatTools, tool_choice: 'none', max_tokens: 16,
      temperature: 0, messages: [{ role: 'user', content: 'Weather in Tokyo?' }, assistant,
        { role: 'tool', tool_call_id: call?.call_id, name: 'get_weather', content: 'Rain' }] });
    eq([again.usage.input_tokens, again.output_text], [ref.usage.prompt_tokens, ref.choices[0].message.content ?? ''],
      "an agent's turn: the output items sent back mean the chat messages written from them");
  }

  // Structured output (text.format json_schema): every answer parses and
  // passes the schema, from a random model.
  const shape = PICK_SCHEMA;
  const validShape = new Ajv2020({ strict: true }).compile(shape);
  for (const temperature of [1, 1.5]) {
    const r = await client.responses.create({ model: 'x', max_output_tokens: 200, temperature, input: 'Pick a city',
      text: { format: { type: 'json_schema', name: 'pick', schema: shape, strict: true } } });
    let v = null;
    try { v = JSON.parse(r.output_text); } catch { /* checked below */ }
    check(v !== null && validShape(v), `structured output at T ${temperature}: ${r.output_text} passes the schema`);
    eq(r.status, 'completed', `structured output at T ${temperature}: ends by itself`);
  }

  // max_output_tokens cuts the answer: incomplete, as many tokens as asked.
  const cut = await client.responses.create({ model: 'x', input: 'Tell me a story', max_output_tokens: 3, temperature: 0 });
  eq([cut.status, cut.incomplete_details?.reason, cut.usage.output_tokens], ['incomplete', 'max_output_tokens', 3],
    'max_output_tokens 3');

  // Errors, in OpenAI's shape, through the client.
  const refused = async (req, param, words, what) => {
    try {
      await client.responses.create({ model: 'x', ...req });
      check(false, `${what}: accepted`);
    } catch (e) {
      eq([e.status, e.error?.type, e.error?.param], [400, 'invalid_request_error', param], `${what}: status and shape`);
      check(String(e.error?.message).includes(words), `${what}: the message names ${words}: ${e.error?.message}`);
    }
  };
  await refused({ input: 'x', previous_response_id: 'resp_1' }, 'previous_response_id', 'keeps no responses',
    'previous_response_id');
  await refused({ input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'https://example.com/a.png' }] }] },
    'input', "'input_image'", 'an image');
  await refused({ input: 'x', tools: [{ type: 'web_search' }] }, 'tools', "'web_search' tool", 'a built-in tool');
  await refused({ input: 'x', max_output_tokens: 0 }, 'max_output_tokens', 'whole number', 'max_output_tokens 0');
  const noKey = await post(srv, '/v1/responses', { model: 'x', input: 'x' });
  eq([noKey.status, noKey.json?.error?.type], [401, 'authentication_error'], 'no API key: a 401 of OpenAI\'s shape');
} finally {
  await stopServer(srv);
}

done();
