/* The K-quant peer models (tests/peer/record_kquant.py): a seeded tiny Llama
 * from `tiny_gguf model --kquant`, quantized by `clinfer quantize` to one of
 * llama.cpp's mixes. Its tensors must hash as llama.cpp's quantization of
 * the same source did when recorded (line "M MIX HASH ..." of
 * tests/data/peer_kquant.txt), so the logits recorded there hold for it. */
#ifndef CLF_PEER_KQUANT_H
#define CLF_PEER_KQUANT_H

#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

#define PEER_KQUANT_DATA "tests/data/peer_kquant.txt"

/* FNV-1a 64 over the tensors sorted by name: name bytes, type (u32 LE), data. */
uint64_t peer_tensor_hash(const clf_gguf *g);

/* The mixes recorded, in file order (up to max); their count. */
int peer_kquant_mixes(char names[][16], int max);

/* Writes dir/kq-src.gguf (once, with $CLINFER_TINY_GGUF) and dir/kq-MIX.gguf
 * (with $CLINFER_BIN quantize) into path; fails the test when the file's
 * tensors are not the ones llama.cpp wrote for the recording. */
void peer_kquant_model(const char *dir, const char *mix, char *path, size_t n);

#endif
