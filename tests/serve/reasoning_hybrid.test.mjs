// A hybrid reasoning model (Qwen 3: the prompt does not open <think>, the
// model does, unless enable_thinking is false and the prompt closes an
// empty block) under a grammar that is not lazy: a client's json_schema or
// a forced tool call.  The model may think first, then answers in the
// grammar; after a prompt that closed reasoning no block may come.
// Qwen 3's real template and vocabulary (llama.cpp's ggml-vocab-qwen3.gguf,
// whose <think> and </think> are single tokens) on a random qwen3 model from
// offkv synth.  A random model thinks only when told: a logit bias of +100
// on <think> makes it the model's every choice, so the answer opens with it
// wherever the grammar lets it, and a reasoning budget ends the block.
//
// References written here: Hugging Face's id of <think>, the markup the
// template and the parser define, ajv for the schema.  While the grammar
// held the answer from its first token, <think> could not come and the
// hybrid model answered without reasoning (the first checks fail).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { need, requireNpm, startServer, stopServer, post, check, eq, done, BIN, SHARED } from './lib.mjs';

need('shared');
const Ajv2020 = requireNpm('ajv/dist/2020').default;
const schema = { type: 'object', properties: { a: { type: 'string', maxLength: 10 } }, required: ['a'],
  additionalProperties: false };
const valid = new Ajv2020({ strict: true }).compile(schema);

const dir = mkdtempSync(path.join(os.tmpdir(), 'offkv-serve-hybrid-'));
const model = path.join(dir, 'qwen3.gguf');
const made = spawnSync(path.join(BIN, 'offkv'), ['synth', '--arch', 'qwen3', '--type', 'q8_0', '--vocab',
  path.join(SHARED, 'vocab', 'ggml-vocab-qwen3.gguf'), '-o', model], { encoding: 'utf8' });
eq(made.status, 0, `offkv synth --arch qwen3 --vocab ggml-vocab-qwen3.gguf: ${made.stderr}`);

const THINK = 151667; // <think> in Qwen 3's vocabulary (Hugging Face's tokenizer.json)
const B = 3;
const template = path.join(SHARED, 'templates', 'src', 'Qwen-Qwen3-0.6B.jinja');
const tools = [{ type: 'function', function: { name: 'pick', description: 'pick one',
  parameters: { type: 'object', properties: { city: { enum: ['Paris', 'Lima'] } }, required: ['city'],
    additionalProperties: false } } }];

const srv = await startServer(['--chat-template-file', template, '-c', '1024'], { model });
try {
  const tok = await post(srv, '/tokenize', { content: '<think>', parse_special: true });
  eq(tok.json.tokens, [THINK], '<think> is one token of the vocabulary');
  const chat = extra => post(srv, '/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }],
    max_tokens: 120, temperature: 0, logprobs: true, logit_bias: { [THINK]: 100 }, ...extra });
  const tokensOf = r => r.json.choices[0].logprobs.content.map(t => t.token);
  const jsonSchema = { response_format: { type: 'json_schema', json_schema: { name: 'x', schema } } };

  // The rendered prompts: thinking on leaves the answer's start open,
  // thinking off closes an empty block (what the server tells apart).
  const on = (await post(srv, '/apply-template', { messages: [{ role: 'user', content: 'hi' }] })).json.prompt;
  const off = (await post(srv, '/apply-template', { messages: [{ role: 'user', content: 'hi' }],
    chat_template_kwargs: { enable_thinking: false } })).json.prompt;
  check(on.endsWith('<|im_start|>assistant\n'), 'thinking on: the prompt ends at the assistant header');
  check(off.endsWith('<think>\n\n</think>\n\n'), 'thinking off: the prompt closes an empty block');

  // A schema after thinking: <think>, B reasoning tokens, the forced close,
  // then JSON that validates, in content.
  const r1 = await chat({ ...jsonSchema, thinking_budget_tokens: B });
  eq(r1.status, 200, 'json_schema, thinking on: 200');
  const t1 = tokensOf(r1), m1 = r1.json.choices[0].message;
  eq(t1[0], '<think>', 'the answer opens its reasoning (the grammar lets <think> come)');
  eq(t1.slice(1, 1 + B), Array(B).fill('<think>'), 'then B reasoning tokens');
  const text = t1.join('');
  const close = text.indexOf('</think>');
  check(close > 0, 'the budget closes the block with </think>');
  eq(text.slice(close + '</think>'.length), '\n\n' + m1.content, 'then the answer: the content after "</think>\\n\\n"');
  let obj1 = null;
  try { obj1 = JSON.parse(m1.content); } catch { /* checked below */ }
  check(obj1 && valid(obj1), `the content validates against the schema: ${JSON.stringify(m1.content)}`);
  eq(m1.reasoning_content, '<think>'.repeat(B), 'reasoning_content: the block\'s text');
  let closedAt = -1;
  for (let i = 0, s = ''; i < t1.length && closedAt < 0; i++) if ((s += t1[i]).includes('</think>')) closedAt = i;
  eq(r1.json.usage.completion_tokens_details, { reasoning_tokens: closedAt },
    'reasoning_tokens: the tokens after <think> up to the one that closes it');
  eq(r1.json.choices[0].finish_reason, 'stop', 'finish_reason stop');

  // A forced call after thinking: the call is read as a call.
  const fc = await chat({ tools, tool_choice: 'required', parallel_tool_calls: false, thinking_budget_tokens: B });
  eq(fc.status, 200, 'tool_choice required, thinking on: 200');
  const fm = fc.json.choices[0].message;
  eq(tokensOf(fc)[0], '<think>', 'the forced call\'s answer opens its reasoning');
  eq(fm.reasoning_content, '<think>'.repeat(B), 'its reasoning_content');
  eq(fc.json.choices[0].finish_reason, 'tool_calls', 'finish_reason tool_calls');
  eq(fm.tool_calls?.length, 1, 'one call');
  eq(fm.tool_calls?.[0]?.function?.name, 'pick', 'to the tool');
  check(['Paris', 'Lima'].includes(JSON.parse(fm.tool_calls?.[0]?.function?.arguments ?? '{}').city),
    `its arguments follow the schema: ${fm.tool_calls?.[0]?.function?.arguments}`);

  // Thinking off: the prompt closed reasoning, so no block may come; the
  // biased model answers in the grammar from its first token.
  const kwOff = { chat_template_kwargs: { enable_thinking: false } };
  const r = await chat({ ...jsonSchema, ...kwOff });
  eq(r.status, 200, 'json_schema, thinking off: 200');
  const t = tokensOf(r), m = r.json.choices[0].message;
  check(!t.includes('<think>'), `no <think> after a prompt that closed reasoning: ${JSON.stringify(t.slice(0, 4))}`);
  check(!m.reasoning_content, 'no reasoning_content');
  eq(r.json.usage.completion_tokens_details, { reasoning_tokens: 0 }, 'no reasoning tokens');
  let obj = null;
  try { obj = JSON.parse(m.content); } catch { /* checked below */ }
  check(obj && valid(obj), `the content validates: ${JSON.stringify(m.content)}`);
  const f2 = await chat({ tools, tool_choice: 'required', parallel_tool_calls: false, ...kwOff });
  eq(f2.json.choices[0].finish_reason, 'tool_calls', 'thinking off: the forced call, finish_reason tool_calls');
  check(!tokensOf(f2).includes('<think>'), 'thinking off: the forced call without <think>');
} finally {
  await stopServer(srv);
  rmSync(dir, { recursive: true, force: true });
}
done();
