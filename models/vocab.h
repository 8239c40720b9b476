/* A model file's tokenizer: its GGUF keys read into a clf_vocab_desc
 * (text/tokenizer/tokenizer.h), from which text/ builds the tokenizer. */
#ifndef CLF_VOCAB_H
#define CLF_VOCAB_H
#include "gguf.h"
#include "tokenizer.h"

/* The tokenizer of `g`'s vocabulary; it keeps its own copy, so `g` may be
 * closed afterwards. CLF_ERR_FORMAT for a missing or malformed key and for
 * an unsupported model or pre-tokenizer. */
clf_status clf_tokenizer_load(const clf_gguf *g, clf_tokenizer **out);

#endif
