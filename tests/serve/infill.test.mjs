// POST /infill, llama.cpp's code-completion endpoint (llama.vim and
// llama.vscode send it): the middle between input_prefix and input_suffix,
// in the model's fill-in-the-middle tokens, answered in llama.cpp's shape.
// Qwen 3's vocabulary (llama.cpp's ggml-vocab-qwen3.gguf, whose FIM tokens
// are Qwen 2.5 Coder's) on a random qwen3 model from offkv synth.
//
// The reference is llama.cpp's prompt layout (its server README and
// format_infill): [REPO myproject\n SEP name\n text ... SEP filename\n]
// PRE prefix prompt SUF suffix MID, with Hugging Face's ids for the FIM
// tokens.  /v1/completions, which reads a prompt's control tokens as llama.cpp
// does, gets that layout as text; the same tokens give the same greedy
// answer from a random model, and the /tokenize counts of the parts give the
// prompt's length, prefix cut to its last 1536 tokens.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { need, startServer, stopServer, post, check, eq, done, BIN, SHARED } from './lib.mjs';

need('shared');
const dir = mkdtempSync(path.join(os.tmpdir(), 'offkv-serve-infill-'));
const model = path.join(dir, 'qwen3.gguf');
const made = spawnSync(path.join(BIN, 'offkv'), ['synth', '--arch', 'qwen3', '--type', 'q8_0', '--vocab',
  path.join(SHARED, 'vocab', 'ggml-vocab-qwen3.gguf'), '-o', model], { encoding: 'utf8' });
eq(made.status, 0, `offkv synth --arch qwen3 --vocab ggml-vocab-qwen3.gguf: ${made.stderr}`);

// Qwen 2.5 Coder's tokenizer_config.json
const PRE = 151659, MID = 151660, SUF = 151661, REPO = 151663, SEP = 151664;

// The SSE events of a stream, parsed.
async function events(srv, p, body) {
  const r = await fetch(srv.url + p, { method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body) });
  const text = await r.text();
  return { status: r.status, text, events: text.split('\n\n').filter(e => e.startsWith('data: '))
    .map(e => JSON.parse(e.slice(6))) };
}

const srv = await startServer(['-c', '4096'], { model });
try {
  const count = async t => (await post(srv, '/tokenize', { content: t, add_special: false })).json.tokens.length;
  const ids = await post(srv, '/tokenize', { content: '<|fim_prefix|><|fim_suffix|><|fim_middle|><|repo_name|><|file_sep|>',
    parse_special: true });
  eq(ids.json.tokens, [PRE, SUF, MID, REPO, SEP], 'the FIM tokens are single tokens with Hugging Face\'s ids');

  // A completion's prompt reads its control tokens (llama.cpp's /v1/completions does).
  const one = await post(srv, '/v1/completions', { prompt: '<|fim_prefix|>', max_tokens: 1, temperature: 0 });
  eq(one.json.usage.prompt_tokens, 1, '/v1/completions reads <|fim_prefix|> as one token');

  const prefix = 'def add(a, b):\n', suffix = '\n\nprint(add(1, 2))\n', prompt = 'x = ';
  const body = { input_prefix: prefix, input_suffix: suffix, prompt, n_predict: 12, temperature: 0 };
  const r = await post(srv, '/infill', body);
  eq(r.status, 200, `/infill: ${r.text}`);
  check(typeof r.json.content === 'string' && r.json.content.length > 0, `content: ${r.text}`);
  eq(r.json.stop, true, 'stop: true');
  eq(r.json.stop_type, 'limit', 'n_predict 12 reached: stop_type limit');
  eq(r.json.tokens_predicted, 12, 'tokens_predicted');
  // the repository frame (Qwen has REPO and SEP), no files, then PRE prefix prompt SUF suffix MID
  const frame = 1 + await count('myproject\n') + 1 + await count('filename\n');
  const want = frame + 1 + await count(prefix) + await count(prompt) + 1 + await count(suffix) + 1;
  eq(r.json.tokens_evaluated, want, 'tokens_evaluated: the frame, the prefix, the prompt, the suffix, 3 FIM tokens');
  for (const k of ['prompt_n', 'prompt_ms', 'predicted_n', 'predicted_ms', 'predicted_per_second'])
    check(typeof r.json.timings?.[k] === 'number', `timings.${k}: ${JSON.stringify(r.json.timings)}`);
  check(typeof r.json.tokens_cached === 'number' && r.json.truncated === false, 'tokens_cached, truncated');

  const text = `<|repo_name|>myproject\n<|file_sep|>filename\n<|fim_prefix|>${prefix}${prompt}<|fim_suffix|>${suffix}<|fim_middle|>`;
  const ref = await post(srv, '/v1/completions', { prompt: text, max_tokens: 12, temperature: 0 });
  eq(ref.json.usage.prompt_tokens, want, 'the layout as text: as many tokens');
  eq(r.json.content, ref.json.choices[0].text, 'the same greedy middle as /v1/completions on the layout');

  // OpenAI's suffix on /v1/completions: the prompt is the prefix, the middle as /infill gives it.
  const sx = await post(srv, '/v1/completions', { prompt: prefix, suffix, max_tokens: 12, temperature: 0 });
  const ix = await post(srv, '/infill', { input_prefix: prefix, input_suffix: suffix, n_predict: 12, temperature: 0 });
  eq(sx.status, 200, `suffix: ${sx.text}`);
  eq(sx.json.choices[0].text, ix.json.content, '/v1/completions with a suffix: /infill\'s middle');
  eq(sx.json.usage.prompt_tokens, ix.json.tokens_evaluated, '/v1/completions with a suffix: /infill\'s prompt');

  // Other files: each after SEP and its name, before the current file.
  const extra = [{ filename: 'util.py', text: 'def sub(a, b):\n    return a - b\n' },
    { filename: 'const.py', text: 'N = 3\n' }];
  const rx = await post(srv, '/infill', { ...body, input_extra: extra });
  const textx = '<|repo_name|>myproject\n' + extra.map(e => `<|file_sep|>${e.filename}\n${e.text}`).join('') +
    `<|file_sep|>filename\n<|fim_prefix|>${prefix}${prompt}<|fim_suffix|>${suffix}<|fim_middle|>`;
  const refx = await post(srv, '/v1/completions', { prompt: textx, max_tokens: 12, temperature: 0 });
  eq(rx.json.tokens_evaluated, refx.json.usage.prompt_tokens, 'input_extra: the repository layout\'s length');
  eq(rx.json.content, refx.json.choices[0].text, 'input_extra: the same middle as on the repository layout');
  check(rx.json.content !== r.json.content || rx.json.tokens_evaluated > want, 'the files are in the prompt');

  // A long prefix keeps its last 1536 tokens (3/4 of llama.cpp's 2048 window).
  const line = 'a = a + 1\n';
  const long = line.repeat(600);
  const n_long = await count(long);
  check(n_long > 1536, `the long prefix has ${n_long} tokens`);
  const rl = await post(srv, '/infill', { input_prefix: long, input_suffix: '', n_predict: 1, temperature: 0 });
  eq(rl.json.tokens_evaluated, frame + 1 + 1536 + 1 + 1, 'a long prefix: its last 1536 tokens');

  // A stream: llama.cpp's events, the same text, the last one stop: true, no [DONE].
  const s = await events(srv, '/infill', { ...body, stream: true });
  eq(s.status, 200, 'stream: 200');
  const last = s.events[s.events.length - 1];
  eq(s.events.map(e => e.content).join(''), r.json.content, 'stream: the pieces join to the answer');
  check(s.events.slice(0, -1).every(e => e.stop === false) && last.stop === true && last.stop_type === 'limit',
    'stream: stop false until the last event');
  check(!s.text.includes('[DONE]'), 'stream: no [DONE]');

  // t_max_predict_ms (llama.vim's bound on the wait): with every token a line
  // break ("\n" is 198 in Qwen's vocabulary), an answer of 50 ends as soon as
  // 1 ms has passed since its first token, as "limit"; without it, all 50 come.
  const nl = { ...body, n_predict: 50, logit_bias: { 198: 100 } };
  const full = await post(srv, '/infill', nl);
  const cut = await post(srv, '/infill', { ...nl, t_max_predict_ms: 1 });
  check(/^\n+$/.test(full.json.content) && full.json.tokens_predicted === 50, `line breaks, all 50: ${full.text.slice(0, 200)}`);
  check(cut.json.stop_type === 'limit' && cut.json.tokens_predicted >= 1 && cut.json.tokens_predicted < 50,
    `t_max_predict_ms 1: cut early (${cut.json.tokens_predicted} tokens, ${cut.json.stop_type})`);
  const late = await post(srv, '/infill', { ...body, n_predict: 20, t_max_predict_ms: 1 });
  check(late.json.tokens_predicted === 20 || /\n/.test(late.json.content),
    `t_max_predict_ms ends only an answer that holds a line break: ${late.text.slice(0, 200)}`);
  const bad = await post(srv, '/infill', { ...body, t_max_predict_ms: -1 });
  check(bad.status === 400 && bad.json?.error?.param === 't_max_predict_ms', `t_max_predict_ms -1: ${bad.status}`);

  // A stop string: stop_type word, the word named.
  const w = r.json.content.trim().split(/\s+/)[0];
  if (w) {
    const rw = await post(srv, '/infill', { ...body, stop: [w] });
    check(rw.json.stop_type === 'word' && rw.json.stopping_word === w, `stop [${JSON.stringify(w)}]: ${rw.text}`);
  }

  // Bad requests: named.
  for (const [b, param] of [[{ input_prefix: 'x' }, 'input_suffix'], [{ input_suffix: 'x' }, 'input_prefix'],
    [{ input_prefix: 1, input_suffix: '' }, 'input_prefix'],
    [{ input_prefix: '', input_suffix: '', input_extra: 'x' }, 'input_extra'],
    [{ input_prefix: '', input_suffix: '', input_extra: [{ filename: 'a' }] }, 'input_extra'],
    [{ input_prefix: '', input_suffix: '', n: 2 }, 'n'], [{ input_prefix: '', input_suffix: '', n_predict: 0 }, 'n_predict']]) {
    const e = await post(srv, '/infill', b);
    check(e.status === 400 && e.json?.error?.param === param, `${JSON.stringify(b)}: 400 naming ${param}: ${e.status} ${e.text}`);
  }
} finally {
  await stopServer(srv);
}

// A model without FIM tokens: 501, said.
const plain = await startServer([]);
try {
  const e = await post(plain, '/infill', { input_prefix: 'a', input_suffix: 'b' });
  check(e.status === 501 && /fill-in-the-middle prefix token/.test(e.json?.error?.message ?? ''),
    `a vocabulary without FIM tokens: ${e.status} ${e.text}`);
  const sx = await post(plain, '/v1/completions', { prompt: 'a', suffix: 'b' });
  check(sx.status === 501, `a suffix without FIM tokens: ${sx.status} ${sx.text}`);
  for (const none of [null, '']) {
    const ns = await post(plain, '/v1/completions', { prompt: 'a', suffix: none, max_tokens: 1 });
    eq(ns.status, 200, `a suffix ${JSON.stringify(none)} is none`);
  }
} finally {
  await stopServer(plain);
}
rmSync(dir, { recursive: true, force: true });
done();
