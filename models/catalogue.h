/* The model catalogue: models/catalogue.tsv, embedded into the library at
 * build time — the same file models/fetch.sh reads — so that a catalogue
 * name means the same file to both. The first model is the default. */
#ifndef CLF_CATALOGUE_H
#define CLF_CATALOGUE_H

#include <stddef.h>
#include <stdint.h>

typedef struct clf_catalogue_entry {
    char name[64];     /* what -m and `make model MODEL=` take: "gemma3-270m" */
    char file[256];    /* its file name in the model cache */
    uint64_t size;     /* bytes */
    char sha256[65];   /* lowercase hex */
} clf_catalogue_entry;

/* The i-th model (0: the default) into *e; 0 when i is past the end. */
int clf_catalogue_at(int i, clf_catalogue_entry *e);
/* The model called `name` into *e; 0 when the catalogue has none. */
int clf_catalogue_find(const char *name, clf_catalogue_entry *e);
/* Every name, comma-separated ("smollm2-135m, gemma3-270m"), for messages. */
void clf_catalogue_names(char *buf, size_t n);

#endif
