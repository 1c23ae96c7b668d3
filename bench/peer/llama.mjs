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
//  - pp @ dD, tg @ dD: the cache first holds D tokens (evaluated untimed),
//    then as pp and tg.
//  - Each measured run follows one unmeasured warm-up run, as llama-bench
//    and offkv bench do.
//  - llama.cpp twice: through node-llama-cpp (the runs interleaved with
//    offkv's), and as today's llama.cpp's own llama-bench (LLAMA_BENCH: the
//    build in ../shared/llama.cpp/, which loads the best CPU variant as
//    llama.cpp's releases do), run after the type's turns with -r REPS; its
//    median is over its samples_ts.
//  - Prefill is also stated as a share of the cores' compute peak
//    (build/bench/peak, the best reading of the probe at the start and
//    after each type: FMA for float weights, int8 dot products for
//    quantized ones, of the widest ISA the kernels use here,
//    OKV_ISA's cap included), counting 2 flops per weight of the layers'
//    matrices and 4 x head_dim per head and cached position for attention.
import { execFileSync, spawn } from "node:child_process";
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
const OUT = need("BENCH_OUT");
const BW = Number(need("BENCH_BW_GBS")) * 1e9; // bytes per second, at the start
// the host's read bandwidth moved by a fifth within minutes on a cloud VM, so
// each type's roofline uses the mean of readings just before and just after
// its runs (BENCH_MEMBW: build/bench/membw; without it, the start's reading)
const MEMBW = env.BENCH_MEMBW && fs.existsSync(env.BENCH_MEMBW) ? env.BENCH_MEMBW : null;
const readBandwidth = () => {
    if (!MEMBW) return BW;
    const out = execFileSync(MEMBW, [String(THREADS), "5"], { encoding: "utf8" });
    const m = out.match(/^read GB\/s: ([\d.]+)$/m);
    if (!m) throw new Error(`${MEMBW} printed no "read GB/s" line`);
    return Number(m[1]) * 1e9;
};
const quick = env.BENCH_QUICK === "1";
const P = quick ? 64 : 512, N = quick ? 16 : 128, D = quick ? 512 : 4096;
const THREADS = Number(env.BENCH_THREADS ?? 2);
if (!Number.isInteger(THREADS) || THREADS < 1) throw new Error(`BENCH_THREADS '${env.BENCH_THREADS}': expected an integer >= 1`);
const REPS = Number(env.BENCH_REPS ?? 3);
if (!Number.isInteger(REPS) || REPS < 1) throw new Error(`BENCH_REPS '${env.BENCH_REPS}': expected an integer >= 1`);
const FA = { auto: "auto", on: true, off: false }[env.BENCH_FA ?? "auto"];
const LLAMA_BENCH = env.LLAMA_BENCH && fs.existsSync(env.LLAMA_BENCH) ? env.LLAMA_BENCH : null;
// node-llama-cpp's turns (BENCH_NLC=0 leaves them out: its prefill at depth
// 4096 runs at ~3 t/s without flash attention, most of the script's time;
// llama-bench is the peer the targets are set against)
const NLC = (env.BENCH_NLC ?? "1") !== "0";
if (FA === undefined) throw new Error(`BENCH_FA '${env.BENCH_FA}': expected auto, on or off`);
const models = need("BENCH_MODELS").trim().split(/\s+/).map((s) => {
    const i = s.indexOf("=");
    return { type: s.slice(0, i), path: s.slice(i + 1) };
});

// node-llama-cpp (NLC_DIR: run.sh installs it) only where it takes turns
const NLC_DIR = NLC ? need("NLC_DIR") : null;
const { getLlama, LlamaLogLevel } = NLC ? await import(pathToFileURL(`${NLC_DIR}/dist/index.js`).href) : {};
const nlcVersion = NLC ? JSON.parse(fs.readFileSync(`${NLC_DIR}/package.json`, "utf8")).version : null;

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
const llama = NLC ? await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.debug, logger, maxThreads: THREADS })
    : null;
// info from here on: llama.cpp says at that level, when it creates a
// context, what flash attention "auto" became (and nothing while decoding)
if (llama) llama.logLevel = LlamaLogLevel[env.BENCH_LOGLEVEL ?? "info"];
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

async function llamaPp(seq, toks, start) {
    await resetTo(seq, start);
    const t0 = now();
    await seq.controlledEvaluate(toks.slice(start, start + P).map((t, i) => (i === P - 1 ? [t, GREEDY] : t)));
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
    const at = depth === 0 ? "" : ` @ d${depth}`;
    const tests = [`pp${P}${at}`, `tg${N}${at}`];
    const o = offkvTurns(path, ["-p", String(P), "-n", String(N), "-d", String(depth)]);
    await o.ready();
    const ctx = NLC ? await llamaContext(model, depth + Math.max(P, N)) : null;
    const out = {};
    try {
        const seq = ctx?.getSequence();
        for (const test of tests) {
            out[test] = { offkv: [], llama: [] };
            for (let r = -1; r < REPS; r++) { // r = -1: the warm-up
                const ov = await o.run();
                if (!NLC) {
                    // llama-bench takes the other turn at depth 0 (one run, after its own
                    // warm-up): this host's read bandwidth was seen to swing by a fifth
                    // within minutes, which moved ratios of runs taken apart
                    const lb = depth === 0 ? await llamaBench(path, { p: test.startsWith("pp") ? P : 0, n: test.startsWith("pp") ? 0 : N, d: 0, r: 1 }) : null;
                    const lv = lb?.[test] ? median(lb[test]) : NaN;
                    say(`  ${test} ${r < 0 ? "warm-up" : `run ${r + 1}/${REPS}`}: offkv ${ov.toFixed(2)}` +
                        `${Number.isFinite(lv) ? `, llama-bench ${lv.toFixed(2)}` : ""} t/s`);
                    if (r < 0) continue;
                    out[test].offkv.push(ov);
                    if (Number.isFinite(lv)) (out[test].lb ??= []).push(lv);
                    continue;
                }
                if (r < 0 && depth > 0 && seq.nextTokenIndex < depth) {
                    await resetTo(seq, 0);
                    const t0 = now();
                    await seq.evaluateWithoutGeneratingNewTokens(toks.slice(0, depth));
                    say(`  llama.cpp: depth ${depth} filled in ${(now() - t0).toFixed(2)} s (not timed)`);
                }
                const lv = test.startsWith("pp") ? await llamaPp(seq, toks, depth) : await llamaTg(seq, toks, depth);
                say(`  ${test} ${r < 0 ? "warm-up" : `run ${r + 1}/${REPS}`}: offkv ${ov.toFixed(2)}, llama.cpp ${lv.toFixed(2)} t/s`);
                if (r < 0) continue;
                out[test].offkv.push(ov);
                out[test].llama.push(lv);
            }
        }
    } finally {
        await ctx?.dispose();
    }
    await o.finish();
    return out;
}

// --- llama-bench: today's llama.cpp on its own -----------------------------
// {test: [t/s samples]} for pp and tg at depth 0 and D, and the CPU variant
// its log names; null without LLAMA_BENCH.
let lbVariant = null;
// `only`: { p, n, d, r } to run fewer tests (one turn: { p: P, n: 0, d: 0, r: 1 })
async function llamaBench(path, only = null) {
    if (!LLAMA_BENCH) return null;
    const fa = { auto: "auto", on: "on", off: "off" }[env.BENCH_FA ?? "auto"];
    const t = only ?? { p: P, n: N, d: `0,${D}`, r: REPS };
    const argv = ["-m", path, "-p", String(t.p), "-n", String(t.n), "-d", String(t.d), "-t", String(THREADS),
        "-r", String(t.r), "-fa", fa, "-ctk", "f16", "-ctv", "f16", "-o", "jsonl"];
    const child = spawn(LLAMA_BENCH, argv, { stdio: ["ignore", "pipe", "pipe"] });
    let out = "", err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    const code = await new Promise((res) => child.on("close", res));
    if (code !== 0) throw new Error(`${LLAMA_BENCH} ${argv.join(" ")} ended (${code}):\n${err}`);
    const m = err.match(/loaded CPU backend from \S*?(libggml-cpu[^/\s]*\.so)/);
    if (m) lbVariant = m[1];
    const runs = {};
    for (const line of out.split("\n").filter((l) => l.trim().startsWith("{"))) {
        const j = JSON.parse(line);
        const test = `${j.n_prompt > 0 ? `pp${j.n_prompt}` : `tg${j.n_gen}`}${j.n_depth > 0 ? ` @ d${j.n_depth}` : ""}`;
        runs[test] = j.samples_ts ?? [j.avg_ts];
        if (!only) say(`  llama-bench ${test}: ${median(runs[test]).toFixed(2)} t/s`);
    }
    return runs;
}

// --- the compute peak (build/bench/peak) ----------------------------------
// The figure the kernels can reach: FMA for float weights, int8 dot products
// for quantized ones, of the widest ISA the kernels use (OKV_ISA caps it).
// BENCH_PEAK holds the probe run.sh made at the start; BENCH_PEAK_BIN (the
// probe itself) is run again after each type and each line keeps its best
// reading: on a shared host one probe read half the FMA rate (120 of 226
// GFLOP/s on a Zen 5), and every "% peak" of that run was off by 2x.
const PEAK_BIN = env.BENCH_PEAK_BIN && fs.existsSync(env.BENCH_PEAK_BIN) ? env.BENCH_PEAK_BIN : null;
const peakBest = {}; // line name -> best wall op/s over the probes
let peakProbes = 0;
const takePeak = (text) => {
    for (const l of text.split("\n")) {
        const m = l.match(/^(\S+(?: \S+)?)\s+(\d+) thread\(s\)\s+([\d.]+) G(?:FLOP|op)\/s\s+wall/);
        if (m && Number(m[2]) === THREADS) peakBest[m[1]] = Math.max(peakBest[m[1]] ?? 0, Number(m[3]) * 1e9);
    }
    peakProbes++;
};
if (env.BENCH_PEAK && fs.existsSync(env.BENCH_PEAK)) takePeak(fs.readFileSync(env.BENCH_PEAK, "utf8"));
const probePeak = () => { if (PEAK_BIN) takePeak(execFileSync(PEAK_BIN, [String(THREADS)], { encoding: "utf8" })); };
const peakOf = () => {
    if (!peakProbes) return null;
    const got = peakBest;
    const flags = new Set(((fs.readFileSync("/proc/cpuinfo", "utf8").match(/^flags\s*:\s*(.*)$/m) ?? [, ""])[1]).split(/\s+/));
    const cap = { scalar: 0, avx2: 1, avxvnni: 1, avx512: 2, avx512vnni: 3 }[env.OKV_ISA ?? "avx512vnni"] ?? 3;
    const has512 = flags.has("avx512bw") && cap >= 2, vnni = has512 && flags.has("avx512_vnni") && cap >= 3;
    // AVX-VNNI below AVX-512: offkv's level where a processor has no AVX-512, or capped to it
    const vnni256 = !has512 && flags.has("avx_vnni") && (env.OKV_ISA === "avxvnni" || (!env.OKV_ISA && !flags.has("avx512bw")));
    const fma = has512 ? "fma512" : "fma256", i8 = vnni ? "i8 vnni512" : has512 ? "i8 avx512" : vnni256 ? "i8 avxvnni" : "i8 avx2";
    if (!got[fma] || !got[i8]) return null;
    return { fma: got[fma], i8: got[i8], names: `${fma} ${(got[fma] / 1e9).toFixed(0)} GFLOP/s, ${i8} ${(got[i8] / 1e9).toFixed(0)} Gop/s` };
};
let peak = peakOf();
const isFloat = (type) => /^(f16|bf16|f32)$/.test(type);
// flops per prompt token at mean cache position `pos`
const ppFlops = (f, pos) => 2 * f.matElems + 4 * f.nLayer * f.nHead * f.kDim * pos;
const ppShare = (type, f, tps, start) =>
    peak ? tps * ppFlops(f, start + (P + 1) / 2) / (isFloat(type) ? peak.fma : peak.i8) : NaN;

// --- what a token costs in bytes ------------------------------------------
function modelFacts(path) {
    // the file's metadata and tensors as `offkv info --json` reads them
    // (arrays left out: only scalars are needed here)
    const info = JSON.parse(execFileSync(OFFKV, ["info", "--json", "--items", "0", path], { maxBuffer: 1 << 26 }));
    const ts = info.tensors.map((t) => ({ name: t.name, bytes: t.bytes, dims: t.shape }));
    const md = (k) => info.metadata[k]?.value;
    const arch = md("general.architecture"), a = (k) => md(`${arch}.${k}`);
    let weights = 0;
    const tied = !ts.some((t) => t.name === "output.weight");
    // a mixture of experts reads expert_used_count of expert_count experts a token
    const active = a("expert_count") ? a("expert_used_count") / a("expert_count") : 1;
    for (const t of ts)
        // token_embd: one row per token, unless it is also the output matrix
        weights += t.name === "token_embd.weight" && !tied ? t.bytes / t.dims[1] : /_exps\./.test(t.name) ? t.bytes * active : t.bytes;
    const nLayer = a("block_count"), nHead = a("attention.head_count"), nKv = a("attention.head_count_kv") ?? nHead;
    const kDim = a("attention.key_length") ?? a("embedding_length") / nHead, vDim = a("attention.value_length") ?? kDim;
    const nVocab = ts.find((t) => t.name === "token_embd.weight").dims[1];
    // the layers' matrices (norms are vectors; token_embd and output are
    // looked up or, in prefill, multiplied for the last token only); a 3-D
    // expert tensor [ne0, ne1, n_expert] counts the expert_used_count
    // experts a token goes through, not one expert nor all of them
    const used = a("expert_count") ? a("expert_used_count") : 1;
    const matElems = ts.filter((t) => t.name.startsWith("blk.") && t.dims.length >= 2 && t.dims[1] > 1)
        .reduce((s, t) => s + t.dims[0] * t.dims[1] * (/_exps\./.test(t.name) && t.dims.length >= 3 ? used : 1), 0);
    // f16 K and V rows per cached position: every layer, or the full layers,
    // and the sliding ones up to the window: layer i slides iff i mod period
    // < period - 1 (offkv's model.c; gpt-oss and gemma2: period 2, the even
    // layers; gemma3: every 6th layer is full, unless the file says otherwise)
    const period = { "gpt-oss": 2, gemma2: 2, gemma3: 6 }[arch];
    const window = period ? a("attention.sliding_window") ?? 0 : 0;
    const p = a("attention.sliding_window_pattern") ?? period;
    let nSwa = 0;
    for (let i = 0; window && i < nLayer; i++) nSwa += p === 0 || i % p < p - 1 ? 1 : 0;
    const row = nKv * (kDim + vDim) * 2;
    return { weights, nVocab, kvPerPos: (nLayer - nSwa) * row, kvSwaPerPos: nSwa * row, window, matElems, nLayer,
             nHead, kDim };
}

// decode roofline (t/s) at read bandwidth `bw` for N steps starting at
// `start` cached tokens: every
// step reads the weights once (a mixture of experts: the active ones) and the
// K/V of start+i+1 positions (a sliding layer: at most its window)
const roof = (f, bw, start) => {
    const depth = start + (N + 1) / 2;
    return bw / (f.weights + f.kvPerPos * depth + f.kvSwaPerPos * Math.min(depth, f.window));
};

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
    const pp = `pp${P}`, tg = `tg${N}`, ppd = `pp${P} @ d${D}`, tgd = `tg${N} @ d${D}`;
    const na = "–";

    const lines = [];
    lines.push(`offkv vs llama.cpp, ${new Date().toISOString().replace(/\.\d+Z$/, "Z")}${quick ? " (BENCH_QUICK: short tests)" : ""}` +
        `${done ? "" : ` (partial: ${results.length} of ${models.length} types so far)`}`);
    lines.push(`CPU: ${cpuModel}, ${os.cpus().length} cores online; SIMD: ${simd}`);
    lines.push(!NLC ? "node-llama-cpp: not run (BENCH_NLC=0)" : `llama.cpp: node-llama-cpp ${nlcVersion} (llama.cpp ${llama.llamaCppRelease.release}, prebuilt), CPU variant ${variant}, flash attention ${faResolved}`);
    lines.push(LLAMA_BENCH ? `llama-bench: ${LLAMA_BENCH} (CPU variant ${lbVariant ?? "?"}), ${NLC ? "run after each type's turns" : `in turns with offkv at depth 0 (one run each, after its warm-up), after them at depth ${D}`}, -r ${REPS}, f16 K/V, -fa ${env.BENCH_FA ?? "auto"}; median of its samples${env.OKV_ISA ? `; OKV_ISA=${env.OKV_ISA} caps offkv (LLAMA_VARIANT limits llama.cpp; run.sh picks haswell for avx2 and avxvnni)` : ""}`
        : "llama-bench: not run (LLAMA_BENCH unset or missing)");
    lines.push(peak ? `compute peak (build/bench/peak, ${THREADS} thread(s), best wall run of ${peakProbes} probe(s): the start and after each type): ${peak.names}${env.OKV_ISA ? ` (OKV_ISA=${env.OKV_ISA})` : ""}; prefill share = t/s x flops per token / peak (a mixture of experts: the flops of the experts a token uses)`
        : "compute peak: not measured (BENCH_PEAK unset)");
    lines.push(`offkv: ${env.OFFKV_COMMIT ?? "?"}; model: synthetic ${env.BENCH_SHAPE ?? "?"} shape (offkv synth --seed 1)`);
    lines.push(`${THREADS} thread(s), f16 K/V; median of ${REPS} runs after a warm-up run, the engines taking turns run by run; depth ${D} filled untimed`);
    lines.push(`memory read bandwidth (build/bench/membw, ${THREADS} thread${THREADS > 1 ? "s" : ""}): ${(BW / 1e9).toFixed(2)} GB/s at the start; ${MEMBW ? "each type's roofline uses the mean of readings just before and after its runs (column read GB/s)" : "every roofline uses it"}; roofline = that / (weight bytes + f16 K/V bytes read per token, at the test's mean depth); a mixture of experts' roofline counts its active bytes: the expert tensors times expert_used_count / expert_count`);
    lines.push(`load average (1 min) before ${load0[0].toFixed(2)}, after ${load1[0].toFixed(2)}, on ${os.cpus().length} cores; ${((now() - t00) / 60).toFixed(1)} min; ratio = offkv / llama.cpp`);
    lines.push("");
    const lb = (r, k) => (r.lb && r.lb[k] ? median(r.lb[k]) : NaN);
    const num = (v) => (Number.isFinite(v) ? fmt(v) : na);
    const ratio = (a, b) => (Number.isFinite(a) && Number.isFinite(b) ? (a / b).toFixed(2) : na);
    const share = (v) => (Number.isFinite(v) ? pct(v) : na);
    // prefill: t/s, ratios against both llama.cpps, shares of the compute peak
    lines.push("Prefill (t/s; ratio = offkv / that llama.cpp; % of the compute peak):");
    lines.push("");
    const ph = ["type"];
    for (const k of [pp, ppd])
        ph.push(`offkv ${k}`, "node-llama-cpp", "ratio", "llama-bench", "ratio", "offkv % peak", "llama-bench % peak");
    lines.push(`| ${ph.join(" | ")} |`);
    lines.push(`|${ph.map((_, i) => (i === 0 ? "---" : "---:")).join("|")}|`);
    for (const r of results) {
        const row = [r.type.toUpperCase()];
        for (const [k, start] of [[pp, 0], [ppd, D]]) {
            const o = r.med("offkv", k), l = r.med("llama", k), b = lb(r, k);
            row.push(num(o), num(l), ratio(o, l), num(b), ratio(o, b), share(ppShare(r.type, r.f, o, start)),
                share(ppShare(r.type, r.f, b, start)));
        }
        lines.push(`| ${row.join(" | ")} |`);
    }
    lines.push("");
    // decode: t/s, ratios, shares of the roofline
    lines.push("Decode (t/s; roofline = read bandwidth / bytes per token, in t/s; share = t/s / roofline):");
    lines.push("");
    const dh = ["type", "weights/token", "read GB/s"];
    for (const k of [tg, tgd])
        dh.push(`offkv ${k}`, "node-llama-cpp", "ratio", "llama-bench", "ratio", "roofline", "offkv share", "llama-bench share");
    lines.push(`| ${dh.join(" | ")} |`);
    lines.push(`|${dh.map((_, i) => (i === 0 ? "---" : "---:")).join("|")}|`);
    for (const r of results) {
        const row = [r.type.toUpperCase(), gb(r.f.weights), (r.bw / 1e9).toFixed(1)];
        for (const [k, start] of [[tg, 0], [tgd, D]]) {
            const o = r.med("offkv", k), l = r.med("llama", k), b = lb(r, k), rf = roof(r.f, r.bw, start);
            row.push(num(o), num(l), ratio(o, l), num(b), ratio(o, b), fmt(rf), share(o / rf), share(b / rf));
        }
        lines.push(`| ${row.join(" | ")} |`);
    }
    lines.push("");
    lines.push("t/s: tokens per second; – where that engine was not run.");
    const text = lines.join("\n") + "\n";
    if (done) process.stdout.write(text);
    fs.writeFileSync(OUT, text);
    fs.writeFileSync(OUT.replace(/\.md$/, "") + ".json", JSON.stringify({
        P, N, D, REPS, threads: THREADS, bandwidth_GBs: BW / 1e9, variant: loaded, flash_attention: faResolved,
        llama_bench: LLAMA_BENCH, llama_bench_variant: lbVariant, peak: peak && { fma: peak.fma, i8: peak.i8, names: peak.names },
        results: results.map(({ type, path, f, runs, lb, bws }) => ({ type, path, bandwidth_GBs: bws.map((b) => b / 1e9), weight_bytes_per_token: f.weights,
            kv_bytes_per_position: f.kvPerPos, matrix_weights: f.matElems, runs, llama_bench: lb })),
    }, null, 1) + "\n");
    fs.writeFileSync(OUT.replace(/\.md$/, "") + ".llama.log", logLines.join("\n") + "\n");
}

// --- the run ------------------------------------------------------------------
const load0 = os.loadavg();
const t00 = now();
const results = [];
for (const { type, path } of models) {
    say(`${type}: ${path}`);
    const model = NLC ? await llama.loadModel({ modelPath: path, gpuLayers: 0 }) : null;
    const f = modelFacts(path);
    // random ids, as llama-bench's (speed does not depend on them)
    let x = 42n;
    const toks = Array.from({ length: D + Math.max(P, N) }, () => {
        x = (x * 6364136223846793005n + 1442695040888963407n) & 0xffffffffffffffffn;
        return 3 + Number((x >> 33n) % BigInt(f.nVocab - 3));
    });
    const bw0 = readBandwidth();
    const runs = { ...(await phase(model, path, toks, 0)), ...(await phase(model, path, toks, D)) };
    await model?.dispose();
    const turned = Object.fromEntries(Object.entries(runs).filter(([, v]) => v.lb).map(([k, v]) => [k, v.lb]));
    const lb = Object.keys(turned).length
        ? { ...turned, ...(await llamaBench(path, { p: P, n: N, d: D, r: REPS })) }
        : await llamaBench(path);
    const bws = [bw0, readBandwidth()];
    probePeak();
    peak = peakOf();
    const med = (e, k) => median(runs[k][e]);
    results.push({ type, path, f, runs, med, lb, bws, bw: (bws[0] + bws[1]) / 2 });
    writeTable(false);
}
writeTable(true);
say(`table written to ${OUT} (per-run values: ${OUT.replace(/\.md$/, "")}.json, llama.cpp's log: .llama.log)`);
