// gpt-oss's harmony format end to end with its real vocabulary (llama.cpp's
// ggml-vocab-gpt-oss.gguf, whose <|end|>, <|return|>, <|call|> and
// <|channel|> are control tokens) on a random gpt-oss model from offkv synth,
// served with gpt-oss's real template.  A random model writes no harmony of
// its own, so a client grammar holds it to an analysis message, then
// optionally the final channel:
//  - a reasoning budget ends the analysis with the control tokens <|end|>
//    <|start|> ... <|message|>, and the answer goes on in the final channel
//    (while <|end|> counted as an end of turn, the answer stopped there:
//    reasoning and no content); the first tokens are the unbudgeted
//    answer's, the reasoning their text after the header, reasoning_tokens
//    the budget plus the <|end|> that closes it; a stream's deltas add up
//    to the same answer;
//  - with tools offered, a budget's markup stops at <|channel|>: the model
//    may call a tool after its cut analysis (sent to the final channel, it
//    could not); without tools it goes on in the final channel;
//  - a forced tool call is read back as a call (finish_reason tool_calls).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { need, startServer, stopServer, post, check, eq, done, BIN, SHARED } from './lib.mjs';

need('shared');

const dir = mkdtempSync(path.join(os.tmpdir(), 'offkv-serve-harmony-'));
const model = path.join(dir, 'harmony.gguf');
const made = spawnSync(path.join(BIN, 'offkv'), ['synth', '--arch', 'gpt-oss', '--type', 'q8_0', '--vocab',
  path.join(SHARED, 'vocab', 'ggml-vocab-gpt-oss.gguf'), '-o', model], { encoding: 'utf8' });
eq(made.status, 0, `offkv synth --arch gpt-oss --vocab ggml-vocab-gpt-oss.gguf: ${made.stderr}`);

const template = path.join(SHARED, 'templates', 'src', 'openai-gpt-oss-120b.jinja');
const HEADER = '<|channel|>analysis<|message|>';
const grammar = `root ::= "${HEADER}" [a-z]+ ( "<|end|><|start|>assistant<|channel|>final<|message|>" [a-z]{3,6} )?`;
const B = 3;

const srv = await startServer(['--chat-template-file', template, '-c', '1024'], { model });
try {
  const chat = extra => post(srv, '/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], max_tokens: 40,
    temperature: 0, logprobs: true, grammar, ...extra });
  const tokensOf = r => r.json.choices[0].logprobs.content.map(t => t.token);

  const free = await chat({});
  eq(free.status, 200, 'an unbudgeted analysis');
  const ft = tokensOf(free);
  // where the header ends: the first token after which the text holds it
  let h = 0;
  for (let s = ''; h < ft.length && !s.includes(HEADER); h++) s += ft[h];
  check(h < ft.length - B, `the header is written (${h} tokens)`);
  eq(free.json.choices[0].finish_reason, 'length', 'unbudgeted: the analysis runs to max_tokens');

  const b = await chat({ thinking_budget_tokens: B });
  eq(b.status, 200, 'a budgeted analysis');
  const bt = tokensOf(b);
  const m = b.json.choices[0].message;
  eq(bt.slice(0, h + B), ft.slice(0, h + B), 'the header and the budget\'s tokens are the unbudgeted answer\'s');
  const upTo = ft.slice(0, h + B).join('');
  eq(m.reasoning_content, upTo.slice(upTo.indexOf(HEADER) + HEADER.length), 'reasoning_content: the text after the header');
  eq(b.json.usage.completion_tokens_details, { reasoning_tokens: B + 1 }, 'reasoning_tokens: the budget and the <|end|>');
  // logprobs name the control tokens as the answer's text has them
  eq(bt.slice(h + B).join(''), '<|end|><|start|>assistant<|channel|>final<|message|>' + m.content,
    'the logprobs\' tokens after the budget: the forced markup, control tokens named, then the content');
  check(/^[a-z]{3,6}$/.test(m.content), `the answer goes on in the final channel: content ${JSON.stringify(m.content)}`);
  eq(b.json.choices[0].finish_reason, 'stop', 'and ends at the grammar\'s end');
  const st = await fetch(srv.url + '/v1/chat/completions', { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 40, temperature: 0, grammar,
      thinking_budget_tokens: B, stream: true }) });
  let sr = '', sc = '';
  for (const line of (await st.text()).split('\n')) {
    if (!line.startsWith('data: {')) continue;
    const d = JSON.parse(line.slice(6)).choices?.[0]?.delta;
    sr += d?.reasoning_content ?? '';
    sc += d?.content ?? '';
  }
  eq([sr, sc], [m.reasoning_content, m.content], 'streamed: the same reasoning and content');

  const tool = { type: 'function', function: { name: 'get_weather', description: 'Weather', parameters: {
    type: 'object', properties: { city: { type: 'string', maxLength: 8 } }, required: ['city'], additionalProperties: false } } };

  // A budget with tools offered: the forced markup stops at <|channel|>, so
  // the model may go on to a call (commentary) after its cut analysis;
  // without tools it is sent to the final channel.  A grammar allows both
  // channels, and a bias on "comment" (12606) makes the model choose
  // commentary wherever it may (its analysis is "comment" too).
  const COMMENT = 12606;
  const both = `root ::= "${HEADER}" [a-z]+ "<|end|><|start|>assistant<|channel|>" ( "final<|message|>" [a-z]{3,6} | ` +
    `"commentary to=functions.get_weather <|constrain|>json<|message|>{\\"city\\":\\"Paris\\"}<|call|>" )`;
  const biased = extra => post(srv, '/v1/chat/completions', { messages: [{ role: 'user', content: 'weather in Paris' }],
    max_tokens: 80, temperature: 0, logprobs: true, grammar: both, logit_bias: { [COMMENT]: 100 },
    thinking_budget_tokens: B, ...extra });
  const wt = await biased({ tools: [tool], tool_choice: 'auto' });
  eq(wt.status, 200, 'a budget with tools: 200');
  // where the header ends in this answer (another prompt: other tokens)
  const headerEnd = toks => {
    let k = 0;
    for (let s = ''; k < toks.length && !s.includes(HEADER); k++) s += toks[k];
    return k;
  };
  const wm = wt.json.choices[0].message, wtoks = tokensOf(wt), wh = headerEnd(wtoks);
  const wUpTo = wtoks.slice(0, wh + B).join('');
  eq(wm.reasoning_content, wUpTo.slice(wUpTo.indexOf(HEADER) + HEADER.length), 'with tools: the analysis, cut at the budget');
  check(wm.reasoning_content.endsWith('comment'.repeat(B)), `with tools: the biased analysis: ${wm.reasoning_content}`);
  eq(wtoks.slice(wh + B, wh + B + 4).join(''), '<|end|><|start|>assistant<|channel|>',
    'with tools: the forced markup ends at <|channel|>');
  eq(wtoks[wh + B + 4], 'comment', 'then the model names the channel');
  eq([wm.tool_calls?.length, wm.tool_calls?.[0]?.function?.name, wm.tool_calls?.[0]?.function?.arguments,
    wt.json.choices[0].finish_reason], [1, 'get_weather', '{"city":"Paris"}', 'tool_calls'],
  'with tools: the call after the cut analysis');
  const nt = await biased({});
  eq(nt.status, 200, 'the same budget without tools: 200');
  const nm = nt.json.choices[0].message;
  check(!nm.tool_calls && /^[a-z]{3,6}$/.test(nm.content),
    `without tools: the final channel, no call: ${JSON.stringify(nm)}`);
  const ntoks = tokensOf(nt);
  eq(ntoks.slice(headerEnd(ntoks) + B).join(''), '<|end|><|start|>assistant<|channel|>final<|message|>' + nm.content,
    'without tools: the forced markup names the final channel');
  const t = await post(srv, '/v1/chat/completions', { messages: [{ role: 'user', content: 'weather in Paris' }],
    max_tokens: 80, temperature: 0, tools: [tool], tool_choice: 'required' });
  eq(t.status, 200, 'a forced call');
  const calls = t.json.choices[0].message.tool_calls ?? [];
  eq([calls.length, calls[0]?.function?.name, t.json.choices[0].finish_reason], [1, 'get_weather', 'tool_calls'],
    'a forced call: one get_weather call');
  let args = null;
  try { args = JSON.parse(calls[0]?.function?.arguments); } catch { /* checked below */ }
  check(args && typeof args.city === 'string' && Object.keys(args).length === 1, `its arguments: ${calls[0]?.function?.arguments}`);
} finally {
  await stopServer(srv);
  rmSync(dir, { recursive: true, force: true });
}
done();
