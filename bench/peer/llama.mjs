// offkv beside llama.cpp (through node-llama-cpp) on the same GGUF files:
// pp, tg, and tg at a cache depth, 2 threads, f16 K/V, the median of runs in
// which the two engines take turns.  bench/peer/run.sh sets the environment
// (it installs node-llama-cpp, writes the models, measures bandwidth); run
// `make bench-peer` rather than this file.
//
// What each engine is asked to do, so that the numbers compare:
//  - pp: one evaluation of P tokens into an empty cache, the last token's
//    logits computed (offkv: eval_last; llama.cpp: one batch, logits of the
//    last token only).
//  - tg: N evaluations of one token each, every one computing its logits
//    (llama.cpp skips the output layer when no logits are asked for, so a
//    greedy next token is asked for: llama.cpp's argmax over the vocabulary
//    is the only sampling cost, microseconds against the milliseconds of a
//    step).  The tokens are fixed random ids, not the generated ones.
//  - tg @ dD: the cache first holds D tokens (evaluated untimed), then as tg.
//  - Each measured run follows one unmeasured warm-up run, as llama-bench
//    and offkv bench do.
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import readline from "node:readline";
import { pathToFileURL } from "node:url";

const env = process.env;
const need = (k) => {
    if (!env[k]) throw new Error(`${k} is not set: run make bench-peer (bench/peer/run.sh)`);
    return env[k];
};
const OFFKV = need("OFFKV");
const NLC_DIR = need("NLC_DIR");
const OUT = need("BENCH_OUT");
const BW = Number(need("BENCH_BW_GBS")) * 1e9; // bytes per second
const quick = env.BENCH_QUICK === "1";
const P = quick ? 64 : 512, N = quick ? 16 : 128, D = quick ? 512 : 4096;
const THREADS = Number(env.BENCH_THREADS ?? 2);
if (!Number.isInteger(THREADS) || THREADS < 1) throw new Error(`BENCH_THREADS '${env.BENCH_THREADS}': expected an integer >= 1`);
const REPS = Number(env.BENCH_REPS ?? 3);
if (!Number.isInteger(REPS) || REPS < 1) throw new Error(`BENCH_REPS '${env.BENCH_REPS}': expected an integer >= 1`);
const FA = { auto: "auto", on: true, off: false }[env.BENCH_FA ?? "auto"];
if (FA === undefined) throw new Error(`BENCH_FA '${env.BENCH_FA}': expected auto, on or off`);
const models = need("BENCH_MODELS").trim().split(/\s+/).map((s) => {
    const i = s.indexOf("=");
    return { type: s.slice(0, i), path: s.slice(i + 1) };
});

const { getLlama, LlamaLogLevel } = await import(pathToFileURL(`${NLC_DIR}/dist/index.js`).href);
const nlcVersion = JSON.parse(fs.readFileSync(`${NLC_DIR}/package.json`, "utf8")).version;

const say = (s) => process.stderr.write(`bench-peer: ${s}\n`);
const now = () => performance.now() / 1000;
const median = (v) => {
    const s = [...v].sort((a, b) => a - b), h = s.length >> 1;
    return s.length % 2 ? s[h] : (s[h - 1] + s[h]) / 2;
};

// llama.cpp's log goes to a file beside the table (it names the CPU variant
// it loaded and what flash attention "auto" became); errors also to stderr.
const logLines = [];
const logger = (level, message) => {
    logLines.push(`[${level}] ${message.trimEnd()}`);
    if (level === "error" || level === "fatal") process.stderr.write(`llama.cpp: ${message}`);
};
// debug while loading the backend: its line "load_backend: loaded CPU backend
// from .../libggml-cpu-VARIANT.so" is a debug-level message
const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.debug, logger, maxThreads: THREADS });
// info from here on: llama.cpp says at that level, when it creates a
// context, what flash attention "auto" became (and nothing while decoding)
llama.logLevel = LlamaLogLevel[env.BENCH_LOGLEVEL ?? "info"];
const loaded = [...new Set(fs.readFileSync("/proc/self/maps", "utf8").split("\n")
    .map((l) => l.split(/\s+/).pop()).filter((f) => /libggml-cpu[^/]*\.so/.test(f ?? "")))];
const variant = loaded.map((f) => f.split("/").pop()).join(", ") || "unknown (no libggml-cpu*.so mapped)";

// --- offkv: `offkv bench --turns`, one run per line we send it -------------
function offkvTurns(path, args) {
    const argv = ["bench", "-m", path, "-t", String(THREADS), "-r", String(REPS), "--turns", ...args];
    const child = spawn(OFFKV, argv, { stdio: ["pipe", "pipe", "pipe"] });
    const lines = [];
    let log = "", code = null, wake = null, waiting = false;
    const poke = () => {
        const w = wake;
        wake = null;
        if (w) w();
    };
    readline.createInterface({ input: child.stderr }).on("line", (l) => {
        log += l + "\n";
        if (env.BENCH_DEBUG) say(`offkv> ${l}`);
        lines.push(l);
        poke();
    });
    child.stdout.resume();
    child.stdin.on("error", () => {}); // an early exit is reported through `code`
    const closed = new Promise((res) => child.on("close", (c) => {
        code = c;
        poke();
        res();
    }));
    async function next(re) {
        for (;;) {
            while (lines.length) {
                const l = lines.shift();
                if (/filled in/.test(l)) say(`  offkv: ${l.replace(/^offkv bench: /, "")}`);
                const m = l.match(re);
                if (m) return m;
            }
            if (code !== null) throw new Error(`${OFFKV} ${argv.join(" ")} ended (${code}):\n${log}`);
            await new Promise((r) => (wake = r));
        }
    }
    return {
        // loaded and idle: waiting for its first go
        async ready() {
            if (!waiting) await next(/waiting for a line/);
            waiting = true;
        },
        async run() {
            await this.ready();
            waiting = false;
            child.stdin.write("\n");
            return Number((await next(/ (?:warm-up|run \d+): ([\d.]+) t\/s$/))[1]);
        },
        async finish() {
            child.stdin.end();
            await closed;
            if (code !== 0) throw new Error(`${OFFKV} ${argv.join(" ")} ended (${code}):\n${log}`);
        },
    };
}

// --- llama.cpp through node-llama-cpp -------------------------------------
const GREEDY = { generateNext: { token: true, options: { temperature: 0 } } };

function llamaContext(model, size) {
    return model.createContext({
        contextSize: size, batchSize: Math.max(512, P), sequences: 1, flashAttention: FA,
        threads: { ideal: THREADS, min: THREADS },
        experimentalKvCacheKeyType: "F16", experimentalKvCacheValueType: "F16",
    });
}

// cache holds exactly `start` tokens: cleared, or cut back to the depth
async function resetTo(seq, start) {
    if (start === 0) await seq.clearHistory();
    else if (seq.nextTokenIndex > start) await seq.eraseContextTokenRanges([{ start, end: seq.nextTokenIndex }]);
    if (seq.nextTokenIndex !== start) throw new Error(`llama.cpp sequence at ${seq.nextTokenIndex}, wanted ${start}`);
}

async function llamaPp(seq, toks) {
    await resetTo(seq, 0);
    const t0 = now();
    await seq.controlledEvaluate(toks.slice(0, P).map((t, i) => (i === P - 1 ? [t, GREEDY] : t)));
    return P / (now() - t0);
}

async function llamaTg(seq, toks, start) {
    await resetTo(seq, start);
    const t0 = now();
    for (let i = start; i < start + N; i++) await seq.controlledEvaluate([[toks[i], GREEDY]]);
    return N / (now() - t0);
}

// Both engines run the tests of one depth in turns: offkv's warm-up, then
// llama.cpp's, then offkv's run 1, llama.cpp's run 1, ...  The first turn at
// a depth includes the depth fill (untimed).  Returns {test: {offkv, llama}}
// of per-run t/s lists.
async function phase(model, path, toks, depth) {
    const tests = depth === 0 ? [`pp${P}`, `tg${N}`] : [`tg${N} @ d${depth}`];
    const o = offkvTurns(path, depth === 0 ? ["-p", String(P), "-n", String(N)] : ["-p", "0", "-n", String(N), "-d", String(depth)]);
    await o.ready();
    const ctx = await llamaContext(model, depth + Math.max(P, N));
    const out = {};
    try {
        const seq = ctx.getSequence();
        for (const test of tests) {
            out[test] = { offkv: [], llama: [] };
            for (let r = -1; r < REPS; r++) { // r = -1: the warm-up
                const ov = await o.run();
                if (r < 0 && depth > 0) {
                    await resetTo(seq, 0);
                    const t0 = now();
                    await seq.evaluateWithoutGeneratingNewTokens(toks.slice(0, depth));
                    say(`  llama.cpp: depth ${depth} filled in ${(now() - t0).toFixed(2)} s (not timed)`);
                }
                const lv = test.startsWith("pp") ? await llamaPp(seq, toks) : await llamaTg(seq, toks, depth);
                say(`  ${test} ${r < 0 ? "warm-up" : `run ${r + 1}/${REPS}`}: offkv ${ov.toFixed(2)}, llama.cpp ${lv.toFixed(2)} t/s`);
                if (r < 0) continue;
                out[test].offkv.push(ov);
                out[test].llama.push(lv);
            }
        }
    } finally {
        await ctx.dispose();
    }
    await o.finish();
    return out;
}

// --- what a token costs in bytes ------------------------------------------
function modelFacts(model, path) {
    const info = model.fileInfo;
    // tensor sizes from the gaps between their offsets (any type, K-quants
    // included; alignment padding is at most 31 bytes a tensor)
    const ts = info.tensorInfo.map((t) => ({ name: t.name, off: Number(t.fileOffset), dims: t.dimensions.map(Number) }))
        .sort((a, b) => a.off - b.off);
    const fileSize = fs.statSync(path).size;
    let weights = 0, all = 0;
    const tied = !ts.some((t) => t.name === "output.weight");
    ts.forEach((t, i) => {
        const bytes = (i + 1 < ts.length ? ts[i + 1].off : fileSize) - t.off;
        all += bytes;
        // token_embd: one row per token, unless it is also the output matrix
        weights += t.name === "token_embd.weight" && !tied ? bytes / t.dims[1] : bytes;
    });
    const md = info.metadata, arch = md.general.architecture, a = md[arch];
    const nLayer = a.block_count, nHead = a.attention.head_count, nKv = a.attention.head_count_kv ?? nHead;
    const kDim = a.attention.key_length ?? a.embedding_length / nHead, vDim = a.attention.value_length ?? kDim;
    const nVocab = ts.find((t) => t.name === "token_embd.weight").dims[1];
    // f16 K and V rows, every layer, per cached position
    return { weights, all, nVocab, kvPerPos: nLayer * nKv * (kDim + vDim) * 2 };
}

// decode roofline (t/s) for N steps starting at `start` cached tokens: every
// step reads the weights once and the K/V of start+i+1 positions
const roof = (f, start) => BW / (f.weights + f.kvPerPos * (start + (N + 1) / 2));

// --- the table: rewritten after each type, so a long run that is stopped
// still leaves what it measured --------------------------------------------
function writeTable(done) {
    const load1 = os.loadavg();
    // "resolve_fused_ops: Flash Attention enabled" says what "auto" became
    const faLine = logLines.find((l) => /Flash Attention (was auto|enabled|disabled)/i.test(l));
    const faResolved = `${env.BENCH_FA ?? "auto"}${faLine ? ` (${faLine.replace(/^\[\w+\]\s*/, "")})` : ""}`;
    const cpuinfo = fs.readFileSync("/proc/cpuinfo", "utf8");
    // x86 names its model and "flags"; aarch64 lists "Features" (asimd =
    // NEON, asimddp = SDOT, i8mm = SMMLA) and often no model name
    const cpuModel = (cpuinfo.match(/^model name\s*:\s*(.*)$/m) ?? [, os.cpus()[0]?.model || "unknown"])[1];
    const flags = new Set((cpuinfo.match(/^(?:flags|Features)\s*:\s*(.*)$/m) ?? [, ""])[1].split(/\s+/));
    const simdKeys = process.arch === "arm64" ? ["asimd", "asimddp", "i8mm"] : ["avx2", "avx512f", "avx512_vnni"];
    const simd = simdKeys.map((k) => `${k} ${flags.has(k) ? "yes" : "no"}`).join(", ");
    const fmt = (v) => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2));
    const pct = (v) => `${(100 * v).toFixed(0)}%`;
    const gb = (b) => `${(b / 1e9).toFixed(2)} GB`;
    const pp = `pp${P}`, tg = `tg${N}`, tgd = `tg${N} @ d${D}`;

    const lines = [];
    lines.push(`offkv vs llama.cpp, ${new Date().toISOString().replace(/\.\d+Z$/, "Z")}${quick ? " (BENCH_QUICK: short tests)" : ""}` +
        `${done ? "" : ` (partial: ${results.length} of ${models.length} types so far)`}`);
    lines.push(`CPU: ${cpuModel}, ${os.cpus().length} cores online; SIMD: ${simd}`);
    lines.push(`llama.cpp: node-llama-cpp ${nlcVersion} (llama.cpp ${llama.llamaCppRelease.release}, prebuilt), CPU variant ${variant}, flash attention ${faResolved}`);
    lines.push(`offkv: ${env.OFFKV_COMMIT ?? "?"}; model: synthetic ${env.BENCH_SHAPE ?? "?"} shape (offkv synth --seed 1)`);
    lines.push(`${THREADS} thread(s), f16 K/V; median of ${REPS} runs after a warm-up run, the engines taking turns run by run; depth ${D} filled untimed`);
    lines.push(`memory read bandwidth (build/bench/membw, ${THREADS} thread${THREADS > 1 ? "s" : ""}): ${(BW / 1e9).toFixed(2)} GB/s; roofline = that / (weight bytes + f16 K/V bytes read per token, at the test's mean depth)`);
    lines.push(`load average (1 min) before ${load0[0].toFixed(2)}, after ${load1[0].toFixed(2)}, on ${os.cpus().length} cores; ${((now() - t00) / 60).toFixed(1)} min; ratio = offkv / llama.cpp`);
    lines.push("");
    const head = ["type", "weights/token", `offkv ${pp}`, `llama.cpp ${pp}`, "ratio",
        `offkv ${tg}`, `llama.cpp ${tg}`, "ratio", "roofline", "offkv share", "llama.cpp share",
        `offkv ${tgd}`, `llama.cpp ${tgd}`, "ratio", "roofline", "offkv share", "llama.cpp share"];
    lines.push(`| ${head.join(" | ")} |`);
    lines.push(`|${head.map((_, i) => (i === 0 ? "---" : "---:")).join("|")}|`);
    for (const { type, f, med } of results) {
        const row = [type.toUpperCase(), gb(f.weights)];
        row.push(fmt(med("offkv", pp)), fmt(med("llama", pp)), (med("offkv", pp) / med("llama", pp)).toFixed(2));
        for (const [k, start] of [[tg, 0], [tgd, D]]) {
            const o = med("offkv", k), l = med("llama", k), rf = roof(f, start);
            row.push(fmt(o), fmt(l), (o / l).toFixed(2), fmt(rf), pct(o / rf), pct(l / rf));
        }
        lines.push(`| ${row.join(" | ")} |`);
    }
    lines.push("");
    lines.push("t/s (tokens per second); the roofline columns are t/s too.");
    const text = lines.join("\n") + "\n";
    if (done) process.stdout.write(text);
    fs.writeFileSync(OUT, text);
    fs.writeFileSync(OUT.replace(/\.md$/, "") + ".json", JSON.stringify({
        P, N, D, REPS, threads: THREADS, bandwidth_GBs: BW / 1e9, variant: loaded, flash_attention: faResolved,
        results: results.map(({ type, path, f, runs }) => ({ type, path, weight_bytes_per_token: f.weights, kv_bytes_per_position: f.kvPerPos, runs })),
    }, null, 1) + "\n");
    fs.writeFileSync(OUT.replace(/\.md$/, "") + ".llama.log", logLines.join("\n") + "\n");
}

// --- the run ------------------------------------------------------------------
const load0 = os.loadavg();
const t00 = now();
const results = [];
for (const { type, path } of models) {
    say(`${type}: ${path}`);
    const model = await llama.loadModel({ modelPath: path, gpuLayers: 0 });
    const f = modelFacts(model, path);
    // random ids, as llama-bench's (speed does not depend on them)
    let x = 42n;
    const toks = Array.from({ length: D + Math.max(P, N) }, () => {
        x = (x * 6364136223846793005n + 1442695040888963407n) & 0xffffffffffffffffn;
        return 3 + Number((x >> 33n) % BigInt(f.nVocab - 3));
    });
    const runs = { ...(await phase(model, path, toks, 0)), ...(await phase(model, path, toks, D)) };
    await model.dispose();
    const med = (e, k) => median(runs[k][e]);
    results.push({ type, path, f, runs, med });
    writeTable(false);
}
writeTable(true);
say(`table written to ${OUT} (per-run values: ${OUT.replace(/\.md$/, "")}.json, llama.cpp's log: .llama.log)`);
