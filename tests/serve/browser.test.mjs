// The chat page in a real browser: Debian's chromium, headless, driven by
// playwright-core.  Type a message, send it, see the answer stream in,
// read the tokens/s, stop a second answer with Stop; a screenshot goes to
// BUILD/serve-page.png.  A thinking model's reasoning in its folding box
// (BUILD/serve-page-thinking.png).
import { existsSync } from 'node:fs';
import path from 'node:path';
import { need, requireNpm, startServer, stopServer, post, check, eq, done, BIN, SHARED } from './lib.mjs';

need('shared');
const CHROMIUM = process.env.OKV_CHROMIUM || '/usr/bin/chromium';
if (!existsSync(CHROMIUM)) {
  console.log(`skipped: ${CHROMIUM} not found (scripts/install-deps.sh installs Debian's chromium)`);
  process.exit(77);
}
const { chromium } = requireNpm('playwright-core');

// A headless chromium and a page in it whose every chat request gets the
// fields of extra added; the page's script errors gather in errors.
async function openPage(extra) {
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', e => errors.push(String(e)));
  await page.route('**/v1/chat/completions', route => {
    const body = JSON.parse(route.request().postData());
    return route.continue({ postData: JSON.stringify({ ...body, ...extra }) });
  });
  return { browser, page, errors };
}

// tiny-llama (random weights, stories260K's vocabulary) rarely ends its
// turn; rarely is not never (CI once saw the second answer end before
// Stop could be pressed), so every request the page sends gets the
// server's ignore_eos added below and runs to max_tokens.
const srv = await startServer(['--parallel', '2', '-c', '2048'], { model: path.join(process.env.OKV_SHARED, 'models', 'tiny-llama.gguf') });
let browser;
try {
  // ignore_eos on every chat request the page sends (see above)
  const { page, errors, ...b } = await openPage({ ignore_eos: true });
  browser = b.browser;
  // The network slowed (CDP) so that an answer takes about a second to
  // arrive: it is seen streaming in, and still arriving when Stop is pressed.
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Network.enable');
  await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: 12000, uploadThroughput: -1 });
  const resp = await page.goto(srv.url + '/?max_tokens=48');
  eq(resp.status(), 200, 'GET / answers');
  check(/offkv/.test(await page.title()), 'the page title');
  // no resource outside the server: the page is self-contained
  const external = [];
  page.on('request', r => { if (!r.url().startsWith(srv.url)) external.push(r.url()); });

  // Count the updates of the answer as they land: a streamed answer is
  // written many times, one piece per chunk.  Records, not callbacks: a
  // fast model delivers several chunks per network read, and one callback
  // then reports all their writes.
  await page.evaluate(() => {
    window.__updates = 0;
    new MutationObserver(recs => { window.__updates += recs.length; })
      .observe(document.getElementById('log'), { childList: true, characterData: true, subtree: true });
  });
  await page.fill('#input', 'Tell me a story about a cat.');
  await page.click('#send');
  // the first answer's first piece: 120 s, as for its end, since under
  // ASan with the rest of the suite on 2 cores it once took over 30 s
  await page.waitForFunction(() => document.querySelector('.msg.assistant')?.textContent.length > 0, null, { timeout: 120000 });
  await page.waitForFunction(() => document.querySelector('#send').disabled === false, null, { timeout: 120000 });
  const updates = await page.evaluate(() => window.__updates);
  check(updates > 5, `the answer streamed in (${updates} updates of the page)`);
  const answer = await page.textContent('.msg.assistant');
  check(answer.length > 0, `an answer appeared (${JSON.stringify(answer.slice(0, 40))}...)`);
  const speed = await page.textContent('#speed');
  check(/^\d+(\.\d)? tokens\/s$/.test(speed), `the speed of the last answer is shown (${speed})`);
  eq(await page.textContent('.msg.user'), 'Tell me a story about a cat.', 'the user message is shown');
  await page.screenshot({ path: path.join(BIN, 'serve-page.png'), fullPage: false });

  // Stop while the answer arrives: after it the answer no longer grows.
  // The network slowed further first (about 5 s for the answer), so that
  // a loaded machine's slow page checks still come before its end.
  await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: 1500, uploadThroughput: -1 });
  await page.fill('#input', 'And then?');
  await page.click('#send');
  await page.waitForFunction(() => document.querySelectorAll('.msg.assistant')[1]?.textContent.length > 0, null, { timeout: 30000 });
  check(await page.isEnabled('#stop'), 'Stop is enabled while the answer streams (answer so far: ' +
    JSON.stringify(await page.locator('.msg.assistant').nth(1).textContent()) + ')');
  await page.click('#stop');
  await page.waitForFunction(() => document.querySelector('#send').disabled === false, null, { timeout: 30000 });
  const stopped = (await page.locator('.msg.assistant').nth(1).textContent()).length;
  await page.waitForTimeout(500);
  eq((await page.locator('.msg.assistant').nth(1).textContent()).length, stopped, 'after Stop the answer no longer grows');
  eq(await page.locator('.msg.assistant').count(), 2, 'two answers');
  eq(errors, [], 'no script errors on the page');
  eq(external, [], 'no request leaves the server');
} finally {
  if (browser) await browser.close();
  eq(await stopServer(srv), { code: 0, signal: null }, 'exit 0');
}

// A thinking model: QwQ's template (its prompt opens <think>) on
// stories260K, a reasoning budget from the address.  The reasoning streams
// into a "Thinking" box above the answer, which folds once the answer
// starts; both equal the API's answer to the same request.
const think = await startServer(['--chat-template-file', path.join(SHARED, 'templates', 'src', 'Qwen-QwQ-32B.jinja')],
  { model: path.join(SHARED, 'models', 'stories260K.gguf') });
browser = null;
try {
  const kw = { chat_template_kwargs: { enable_thinking: true } };
  const ref = await post(think, '/v1/chat/completions', { messages: [{ role: 'user', content: 'Once upon a time' }],
    max_tokens: 40, temperature: 0, thinking_budget_tokens: 8, ...kw });
  const m = ref.json.choices[0].message;
  check(m.reasoning_content.length > 0 && m.content.length > 0, 'the API\'s answer has reasoning and content');
  const { page, errors, ...b } = await openPage(kw);
  browser = b.browser;
  await page.goto(think.url + '/?max_tokens=40&temperature=0&thinking_budget_tokens=8');
  await page.fill('#input', 'Once upon a time');
  await page.click('#send');
  await page.waitForFunction(() => document.querySelector('#send').disabled === false, null, { timeout: 120000 });
  eq(await page.locator('.msg.think').count(), 1, 'a Thinking box');
  eq(await page.textContent('.msg.think div'), m.reasoning_content.replace(/\s+$/, ''), 'it holds the reasoning');
  eq(await page.textContent('.msg.assistant'), m.content, 'the answer bubble holds the content');
  eq(await page.evaluate(() => document.querySelector('.msg.think').open), false, 'the box folded when the answer started');
  eq(await page.evaluate(() => document.querySelector('.msg.think').nextElementSibling.className), 'msg assistant',
    'the box sits above its answer');
  await page.screenshot({ path: path.join(BIN, 'serve-page-thinking.png'), fullPage: false });
  eq(errors, [], 'no script errors on the thinking page');
} finally {
  if (browser) await browser.close();
  eq(await stopServer(think), { code: 0, signal: null }, 'exit 0 (thinking)');
}
done();
