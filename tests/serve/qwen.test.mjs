// offkv serve with a Qwen-layout model (tiny-qwen2: Q/K/V biases, NEOX
// RoPE, tied output) and another of the 2026 families (tiny-gemma2: soft
// caps, sliding layers): greedy completions, plain and streamed, equal to
// `offkv run --temp 0` on the same model, one model per server.  Those two
// random models mostly repeat the prompt's last token, so a qwen2 model
// from offkv synth (untied, its text varied) is served too.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { need, startServer, stopServer, post, check, eq, done, BIN, SHARED } from './lib.mjs';

need('shared');

function runGreedy(model, prompt, n) {
  const r = spawnSync(path.join(BIN, 'offkv'), ['run', '-m', model, '-p', prompt, '-n', String(n), '--temp', '0',
    '--no-display-prompt', '-t', '1'], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`offkv run failed: ${r.stderr}`);
  return r.stdout.replace(/\n$/, '');
}

const dir = mkdtempSync(path.join(os.tmpdir(), 'offkv-serve-qwen-'));
const synth = path.join(dir, 'synth-qwen2.gguf');
const made = spawnSync(path.join(BIN, 'offkv'), ['synth', '--arch', 'qwen2', '--n-layer', '3', '--seed', '5', '-o', synth],
  { encoding: 'utf8' });
eq(made.status, 0, `offkv synth --arch qwen2: ${made.stderr}`);

for (const name of ['tiny-qwen2', 'tiny-gemma2', 'synth-qwen2']) {
  const model = name.startsWith('synth') ? synth : path.join(SHARED, 'models', `${name}.gguf`);
  const srv = await startServer(['--parallel', '2', '-c', '512'], { model });
  try {
    for (const prompt of ['Once upon a time', 'The little dog saw a big tree']) {
      const want = runGreedy(model, prompt, 24);
      check(want.length > 0, `${name}: offkv run wrote text`);
      const c = await post(srv, '/v1/completions', { prompt, max_tokens: 24, temperature: 0 });
      eq([c.status, c.json?.choices?.[0]?.text], [200, want], `${name}: greedy completion = offkv run --temp 0 ("${prompt}")`);
      const used = c.json?.usage?.completion_tokens, why = c.json?.choices?.[0]?.finish_reason;
      check(used === 24 ? why === 'length' : used < 24 && why === 'stop',
        `${name}: ${used} tokens, finish_reason ${why} (24 unless the end of text came first)`);
      // streamed: the deltas put together are the same text
      const r = await fetch(srv.url + '/v1/completions', { method: 'POST', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ prompt, max_tokens: 24, temperature: 0, stream: true }) });
      let streamed = '';
      for (const line of (await r.text()).split('\n')) {
        if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
        streamed += JSON.parse(line.slice(6)).choices?.[0]?.text ?? '';
      }
      eq(streamed, want, `${name}: streamed completion = offkv run --temp 0 ("${prompt}")`);
    }
    // two at once, in the two slots: each its own greedy text
    const prompts = ['Once upon a time', 'The little dog saw a big tree'];
    const both = await Promise.all(prompts.map(p => post(srv, '/v1/completions', { prompt: p, max_tokens: 16, temperature: 0 })));
    eq(both.map(b => b.json?.choices?.[0]?.text), prompts.map(p => runGreedy(model, p, 16)), `${name}: two requests at once`);
    console.log(`${name}: served completions equal offkv run --temp 0`);
  } finally {
    const ex = await stopServer(srv);
    eq(ex.code, 0, `${name}: SIGTERM exit code`);
  }
}
rmSync(dir, { recursive: true, force: true });
done();
