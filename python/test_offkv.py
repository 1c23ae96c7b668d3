"""Tests of the ctypes binding (ctest `python`; run by make test).

The library comes from $OFFKV_LIB (ctest sets it to the build's liboffkv.so),
the offkv program from $OKV_BIN; the model is models/stories260K.gguf."""
import copy
import gc
import json
import os
import pickle
import subprocess
import sys
import tempfile
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import offkv  # noqa: E402

MODEL = os.path.join(ROOT, "models", "stories260K.gguf")
BIN = os.environ.get("OKV_BIN", os.path.join(ROOT, "build"))
PROMPT = "Once upon a time"
SHARED = os.environ.get("OKV_SHARED", os.path.join(ROOT, "..", "shared"))


# One thread everywhere: a thread pool's spinning workers crawl on a loaded
# machine, and the same thread count gives the same bits.
def offkv_run(*flags):
    out = subprocess.run([os.path.join(BIN, "offkv"), "run", "-m", MODEL, "-p", PROMPT, "--no-display-prompt"]
                         + list(flags), check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    return out.stdout.decode("utf-8")


class TestOffkv(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model = offkv.Model(MODEL)

    @classmethod
    def tearDownClass(cls):
        cls.model.close()

    def test_version(self):
        with open(os.path.join(ROOT, "include", "offkv", "version.h")) as f:
            parts = {l.split()[1]: l.split()[2] for l in f if l.startswith("#define OKV_VERSION_") and
                     l.split()[1] in ("OKV_VERSION_MAJOR", "OKV_VERSION_MINOR", "OKV_VERSION_PATCH")}
        want = "%s.%s.%s" % (parts["OKV_VERSION_MAJOR"], parts["OKV_VERSION_MINOR"], parts["OKV_VERSION_PATCH"])
        self.assertEqual(offkv.version(), want)

    def test_model(self):
        self.assertEqual(self.model.arch, "llama")
        self.assertEqual(self.model.n_vocab, 512)
        self.assertIn("5 layers", self.model.describe())

    def test_load_progress(self):
        # stages in order, done only growing, reading ending at the file's
        # tensor bytes (a GGUF's data section holds just them, padded)
        seen = []
        m = offkv.Model(MODEL, progress=lambda stage, done, total: seen.append((stage, done, total)))
        try:
            self.assertEqual(m.generate(PROMPT, n=8, temperature=0, n_threads=1),
                             self.model.generate(PROMPT, n=8, temperature=0, n_threads=1))
        finally:
            m.close()
        self.assertEqual(seen[0][0], "reading")
        reading = [s for s in seen if s[0] == "reading"]
        self.assertEqual(reading[-1][1], reading[-1][2])
        self.assertEqual([d for _, d, _ in reading], sorted(d for _, d, _ in reading))
        self.assertGreater(reading[-1][2], 0)
        self.assertLessEqual(reading[-1][2], os.path.getsize(MODEL))
        with self.assertRaisesRegex(TypeError, "progress must be a function"):
            offkv.Model(MODEL, progress=3)

        def boom(stage, done, total):
            raise ValueError("stop at %s" % stage)
        with self.assertRaisesRegex(ValueError, "stop at reading"):
            offkv.Model(MODEL, progress=boom)

    def test_greedy_matches_cli(self):
        text = self.model.generate(PROMPT, n=64, temperature=0, n_threads=1)
        self.assertEqual(text + "\n", offkv_run("-n", "64", "--temp", "0", "-t", "1"))
        self.assertIn("Lily", text)

    def test_stream(self):
        # stream=True: pieces as the tokens come, joined the text generate gives
        text = self.model.generate(PROMPT, n=40, temperature=0, n_threads=1)
        pieces = self.model.generate(PROMPT, n=40, temperature=0, n_threads=1, stream=True)
        self.assertFalse(isinstance(pieces, str))
        got = list(pieces)
        self.assertGreater(len(got), 10)
        self.assertTrue(all(isinstance(p, str) and p for p in got))
        self.assertEqual("".join(got), text)
        # arguments are checked at the call, not at the first piece
        with self.assertRaisesRegex(ValueError, "n"):
            self.model.generate(PROMPT, n=-1, stream=True)
        # a stream left early, then another generation: nothing held up
        s = self.model.generate(PROMPT, n=40, temperature=0, n_threads=1, stream=True)
        self.assertEqual(next(s), got[0])
        s.close()
        self.assertEqual(self.model.generate(PROMPT, n=40, temperature=0, n_threads=1), text)
        # the evaluation's errors come from the iteration
        s = self.model.generate(PROMPT * 40, n=4, context_size=8, stream=True)
        with self.assertRaisesRegex(offkv.OffkvError, "more than the context's 8"):
            next(s)

    def test_stream_utf8(self):
        # a character split across tokens waits for its last byte: here each
        # token's bytes are one byte of a known text (token_bytes replaced on
        # the instance), so every character of two to four bytes is split
        data = "h\u00e9llo w\u00f6rld \u4f60\u597d \U0001F600!".encode("utf-8")
        with offkv.Model(MODEL) as m:
            calls = iter(range(1 << 20))
            m.token_bytes = lambda tok, special=False: data[next(calls) % len(data):][:1]
            got = list(m.generate(PROMPT, n=len(data), temperature=0, n_threads=1, stream=True))
        self.assertEqual("".join(got), data.decode("utf-8"))
        self.assertTrue(all(p and "\ufffd" not in p for p in got), got)
        self.assertEqual(len(got), len(data.decode("utf-8")))
        # chat streams as it answers
        t = offkv.ChatTemplate("{{ messages[0].content }}")
        msgs = [{"role": "user", "content": PROMPT}]
        args = dict(n=24, temperature=0, n_threads=1, template=t)
        self.assertEqual("".join(self.model.chat(msgs, stream=True, **args)), self.model.chat(msgs, **args))

    def test_new_families_match_cli(self):
        # the 2026 dense families, written by offkv synth: greedy text equal to offkv run's
        offkv_bin = os.path.join(BIN, "offkv")
        with tempfile.TemporaryDirectory() as d:
            for arch in ("qwen2", "qwen3", "smollm3", "gemma2", "phi3"):
                path = os.path.join(d, arch + ".gguf")
                subprocess.run([offkv_bin, "synth", "--arch", arch, "--n-layer", "2", "--seed", "5", "-o", path],
                               check=True, stderr=subprocess.DEVNULL)
                with offkv.Model(path) as m:
                    self.assertTrue(m.describe().startswith(arch + ":"), m.describe())
                    text = m.generate(PROMPT, n=24, temperature=0, n_threads=1)
                out = subprocess.run([offkv_bin, "run", "-m", path, "-p", PROMPT, "--no-display-prompt", "-n", "24",
                                      "--temp", "0", "-t", "1"], check=True, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL).stdout.decode("utf-8", "replace")
                self.assertEqual(text + "\n", out, arch)

    def test_eog(self):
        # the ids that end a generation: llama.cpp's set for Qwen 3's vocabulary
        # (test_tokenizer_eog says where it comes from), on a random model with it
        self.assertEqual(self.model.eog, {self.model.eos})
        vocab = os.path.join(SHARED, "vocab", "ggml-vocab-qwen3.gguf")
        if not os.path.exists(vocab):
            self.skipTest("Qwen 3's vocabulary needs ../shared (OKV_SHARED)")
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "qwen3.gguf")
            subprocess.run([os.path.join(BIN, "offkv"), "synth", "--arch", "qwen3", "--n-layer", "1", "--vocab", vocab,
                            "-o", path], check=True, stderr=subprocess.DEVNULL)
            with offkv.Model(path) as m:
                self.assertEqual(m.eog, {128247, 151643, 151645, 151662, 151663, 151664})
                self.assertIn(m.eos, m.eog)
                # a prompt's control tokens, read as offkv run (and llama.cpp) reads them
                chatml = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
                self.assertEqual(m.tokenize(chatml, parse_special=True)[0], 151644)
                for flags, special in (((), True), (("--no-parse-special",), False)):
                    text = m.generate(chatml, n=6, temperature=0, n_threads=1, parse_special=special)
                    out = subprocess.run([os.path.join(BIN, "offkv"), "run", "-m", path, "-p", chatml,
                                          "--no-display-prompt", "-n", "6", "--temp", "0", "-t", "1", *flags],
                                         check=True, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL).stdout.decode("utf-8", "replace")
                    self.assertEqual(text + "\n", out, flags)

    def test_model_chat(self):
        # stories260K has no template of its own; with Qwen 2.5's, the greedy
        # answer is offkv run's on the rendered prompt
        self.assertIsNone(self.model.chat_template)
        with self.assertRaises(offkv.OffkvError) as e:
            self.model.chat([{"role": "user", "content": "hi"}])
        self.assertEqual(e.exception.status, "OKV_ERR_NOT_FOUND")
        src = os.path.join(SHARED, "templates", "src", "Qwen-Qwen2.5-7B-Instruct.jinja")
        if not os.path.exists(src):
            self.skipTest("the template needs ../shared (OKV_SHARED)")
        with open(src, encoding="utf-8") as f:
            t = offkv.ChatTemplate(f.read())
        msgs = [{"role": "user", "content": "Once upon a time"}]
        got = self.model.chat(msgs, n=10, temperature=0, template=t, context_size=512, n_threads=1)
        prompt = t.render(msgs)
        out = subprocess.run([os.path.join(BIN, "offkv"), "run", "-m", MODEL, "-p", prompt, "--no-display-prompt",
                              "-n", "10", "--temp", "0", "-t", "1", "-c", "512"], check=True, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL).stdout.decode("utf-8", "replace")
        self.assertTrue(got)
        self.assertEqual(got + "\n", out)
        with self.assertRaises(TypeError):
            self.model.chat(msgs, template="not a template")
        t.close()
        # a template that prints bos_token first: not a second BOS (run adds its own)
        with open(os.path.join(SHARED, "templates", "src", "mistralai-Mistral-Nemo-Instruct-2407.jinja"),
                  encoding="utf-8") as f:
            src = f.read()
        with offkv.ChatTemplate(src, "<s>", "</s>") as tb, offkv.ChatTemplate(src) as plain:
            self.assertTrue(tb.render(msgs).startswith("<s>"))
            got = self.model.chat(msgs, n=10, temperature=0, template=tb, context_size=512, n_threads=1)
            out = subprocess.run([os.path.join(BIN, "offkv"), "run", "-m", MODEL, "-p", plain.render(msgs),
                                  "--no-display-prompt", "-n", "10", "--temp", "0", "-t", "1", "-c", "512"], check=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout.decode("utf-8", "replace")
            self.assertEqual(got + "\n", out)

    def test_sampled_matches_cli(self):
        a = self.model.generate(PROMPT, n=40, temperature=0.8, seed=7, n_threads=1)
        self.assertEqual(a, self.model.generate(PROMPT, n=40, temperature=0.8, seed=7, n_threads=1))
        self.assertEqual(a + "\n", offkv_run("-n", "40", "--temp", "0.8", "--seed", "7", "-t", "1"))

    def test_tokenize(self):
        ids = self.model.tokenize(PROMPT)
        self.assertEqual(ids[0], self.model.bos)
        self.assertEqual(self.model.tokenize(PROMPT, add_special=False), ids[1:])
        self.assertEqual(self.model.detokenize(ids[1:]), " " + PROMPT)
        # the sentence's tail as a continuation: its ids within the whole
        # (llama.cpp's, as test_tokenizer_spm holds them)
        self.assertEqual(self.model.tokenize(" upon a time", add_special=False, continuation=True), ids[2:])

    def test_eval_rewind(self):
        ids = self.model.tokenize(PROMPT)
        with self.model.context(kv_type="f32", max_write=3, n_threads=1) as ctx:
            first = ctx.eval(ids)  # split into calls of 3
            self.assertEqual(len(first), self.model.n_vocab)
            self.assertEqual(ctx.length, len(ids))
            best = max(range(len(first)), key=first.__getitem__)
            after = ctx.eval([best])
            self.assertEqual(ctx.length, len(ids) + 1)
            self.assertTrue(ctx.can_rewind(len(ids)))
            ctx.rewind(len(ids))
            self.assertEqual(list(ctx.eval([best])), list(after))
            rows = ctx.eval(ids, start=0, all_logits=True)
            self.assertEqual(len(rows), len(ids))
            self.assertEqual(list(rows[-1]), list(first))
            with self.assertRaises(offkv.OffkvError) as e:
                ctx.rewind(ctx.length + 5)
            self.assertEqual(e.exception.status, "OKV_ERR_POSITION")
            self.assertTrue(e.exception.message)
            ctx.clear()
            self.assertEqual(ctx.length, 0)

    def test_sampler(self):
        ids = self.model.tokenize(PROMPT)
        with self.model.context(n_threads=1) as ctx:
            logits = ctx.eval(ids)
        s = offkv.Sampler(self.model.n_vocab, temperature=0)
        self.assertEqual(s.sample(logits), max(range(len(logits)), key=logits.__getitem__))
        with self.assertRaises(ValueError):
            s.sample(logits[:10])
        # a NaN logit is a broken model, not a least likely token
        broken = list(logits)
        broken[len(broken) // 2] = float("nan")
        with self.assertRaises(offkv.OffkvError) as e:
            s.sample(broken)
        self.assertEqual(e.exception.status, "OKV_ERR_NUMERIC")

    def test_errors(self):
        with self.assertRaises(offkv.OffkvError) as e:
            offkv.Model(os.path.join(HERE, "no-such-model.gguf"))
        self.assertEqual(e.exception.status, "OKV_ERR_IO")
        self.assertIn("no-such-model.gguf", e.exception.message)
        with self.assertRaises(offkv.OffkvError) as e:
            self.model.context(kv_type="f8")
        self.assertEqual(e.exception.status, "OKV_ERR_INVALID")
        self.assertIn("f8", e.exception.message)
        with self.assertRaises(offkv.OffkvError) as e:
            self.model.token_bytes(self.model.n_vocab)
        self.assertEqual(e.exception.status, "OKV_ERR_INVALID")
        # the load's threads: the library's bounds, named
        for bad in (0, 1025, "two"):
            with self.assertRaises(offkv.OffkvError, msg=repr(bad)) as e:
                offkv.Model(MODEL, {"n_threads": bad})
            self.assertEqual(e.exception.status, "OKV_ERR_INVALID")
            self.assertIn("n_threads", e.exception.message)
        # given or defaulted, the same model
        with offkv.Model(MODEL, {"n_threads": 3}) as m3, offkv.Model(MODEL, {}) as md:
            self.assertEqual(m3.generate(PROMPT, n=6, temperature=0, n_threads=1),
                             md.generate(PROMPT, n=6, temperature=0, n_threads=1))

    def test_module_entry(self):
        env = dict(os.environ, PYTHONPATH=HERE)
        cmd = [sys.executable, "-m", "offkv", "-m", MODEL, "-p", PROMPT, "-n", "16", "--temp", "0", "-t", "1"]
        out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, env=env).stdout.decode()
        self.assertEqual(out, PROMPT + offkv_run("-n", "16", "--temp", "0", "-t", "1"))


class TestChatTemplate(unittest.TestCase):
    def test_renders_as_jinja2(self):
        # every shared template and conversation against what Python's jinja2
        # renders the way transformers does (../shared/templates/README.md)
        base = os.path.join(SHARED, "templates")
        if not os.path.isdir(base):
            self.skipTest("the templates need ../shared (OKV_SHARED)")
        with open(os.path.join(base, "conversations.json"), encoding="utf-8") as f:
            conv = json.load(f)
        names = sorted(n[:-len(".jinja")] for n in os.listdir(os.path.join(base, "src")) if n.endswith(".jinja"))
        self.assertGreaterEqual(len(names), 24)
        n_checked = 0
        for name in names:
            prefixes = sorted((p for p in conv["specials"] if name.startswith(p)), key=len)
            bos, eos = conv["specials"][prefixes[-1]] if prefixes else ("<s>", "</s>")
            with open(os.path.join(base, "src", name + ".jinja"), encoding="utf-8") as f:
                t = offkv.ChatTemplate(f.read(), bos, eos)
            with t:
                self.assertEqual((t.bos_token, t.eos_token), (bos, eos))
                for case in conv["cases"]:
                    stem = os.path.join(base, "expected", "%s.%s" % (name, case["name"]))
                    kw = {"tools": case.get("tools"), "add_generation_prompt": case.get("add_generation_prompt", True),
                          "now": "2026-12-01T09:30:00"}
                    if os.path.exists(stem + ".txt"):
                        with open(stem + ".txt", "rb") as f:
                            want = f.read().decode("utf-8")
                        self.assertEqual(t.render(case["messages"], **kw), want, "%s %s" % (name, case["name"]))
                    else:
                        with open(stem + ".error", encoding="utf-8") as f:
                            message = f.read().strip()
                        kind, _, rest = message.partition(": ")  # "TemplateError: text": jinja2's class first
                        if kind.endswith("Error") and rest:
                            message = rest
                        with self.assertRaises(offkv.OffkvError, msg="%s %s" % (name, case["name"])) as e:
                            t.render(case["messages"], **kw)
                        self.assertEqual(e.exception.status, "OKV_ERR_FORMAT")
                        self.assertIn(message, e.exception.message)
                    n_checked += 1
        self.assertGreaterEqual(n_checked, 24 * 8)

    def test_variables_and_errors(self):
        src = "{{ messages[0]['content'] }}|{{ enable_thinking }}|{{ tools | length if tools is defined else 'none' }}"
        with offkv.ChatTemplate(src) as t:
            self.assertEqual(t.render([{"role": "user", "content": "h\u00e9"}], enable_thinking=False), "h\u00e9|False|none")
            self.assertEqual(t.render('[{"role": "user", "content": "j"}]', tools=[{}, {}]), "j||2")
            with self.assertRaises(offkv.OffkvError) as e:
                t.render([1])
            self.assertEqual(e.exception.status, "OKV_ERR_INVALID")
            with self.assertRaises(TypeError):
                t.render([{"role": "user", "content": object()}])
            with self.assertRaises(ValueError):
                t.render("[\"a\u0000b\"]")
        with self.assertRaises(offkv.OffkvError) as e:
            offkv.ChatTemplate("{% if %}")
        self.assertEqual(e.exception.status, "OKV_ERR_FORMAT")
        t.close()
        with self.assertRaises(offkv.OffkvError):
            t.render([])


class TestHostile(unittest.TestCase):
    """What a hostile (or careless) caller does: closed objects, wrong types,
    out-of-range values (issue 15, items 1, 8, 9 and 13)."""

    def assertClosed(self, fn):
        with self.assertRaises(offkv.OffkvError) as e:
            fn()
        self.assertIn("closed", e.exception.message)

    def test_closed_context(self):
        with offkv.Model(MODEL) as m:
            ids = m.tokenize(PROMPT)
            ctx = m.context(n_threads=1)
            ctx.eval(ids)
            ctx.close()
            ctx.close()  # twice is fine
            for fn in (lambda: ctx.length, ctx.clear, lambda: ctx.rewind(1), lambda: ctx.can_rewind(1),
                       lambda: ctx.eval(ids)):
                self.assertClosed(fn)
            # The model still works after its context is closed.
            self.assertEqual(m.tokenize(PROMPT), ids)

    def test_closed_model(self):
        with offkv.Model(MODEL) as m:
            ctx = m.context(n_threads=1)
            ids = m.tokenize(PROMPT)
        # The with block closed the model and, before it, its context.
        for fn in (lambda: m.tokenize(PROMPT), m.describe, lambda: m.token_bytes(1), lambda: m.context(),
                   lambda: m.generate(PROMPT, n=2), lambda: ctx.length, ctx.clear, lambda: ctx.rewind(0),
                   lambda: ctx.eval(ids)):
            self.assertClosed(fn)
        m.close()

    def test_context_keeps_model_alive(self):
        m = offkv.Model(MODEL)
        ids = m.tokenize(PROMPT)
        ctx = m.context(n_threads=1)
        ref = ctx.eval(ids)
        ctx.clear()
        del m
        gc.collect()
        # The model is still held by its context: evaluating reads its weights.
        self.assertEqual(list(ctx.eval(ids)), list(ref))
        model = ctx.model
        del ctx
        gc.collect()
        self.assertEqual(len(model._contexts), 0)
        model.close()

    def test_contexts_not_kept(self):
        with offkv.Model(MODEL) as m:
            for _ in range(20):
                m.generate(PROMPT, n=1, temperature=0, n_threads=1)
            c = m.context(n_threads=1)
            self.assertEqual(len(m._contexts), 1)
            c.close()
            self.assertEqual(len(m._contexts), 0)
            c = m.context(n_threads=1)
            del c
            gc.collect()
            self.assertEqual(len(m._contexts), 0)

    def test_arguments_checked(self):
        with offkv.Model(MODEL) as m:
            with m.context(n_threads=1) as ctx:
                for bad, exc in ((2**40, ValueError), (-1, ValueError), (m.n_vocab, ValueError), (1.5, TypeError),
                                 ("a", TypeError), (True, TypeError)):
                    with self.assertRaises(exc, msg=repr(bad)) as e:
                        ctx.eval([1, bad])
                    self.assertIn("tokens[1]", str(e.exception))
                    self.assertEqual(ctx.length, 0)
                with self.assertRaises(TypeError):
                    ctx.eval("abc")
                with self.assertRaises(ValueError):
                    ctx.eval([1], start=-1)
                ctx.eval([1, 2])
                with self.assertRaises(ValueError):
                    ctx.rewind(2**32)  # would be 0 as an int32: the cache emptied
                self.assertEqual(ctx.length, 2)
                with self.assertRaises(TypeError):
                    ctx.rewind(1.0)
            for bad in (5, [65, 66], None, 2.5):
                with self.assertRaises(TypeError, msg=repr(bad)) as e:
                    m.generate(bad, n=2)
                self.assertIn("prompt", str(e.exception))
                with self.assertRaises(TypeError, msg=repr(bad)):
                    m.tokenize(bad)
            for kw, exc in (({"n": 2.5}, TypeError), ({"n": -1}, ValueError), ({"n": "3"}, TypeError),
                            ({"temperature": float("nan")}, ValueError), ({"temperature": -1}, ValueError),
                            ({"temperature": "0"}, TypeError), ({"top_k": 1.5}, TypeError),
                            ({"top_p": 2}, ValueError), ({"seed": 1.5}, TypeError),
                            ({"n_threads": 0}, ValueError), ({"context_size": 0}, ValueError)):
                with self.assertRaises(exc, msg=repr(kw)) as e:
                    m.generate(PROMPT, **kw)
                self.assertIn(next(iter(kw)), str(e.exception))
            with self.assertRaises(ValueError):
                m.token_bytes(-1)
            with self.assertRaises(TypeError):
                m.token_bytes(1.0)
            s = offkv.Sampler(m.n_vocab, temperature=0)
            logits = [0.0] * m.n_vocab
            s.close()
            self.assertClosed(lambda: s.sample(logits))
            with self.assertRaises(TypeError):
                offkv.Sampler(m.n_vocab, top_k=2.5)
            with self.assertRaises(ValueError):
                offkv.Sampler(0)
            # seeds beyond 64 bits (or negative) were folded: 2**64 sampled as 0
            for bad in (2**64, -1):
                with self.assertRaises(ValueError, msg=repr(bad)) as e:
                    offkv.Sampler(m.n_vocab, seed=bad)
                self.assertIn("seed", str(e.exception))
                with self.assertRaises(ValueError, msg=repr(bad)):
                    m.generate(PROMPT, n=2, seed=bad)
            offkv.Sampler(m.n_vocab, seed=2**64 - 1).close()

    def test_c_strings_not_cut(self):
        # a NUL in a path or an option would end the C string there: the
        # model's path with "\0junk" loaded the model, "f32\0junk" was f32
        with self.assertRaises(ValueError) as e:
            offkv.Model(MODEL + "\0junk")
        self.assertIn("path", str(e.exception))
        with offkv.Model(MODEL) as m:
            for opts in ({"kv_type": "f32\0junk"}, {"capacity": "16\0junk"}, {"bogus\0": 1}):
                with self.assertRaises(ValueError, msg=repr(opts)) as e:
                    offkv.Context(m, n_threads=1, **opts)
                self.assertIn("NUL", str(e.exception))
            with self.assertRaises(TypeError) as e:
                offkv.Model(MODEL, [("a", "b")])
            self.assertIn("options", str(e.exception))

    def test_refused_eval_changes_nothing(self):
        # eval splits tokens into calls of max_write; one past the capacity
        # ran the first calls and then failed, leaving them in the cache
        with offkv.Model(MODEL) as m, m.context(n_threads=1, capacity=16, max_write=4) as ctx:
            ctx.eval([1] * 8)
            before = ctx.eval([2], start=7, all_logits=True)[0]
            for tokens, start in (([2] * 12, 6), ([3] * 9, None)):
                with self.assertRaises(ValueError, msg=repr((len(tokens), start))) as e:
                    ctx.eval(tokens, start=start, all_logits=True)
                self.assertIn("capacity 16", str(e.exception))
                self.assertEqual(ctx.length, 8)
            ctx.rewind(7)
            self.assertEqual(ctx.eval([2], all_logits=True)[0], before)

    def test_close_while_another_thread_evaluates(self):
        # ctypes lets go of the GIL inside C: a close() from another thread
        # freed the context (or the model) under a running eval (segfault)
        for which in ("context", "model"):
            m = offkv.Model(MODEL)
            ctx = m.context(n_threads=1, capacity=512, kv_type="f32")
            started = threading.Event()
            outcome = []

            def work():
                try:
                    for _ in range(1000):
                        started.set()
                        ctx.eval([1] + [100] * 255, start=0)
                    outcome.append("finished")
                except offkv.OffkvError as e:
                    outcome.append(e.message)

            t = threading.Thread(target=work)
            t.start()
            started.wait()
            (ctx if which == "context" else m).close()
            t.join()
            self.assertEqual(len(outcome), 1, which)
            self.assertIn("closed", outcome[0], which)
            m.close()

    def test_one_context_from_two_threads(self):
        # two threads' evals on one context took turns in nothing: a step
        # opened by one and the other's BUSY left the cache BUSY for good
        with offkv.Model(MODEL) as m, m.context(n_threads=1, capacity=256) as ctx:
            want = ctx.eval(list(range(1, 100)), start=0)
            errors = []

            def work():
                try:
                    for _ in range(10):
                        if ctx.eval(list(range(1, 100)), start=0) != want:
                            errors.append("different logits")
                except offkv.OffkvError as e:
                    errors.append(str(e))

            ts = [threading.Thread(target=work) for _ in range(2)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            self.assertEqual(errors, [])
            ctx.rewind(0)
            self.assertEqual(ctx.length, 0)

    def test_no_copies(self):
        # a copy shared the C handle: each copy freed it (double free)
        with offkv.Model(MODEL) as m, m.context(n_threads=1, capacity=16) as ctx:
            s = offkv.Sampler(m.n_vocab, seed=1)
            for obj in (m, ctx, s):
                for make in (copy.copy, copy.deepcopy, pickle.dumps):
                    with self.assertRaises(TypeError, msg="%s %s" % (make.__name__, type(obj).__name__)) as e:
                        make(obj)
                    self.assertIn("offkv." + type(obj).__name__, str(e.exception))
            s.close()

    def test_error_pickles(self):
        # multiprocessing sends a worker's exception by pickle; OffkvError
        # could not be rebuilt, and Pool.map hung
        e = pickle.loads(pickle.dumps(offkv.OffkvError("OKV_ERR_IO", "cannot open x")))
        self.assertEqual((e.status, e.message, str(e)), ("OKV_ERR_IO", "cannot open x", "OKV_ERR_IO: cannot open x"))
        self.assertEqual(str(copy.copy(e)), "OKV_ERR_IO: cannot open x")

    def test_eval_progress(self):
        # 10 tokens in calls of at most 4: reports after 4, 8 and 10
        seen = []
        with offkv.Model(MODEL) as m:
            with m.context(n_threads=1, capacity=64, max_write=4) as ctx:
                plain = list(ctx.eval(list(range(1, 11)), start=0))
                got = ctx.eval(list(range(1, 11)), start=0, progress=lambda done, total: seen.append((done, total)))
                self.assertEqual(seen, [(4, 10), (8, 10), (10, 10)])
                self.assertEqual(list(got), plain)
                with self.assertRaisesRegex(TypeError, "progress must be a function"):
                    ctx.eval([1], progress="yes")
                self.assertEqual(ctx.length, 10)

                # an exception from progress cancels: the eval is undone
                def stop(done, total):
                    if done == 8:
                        raise KeyboardInterrupt

                with self.assertRaises(KeyboardInterrupt):
                    ctx.eval(list(range(20, 30)), progress=stop)
                self.assertEqual(ctx.length, 10)
            seen.clear()
            text = m.generate(PROMPT, n=8, temperature=0, n_threads=1,
                              progress=lambda done, total: seen.append((done, total)))
            self.assertEqual(text, offkv_run("-n", "8", "--temp", "0", "-t", "1").rstrip("\n"))
            n = len(m.tokenize(PROMPT))
            self.assertEqual(seen, [(n, n)])
            with self.assertRaisesRegex(TypeError, "progress must be a function"):
                m.generate(PROMPT, n=1, progress=1)
            # a progress function that closes the context, or the model: the
            # eval stops with the closed object's error, nothing freed twice
            ctx = m.context(n_threads=1, capacity=64, max_write=4)
            with self.assertRaisesRegex(offkv.OffkvError, "the context is closed"):
                ctx.eval(list(range(1, 11)), progress=lambda done, total: ctx.close())
            ctx = m.context(n_threads=1, capacity=64, max_write=4)
            with self.assertRaisesRegex(offkv.OffkvError, "closed"):
                ctx.eval(list(range(1, 11)), progress=lambda done, total: m.close())

    def test_exception_between_calls_rewinds(self):
        # an exception (KeyboardInterrupt, say) between two of eval's calls
        # left the first calls' tokens in the cache
        lib = offkv.load_library()
        real = lib.okv_context_eval_last
        calls = []

        def interrupted(*args):
            calls.append(1)
            if len(calls) == 3:
                raise KeyboardInterrupt
            return real(*args)

        with offkv.Model(MODEL) as m, m.context(n_threads=1, capacity=64, max_write=4) as ctx:
            ctx.eval([1, 2, 3])
            lib.okv_context_eval_last = interrupted
            try:
                with self.assertRaises(KeyboardInterrupt):
                    ctx.eval([5] * 20)
            finally:
                lib.okv_context_eval_last = real
            self.assertEqual(len(calls), 3)
            self.assertEqual(ctx.length, 3)

    def test_tokens_need_an_order(self):
        # a set was evaluated in hash order; an int gave a TypeError naming nothing
        with offkv.Model(MODEL) as m, m.context(n_threads=1, capacity=16) as ctx:
            for bad in ({7, 3, 5}, {7: 1}, 5):
                with self.assertRaises(TypeError, msg=repr(bad)) as e:
                    ctx.eval(bad)
                self.assertIn("tokens", str(e.exception))
            self.assertEqual(ctx.length, 0)
            ctx.eval(range(1, 4))
            self.assertEqual(ctx.length, 3)

    def test_logits_past_float32(self):
        # 1e39 became inf in array('f'), tying with 2e39: a wrong argmax
        logits = [0.0] * 512
        logits[5], logits[7] = 1e39, 2e39
        with self.assertRaises(ValueError) as e:
            offkv.Sampler(512, temperature=0).sample(logits)
        self.assertIn("logits[5]", str(e.exception))
        logits[5], logits[7] = 1e30, 2e30
        self.assertEqual(offkv.Sampler(512, temperature=0).sample(logits), 7)

    def test_bounds_as_the_library(self):
        # values Python let through and C refused as OffkvError
        with offkv.Model(MODEL) as m:
            for kw, name in ((dict(top_p=0), "top_p"), (dict(top_p=1e-50), "top_p"),
                             (dict(n_threads=2000), "n_threads"), (dict(context_size=2**31 - 1), "context_size")):
                with self.assertRaises(ValueError, msg=repr(kw)) as e:
                    m.generate(PROMPT, n=1, **kw)
                self.assertIn(name, str(e.exception))

    def test_module_entry_bad_input(self):
        # argv bytes that are not UTF-8 reach the model as they are (as
        # offkv run takes them); bad numbers are a message, not a traceback
        env = dict(os.environ, PYTHONPATH=HERE)
        base = [sys.executable, "-m", "offkv", "-m", MODEL, "-t", "1"]
        out = subprocess.run(base + ["-p", b"caf\xe9", "-n", "8", "--temp", "0"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env)
        self.assertEqual(out.returncode, 0, out.stderr)
        cli = subprocess.run([os.path.join(BIN, "offkv"), "run", "-m", MODEL, "-p", b"caf\xe9", "-n", "8",
                              "--temp", "0", "-t", "1"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True)
        self.assertEqual(out.stdout, cli.stdout)
        for flags, name in ((["-n", "-1"], "n is -1"), (["--seed", "-1"], "seed"), (["--top-p", "0"], "top_p")):
            r = subprocess.run(base + ["-p", "x"] + flags, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
            self.assertEqual(r.returncode, 1, flags)
            self.assertIn("offkv: ", r.stderr.decode(), flags)
            self.assertIn(name, r.stderr.decode(), flags)
            self.assertNotIn("Traceback", r.stderr.decode(), flags)

    def test_failed_load_is_quiet(self):
        # A failed load raises once; its __del__ prints nothing to stderr.
        code = ("import offkv\ntry:\n    offkv.Model('/nonexistent')\nexcept offkv.OffkvError:\n    pass\n"
                "import gc; gc.collect()\n")
        env = dict(os.environ, PYTHONPATH=HERE)
        r = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.assertEqual(r.returncode, 0)
        self.assertEqual(r.stderr.decode(), "")


if __name__ == "__main__":
    unittest.main()
