"""offkv info against a GGUF reader of its own (below, from the format's
description: header, key/value pairs, tensor infos, aligned data): on a file
this script writes with every value type and the awkward values (NaN and
infinities, u64 and i64 extremes, invalid UTF-8, control bytes, nested
arrays, a long string), on real models of several weight types and on real
vocabularies, `offkv info --json --items all` must give every key, type,
value and tensor (type, shape, bytes, offset) as this reader does; --items
and the text form's cut strings say what they leave out; bad files and
arguments are errors that name them.

usage: info_check.py OFFKV_PROGRAM [SHARED_DIR]"""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

OFFKV = sys.argv[1]
SHARED = sys.argv[2] if len(sys.argv) > 2 else None

# metadata value types, as numbered in the file
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
TYPE_NAMES = ["u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"]
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<?", U64: "<Q",
          I64: "<q", F64: "<d"}
# ggml tensor types in the shared files: name, values per block, bytes per block
GGML = {0: ("f32", 1, 4), 1: ("f16", 1, 2), 2: ("q4_0", 32, 18), 3: ("q4_1", 32, 20), 6: ("q5_0", 32, 22),
        7: ("q5_1", 32, 24), 8: ("q8_0", 32, 34), 10: ("q2_K", 256, 84), 11: ("q3_K", 256, 110),
        12: ("q4_K", 256, 144), 13: ("q5_K", 256, 176), 14: ("q6_K", 256, 210), 30: ("bf16", 1, 2),
        39: ("mxfp4", 32, 17)}

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


# ---- reading -----------------------------------------------------------------
class Reader:
    def __init__(self, data):
        self.d, self.p = data, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.d, self.p)[0]
        self.p += struct.calcsize(fmt)
        return v

    def raw_str(self):
        n = self.take("<Q")
        s = self.d[self.p:self.p + n]
        self.p += n
        return s

    def value(self, t):
        """(type, value): raw bytes for strings, (elem, [values]) for arrays"""
        if t == STRING:
            return self.raw_str()
        if t == ARRAY:
            elem, n = self.take("<I"), self.take("<Q")
            return (elem, [self.value(elem) for _ in range(n)])
        return self.take(SCALAR[t])


def read_gguf(path):
    with open(path, "rb") as f:
        r = Reader(f.read())
    assert r.take("<4s") == b"GGUF"
    version = r.take("<I")
    n_t, n_kv = r.take("<Q"), r.take("<Q")
    kv = []
    for _ in range(n_kv):
        key = r.raw_str().decode()
        t = r.take("<I")
        kv.append((key, t, r.value(t)))
    tensors = []
    for _ in range(n_t):
        name = r.raw_str().decode()
        dims = [r.take("<Q") for _ in range(r.take("<I"))]
        t, off = r.take("<I"), r.take("<Q")
        tname, block, size = GGML[t]
        n = math.prod(dims)
        tensors.append({"name": name, "type": tname, "shape": dims, "bytes": n // block * size, "offset": off})
    align = next((v for k, t, v in kv if k == "general.alignment"), 32)
    return {"version": version, "alignment": align, "kv": kv, "tensors": tensors}


# ---- comparing ---------------------------------------------------------------
def per_byte_fffd(err):
    return ("\ufffd" * (err.end - err.start), err.end)


import codecs  # noqa: E402

codecs.register_error("per_byte_fffd", per_byte_fffd)


def expect_json(t, v):
    """What offkv's JSON should hold for a value of type t read as v."""
    if t == STRING:
        return v.decode("utf-8", "per_byte_fffd")
    if t in (F32, F64):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
    return v


def same_value(t, want, got):
    if t in (F32, F64) and isinstance(got, (int, float)):
        # the same bits (-0.0 included); f32: the digits read back as that f32
        fmt = "<f" if t == F32 else "<d"
        return struct.pack(fmt, got) == struct.pack(fmt, want)
    if t == BOOL:
        return got is want
    return got == want and type(got) is type(want)


def compare(path, items="all"):
    want = read_gguf(path)
    res = subprocess.run([OFFKV, "info", "--json", "--items", str(items), path], capture_output=True)
    check(res.returncode == 0, f"{path}: offkv info exit {res.returncode}: {res.stderr.decode(errors='replace')}")
    if res.returncode:
        return
    got = json.loads(res.stdout)
    name = os.path.basename(path)
    check(got["version"] == want["version"] and got["alignment"] == want["alignment"],
          f"{name}: version/alignment {got['version']}/{got['alignment']}, want {want['version']}/{want['alignment']}")
    check(list(got["metadata"]) == [k for k, _, _ in want["kv"]], f"{name}: keys or their order differ")
    bad = 0
    for key, t, v in want["kv"]:
        g = got["metadata"].get(key)
        if g is None or g["type"] != TYPE_NAMES[t]:
            check(False, f"{name}: {key}: type {g and g['type']}, want {TYPE_NAMES[t]}")
            continue
        if t == ARRAY:
            elem, vals = v
            shown = vals if items == "all" else vals[:items]
            ok = g["elem"] == TYPE_NAMES[elem] and g["length"] == len(vals)
            if elem == ARRAY:
                ok = ok and g["value"] == []
            else:
                ok = ok and len(g["value"]) == len(shown) and all(
                    same_value(elem, expect_json(elem, w), x) for w, x in zip(shown, g["value"]))
        else:
            ok = same_value(t, expect_json(t, v), g["value"])
        if not ok:
            bad += 1
            if bad <= 3:
                check(False, f"{name}: {key} = {str(g)[:300]}, want {str(v)[:300]}")
    check(bad == 0, f"{name}: {bad} values differ")
    check(got["tensors"] == want["tensors"], f"{name}: tensors differ (first: {got['tensors'][:1]} vs "
                                             f"{want['tensors'][:1]})")
    print(f"ok: {name}: {len(want['kv'])} keys, {len(want['tensors'])} tensors, --items {items}")
    return got


# ---- a file of every kind of value --------------------------------------------
def enc_str(b):
    return struct.pack("<Q", len(b)) + b


def enc_value(t, v):
    if t == STRING:
        return enc_str(v)
    if t == ARRAY:
        elem, vals = v
        return struct.pack("<IQ", elem, len(vals)) + b"".join(enc_value(elem, x) for x in vals)
    return struct.pack(SCALAR[t], v)


def write_gguf(path, kv, tensors):
    """tensors: (name, ggml type, dims); data zeros, 32-byte aligned"""
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv))
    for key, t, v in kv:
        out += enc_str(key.encode()) + struct.pack("<I", t) + enc_value(t, v)
    off, infos = 0, b""
    sizes = []
    for name, t, dims in tensors:
        _, block, size = GGML[t]
        n = math.prod(dims) // block * size
        infos += enc_str(name.encode()) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        infos += struct.pack("<IQ", t, off)
        sizes.append(n)
        off += (n + 31) // 32 * 32
    out += infos
    out += b"\0" * (-len(out) % 32) + b"\0" * off
    with open(path, "wb") as f:
        f.write(out)


ODD_KV = [
    ("general.architecture", STRING, b"odd"),
    ("t.u8", U8, 255), ("t.i8", I8, -128), ("t.u16", U16, 65535), ("t.i16", I16, -32768),
    ("t.u32", U32, 4294967295), ("t.i32", I32, -2147483648),
    ("t.u64", U64, 2**64 - 1), ("t.i64", I64, -2**63),
    ("t.f32", F32, 1e-5), ("t.f32.tiny", F32, 1.401298464324817e-45), ("t.f32.nan", F32, float("nan")),
    ("t.f32.inf", F32, float("inf")), ("t.f64", F64, 0.1), ("t.f64.max", F64, 1.7976931348623157e308),
    ("t.f64.ninf", F64, float("-inf")), ("t.true", BOOL, True), ("t.false", BOOL, False),
    ("t.str.ctl", STRING, b'quote " backslash \\ nl \n tab \t cr \r bel \x07 del \x7f'),
    ("t.str.utf8", STRING, "caf\u00e9 \u4e2d\u6587 \U0001f600".encode()),
    ("t.str.bad", STRING, b"lone \x80 cut \xe2\x82 over \xc0\x80 surr \xed\xa0\x80 high \xf5\x80 end \xf0\x9f"),
    ("t.str.long", STRING, b"x" * 1000),
    ("t.arr.u64", ARRAY, (U64, [0, 2**63, 2**64 - 1])),
    ("t.arr.i8", ARRAY, (I8, [-1, 0, 127])),
    ("t.arr.f64", ARRAY, (F64, [float("nan"), -0.0, 5e-324])),
    ("t.arr.bool", ARRAY, (BOOL, [True, False])),
    ("t.arr.str", ARRAY, (STRING, [b"a", b"\xff", b""])),
    ("t.arr.empty", ARRAY, (U32, [])),
    ("t.arr.nested", ARRAY, (ARRAY, [(U8, [1, 2]), (U8, [])])),
    ("t.arr.many", ARRAY, (I32, list(range(-20, 20)))),
]


def main():
    tmp = tempfile.mkdtemp(prefix="offkv-info-")
    odd = os.path.join(tmp, "odd.gguf")
    write_gguf(odd, ODD_KV, [("a", 0, [4]), ("b", 1, [8, 2]), ("c", 8, [64, 3])])
    compare(odd)
    got = compare(odd, items=3)
    if got:
        many = got["metadata"]["t.arr.many"]
        check(many["length"] == 40 and many["value"] == [-20, -19, -18], f"--items 3: {many}")
    compare(odd, items=0)

    # text: one line a key, cut strings and arrays saying what they leave out
    text = subprocess.run([OFFKV, "info", odd], capture_output=True, text=True, errors="replace")
    lines = {ln.split()[0]: ln for ln in text.stdout.splitlines() if ln.startswith("  ")}
    check(text.returncode == 0 and text.stdout.startswith(f"{odd}: GGUF v3, alignment 32, {len(ODD_KV)} metadata keys,"
                                                          " 3 tensors"), f"text header: {text.stdout[:200]}")
    check(lines.get("t.str.long", "").endswith('"' + "x" * 200 + '" ... (800 more bytes)'),
          f"text long string: {lines.get('t.str.long', '')[-80:]}")
    check(lines.get("t.arr.many", "").endswith("-13, ... (32 more)"), f"text array: {lines.get('t.arr.many')}")
    check("\\n" in lines.get("t.str.ctl", "") and "\\x07" in lines.get("t.str.ctl", ""),
          f"text control bytes: {lines.get('t.str.ctl')}")
    check(lines.get("c", "").split()[1:4] == ["q8_0", "64", "x"], f"text tensor: {lines.get('c')}")

    # --key: one value alone; a string's bytes exactly as stored
    def key(path, k, *extra):
        return subprocess.run([OFFKV, "info", path, "--key", k, *extra], capture_output=True)
    kv = {k: (t, v) for k, t, v in ODD_KV}
    for k in ["t.str.bad", "t.str.ctl", "t.str.long", "t.str.utf8"]:
        r = key(odd, k)
        check(r.returncode == 0 and r.stdout == kv[k][1], f"--key {k}: {r.stdout[:80]!r}")
    r = key(odd, "t.u64")
    check(r.stdout == b"18446744073709551615\n", f"--key t.u64: {r.stdout!r}")
    r = key(odd, "t.arr.many", "--items", "2")
    check(r.stdout == b"-20\n-19\n... (38 more)\n", f"--key t.arr.many --items 2: {r.stdout!r}")
    r = key(odd, "t.arr.f64", "--json")
    check(r.returncode == 0 and json.loads(r.stdout) == ["NaN", -0.0, 5e-324], f"--key t.arr.f64 --json: {r.stdout!r}")
    r = key(odd, "t.nope")
    check(r.returncode == 1 and b"t.nope" in r.stderr and r.stdout == b"", f"--key t.nope: {r.returncode} {r.stderr!r}")

    # errors: named, nothing on stdout
    trunc = os.path.join(tmp, "trunc.gguf")
    with open(odd, "rb") as f, open(trunc, "wb") as g:
        g.write(f.read()[:300])
    for argv, code, needle in [([trunc], 1, "trunc.gguf"), ([os.path.join(tmp, "none.gguf")], 1, "none.gguf"),
                               ([odd, "--items", "-1"], 2, "-1"), ([odd, "--items", "x"], 2, "'x'"),
                               ([odd, odd], 2, "one file at a time"), ([], 2, "GGUF file is required"),
                               ([odd, "--bogus"], 2, "--bogus")]:
        r = subprocess.run([OFFKV, "info", *argv], capture_output=True, text=True)
        check(r.returncode == code and needle in r.stderr and r.stdout == "",
              f"offkv info {argv}: exit {r.returncode} (want {code}), stderr {r.stderr.strip()!r}")

    if SHARED and os.path.isdir(SHARED):
        for m in ["tiny-llama", "tiny-llama256-q4_k_m", "tiny-llama256-q2_k", "tiny-gpt-oss-mx", "tiny-gemma3"]:
            compare(os.path.join(SHARED, "models", m + ".gguf"))
        for v in ["ggml-vocab-llama-spm", "ggml-vocab-gemma3", "ggml-vocab-gpt-2"]:
            compare(os.path.join(SHARED, "vocab", v + ".gguf"))
        # a real chat template, written out whole
        qwen = os.path.join(SHARED, "vocab", "ggml-vocab-qwen3.gguf")
        want = dict((k, v) for k, _, v in read_gguf(qwen)["kv"])["tokenizer.chat_template"]
        r = subprocess.run([OFFKV, "info", qwen, "--key", "tokenizer.chat_template"], capture_output=True)
        check(r.returncode == 0 and r.stdout == want, f"--key tokenizer.chat_template: {len(r.stdout)} bytes, want {len(want)}")
    else:
        print("info_check: ../shared not found: the real files were skipped (the written one ran)")
    for f in os.listdir(tmp):
        os.remove(os.path.join(tmp, f))
    os.rmdir(tmp)
    if failures:
        print(f"info_check: {len(failures)} failures")
        sys.exit(1)
    print("info_check: all passed")


main()
