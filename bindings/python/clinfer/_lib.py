"""libclinfer.so through ctypes: finding it, and include/clinfer.h's types
and signatures (kept in the header's order)."""
import ctypes
import ctypes.util
import glob
import os
import shutil

from ctypes import POINTER, c_char, c_char_p, c_double, c_float, c_int, c_int32, c_size_t, c_uint, c_uint64, c_void_p


def _find():
    """$CLINFER_LIBRARY, then a libclinfer.so* beside the package, then the
    build folder of the source tree the package is in (bindings/python run
    from the tree: ../../build), then the library of the installed
    `clinfer` on PATH (PREFIX/bin/clinfer: PREFIX/lib*/), then the system's
    loader (ldconfig's cache, LD_LIBRARY_PATH)."""
    env = os.environ.get("CLINFER_LIBRARY")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    found = sorted(glob.glob(os.path.join(here, "libclinfer.so*")))
    tree = os.path.normpath(os.path.join(here, "..", "..", ".."))
    if not found and os.path.isfile(os.path.join(tree, "include", "clinfer.h")):
        found = glob.glob(os.path.join(tree, "build", "libclinfer.so.0"))
    cli = shutil.which("clinfer")
    if not found and cli:
        prefix = os.path.dirname(os.path.dirname(os.path.realpath(cli)))
        found = sorted(glob.glob(os.path.join(prefix, "lib*", "libclinfer.so.0")) +
                       glob.glob(os.path.join(prefix, "lib", "*", "libclinfer.so.0")))
    if found:
        return found[0]
    return ctypes.util.find_library("clinfer") or "libclinfer.so.0"


def _load():
    path = _find()
    try:
        return ctypes.CDLL(path)
    except OSError as e:
        raise ImportError(
            f"clinfer: cannot load the library {path!r} ({e}); install libclinfer "
            "(cmake --install, or the .deb) or set CLINFER_LIBRARY to libclinfer.so") from None


lib = _load()


class DeviceInfo(ctypes.Structure):
    _fields_ = [("size", c_size_t), ("selector", c_char * 16), ("platform", c_char * 128), ("name", c_char * 128),
                ("type", c_char * 16), ("compute_units", c_uint), ("global_mem", c_uint64),
                ("max_alloc", c_uint64), ("is_default", c_int)]


class ModelParams(ctypes.Structure):
    _fields_ = [("size", c_size_t), ("vocab_only", c_int)]


class ModelInfo(ctypes.Structure):
    _fields_ = [("size", c_size_t), ("arch", c_char * 32), ("name", c_char * 128), ("weight_type", c_char * 16),
                ("chat_format", c_char * 16), ("device", c_char * 128), ("n_params", c_uint64),
                ("device_bytes", c_uint64), ("n_vocab", c_int), ("n_ctx_train", c_int), ("n_embd", c_int),
                ("n_layer", c_int), ("n_head", c_int), ("n_head_kv", c_int), ("n_ff", c_int), ("bos", c_int32),
                ("eos", c_int32)]


class ChatMessage(ctypes.Structure):
    _fields_ = [("role", c_char_p), ("content", c_char_p)]


class SessionParams(ctypes.Structure):
    _fields_ = [("size", c_size_t), ("n_ctx", c_int), ("n_batch", c_int), ("kv_type", c_int)]


class SamplerParams(ctypes.Structure):
    _fields_ = [("size", c_size_t), ("temperature", c_float), ("top_k", c_int), ("top_p", c_float),
                ("min_p", c_float), ("repeat_penalty", c_float), ("repeat_last_n", c_int), ("seed", c_uint64)]


TokenCallback = ctypes.CFUNCTYPE(c_int, c_void_p, c_int32, POINTER(c_char), c_size_t)


class GenerateParams(ctypes.Structure):
    _fields_ = [("size", c_size_t), ("max_tokens", c_int), ("sampler", c_void_p), ("on_token", TokenCallback),
                ("user_data", c_void_p), ("special", c_int)]


class GenerateResult(ctypes.Structure):
    _fields_ = [("size", c_size_t), ("stop", c_int), ("n_prompt", c_int), ("n_generated", c_int), ("last", c_int32),
                ("prompt_seconds", c_double), ("generate_seconds", c_double)]


def _sig(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)


_sig("clinfer_version", c_char_p)
_sig("clinfer_last_error", c_char_p)
_sig("clinfer_status_name", c_char_p, c_int)
_sig("clinfer_free", None, c_void_p)
_sig("clinfer_device_count", c_int, POINTER(c_int))
_sig("clinfer_device_get", c_int, c_int, POINTER(DeviceInfo))
_sig("clinfer_model_default_params", ModelParams)
_sig("clinfer_model_load", c_int, c_char_p, c_char_p, POINTER(ModelParams), POINTER(c_void_p))
_sig("clinfer_model_free", None, c_void_p)
_sig("clinfer_model_get_info", c_int, c_void_p, POINTER(ModelInfo))
_sig("clinfer_model_n_vocab", c_int, c_void_p)
_sig("clinfer_tokenize", c_int, c_void_p, c_char_p, c_size_t, c_int, c_int, POINTER(POINTER(c_int32)), POINTER(c_int))
_sig("clinfer_detokenize", c_int, c_void_p, POINTER(c_int32), c_int, c_int, POINTER(c_void_p), POINTER(c_size_t))
_sig("clinfer_token_is_eog", c_int, c_void_p, c_int32)
_sig("clinfer_chat_apply", c_int, c_void_p, POINTER(ChatMessage), c_int, c_int, POINTER(c_void_p), POINTER(c_size_t))
_sig("clinfer_chat_tokenize", c_int, c_void_p, POINTER(ChatMessage), c_int, c_int, POINTER(POINTER(c_int32)),
     POINTER(c_int))
_sig("clinfer_session_default_params", SessionParams)
_sig("clinfer_session_create", c_int, c_void_p, POINTER(SessionParams), POINTER(c_void_p))
_sig("clinfer_session_free", None, c_void_p)
_sig("clinfer_session_n_ctx", c_int, c_void_p)
_sig("clinfer_session_n_past", c_int, c_void_p)
_sig("clinfer_session_rewind", c_int, c_void_p, c_int)
_sig("clinfer_eval", c_int, c_void_p, POINTER(c_int32), c_int)
_sig("clinfer_eval_all", c_int, c_void_p, POINTER(c_int32), c_int, POINTER(c_float))
_sig("clinfer_session_logits", POINTER(c_float), c_void_p)
_sig("clinfer_sampler_default_params", SamplerParams)
_sig("clinfer_sampler_create", c_int, c_void_p, POINTER(SamplerParams), POINTER(c_void_p))
_sig("clinfer_sampler_free", None, c_void_p)
_sig("clinfer_sampler_sample", c_int, c_void_p, POINTER(c_float), c_int, POINTER(c_int32))
_sig("clinfer_sampler_accept", c_int, c_void_p, c_int32)
_sig("clinfer_sampler_reset", None, c_void_p)
_sig("clinfer_generate_default_params", GenerateParams)
_sig("clinfer_generate", c_int, c_void_p, POINTER(c_int32), c_int, POINTER(GenerateParams), POINTER(GenerateResult))
_sig("clinfer_session_cancel", None, c_void_p)
