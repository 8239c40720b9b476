#include "place_mpi.h"

#include <string.h>

#include "clf_mpi.h"

clf_status cli_place_mpi_open(const cli_place *p, const char *model, const clf_gguf *g,
                              void (*prepare)(clf_runtime *rt), cli_stages *out) {
    memset(out, 0, sizeof *out);
    if (p->devices || p->split)
        return clf_fail(CLF_ERR_ARG, "--mpi holds one stage per rank: not with --devices or --split (--device "
                                     "picks each rank's)");
    double ratio[CLF_SPLIT_MAX];
    int n_ratio = 0;
    if (p->ratio) {
        clf_status st = clf_split_parse_ratio(p->ratio, ratio, CLF_SPLIT_MAX, &n_ratio);
        if (st != CLF_OK) return clf_fail_ctx(st, "--split-ratio: ");
    }
    CLF_TRY(clf_runtime_create(p->device, &out->rt[0]));
    out->n = 1;
    if (prepare) prepare(out->rt[0]);
    clf_status st = clf_mpi_load(out->rt[0], g, model, p->device, p->ratio ? ratio : NULL, n_ratio, &out->m[0]);
    if (st != CLF_OK) cli_stages_close(out);
    return st;
}
