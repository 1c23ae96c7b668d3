"""Tests of the ctypes binding (ctest `python`; run by make test).

The library comes from $OFFKV_LIB (ctest sets it to the build's liboffkv.so),
the offkv program from $OKV_BIN; the model is models/stories260K.gguf."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import offkv  # noqa: E402

MODEL = os.path.join(ROOT, "models", "stories260K.gguf")
BIN = os.environ.get("OKV_BIN", os.path.join(ROOT, "build"))
PROMPT = "Once upon a time"


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

    def test_greedy_matches_cli(self):
        text = self.model.generate(PROMPT, n=64, temperature=0, n_threads=1)
        self.assertEqual(text + "\n", offkv_run("-n", "64", "--temp", "0", "-t", "1"))
        self.assertIn("Lily", text)

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

    def test_sampled_matches_cli(self):
        a = self.model.generate(PROMPT, n=40, temperature=0.8, seed=7, n_threads=1)
        self.assertEqual(a, self.model.generate(PROMPT, n=40, temperature=0.8, seed=7, n_threads=1))
        self.assertEqual(a + "\n", offkv_run("-n", "40", "--temp", "0.8", "--seed", "7", "-t", "1"))

    def test_tokenize(self):
        ids = self.model.tokenize(PROMPT)
        self.assertEqual(ids[0], self.model.bos)
        self.assertEqual(self.model.tokenize(PROMPT, add_special=False), ids[1:])
        self.assertEqual(self.model.detokenize(ids[1:]), " " + PROMPT)

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

    def test_module_entry(self):
        env = dict(os.environ, PYTHONPATH=HERE)
        cmd = [sys.executable, "-m", "offkv", "-m", MODEL, "-p", PROMPT, "-n", "16", "--temp", "0", "-t", "1"]
        out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, env=env).stdout.decode()
        self.assertEqual(out, PROMPT + offkv_run("-n", "16", "--temp", "0", "-t", "1"))


if __name__ == "__main__":
    unittest.main()
