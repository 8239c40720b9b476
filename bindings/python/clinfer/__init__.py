"""clinfer: a portable LLM inference engine on OpenCL, from Python.

    import clinfer
    model = clinfer.Model()                  # the default model, the default device
    session = model.session()
    print(session.generate("The capital of France is", max_tokens=16))
    for piece in session.generate("Tell me a joke.", chat=True, stream=True):
        print(piece, end="")

Every failure raises clinfer.Error with the library's status and message.
A model may be shared by sessions on several threads; a session belongs to
one thread at a time (Session.cancel and close excepted: close() cancels a
running generation and waits for it).
"""
import atexit
import contextlib
import ctypes
import operator
import os
import queue
import threading
import weakref

import numpy as np

from . import _lib
from ._lib import lib

__all__ = ["Error", "Model", "Session", "devices", "version", "__version__"]
__version__ = "0.1.0"

_INTERRUPTED = 9
_STOPS = {0: None, 1: "eog", 2: "max_tokens", 3: "callback"}


class Error(Exception):
    """A failed library call: status (the C clinfer_status value, also the
    `clinfer` command's exit status), status_name and the library's message."""

    def __init__(self, status, message):
        self.status = status
        self.status_name = lib.clinfer_status_name(status).decode()
        self.message = message
        super().__init__(f"{self.status_name}: {message}")


def _check(status):
    if status != 0:
        raise Error(status, lib.clinfer_last_error().decode("utf-8", "replace"))


def _str(b):
    return b.decode("utf-8", "replace")


def version():
    """The library's version ("0.1.0")."""
    return lib.clinfer_version().decode()


def devices():
    """The OpenCL devices: dicts with selector ("P:D"), platform, name, type,
    compute_units, global_mem, max_alloc and is_default."""
    n = ctypes.c_int()
    _check(lib.clinfer_device_count(ctypes.byref(n)))
    out = []
    for i in range(n.value):
        d = _lib.DeviceInfo(size=ctypes.sizeof(_lib.DeviceInfo))
        _check(lib.clinfer_device_get(i, ctypes.byref(d)))
        out.append({"selector": _str(d.selector), "platform": _str(d.platform), "name": _str(d.name),
                    "type": _str(d.type), "compute_units": d.compute_units, "global_mem": d.global_mem,
                    "max_alloc": d.max_alloc, "is_default": bool(d.is_default)})
    return out


_INT = (-2**31, 2**31 - 1)  # the C int (and int32_t) of the library's arguments
_U64 = (0, 2**64 - 1)


def _int(name, value, bounds=_INT):
    """value as an integer in bounds: ctypes would wrap one outside them
    silently (2**32 + 5 -> 5), so it is refused instead."""
    try:
        v = operator.index(value)
    except TypeError:
        raise Error(2, f"{name} must be an integer, not {type(value).__name__}") from None
    if not bounds[0] <= v <= bounds[1]:
        raise Error(2, f"{name} {v} is out of range ({bounds[0]} .. {bounds[1]})")
    return v


def _ids(tokens):
    tokens = [_int(f"token {i}", t) for i, t in enumerate(tokens)]
    arr = (ctypes.c_int32 * len(tokens))(*tokens)
    return arr, len(tokens)


class _Handle:
    """A library handle (self._h) freed by close(), also on `with` exit, on
    garbage collection and at interpreter exit. Each library call holds a
    use of the handle (_use); close() first takes the handle away from new
    users, stops what runs (_stop), waits for the uses to end, then frees
    it: no call can reach a freed handle, whatever the threads do."""

    _what = "handle"

    def _init_handle(self):
        self._h = None
        self._users = 0
        self._cv = threading.Condition()
        self._closing = threading.Lock()  # a second close() waits for the first

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    @contextlib.contextmanager
    def _use(self):
        with self._cv:
            if not self._h:
                raise Error(2, f"the {self._what} is closed")
            self._users += 1
            h = self._h
        try:
            yield h
        finally:
            with self._cv:
                self._users -= 1
                self._cv.notify_all()

    def _call(self, f, *args):
        """f(handle, *args) with a use of the handle held."""
        with self._use() as h:
            return f(h, *args)

    def _stop(self, h):
        """Makes the running uses of h end soon (a session cancels)."""

    def _free(self, h):
        raise NotImplementedError

    def close(self):
        if getattr(self, "_cv", None) is None:  # __init__ failed before the handle existed
            return
        with self._closing:
            with self._cv:
                h, self._h = self._h, None
            if not h:
                return
            self._stop(h)
            with self._cv:
                while self._users:
                    self._cv.wait()
            self._free(h)


# Interpreter exit: close what is still open while the threads still run (a
# generation's thread needs the interpreter to end its callback); in
# finalization they are frozen and a close would wait for them forever.
_live = weakref.WeakSet()


@atexit.register
def _close_all():
    for h in sorted(_live, key=lambda h: isinstance(h, Model)):  # sessions, then models
        try:
            h.close()
        except Exception:
            pass


class Model(_Handle):
    """A GGUF model loaded onto a device.

    path: the file (None: $CLINFER_MODEL, else the default model in the
    cache); device: "P:D" or a name substring (None: $CLINFER_DEVICE, else
    the first GPU, accelerator, then CPU); vocab_only: the tokenizer and chat
    template only, no device (the selector is not looked at) and no weights
    (a vocabulary-only file such as llama.cpp's ggml-vocab-*.gguf loads):
    session() then raises Error (status 2) saying so."""

    _what = "model"

    def __init__(self, path=None, device=None, vocab_only=False):
        self._init_handle()
        self._sessions = weakref.WeakSet()
        p = lib.clinfer_model_default_params()
        p.vocab_only = int(bool(vocab_only))
        h = ctypes.c_void_p()
        _check(lib.clinfer_model_load(None if path is None else os.fsencode(path),
                                      None if device is None else device.encode(), ctypes.byref(p), ctypes.byref(h)))
        self._h = h
        _live.add(self)
        i = _lib.ModelInfo(size=ctypes.sizeof(_lib.ModelInfo))
        _check(self._call(lib.clinfer_model_get_info, ctypes.byref(i)))
        self.info = {f: (_str(getattr(i, f)) if isinstance(getattr(i, f), bytes) else getattr(i, f))
                     for f, _ in _lib.ModelInfo._fields_ if f != "size"}
        self.n_vocab = i.n_vocab

    def close(self):
        """Frees the model, its sessions first (a running generation is
        cancelled and waited for)."""
        super().close()

    def _free(self, h):
        for s in list(self._sessions):  # every session: they are made under a use of the model
            s.close()
        lib.clinfer_model_free(h)

    def tokenize(self, text, add_special=True, parse_special=False):
        """Text -> token ids (a list): add_special adds BOS where the model
        asks for it; parse_special reads "<|im_start|>" and the like as
        their tokens."""
        b = text.encode() if isinstance(text, str) else bytes(text)
        ptr = ctypes.POINTER(ctypes.c_int32)()
        n = ctypes.c_int()
        _check(self._call(lib.clinfer_tokenize, b, len(b), int(add_special), int(parse_special),
                                    ctypes.byref(ptr), ctypes.byref(n)))
        try:
            return ptr[:n.value] if n.value else []
        finally:
            lib.clinfer_free(ptr)

    def detokenize(self, tokens, special=False):
        """Token ids -> text; special: control tokens as their text."""
        arr, n = _ids(tokens)
        ptr = ctypes.c_void_p()
        length = ctypes.c_size_t()
        _check(self._call(lib.clinfer_detokenize, arr, n, int(special), ctypes.byref(ptr), ctypes.byref(length)))
        try:
            return _str(ctypes.string_at(ptr, length.value))
        finally:
            lib.clinfer_free(ptr)

    @staticmethod
    def _messages(messages):
        keep = [(m["role"].encode(), m["content"].encode()) for m in messages]
        return keep, (_lib.ChatMessage * max(len(keep), 1))(*[_lib.ChatMessage(r, c) for r, c in keep])

    def chat(self, messages, add_assistant=True):
        """[{"role": "user", "content": "..."}, ...] -> the conversation's text
        in the model's chat format, to read: chat_tokens gives the prompt
        (tokenized with parse_special, control-token text typed in a message
        would become the token)."""
        keep, arr = self._messages(messages)
        ptr = ctypes.c_void_p()
        length = ctypes.c_size_t()
        _check(self._call(lib.clinfer_chat_apply, arr, len(keep), int(add_assistant), ctypes.byref(ptr),
                                      ctypes.byref(length)))
        try:
            return _str(ctypes.string_at(ptr, length.value))
        finally:
            lib.clinfer_free(ptr)

    def chat_tokens(self, messages, add_assistant=True):
        """The conversation as prompt token ids: the format's markers are
        control tokens, the messages' contents text, whatever they hold."""
        keep, arr = self._messages(messages)
        ptr = ctypes.POINTER(ctypes.c_int32)()
        n = ctypes.c_int()
        _check(self._call(lib.clinfer_chat_tokenize, arr, len(keep), int(add_assistant), ctypes.byref(ptr),
                          ctypes.byref(n)))
        try:
            return ptr[:n.value] if n.value else []
        finally:
            lib.clinfer_free(ptr)

    def is_eog(self, token):
        """Whether a token ends generation (EOS, <|im_end|>, ...)."""
        return bool(self._call(lib.clinfer_token_is_eog, _int("token", token)))

    def session(self, n_ctx=0, n_batch=0, kv="f32"):
        """A new session (context) on this model: n_ctx 0 is the model's
        training context, at most 4096; kv "f32" or "f16"."""
        return Session(self, n_ctx=n_ctx, n_batch=n_batch, kv=kv)


class Session(_Handle):
    """A context on a model: its KV cache, the logits of the last token."""

    _what = "session"

    def __init__(self, model, n_ctx=0, n_batch=0, kv="f32"):
        if kv not in ("f32", "f16"):
            raise Error(2, f"kv must be 'f32' or 'f16', not {kv!r}")
        self._init_handle()
        self.model = model
        self.last_result = None
        self._busy = threading.Lock()  # one generation or evaluation at a time
        p = lib.clinfer_session_default_params()
        p.n_ctx, p.n_batch, p.kv_type = _int("n_ctx", n_ctx), _int("n_batch", n_batch), 0 if kv == "f32" else 1
        h = ctypes.c_void_p()
        with model._use() as mh:  # so that the model's close() finds this session
            _check(lib.clinfer_session_create(mh, ctypes.byref(p), ctypes.byref(h)))
            self._h = h
            model._sessions.add(self)
        _live.add(self)

    def close(self):
        """Frees the session; a running generation is cancelled and waited
        for (its stream ends, last_result["stop"] is "cancelled")."""
        super().close()

    def _stop(self, h):
        lib.clinfer_session_cancel(h)

    def _free(self, h):
        lib.clinfer_session_free(h)

    @contextlib.contextmanager
    def _exclusive(self):
        """Held by a call that must not overlap a generation."""
        if not self._busy.acquire(blocking=False):
            raise Error(2, "the session is already generating")
        try:
            yield
        finally:
            self._busy.release()

    @property
    def n_ctx(self):
        return self._call(lib.clinfer_session_n_ctx)

    @property
    def n_past(self):
        """Tokens the session holds."""
        return self._call(lib.clinfer_session_n_past)

    def reset(self, pos=0):
        """Forgets the tokens from position pos on (0: all)."""
        with self._exclusive():
            _check(self._call(lib.clinfer_session_rewind, _int("pos", pos)))

    def eval(self, tokens, all_logits=False):
        """Appends tokens to the context; with all_logits returns every
        token's logits (a float32 array [len(tokens), n_vocab])."""
        arr, n = _ids(tokens)
        with self._exclusive():
            if not all_logits:
                _check(self._call(lib.clinfer_eval, arr, n))
                return None
            out = np.empty((n, self.model.n_vocab), dtype=np.float32)
            _check(self._call(lib.clinfer_eval_all, arr, n, out.ctypes.data_as(ctypes.POINTER(ctypes.c_float))))
            return out

    @property
    def logits(self):
        """The last evaluated token's logits: a float32 array [n_vocab] (a
        copy), or None before any evaluation."""
        with self._use() as h:
            ptr = lib.clinfer_session_logits(h)
            if not ptr:
                return None
            return np.ctypeslib.as_array(ptr, shape=(self.model.n_vocab,)).copy()

    def cancel(self):
        """Stops the running generation before its next token (from any thread)."""
        with self._cv:  # close() cannot free the handle meanwhile
            if self._h:
                lib.clinfer_session_cancel(self._h)

    def generate(self, prompt, max_tokens=256, temperature=0.0, top_k=40, top_p=0.95, min_p=0.05,
                 repeat_penalty=1.0, repeat_last_n=64, seed=0, chat=False, special=False, stream=False, reset=True):
        """Generates text after `prompt` (a str, or token ids).

        Greedy unless temperature > 0 (then top_k, top_p and min_p filter,
        llama.cpp's order). chat: the prompt is a user message in the model's
        chat format. reset: start from an empty context (else the prompt
        follows what the session holds). Returns the text, or with
        stream=True an iterator of text pieces as they are generated.
        Generation ends at an end-of-generation token, at max_tokens, or on
        cancel() (or when the stream is closed); last_result says which."""
        if isinstance(prompt, str):
            if chat:
                prompt = self.model.chat_tokens([{"role": "user", "content": prompt}])
            else:
                prompt = self.model.tokenize(prompt)
        sp = lib.clinfer_sampler_default_params()
        sp.temperature, sp.top_k, sp.top_p, sp.min_p = temperature, _int("top_k", top_k), top_p, min_p
        sp.repeat_penalty, sp.repeat_last_n = repeat_penalty, _int("repeat_last_n", repeat_last_n)
        sp.seed = _int("seed", seed, _U64)
        args = (list(prompt), _int("max_tokens", max_tokens), sp, special, reset)
        _ids(args[0])  # out-of-range ids raise here, not on the stream's thread
        if stream:
            return self._stream(args)
        pieces = []
        self._run(args, pieces.append)
        return "".join(pieces)

    def _run(self, args, emit):
        """One clinfer_generate call, each piece passed to emit(str)."""
        tokens, max_tokens, sp, special, reset = args
        smp = ctypes.c_void_p()
        with self._exclusive(), self._use() as h:  # close() cancels, then waits for this use
            try:
                if reset:
                    _check(lib.clinfer_session_rewind(h, 0))
                _check(self.model._call(lib.clinfer_sampler_create, ctypes.byref(sp), ctypes.byref(smp)))
                failure = []

                def on_token(user, token, piece, n):
                    try:
                        emit(_str(ctypes.string_at(piece, n)))
                        return 0
                    except BaseException as e:  # raised again after the C call
                        failure.append(e)
                        return 1

                cb = _lib.TokenCallback(on_token)
                gp = lib.clinfer_generate_default_params()
                gp.max_tokens, gp.sampler, gp.on_token, gp.special = max_tokens, smp, cb, int(special)
                r = _lib.GenerateResult(size=ctypes.sizeof(_lib.GenerateResult))
                arr, n = _ids(tokens)
                st = lib.clinfer_generate(h, arr, n, ctypes.byref(gp), ctypes.byref(r))
                self.last_result = {"stop": "cancelled" if st == _INTERRUPTED else _STOPS.get(r.stop),
                                    "n_prompt": r.n_prompt, "n_generated": r.n_generated,
                                    "prompt_seconds": r.prompt_seconds, "generate_seconds": r.generate_seconds}
                if failure:
                    raise failure[0]
                if st != _INTERRUPTED:
                    _check(st)
            finally:
                lib.clinfer_sampler_free(smp)

    def _stream(self, args):
        """The C loop runs on a thread and hands pieces over a queue; closing
        the iterator early cancels it."""
        q = queue.SimpleQueue()
        end = object()

        def run():
            try:
                self._run(args, q.put)
                q.put(end)
            except BaseException as e:
                q.put(e)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        try:
            while True:
                item = q.get()
                if item is end:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            if t.is_alive():
                self.cancel()
            t.join()
