#!/usr/bin/env python3
"""`clinfer tokenize` on llama.cpp's vocabulary-only GGUF files (issue 44).

usage: vocab_cli.py CLINFER SOURCE_DIR

For each file of tests/data/vocab (tests/data/vocab/README.md): every text
of its .inp (texts separated by lines `__ggml_vocab_test__`, the last one
ends before the final separator) tokenized by `clinfer tokenize --no-bos -p
TEXT` gives the ids of its line in the .out. Those are llama.cpp's
test-tokenizer-0 vectors: no BOS, control-token text read as text, which is
what tests/test_tokenizer.c checks the library against (add_special 0,
parse_special 0); here the command line, argv passed without a shell so
newlines, leading blanks and odd bytes arrive as they are.

Every run happens where OpenCL has no platform (OCL_ICD_VENDORS an empty
folder) and $CLINFER_DEVICE names no device: a vocabulary-only load builds
no runtime and touches no weights, so neither matters. `clinfer devices`
under the same environment must fail, which shows the environment does hide
the devices.

Also: `--pieces` and `--special` exit 0 with output on each file, and a
file with tensors but no vocabulary fails with one clear line.

Any mismatch is printed (file, text number, text, wanted and got ids) and
fails the test; a missing data file fails too (the files are part of the
checkout)."""
import os
import struct
import subprocess
import sys
import tempfile

FILES = ["ggml-vocab-gpt-2.gguf", "ggml-vocab-llama-spm.gguf", "ggml-vocab-phi-3.gguf", "ggml-vocab-starcoder.gguf"]
SEP = b"\n__ggml_vocab_test__\n"
N_TEXTS = 46  # in each .inp (tests/test_tokenizer.c asserts the same)


def cases(path):
    """The (text, ids) pairs of a vocabulary file's .inp and .out."""
    with open(path + ".inp", "rb") as f:
        inp = f.read()
    with open(path + ".out", "rb") as f:
        out = f.read().decode("ascii").split("\n")
    # as test_tokenizer.c reads them: a text ends at each separator; what
    # follows the last one (nothing) is no text
    texts = inp.split(SEP)[:-1]
    if len(texts) != N_TEXTS or len(out) < len(texts):
        raise SystemExit(f"FAIL: {path}: {len(texts)} texts and {len(out)} lines of ids, expected {N_TEXTS} of each")
    return [(t, [int(x) for x in out[i].split()]) for i, t in enumerate(texts)]


def tokenize(binary, env, model, text, *flags):
    """The command's exit status, stdout and stderr (bytes)."""
    r = subprocess.run([binary, "tokenize", "-m", model, *flags, "-p", text], env=env, capture_output=True,
                       timeout=60)
    return r.returncode, r.stdout, r.stderr


def weights_only_gguf(path):
    """A GGUF v3 file with one F32 tensor (token_embd.weight, 4 x 2) and
    general.architecture, but no tokenizer.* keys."""
    def s(x):
        b = x.encode()
        return struct.pack("<Q", len(b)) + b
    kv = s("general.architecture") + struct.pack("<I", 8) + s("llama")  # 8: string
    info = s("token_embd.weight") + struct.pack("<IQQIQ", 2, 4, 2, 0, 0)  # 2 dims, type 0 (F32), offset 0
    head = b"GGUF" + struct.pack("<IQQ", 3, 1, 1) + kv + info
    head += b"\0" * (-len(head) % 32)  # the data section starts aligned (general.alignment's default, 32)
    with open(path, "wb") as f:
        f.write(head + struct.pack("<8f", *range(8)))


def main():
    if len(sys.argv) != 3:
        raise SystemExit("usage: vocab_cli.py CLINFER SOURCE_DIR")
    binary, src = sys.argv[1], sys.argv[2]
    vocab_dir = os.path.join(src, "tests", "data", "vocab")
    bad = 0
    with tempfile.TemporaryDirectory(prefix="clinfer-vocab-") as tmp:
        # no OpenCL platform, no device: a vocabulary-only load needs neither
        icd = os.path.join(tmp, "no-icd")
        os.mkdir(icd)
        env = dict(os.environ, OCL_ICD_VENDORS=icd, CLINFER_DEVICE="no-such-device")
        env.pop("OCL_ICD_FILENAMES", None)
        r = subprocess.run([binary, "devices"], env=env, capture_output=True, timeout=60)
        if r.returncode == 0:
            print(f"FAIL: `clinfer devices` found a device with OCL_ICD_VENDORS={icd}, so this test cannot show "
                  "that tokenize needs none:\n" + r.stdout.decode(errors="replace"))
            bad += 1

        n_texts = 0
        for name in FILES:
            model = os.path.join(vocab_dir, name)
            for p in (model, model + ".inp", model + ".out"):
                if not os.path.isfile(p):
                    raise SystemExit(f"FAIL: {p} is missing (it is part of the checkout)")
            file_bad = 0
            for i, (text, want) in enumerate(cases(model)):
                rc, out, err = tokenize(binary, env, model, text, "--no-bos")
                got = [int(x) for x in out.split()] if rc == 0 else None
                if got != want:
                    print(f"FAIL: {name} text {i} {text!r}: want {' '.join(map(str, want))}; "
                          f"got {out.decode(errors='replace').strip()!r} (exit {rc}) "
                          f"{err.decode(errors='replace').strip()}")
                    file_bad += 1
                n_texts += 1
            # --pieces and --special run on it (BOS added where the file asks)
            for flags in (["--pieces"], ["--special"], ["--special", "--pieces"]):
                rc, out, err = tokenize(binary, env, model, "Hello world<|endoftext|></s>\n", *flags)
                if rc != 0 or not out.strip():
                    print(f"FAIL: {name} {' '.join(flags)}: exit {rc}, output {out!r} "
                          f"{err.decode(errors='replace').strip()}")
                    file_bad += 1
            print(f"{name}: {N_TEXTS} texts, {file_bad} failures")
            bad += file_bad

        # tensors but no vocabulary: one line that says so, a format error
        path = os.path.join(tmp, "weights-only.gguf")
        weights_only_gguf(path)
        rc, out, err = tokenize(binary, env, path, "hi")
        lines = err.decode(errors="replace").strip().split("\n")
        if rc != 4 or out or len(lines) != 1 or "has no vocabulary" not in lines[0]:
            print(f"FAIL: tokenize on a file without a vocabulary: exit {rc} (want 4), stdout {out!r}, stderr {lines}")
            bad += 1
        else:
            print(f"no vocabulary: {lines[0]}")

    if bad:
        print(f"FAIL: {bad} failures")
        return 1
    print(f"OK: {n_texts} texts of {len(FILES)} vocabulary files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
