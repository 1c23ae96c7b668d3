"""offkv from Python: a ctypes binding over liboffkv.so (standard library only).

    import offkv
    model = offkv.Model("stories260K.gguf")
    print(model.generate("Once upon a time", n=64, temperature=0.8, seed=1))

Lower level, for callers who sample themselves:

    ctx = model.context(n_threads=2)           # its own KV cache
    ids = model.tokenize("Once upon a time")   # BOS added as the vocabulary asks
    logits = ctx.eval(ids)                     # array('f') of n_vocab: after the last token
    tok = max(range(len(logits)), key=logits.__getitem__)
    logits = ctx.eval([tok])                   # continues at ctx.length
    ctx.rewind(len(ids))                       # drop what came after the prompt

liboffkv.so is looked for in $OFFKV_LIB, then beside this file, then on the
loader's path (liboffkv.so.0, as `make install` puts it).  Every failure the
library reports raises OffkvError carrying its status and message.

Objects may be shared between threads: calls on one Model, Context or
Sampler take turns (each holds a lock; separate contexts run side by side),
and close() waits for a call in flight.  They cannot be copied or pickled
(each owns C memory); make another instead.
"""

import array
import codecs
import ctypes
import json
import math
import operator
import os
import sys
import threading
import weakref

__all__ = ["OffkvError", "Model", "Context", "Sampler", "version", "load_library"]

_ADD_SPECIAL = 1
_PARSE_SPECIAL = 2
_CONTINUE = 4
_STATUS = ["OKV_OK", "OKV_ERR_INVALID", "OKV_ERR_POSITION", "OKV_ERR_NOMEM", "OKV_ERR_NOT_FOUND",
           "OKV_ERR_FORMAT", "OKV_ERR_IO", "OKV_ERR_UNSUPPORTED", "OKV_ERR_BUSY",
           "OKV_ERR_NUMERIC"]


class OffkvError(Exception):
    """A failure reported by liboffkv: .status is its name ("OKV_ERR_IO", ...),
    .message the library's words."""

    def __init__(self, status, message):
        self.status = status
        self.message = message
        # both arguments kept, so the error pickles (multiprocessing) and copies
        super().__init__(status, message)

    def __str__(self):
        return "%s: %s" % (self.status, self.message)


class _Error(ctypes.Structure):
    _fields_ = [("status", ctypes.c_int), ("message", ctypes.c_char * 256)]


class _CacheConfig(ctypes.Structure):
    _fields_ = [("capacity", ctypes.c_int32), ("initial_capacity", ctypes.c_int32),
                ("max_write", ctypes.c_int32), ("dtype", ctypes.c_int)]


class _SamplerParams(ctypes.Structure):
    _fields_ = [("temperature", ctypes.c_float), ("top_k", ctypes.c_int32),
                ("top_p", ctypes.c_float), ("seed", ctypes.c_uint64)]


class _ChatInput(ctypes.Structure):
    _fields_ = [("messages_json", ctypes.c_char_p), ("tools_json", ctypes.c_char_p),
                ("extra_json", ctypes.c_char_p), ("add_generation_prompt", ctypes.c_bool),
                ("now", ctypes.c_char_p), ("limits", ctypes.c_void_p)]


_P = ctypes.c_void_p
_I32 = ctypes.c_int32
_I32P = ctypes.POINTER(ctypes.c_int32)
_FP = ctypes.POINTER(ctypes.c_float)
_SZ = ctypes.c_size_t
_ERR = ctypes.POINTER(_Error)
_STRS = ctypes.POINTER(ctypes.c_char_p)
# okv_model_progress: (user, stage, done, total)
_PROGRESS = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint64, ctypes.c_uint64)
_SIGNATURES = {
    "okv_version": (ctypes.c_char_p, []),
    "okv_model_load": (_P, [ctypes.c_char_p, _STRS, _ERR]),
    "okv_model_load_progress": (_P, [ctypes.c_char_p, _STRS, _PROGRESS, ctypes.c_void_p, _ERR]),
    "okv_model_free": (None, [_P]),
    "okv_model_arch": (ctypes.c_char_p, [_P]),
    "okv_model_describe": (ctypes.c_char_p, [_P]),
    "okv_model_n_vocab": (_I32, [_P]),
    "okv_model_n_ctx_train": (_I32, [_P]),
    "okv_model_tokenizer": (_P, [_P]),
    "okv_context_create": (_P, [_P, _STRS, _P, _ERR]),
    "okv_context_free": (None, [_P]),
    "okv_context_eval": (ctypes.c_int, [_P, _I32P, _I32P, _I32, _FP, _ERR]),
    "okv_context_eval_last": (ctypes.c_int, [_P, _I32P, _I32P, _I32, _FP, _ERR]),
    "okv_context_cache": (_P, [_P]),
    "okv_context_max_write": (_I32, [_P]),
    "okv_cache_length": (_I32, [_P]),
    "okv_cache_get_config": (ctypes.c_bool, [_P, ctypes.POINTER(_CacheConfig)]),
    "okv_cache_can_rewind": (ctypes.c_bool, [_P, _I32]),
    "okv_cache_rewind": (ctypes.c_int, [_P, _I32, _ERR]),
    "okv_cache_clear": (ctypes.c_int, [_P, _ERR]),
    "okv_tokenizer_encode": (ctypes.c_int, [_P, ctypes.c_char_p, _SZ, ctypes.c_uint, _I32P, _SZ,
                                            ctypes.POINTER(_SZ), _ERR]),
    "okv_tokenizer_token_to_piece": (ctypes.c_int, [_P, _I32, ctypes.c_int, ctypes.c_char_p, _SZ,
                                                    ctypes.POINTER(_SZ), _ERR]),
    "okv_tokenizer_bos": (_I32, [_P]),
    "okv_tokenizer_eos": (_I32, [_P]),
    "okv_tokenizer_adds_bos": (ctypes.c_int, [_P]),
    "okv_tokenizer_eog": (_I32P, [_P, _I32P]),
    "okv_sampler_create": (_P, [ctypes.POINTER(_SamplerParams), _I32, _ERR]),
    "okv_sampler_free": (None, [_P]),
    "okv_sampler_sample": (_I32, [_P, _FP]),
    "okv_free": (None, [_P]),
    "okv_gguf_open": (_P, [ctypes.c_char_p, _ERR]),
    "okv_gguf_close": (None, [_P]),
    "okv_chat_template_parse": (_P, [ctypes.c_char_p, _SZ, _ERR]),
    "okv_chat_template_from_gguf": (_P, [_P, _ERR]),
    "okv_chat_template_free": (None, [_P]),
    "okv_chat_template_set_tokens": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.c_char_p, _ERR]),
    "okv_chat_template_source": (ctypes.c_char_p, [_P]),
    "okv_chat_template_bos": (ctypes.c_char_p, [_P]),
    "okv_chat_template_eos": (ctypes.c_char_p, [_P]),
    "okv_chat_template_render": (ctypes.c_int, [_P, ctypes.POINTER(_ChatInput), ctypes.POINTER(ctypes.c_void_p),
                                                ctypes.POINTER(_SZ), _ERR]),
}

_lib = None


def load_library(path=None):
    """Loads liboffkv.so (path, else $OFFKV_LIB, beside this file, the loader's
    path) once and returns it; later calls return the same library."""
    global _lib
    if _lib is not None:
        return _lib
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [path] if path else []
    if os.environ.get("OFFKV_LIB"):
        candidates.append(os.environ["OFFKV_LIB"])
    candidates += [os.path.join(here, "liboffkv.so"), os.path.join(here, "liboffkv.so.0"),
                   "liboffkv.so.0", "liboffkv.so"]
    tried = []
    for c in candidates:
        if os.sep in c and not os.path.exists(c):
            continue
        try:
            lib = ctypes.CDLL(c)
            break
        except OSError as e:
            tried.append("%s (%s)" % (c, e))
    else:
        raise OSError("offkv: liboffkv.so not found; set OFFKV_LIB to its path. Tried: " +
                      ("; ".join(tried) or ", ".join(candidates)))
    for name, (res, args) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args
    _lib = lib
    return lib


def version():
    """The linked library's version, "MAJOR.MINOR.PATCH"."""
    return load_library().okv_version().decode()


def _check(status, err):
    if status != 0:
        name = _STATUS[status] if 0 <= status < len(_STATUS) else "OKV_ERR_UNKNOWN"
        raise OffkvError(name, err.message.decode("utf-8", "replace"))


def _raise(err):
    _check(err.status if err.status else 1, err)


def _int(name, v, lo=None, hi=None):
    """v as an int (an int, or what operator.index takes; not a bool or a
    float), in [lo, hi]: TypeError or ValueError naming it otherwise.  The C
    API takes int32 and friends: a larger value would be cut silently."""
    if isinstance(v, bool):
        raise TypeError("%s must be an integer, not a bool" % name)
    try:
        v = operator.index(v)
    except TypeError:
        raise TypeError("%s must be an integer, not %s" % (name, type(v).__name__)) from None
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise ValueError("%s is %d, outside %s..%s" % (name, v, "" if lo is None else lo, "" if hi is None else hi))
    return v


def _float(name, v, lo, hi):
    """v as a finite float in [lo, hi]."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError("%s must be a number, not %s" % (name, type(v).__name__))
    v = float(v)
    if not math.isfinite(v) or v < lo or v > hi:
        raise ValueError("%s is %r, outside %g..%g" % (name, v, lo, hi))
    return v


def _text(name, text):
    """A str (encoded as UTF-8) or bytes-like text; anything else (an int, a
    list of ints, which bytes() would turn into NULs or characters) is a
    TypeError."""
    if isinstance(text, str):
        return text.encode("utf-8")
    if isinstance(text, (bytes, bytearray, memoryview)):
        return bytes(text)
    raise TypeError("%s must be str or bytes, not %s" % (name, type(text).__name__))


_I32_MAX = 2**31 - 1
_CAPACITY_MAX = 2**30  # okv_context_create's capacity bound


def _no_nul(name, b):
    """b (bytes for a C string) unless it holds a NUL, where C would cut it."""
    if b"\0" in b:
        raise ValueError("%s holds a NUL character at byte %d; a C string would end there" % (name, b.index(b"\0")))
    return b


def _options(opts):
    """A dict of options as the NULL-terminated char *[] the C API takes."""
    if opts is not None and not isinstance(opts, dict):
        raise TypeError("options must be a dict of name: value, not %s" % type(opts).__name__)
    flat = []
    for k, v in (opts or {}).items():
        key = _no_nul("option name %r" % (k,), str(k).encode())
        flat += [key, _no_nul("option %r" % (k,), str(v).encode())]
    arr = (ctypes.c_char_p * (len(flat) + 1))(*flat, None)
    return arr


def _default_threads():
    n = os.cpu_count() or 1
    return max(1, min(n, 8))


class _Handle:
    """What Model, Context and Sampler share: a lock that makes calls on one
    object take turns (ctypes lets go of the GIL inside C, so without it a
    close() could free memory another thread's call is using), and no
    copies (a copy would share the C handle and free it twice)."""

    def __copy__(self):
        raise TypeError("offkv.%s objects cannot be copied (each owns C memory); make another"
                        % type(self).__name__)

    def __deepcopy__(self, memo):
        self.__copy__()

    def __reduce__(self):
        raise TypeError("offkv.%s objects cannot be pickled (each owns C memory)" % type(self).__name__)

    def _release(self, attr, free, *also):
        """Frees the C handle in attr with _lib.free, after a call in flight;
        attr and also become None.  Nothing when __init__ failed before the
        lock (then there is nothing to free)."""
        lock = getattr(self, "_lock", None)
        if lock is None:
            return
        with lock:
            handle = getattr(self, attr, None)
            # _lib may already be gone when the interpreter shuts down
            if handle and _lib is not None:
                getattr(_lib, free)(handle)
            for a in (attr,) + also:
                setattr(self, a, None)


def _top_p(top_p):
    top_p = _float("top_p", top_p, 0.0, 1.0)
    # as the C float the sampler takes (1e-50 is 0 there)
    if ctypes.c_float(top_p).value <= 0.0:
        raise ValueError("top_p is %r; it must be above 0 as a 32-bit float (1 keeps every token)" % (top_p,))
    return top_p


def _logits_f32(logits):
    """logits as array('f'); a finite value past float32's range is a
    ValueError naming it (the conversion would make it inf and tie it)."""
    if isinstance(logits, array.array) and logits.typecode == "f":
        return logits
    wide = array.array("d", logits)
    out = array.array("f", wide)
    if math.inf in out or -math.inf in out:
        for i, (d, f) in enumerate(zip(wide, out)):
            if math.isinf(f) and math.isfinite(d):
                raise ValueError("logits[%d] is %r, past float32's range" % (i, d))
    return out


class Sampler(_Handle):
    """okv_sampler: greedy when temperature <= 0, else top-k, then top-p, then a
    draw from the temperature-scaled softmax with its own seeded state."""

    def __init__(self, n_vocab, temperature=0.8, top_k=40, top_p=0.95, seed=None):
        self._s = None
        self._lock = threading.RLock()
        lib = load_library()
        n_vocab = _int("n_vocab", n_vocab, 1, _I32_MAX)
        temperature = _float("temperature", temperature, 0.0, 1e30)
        top_k = _int("top_k", top_k, 0, _I32_MAX)
        top_p = _top_p(top_p)
        if seed is None:
            seed = int.from_bytes(os.urandom(8), "little")
        seed = _int("seed", seed, 0, 2**64 - 1)
        p = _SamplerParams(temperature, top_k, top_p, seed)
        err = _Error()
        self._s = lib.okv_sampler_create(ctypes.byref(p), n_vocab, ctypes.byref(err))
        if not self._s:
            _raise(err)
        self.n_vocab = n_vocab
        self.seed = seed

    def sample(self, logits):
        """Picks a token id from n_vocab logits (an array('f') or any floats); a NaN
        logit raises OffkvError OKV_ERR_NUMERIC (the model's output is broken)."""
        logits = _logits_f32(logits)
        if len(logits) != self.n_vocab:
            raise ValueError("%d logits for a vocabulary of %d" % (len(logits), self.n_vocab))
        buf = (ctypes.c_float * len(logits)).from_buffer(logits)
        with self._lock:
            if not self._s:
                raise OffkvError("OKV_ERR_INVALID", "the sampler is closed")
            token = int(load_library().okv_sampler_sample(self._s, buf))
        if token == -2:  # OKV_SAMPLE_NAN
            raise OffkvError("OKV_ERR_NUMERIC", "a logit is NaN: the model's output is broken, no token was drawn")
        return token

    def close(self):
        """Frees the sampler (after a sample() in flight); sample() then raises
        OffkvError.  Closing twice is fine."""
        self._release("_s", "okv_sampler_free")

    __del__ = close


def _json_text(name, v):
    """v as JSON text for the C API: a str is taken as JSON already; lists and
    dicts are encoded (UTF-8, non-ASCII kept)."""
    if isinstance(v, (str, bytes, bytearray)):
        return _no_nul(name, _text(name, v))
    return _no_nul(name, json.dumps(v, ensure_ascii=False).encode("utf-8"))


class ChatTemplate(_Handle):
    """A chat template (Jinja), parsed once and rendered any number of times:
    render() makes the prompt text of a conversation as Hugging Face's
    apply_chat_template does (trim_blocks, lstrip_blocks, a sandbox with
    limits).  source: the template's text (str or bytes); bos_token and
    eos_token: the strings it sees by those names (None: empty).
    Model.chat_template is the one a model's file holds."""

    def __init__(self, source, bos_token=None, eos_token=None):
        self._t = None
        self._lock = threading.RLock()
        lib = load_library()
        data = _text("source", source)
        err = _Error()
        self._t = lib.okv_chat_template_parse(data, len(data), ctypes.byref(err))
        if not self._t:
            _raise(err)
        if bos_token is not None or eos_token is not None:
            self._set_tokens(bos_token, eos_token)

    @classmethod
    def _adopt(cls, handle):
        t = cls.__new__(cls)
        t._lock = threading.RLock()
        t._t = handle
        return t

    def _set_tokens(self, bos_token, eos_token):
        err = _Error()
        b = None if bos_token is None else _no_nul("bos_token", _text("bos_token", bos_token))
        e = None if eos_token is None else _no_nul("eos_token", _text("eos_token", eos_token))
        with self._lock:
            _check(load_library().okv_chat_template_set_tokens(self._live(), b, e, ctypes.byref(err)), err)

    def _live(self):
        if not self._t:
            raise OffkvError("OKV_ERR_INVALID", "the chat template is closed")
        return self._t

    def _text_of(self, fn):
        with self._lock:
            return getattr(load_library(), fn)(self._live()).decode("utf-8", "replace")

    @property
    def source(self):
        """The template's text."""
        return self._text_of("okv_chat_template_source")

    @property
    def bos_token(self):
        return self._text_of("okv_chat_template_bos")

    @property
    def eos_token(self):
        return self._text_of("okv_chat_template_eos")

    def render(self, messages, tools=None, add_generation_prompt=True, now=None, **variables):
        """The prompt text the template makes of messages (a list of OpenAI-style
        dicts: role, content, tool_calls, reasoning_content, ...; or their JSON
        text).  tools: a list of tools (None: undefined in the template);
        variables: further template variables (enable_thinking=False,
        reasoning_effort="low", ...); now: strftime_now's time, a datetime or
        "YYYY-MM-DDTHH:MM:SS" (None: now, local).  A template that raises
        (raise_exception) or fails is OffkvError OKV_ERR_FORMAT with its
        message; messages of the wrong shape OKV_ERR_INVALID."""
        lib = load_library()
        if now is not None and not isinstance(now, str):
            now = now.strftime("%Y-%m-%dT%H:%M:%S")
        # the ctypes arguments stay referenced until the call returns
        m = _json_text("messages", messages)
        t = None if tools is None else _json_text("tools", tools)
        x = _json_text("variables", variables) if variables else None
        n = None if now is None else _no_nul("now", now.encode())
        inp = _ChatInput(m, t, x, bool(add_generation_prompt), n, None)
        out = ctypes.c_void_p()
        size = _SZ(0)
        err = _Error()
        with self._lock:
            st = lib.okv_chat_template_render(self._live(), ctypes.byref(inp), ctypes.byref(out), ctypes.byref(size),
                                              ctypes.byref(err))
        try:
            _check(st, err)
            return ctypes.string_at(out.value, size.value).decode("utf-8", "replace")
        finally:
            if out.value:
                lib.okv_free(out)

    def close(self):
        """Frees the template; its methods then raise OffkvError."""
        self._release("_t", "okv_chat_template_free")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    __del__ = close


class Model(_Handle):
    """A GGUF model (general.architecture llama, gemma3, muse-glimmer, qwen2,
    qwen3, qwen3moe, smollm3, gemma2, phi3 or gpt-oss), memory-mapped.
    options: the okv_model_load options, e.g. {"sliding_window": 4096};
    n_threads (the threads the load repacks the matrices on) defaults to
    this machine's cores, at most 8, as a Context's does.
    progress: None, or a function called as progress(stage, done, total)
    while the model loads (okv_model_load_progress: stage "reading" then
    "repacking", done and total in bytes); an exception it raises stops
    nothing in the load, which ends, frees the model and raises it."""

    def __init__(self, path, options=None, progress=None):
        # Set first: close() (and __del__ after a failed load) reads them.
        self._m = None
        self._tok = None
        self._path = os.fsencode(path)
        self._template = False  # not read yet (None: the file has none)
        # Held by the model's own calls, close(), and a context's creation:
        # a context's calls hold the context's lock, and close() closes the
        # contexts first (the model lock, then a context's: one order).
        self._lock = threading.RLock()
        # Held weakly: a context keeps its model alive, not the other way.
        self._contexts = weakref.WeakSet()
        lib = load_library()
        err = _Error()
        opts = {} if options is None else dict(options) if isinstance(options, dict) else options
        if isinstance(opts, dict) and "n_threads" not in opts:
            opts["n_threads"] = _default_threads()
        self._opts = _options(opts)
        if progress is None:
            self._m = lib.okv_model_load(_no_nul("path", os.fsencode(path)), self._opts, ctypes.byref(err))
        else:
            if not callable(progress):
                raise TypeError("progress must be a function of (stage, done, total) or None, not %s"
                                % type(progress).__name__)
            raised = []

            def call(_user, stage, done, total):
                # ctypes would print an exception and drop it: keep the first
                if not raised:
                    try:
                        progress(stage.decode(), int(done), int(total))
                    except BaseException as e:  # noqa: B902 (KeyboardInterrupt too)
                        raised.append(e)

            cb = _PROGRESS(call)
            self._m = lib.okv_model_load_progress(_no_nul("path", os.fsencode(path)), self._opts, cb, None,
                                                  ctypes.byref(err))
            if raised:
                if self._m:
                    lib.okv_model_free(self._m)
                    self._m = None
                raise raised[0]
        if not self._m:
            _raise(err)
        self._tok = lib.okv_model_tokenizer(self._m)
        self.n_vocab = int(lib.okv_model_n_vocab(self._m))
        self.n_ctx_train = int(lib.okv_model_n_ctx_train(self._m))
        self.arch = lib.okv_model_arch(self._m).decode()
        self.bos = int(lib.okv_tokenizer_bos(self._tok))
        self.eos = int(lib.okv_tokenizer_eos(self._tok))
        self._adds_bos = bool(lib.okv_tokenizer_adds_bos(self._tok))
        n_eog = ctypes.c_int32(0)
        eog = lib.okv_tokenizer_eog(self._tok, ctypes.byref(n_eog))
        # the ids that end a generation: EOS and the turn ends (<|im_end|>, <|eot_id|>, ...)
        self.eog = frozenset(int(eog[i]) for i in range(n_eog.value))

    def _live(self):
        """The model's handle; OffkvError once it is closed (its memory is gone)."""
        if not self._m:
            raise OffkvError("OKV_ERR_INVALID", "the model is closed")
        return self._m

    def describe(self):
        """The library's one-line description: arch, layers, widths, weight types."""
        with self._lock:
            return load_library().okv_model_describe(self._live()).decode()

    def tokenize(self, text, add_special=True, parse_special=False, continuation=False):
        """Token ids of text (str or bytes); BOS/EOS as the vocabulary asks when add_special.
        continuation: the text continues tokens already in the sequence (no space prefix of
        its own with a SentencePiece vocabulary)."""
        lib = load_library()
        data = _text("text", text)
        flags = ((_ADD_SPECIAL if add_special else 0) | (_PARSE_SPECIAL if parse_special else 0) |
                 (_CONTINUE if continuation else 0))
        need = _SZ(0)
        err = _Error()
        with self._lock:
            self._live()
            lib.okv_tokenizer_encode(self._tok, data, len(data), flags, None, 0, ctypes.byref(need), ctypes.byref(err))
            ids = (ctypes.c_int32 * max(need.value, 1))()
            n = _SZ(0)
            _check(lib.okv_tokenizer_encode(self._tok, data, len(data), flags, ids, need.value, ctypes.byref(n),
                                            ctypes.byref(err)), err)
        return list(ids[:n.value])

    def token_bytes(self, token, special=False):
        """The bytes token stands for (a piece may be part of a UTF-8 character)."""
        lib = load_library()
        token = _int("token", token, 0, _I32_MAX)
        buf = ctypes.create_string_buffer(64)
        n = _SZ(0)
        err = _Error()
        with self._lock:
            self._live()
            st = lib.okv_tokenizer_token_to_piece(self._tok, token, int(bool(special)), buf, len(buf), ctypes.byref(n),
                                                  ctypes.byref(err))
            if st != 0 and n.value > len(buf):
                buf = ctypes.create_string_buffer(n.value)
                st = lib.okv_tokenizer_token_to_piece(self._tok, token, int(bool(special)), buf, len(buf),
                                                      ctypes.byref(n), ctypes.byref(err))
        _check(st, err)
        return buf.raw[:n.value]

    def detokenize(self, tokens):
        """The text of tokens: their bytes joined, decoded as UTF-8 (invalid bytes: U+FFFD)."""
        return b"".join(self.token_bytes(t) for t in tokens).decode("utf-8", "replace")

    def context(self, **options):
        """A new Context on this model; see Context for the options."""
        return Context(self, **options)

    @property
    def chat_template(self):
        """The file's chat template (tokenizer.chat_template, with its BOS and
        EOS texts) as a ChatTemplate, read once; None when the file has none."""
        with self._lock:
            self._live()
            if self._template is False:
                lib = load_library()
                err = _Error()
                g = lib.okv_gguf_open(_no_nul("path", self._path), ctypes.byref(err))
                if not g:
                    _raise(err)
                try:
                    t = lib.okv_chat_template_from_gguf(g, ctypes.byref(err))
                finally:
                    lib.okv_gguf_close(g)
                if not t and err.status != _STATUS.index("OKV_ERR_NOT_FOUND"):
                    _raise(err)
                self._template = ChatTemplate._adopt(t) if t else None
            return self._template

    def chat(self, messages, n=256, temperature=0.8, seed=None, top_k=40, top_p=0.95, n_threads=None,
             context_size=None, template=None, tools=None, progress=None, stream=False, **variables):
        """The model's answer to a conversation: messages (OpenAI-style dicts, see
        ChatTemplate.render) rendered with template (a ChatTemplate; None: the
        file's own, chat_template), tokenized with its markup as special tokens
        (a BOS the template printed is not doubled), then generated as
        generate() does until a token that ends the turn.  Returns the answer's
        text, markup such as <think> included as the model wrote it (stream=True:
        an iterator of its pieces, as generate's).  tools and variables
        (enable_thinking=False, ...) go to the template."""
        t = self.chat_template if template is None else template
        if t is None:
            raise OffkvError("OKV_ERR_NOT_FOUND", "the model's file has no chat template (tokenizer.chat_template): "
                             "pass template=offkv.ChatTemplate(source)")
        if not isinstance(t, ChatTemplate):
            raise TypeError("template must be an offkv.ChatTemplate or None, not %s" % type(t).__name__)
        prompt = t.render(messages, tools=tools, **variables)
        bos = t.bos_token
        if bos and prompt.startswith(bos) and self._adds_bos:
            prompt = prompt[len(bos):]  # the tokenizer adds BOS itself
        return self._generate(self.tokenize(prompt, parse_special=True), n, temperature, seed, top_k, top_p,
                              n_threads, context_size, progress, stream)

    def generate(self, prompt, n=64, temperature=0.8, seed=None, top_k=40, top_p=0.95, n_threads=None,
                 context_size=None, progress=None, parse_special=True, stream=False):
        """Generates up to n tokens after prompt (BOS added as the vocabulary asks;
        control tokens' text in it, such as <|im_start|>, read as those tokens
        unless parse_special is False, as llama.cpp reads a prompt) and returns
        the text after the prompt: what `offkv run --no-display-prompt`
        prints with the same flags, without its final newline.  Stops early at
        a token that ends a generation (eog: EOS, <|im_end|>, <|eot_id|>, ...)
        or when the context is full.  seed None is a
        random seed; temperature 0 is greedy.  progress: as Context.eval's, for
        the prompt.

        stream=True returns an iterator of the text's pieces instead, each as
        its tokens come (a character split across tokens waits for its last
        byte), that join to the same text.  The arguments are checked at the
        call; the evaluation runs as the iterator is read, and its errors come
        from there.  A stream left before its end frees its context when it is
        closed or collected."""
        self._live()
        return self._generate(self.tokenize(_text("prompt", prompt), parse_special=bool(parse_special)), n, temperature,
                              seed, top_k, top_p, n_threads, context_size, progress, stream)

    def _generate(self, ids, n, temperature, seed, top_k, top_p, n_threads, context_size, progress, stream=False):
        """generate() after the prompt's ids: the text, or with stream an
        iterator of its pieces."""
        if progress is not None and not callable(progress):
            raise TypeError("progress must be a function of (done, total) or None, not %s"
                            % type(progress).__name__)
        n = _int("n", n, 0)
        temperature = _float("temperature", temperature, 0.0, 1e30)
        top_k = _int("top_k", top_k, 0, _I32_MAX)
        top_p = _top_p(top_p)
        if seed is not None:
            seed = _int("seed", seed, 0, 2**64 - 1)
        if context_size is not None:
            context_size = _int("context_size", context_size, 1, _CAPACITY_MAX)
        if not ids:
            raise OffkvError("OKV_ERR_INVALID", "the prompt is empty and the vocabulary adds no BOS")
        opts = {}
        if context_size is not None:
            opts["capacity"] = context_size
            if context_size < 512:
                opts["max_write"] = context_size
        pieces = self._pieces(list(ids), n, (temperature, top_k, top_p, seed), n_threads, opts, progress)
        return pieces if stream else "".join(pieces)

    def _pieces(self, ids, n, sampling, n_threads, opts, progress):
        """The generation's text as it comes: a piece per token, bytes of a
        character split across tokens held until its last (an incremental
        decoder, so the pieces join to what decoding all the bytes at once
        gives)."""
        utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        with Context(self, n_threads=n_threads, **opts) as ctx:
            if len(ids) > ctx.capacity:
                raise OffkvError("OKV_ERR_INVALID", "the prompt has %d tokens, more than the context's %d"
                                 % (len(ids), ctx.capacity))
            sampler = Sampler(self.n_vocab, *sampling)
            try:
                logits = ctx.eval(ids, progress=progress)
                made = 0
                p = len(ids)
                while made < n:
                    tok = sampler.sample(logits)
                    if tok in self.eog:
                        break
                    made += 1
                    piece = utf8.decode(self.token_bytes(tok))
                    if piece:
                        yield piece
                    if made == n or p >= ctx.capacity:
                        break
                    logits = ctx.eval([tok])
                    p += 1
            finally:
                sampler.close()
        tail = utf8.decode(b"", final=True)
        if tail:
            yield tail

    def close(self):
        """Frees the model; its open contexts are closed first (each after its
        call in flight).  Every method of a closed model (and of its
        contexts) then raises OffkvError."""
        lock = getattr(self, "_lock", None)
        if lock is None:
            return
        with lock:
            for c in list(getattr(self, "_contexts", None) or ()):
                c.close()
            if getattr(self, "_template", None):
                self._template.close()
            self._release("_m", "okv_model_free", "_tok")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()


class Context(_Handle):
    """A stream of evaluation over its own KV cache.  Options (okv_context_create):
    capacity (positions held, up to 2**30; default the model's training
    context, at most 4096), max_write (most tokens one eval call takes; longer
    inputs to eval are split), kv_type ("f16", "f32" or "q8_0"), n_threads
    (1..1024; default: cores, at most 8)."""

    def __init__(self, model, n_threads=None, **options):
        # Set first: close() (and __del__ after a failed create) reads them.
        self._c = None
        self._cache = None
        self._lock = threading.RLock()
        if not isinstance(model, Model):
            raise TypeError("model must be an offkv.Model, not %s" % type(model).__name__)
        lib = load_library()
        # A strong reference: the model outlives its contexts whatever order
        # they are dropped or collected in.
        self.model = model
        opts = dict(options)
        opts["n_threads"] = _default_threads() if n_threads is None else _int("n_threads", n_threads, 1, 1024)
        self._opts = _options(opts)
        err = _Error()
        with model._lock:
            self._c = lib.okv_context_create(model._live(), self._opts, None, ctypes.byref(err))
            if not self._c:
                _raise(err)
            self._cache = lib.okv_context_cache(self._c)
            self.max_write = int(lib.okv_context_max_write(self._c))
            cfg = _CacheConfig()
            lib.okv_cache_get_config(self._cache, ctypes.byref(cfg))
            self.capacity = int(cfg.capacity)
            model._contexts.add(self)

    def _live(self):
        """The cache's handle; OffkvError once the context (or its model) is closed."""
        if not self._c:
            raise OffkvError("OKV_ERR_INVALID", "the context is closed")
        return self._cache

    @property
    def length(self):
        """Positions the cache holds (the next eval starts here)."""
        with self._lock:
            return int(load_library().okv_cache_length(self._live()))

    def eval(self, tokens, start=None, all_logits=False, progress=None):
        """Evaluates tokens at positions start, start+1, ... (start: the current
        length), in calls of at most max_write tokens.  Returns the logits after
        the last token as array('f') of n_vocab, or with all_logits a list of
        such arrays, one per token.  What the first call would refuse (a start
        past the length or where the cache cannot rewind, positions past the
        capacity) leaves the context as it was; should a later call fail (out
        of memory), the sequence is rewound to start where the cache can
        rewind there, so no part of the tokens stays (the same when an
        exception, KeyboardInterrupt say, comes between two calls).
        progress: None, or a function called as progress(done, total) after
        each call (tokens evaluated so far of this eval's total): a long
        prompt takes minutes on a CPU.  An exception it raises stops the eval
        there, rewound as above, and propagates: a way to cancel."""
        if progress is not None and not callable(progress):
            raise TypeError("progress must be a function of (done, total) or None, not %s"
                            % type(progress).__name__)
        with self._lock:
            return self._eval(tokens, start, all_logits, progress)

    def _eval(self, tokens, start, all_logits, progress=None):
        lib = load_library()
        self._live()
        nv = self.model.n_vocab
        if isinstance(tokens, (str, bytes, bytearray)):
            raise TypeError("tokens must be a sequence of token ids, not %s (tokenize it first)"
                            % type(tokens).__name__)
        # an order: a set or a dict would be evaluated in hash order
        if isinstance(tokens, (set, frozenset, dict)) or not hasattr(tokens, "__iter__"):
            raise TypeError("tokens must be a sequence of token ids (a list, tuple, array or range), not %s"
                            % type(tokens).__name__)
        tokens = [_int("tokens[%d]" % i, t, 0, nv - 1) for i, t in enumerate(tokens)]
        if not tokens:
            raise ValueError("eval of no tokens")
        pos0 = self.length if start is None else _int("start", start, 0, _I32_MAX - len(tokens))
        if pos0 + len(tokens) > self.capacity:
            raise ValueError("eval of %d tokens from position %d ends at %d, past the context's capacity %d"
                             % (len(tokens), pos0, pos0 + len(tokens), self.capacity))
        rows = []
        last = None
        err = _Error()
        done = False
        try:
            for at in range(0, len(tokens), self.max_write):
                chunk = tokens[at:at + self.max_write]
                n = len(chunk)
                ids = (ctypes.c_int32 * n)(*chunk)
                pos = (ctypes.c_int32 * n)(*range(pos0 + at, pos0 + at + n))
                if all_logits:
                    out = array.array("f", bytes(4 * n * nv))
                    rc = lib.okv_context_eval(self._c, ids, pos, n, (ctypes.c_float * (n * nv)).from_buffer(out),
                                              ctypes.byref(err))
                else:
                    final = at + n == len(tokens)
                    out = array.array("f", bytes(4 * nv)) if final else None
                    buf = (ctypes.c_float * nv).from_buffer(out) if final else None
                    rc = lib.okv_context_eval_last(self._c, ids, pos, n, buf, ctypes.byref(err))
                _check(rc, err)
                if all_logits:
                    rows += [out[i * nv:(i + 1) * nv] for i in range(n)]
                else:
                    last = out
                if progress is not None:
                    progress(at + n, len(tokens))
                    self._live()  # progress may have closed the context (or its model)
            done = True
        finally:
            # a failed call (or an exception between calls) after the first
            # left earlier chunks in the cache: take them back out
            if not done and lib.okv_cache_length(self._cache) > pos0 and lib.okv_cache_can_rewind(self._cache, pos0):
                lib.okv_cache_rewind(self._cache, pos0, None)
        return rows if all_logits else last

    def can_rewind(self, pos):
        """Whether rewind(pos) would succeed (sliding-window layers forget)."""
        pos = _int("pos", pos, 0, _I32_MAX)
        with self._lock:
            return bool(load_library().okv_cache_can_rewind(self._live(), pos))

    def rewind(self, pos):
        """Shortens the sequence to pos positions (speculative decoding's undo)."""
        pos = _int("pos", pos, 0, _I32_MAX)
        err = _Error()
        with self._lock:
            _check(load_library().okv_cache_rewind(self._live(), pos, ctypes.byref(err)), err)

    def clear(self):
        """Empties the sequence."""
        err = _Error()
        with self._lock:
            _check(load_library().okv_cache_clear(self._live(), ctypes.byref(err)), err)

    def close(self):
        """Frees the context (after a call in flight); every method then raises
        OffkvError.  Closing twice is fine."""
        self._release("_c", "okv_context_free", "_cache")
        model = getattr(self, "model", None)
        if model is not None:
            model._contexts.discard(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(prog="python3 -m offkv", description="Generates text with an offkv model.")
    ap.add_argument("-m", "--model", required=True, help="GGUF model")
    ap.add_argument("-p", "--prompt", default="", help="prompt (default: empty, BOS only)")
    ap.add_argument("-n", "--n-predict", type=int, default=64, help="tokens to generate at most (default 64)")
    ap.add_argument("--temp", type=float, default=0.8, help="temperature; 0 = greedy (default 0.8)")
    ap.add_argument("--top-k", type=int, default=40)
    ap.add_argument("--top-p", type=float, default=0.95)
    ap.add_argument("--seed", type=int, default=None, help="sampling seed (default: random)")
    ap.add_argument("-t", "--threads", type=int, default=None)
    ap.add_argument("--no-display-prompt", action="store_true", help="do not echo the prompt")
    a = ap.parse_args(argv)
    # the prompt's bytes as given (argv's undecodable bytes come back as they were)
    prompt = os.fsencode(a.prompt)
    try:
        with Model(a.model) as m:
            text = m.generate(prompt, n=a.n_predict, temperature=a.temp, seed=a.seed, top_k=a.top_k,
                              top_p=a.top_p, n_threads=a.threads)
    except (OffkvError, OSError, ValueError, TypeError) as e:
        print("offkv: %s" % e, file=sys.stderr)
        return 1
    sys.stdout.flush()
    sys.stdout.buffer.write((b"" if a.no_display_prompt else prompt) + text.encode("utf-8") + b"\n")
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
