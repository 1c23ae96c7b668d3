// The server's rendering of the 24 real chat templates of ../shared/templates
// over their 8 conversations, through POST /apply-template (a server per
// template, started with --chat-template-file): messages go as OpenAI's
// clients send them (tool calls' arguments as JSON strings).  Where the
// family's bos / eos texts are stories260K's (<s>, </s>) the prompt must be
// byte for byte what Python's jinja2 rendered; for the others (the server
// takes the model's bos / eos) it must be what `offkv template` prints with
// <s> and </s>, whose renders with the families' own texts are checked
// against jinja2 by the chat_templates test.  jinja2 rendered with
// strftime_now pinned to 2026-12-01 09:30:00 (../shared/templates/README.md)
// and the server renders today's date, so a template that calls
// strftime_now is checked the second way too, and `offkv template --now`
// with that time against jinja2 (the test passed only on 2026-12-01 before).
// Where jinja2 raised, the answer is a 400 carrying the template's message.
import { spawnSync } from 'node:child_process';
import { readFileSync, existsSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { need, startServer, stopServer, post, check, eq, done, BIN, SHARED } from './lib.mjs';

need('shared');
const dir = path.join(SHARED, 'templates');
const conv = JSON.parse(readFileSync(path.join(dir, 'conversations.json'), 'utf8'));
const index = JSON.parse(readFileSync(path.join(dir, 'expected', 'index.json'), 'utf8'));
const tmp = mkdtempSync(path.join(os.tmpdir(), 'okv-templates-'));

function specials(name) {
  let best = ['<s>', '</s>'], len = 0;
  for (const [prefix, v] of Object.entries(conv.specials))
    if (name.startsWith(prefix) && prefix.length > len) { best = v; len = prefix.length; }
  return best;
}

// OpenAI's shape: arguments as a JSON string
function openaiMessages(msgs) {
  return msgs.map(m => m.tool_calls ? { ...m, tool_calls: m.tool_calls.map(c => ({ ...c,
    function: { ...c.function, arguments: JSON.stringify(c.function.arguments) } })) } : m);
}

const names = [...new Set(index.map(e => e.template))];
let same = 0, viaCli = 0, raised = 0;
for (const name of names) {
  const file = path.join(dir, 'src', `${name}.jinja`);
  const srv = await startServer(['--chat-template-file', file, '-c', '4096']);
  try {
    const [bos, eos] = specials(name);
    const dated = readFileSync(file, 'utf8').includes('strftime_now');
    const exact = bos === '<s>' && eos === '</s>';
    for (const e of index.filter(x => x.template === name)) {
      const c = conv.cases.find(k => k.name === e.case);
      const body = { messages: openaiMessages(c.messages), add_generation_prompt: c.add_generation_prompt ?? true };
      if (c.tools) body.tools = c.tools;
      const r = await post(srv, '/apply-template', body);
      const what = `${name}.${e.case}`;
      if (e.outcome !== 'ok') {
        const msg = readFileSync(path.join(dir, 'expected', `${what}.error`), 'utf8').trim().replace(/^[A-Za-z]+: /, '');
        check(r.status === 400 && r.json?.error?.message.includes(msg), `${what}: want a 400 with '${msg}', got ${r.status} ${r.text.slice(0, 200)}`);
        raised++;
        continue;
      }
      check(r.status === 200 && typeof r.json?.prompt === 'string', `${what}: ${r.status} ${r.text.slice(0, 200)}`);
      if (r.status !== 200) continue;
      const mf = path.join(tmp, 'm.json'), tf = path.join(tmp, 't.json');
      writeFileSync(mf, JSON.stringify(c.messages));
      const args = ['template', '--template', file, '--bos-token', '<s>', '--eos-token', '</s>', '--messages', mf];
      if (c.tools) { writeFileSync(tf, JSON.stringify(c.tools)); args.push('--tools', tf); }
      if (c.add_generation_prompt === false) args.push('--no-generation-prompt');
      const cli = (...more) => spawnSync(path.join(BIN, 'offkv'), [...args, ...more], { encoding: 'utf8' }).stdout;
      if (exact) {
        const want = readFileSync(path.join(dir, 'expected', `${what}.txt`), 'utf8');
        if (dated) eq(cli('--now', '2026-12-01T09:30:00') === want, true, `${what}: offkv template --now = jinja2's render`);
        else eq(r.json.prompt === want, true, `${what}: /apply-template = jinja2's render`);
        same++;
      }
      if (!exact || dated) {
        // strftime_now: today's date in both (neither is pinned here)
        eq(r.json.prompt === cli(), true, `${what}: /apply-template = offkv template`);
        viaCli++;
      }
    }
    if (name === 'openai-gpt-oss-120b') {
      // OpenAI's reasoning_effort reaches the template as its variable:
      // jinja2's render (no reasoning_effort) says "Reasoning: medium", once
      const c = conv.cases.find(k => k.name === 'user');
      const body = { messages: openaiMessages(c.messages) };
      const plain = await post(srv, '/apply-template', body);
      const high = await post(srv, '/apply-template', { ...body, reasoning_effort: 'high' });
      const want = readFileSync(path.join(dir, 'expected', `${name}.user.txt`), 'utf8');
      eq(want.split('Reasoning: medium').length, 2, `${name}: jinja2's render says 'Reasoning: medium' once`);
      eq(plain.json?.prompt?.split('Reasoning: medium').length, 2, `${name}: no reasoning_effort: medium`);
      eq(high.json?.prompt, plain.json?.prompt?.replace('Reasoning: medium', 'Reasoning: high'),
        `${name}: reasoning_effort 'high' changes that line and nothing else`);
      const bad = await post(srv, '/apply-template', { ...body, reasoning_effort: 'huge' });
      check(bad.status === 400 && bad.json?.error?.param === 'reasoning_effort',
        `${name}: reasoning_effort 'huge' is a 400 naming it: ${bad.status} ${bad.text.slice(0, 200)}`);
    }
  } finally {
    await stopServer(srv);
  }
}
console.log(`${same} renders equal to jinja2's, ${viaCli} equal to offkv template's, ${raised} raised`);
rmSync(tmp, { recursive: true, force: true });
done();
