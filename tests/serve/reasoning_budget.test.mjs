// Reasoning budgets and reasoning token counts: llama.cpp's per-request
// thinking_budget_tokens on /v1/chat/completions, Anthropic's
// thinking.budget_tokens on /v1/messages, and the server's
// --reasoning-budget; thinking_budget_message / --reasoning-budget-message; usage's completion_tokens_details.reasoning_tokens
// (chat) and output_tokens_details.reasoning_tokens (Responses); a
// json_schema answer after the reasoning.
// QwQ's real template, whose prompt leaves <think> open, on stories260K (a
// trained tiny model: greedy, it writes text and never "</think>").
//
// The references are written here: the budgeted answer's first N tokens are
// the free answer's (greedy), then come the template's closing markup,
// "\n</think>\n\n", token by token, then the content equals the greedy
// continuation of the raw prompt with that text appended, from
// /v1/completions; reasoning_tokens is the count of tokens up to the one
// that completes "</think>", read off the answer's own logprobs tokens.
import path from 'node:path';
import { need, requireNpm, startServer, stopServer, post, check, eq, done, SHARED } from './lib.mjs';

need('shared');
const Ajv2020 = requireNpm('ajv/dist/2020').default;
const validA = new Ajv2020({ strict: true }).compile({ type: 'object', properties: { a: { type: 'string', maxLength: 10 } },
  required: ['a'], additionalProperties: false });

const N = 8, MAX = 40;
const FORCE = '\n</think>\n\n';
const template = path.join(SHARED, 'templates', 'src', 'Qwen-QwQ-32B.jinja');
const model = path.join(SHARED, 'models', 'stories260K.gguf');
const messages = [{ role: 'user', content: 'Once upon a time' }];
const kw = { chat_template_kwargs: { enable_thinking: true } };

const tokensOf = r => r.json.choices[0].logprobs.content.map(t => t.token);

let srv = await startServer(['--chat-template-file', template], { model });
try {
  const chat = extra => post(srv, '/v1/chat/completions',
    { messages, max_tokens: MAX, temperature: 0, logprobs: true, ...kw, ...extra });

  // No budget: the whole answer is reasoning (the prompt opened <think>).
  const free = await chat({});
  eq(free.status, 200, 'a free answer');
  const freeText = tokensOf(free).join('');
  check(!freeText.includes('</think>'), 'the free answer never closes its reasoning');
  eq(free.json.usage.completion_tokens_details, { reasoning_tokens: MAX }, 'free: every token is reasoning');
  eq(free.json.choices[0].message.content, '', 'free: no content');

  // thinking_budget_tokens N against the free answer cut at N.
  const cut = await chat({ max_tokens: N });
  const b = await chat({ thinking_budget_tokens: N });
  eq(b.status, 200, 'a budgeted answer');
  const toks = tokensOf(b);
  eq(toks.length, MAX, 'the budgeted answer runs to max_tokens');
  eq(toks.slice(0, N), tokensOf(cut), 'its first N tokens are the free answer\'s');
  let forced = 0, closedAt = -1;
  for (let i = N, s = ''; i < toks.length && s.length < FORCE.length; i++, forced++) {
    s += toks[i];
    if (closedAt < 0 && s.includes('</think>')) closedAt = i;
  }
  eq(toks.slice(N, N + forced).join(''), FORCE, 'then the template\'s closing markup, "\\n</think>\\n\\n", whole tokens');
  const m = b.json.choices[0].message;
  eq(m.reasoning_content, cut.json.choices[0].message.reasoning_content, 'reasoning_content: the free answer\'s N tokens');
  eq(b.json.usage.completion_tokens_details, { reasoning_tokens: closedAt + 1 },
    'reasoning_tokens: up to the token that closes </think>');
  eq(b.json.choices[0].finish_reason, 'length', 'finish_reason length');
  const rendered = (await post(srv, '/apply-template', { messages, ...kw })).json.prompt;
  const ref = await post(srv, '/v1/completions', { prompt: rendered + tokensOf(cut).join('') + FORCE,
    max_tokens: MAX - N - forced, temperature: 0 });
  eq(ref.status, 200, 'the reference continuation');
  check(m.content.length > 0, `the budgeted answer has content: ${JSON.stringify(m.content)}`);
  eq(m.content, ref.json.choices[0].text.replace(/^\s+/, ''), 'content: the raw prompt\'s greedy continuation after the markup');

  // Structured output from a reasoning model: the schema holds what follows
  // the reasoning (the grammar skips the block the prompt opened), so the
  // budgeted answer thinks N tokens, then answers JSON that passes the
  // schema (from its first token the grammar put the JSON inside the
  // reasoning, and content was empty).
  const schema = { type: 'object', properties: { a: { type: 'string', maxLength: 10 } }, required: ['a'],
    additionalProperties: false };
  const js = await chat({ max_tokens: 100, thinking_budget_tokens: N, response_format: { type: 'json_schema',
    json_schema: { name: 'x', schema } } });
  const jm = js.json.choices[0].message;
  eq(jm.reasoning_content, cut.json.choices[0].message.reasoning_content, 'json_schema: the reasoning is the free answer\'s N tokens');
  let parsed = null;
  try { parsed = JSON.parse(jm.content); } catch { /* checked below */ }
  check(parsed && validA(parsed), `json_schema: the content passes the schema: ${JSON.stringify(jm.content)}`);
  eq(js.json.choices[0].finish_reason, 'stop', 'json_schema: the answer ends with the JSON');

  // thinking_budget_message: text written before the markup, as the model's
  // own (llama.cpp's name); the content continues from both.
  const MSG = ' Time to answer.';
  const wm = await chat({ thinking_budget_tokens: N, thinking_budget_message: MSG });
  const wt = tokensOf(wm);
  eq(wt.slice(0, N), tokensOf(cut), 'with a message: the first N tokens are the free answer\'s');
  let wf = 0;
  for (let s = ''; N + wf < wt.length && s.length < MSG.length + FORCE.length; wf++) s += wt[N + wf];
  eq(wt.slice(N, N + wf).join(''), MSG + FORCE, 'with a message: the message, then the markup');
  eq(wm.json.choices[0].message.reasoning_content, (tokensOf(cut).join('') + MSG).trim(), 'with a message: the reasoning ends with it');
  const wref = await post(srv, '/v1/completions', { prompt: rendered + tokensOf(cut).join('') + MSG + FORCE,
    max_tokens: MAX - N - wf, temperature: 0 });
  eq(wm.json.choices[0].message.content, wref.json.choices[0].text.replace(/^\s+/, ''), 'with a message: content continues from it');

  // Budget 0: reasoning ends before it starts.
  const z = await chat({ thinking_budget_tokens: 0 });
  eq(z.json.choices[0].message.reasoning_content ?? '', '', 'budget 0: no reasoning');
  eq(tokensOf(z).slice(0, forced).join(''), FORCE, 'budget 0: the markup first');
  eq(z.json.usage.completion_tokens_details, { reasoning_tokens: closedAt + 1 - N }, 'budget 0: only the markup counts');

  // A stream gets the same answer in pieces.
  const st = await fetch(srv.url + '/v1/chat/completions', { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ messages, max_tokens: MAX, temperature: 0, thinking_budget_tokens: N, stream: true,
      stream_options: { include_usage: true }, ...kw }) });
  let sr = '', sc = '', usage = null;
  for (const line of (await st.text()).split('\n')) {
    if (!line.startsWith('data: {')) continue;
    const ev = JSON.parse(line.slice(6));
    if (ev.usage) usage = ev.usage;
    const d = ev.choices?.[0]?.delta;
    if (d?.reasoning_content) sr += d.reasoning_content;
    if (d?.content) sc += d.content;
  }
  eq([sr, sc], [m.reasoning_content, m.content], 'a stream: the same reasoning and content');
  eq(usage?.completion_tokens_details, b.json.usage.completion_tokens_details, 'a stream: the same reasoning_tokens');

  // Anthropic's budget_tokens is the same budget (thinking enabled is enable_thinking).
  const a = await post(srv, '/v1/messages', { model: 'x', messages, max_tokens: MAX, temperature: 0,
    thinking: { type: 'enabled', budget_tokens: N } });
  eq(a.status, 200, 'Anthropic: budget_tokens');
  eq(a.json.content.map(c => c.type), ['thinking', 'text'], 'Anthropic: a thinking block, then text');
  eq([a.json.content[0].thinking, a.json.content[1].text], [m.reasoning_content, m.content], 'Anthropic: the chat answer\'s blocks');

  // Bad budgets name the field.
  for (const [what, body, param] of [
    ['-2', { thinking_budget_tokens: -2 }, 'thinking_budget_tokens'],
    ['1.5', { thinking_budget_tokens: 1.5 }, 'thinking_budget_tokens'],
    ['a string', { thinking_budget_tokens: '8' }, 'thinking_budget_tokens'],
    ['message a number', { thinking_budget_tokens: 8, thinking_budget_message: 5 }, 'thinking_budget_message'],
    ['message 5000 bytes', { thinking_budget_tokens: 8, thinking_budget_message: 'x'.repeat(5000) }, 'thinking_budget_message'],
  ]) {
    const r = await chat(body);
    eq([r.status, r.json?.error?.param], [400, param], `thinking_budget_tokens ${what}: 400 naming it`);
  }
  const ab = await post(srv, '/v1/messages', { model: 'x', messages, max_tokens: 8, thinking: { type: 'enabled', budget_tokens: -1 } });
  eq(ab.status, 400, 'Anthropic: a negative budget_tokens is a 400');
  check(/budget_tokens/.test(ab.json?.error?.message ?? ''), `Anthropic: the message names budget_tokens: ${ab.text}`);

  // Responses: output_tokens_details.reasoning_tokens (this template thinks
  // only with enable_thinking, which the Responses API cannot set: 0).
  const r = await post(srv, '/v1/responses', { model: 'x', input: 'Once upon a time', max_output_tokens: 4 });
  eq(r.json?.usage?.output_tokens_details, { reasoning_tokens: 0 }, 'Responses: reasoning_tokens in usage');
} finally {
  await stopServer(srv);
}

// The server's --reasoning-budget: the default for requests that name none;
// a request's -1 lifts it.
srv = await startServer(['--chat-template-file', template, '--reasoning-budget', String(N), '--reasoning-budget-message',
  ' Enough.'], { model });
try {
  const chat = extra => post(srv, '/v1/chat/completions', { messages, max_tokens: MAX, temperature: 0, ...kw, ...extra });
  const d = await chat({});
  const cut = await chat({ max_tokens: N, thinking_budget_tokens: -1 });
  eq(d.json.choices[0].message.reasoning_content, cut.json.choices[0].message.reasoning_content + ' Enough.',
    '--reasoning-budget: reasoning cut at N, then --reasoning-budget-message');
  const own = await chat({ thinking_budget_message: ' Mine.' });
  eq(own.json.choices[0].message.reasoning_content, cut.json.choices[0].message.reasoning_content + ' Mine.',
    'a request\'s thinking_budget_message wins');
  check(d.json.choices[0].message.content.length > 0, '--reasoning-budget: then content');
  const lifted = await chat({ thinking_budget_tokens: -1 });
  eq(lifted.json.usage.completion_tokens_details, { reasoning_tokens: MAX }, 'thinking_budget_tokens -1 lifts it');
} finally {
  await stopServer(srv);
}
done();
