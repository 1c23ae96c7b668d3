// offkv serve --keepalive: streams that would go silent get pings, which
// clients skip and proxies count as traffic.  A stream whose prompt takes a
// while (2000 tokens read one a step, --chunk 1) gets them meanwhile —
// Anthropic's ping events, SSE comments on OpenAI's streams — and both
// clients read through them; with 0 none.  A stream queued behind a long
// prompt (--parallel 1) starts after --keepalive seconds, its status line
// and pings going out while it waits, then answers whole.
import { need, requireNpm, startServer, stopServer, check, eq, done, sleep } from './lib.mjs';

need('shared');
const { default: Anthropic } = requireNpm('@anthropic-ai/sdk');
const { default: OpenAI } = requireNpm('openai');
const words = n => Array.from({ length: n }, (_, i) => `w${i % 97} the cat sat.`).join(' ');

for (const ka of ['0.05', '0']) {
  const srv3 = await startServer(['--chunk', '1', '-c', '4096', '--keepalive', ka]);
  try {
    const t0 = Date.now();
    const raw = await (await fetch(srv3.url + '/v1/messages', { method: 'POST', body: JSON.stringify({ max_tokens: 3,
      stream: true, messages: [{ role: 'user', content: words(350) }] }) })).text();
    const took = Date.now() - t0;
    const pings = raw.split('\n').filter(l => l === 'event: ping').length;
    const rawChat = await (await fetch(srv3.url + '/v1/chat/completions', { method: 'POST', body: JSON.stringify({
      max_tokens: 3, stream: true, messages: [{ role: 'user', content: 'x ' + words(350) }] }) })).text();
    const comments = rawChat.split('\n').filter(l => l === ': ping').length;
    if (ka === '0') eq([pings, comments], [0, 0], '--keepalive 0: no pings');
    else if (took < 300) console.log(`(the prompt took ${took} ms: too quick to expect pings every 50 ms; not checked)`);
    else {
      check(pings >= 2, `--keepalive ${ka}: ${pings} ping events in a ${took} ms stream`);
      check(comments >= 2, `--keepalive ${ka}: ${comments} ': ping' comments in the chat stream`);
      check(raw.indexOf('event: ping') > raw.indexOf('event: message_start'), 'pings come after message_start');
    }
    // the clients read through the pings
    const c3 = new Anthropic({ baseURL: srv3.url, apiKey: 'none', maxRetries: 0, timeout: 120000 });
    const m = await c3.messages.stream({ model: 'x', max_tokens: 3, messages: [{ role: 'user', content: 'y ' + words(350) }] })
      .finalMessage();
    eq([m.stop_reason, m.usage.output_tokens], ['max_tokens', 3], `--keepalive ${ka}: the SDK's stream ends whole`);
    const o3 = new OpenAI({ baseURL: srv3.url + '/v1', apiKey: 'none', maxRetries: 0, timeout: 120000 });
    let got = '';
    for await (const ch of await o3.chat.completions.create({ model: 'x', max_tokens: 3, stream: true,
      messages: [{ role: 'user', content: 'z ' + words(350) }] })) got += ch.choices[0]?.delta?.content ?? '';
    check(got.length > 0, `--keepalive ${ka}: the openai client's stream reads text`);
  } finally {
    await stopServer(srv3);
  }
}

// Queued behind a long prompt: the status line and pings before the
// sequence frees, then the whole answer.
for (const [api, path, pingLine, body] of [
  ['chat', '/v1/chat/completions', ': ping', { max_tokens: 3, stream: true, messages: [{ role: 'user', content: 'hi' }] }],
  ['messages', '/v1/messages', 'event: ping', { max_tokens: 3, stream: true, messages: [{ role: 'user', content: 'hi' }] }],
]) {
  const srv4 = await startServer(['--chunk', '1', '-c', '4096', '--parallel', '1', '--keepalive', '0.1']);
  try {
    const t0 = Date.now();
    const long = fetch(srv4.url + '/v1/chat/completions', { method: 'POST', body: JSON.stringify({ max_tokens: 2,
      messages: [{ role: 'user', content: words(350) }] }) }).then(async r => { await r.text(); return Date.now() - t0; });
    await sleep(50);
    const r = await fetch(srv4.url + path, { method: 'POST', body: JSON.stringify(body) });
    const tStatus = Date.now() - t0;
    const reader = r.body.getReader();
    let text = '', tPing = -1;
    for (;;) {
      const { value, done: end } = await reader.read();
      if (end) break;
      text += new TextDecoder().decode(value);
      if (tPing < 0 && text.split('\n').includes(pingLine)) tPing = Date.now() - t0;
    }
    const tLong = await long;
    if (tLong < 400) console.log(`(the long prompt took ${tLong} ms: too quick to expect a queued stream's pings; not checked)`);
    else {
      check(r.status === 200 && tStatus < tLong, `${api}: the queued stream's status line at ${tStatus} ms, before the long prompt's answer at ${tLong} ms`);
      check(tPing >= 0 && tPing < tLong, `${api}: a ping at ${tPing} ms, while queued (the long answer at ${tLong} ms)`);
    }
    check(api === 'chat' ? text.endsWith('data: [DONE]\n\n') : text.includes('event: message_stop'), `${api}: the queued stream ends whole: ${text.slice(-200)}`);
  } finally {
    await stopServer(srv4);
  }
}
done();
