/* random_model: a GGUF with the shapes of SmolLM2-135M (30 layers, d 576,
 * ff 1536, 9/3 heads, vocabulary 49152, tied embeddings) and random
 * weights, for timing on machines where the real file cannot be brought
 * (the device machine takes a 64 MiB working tree). Speed depends only on
 * the shapes and types, so `clinfer bench` figures carry over.
 *
 *   random_model PATH [TYPE]     TYPE: Q4_1 (default), Q8_0, Q4_0, F16, F32
 */
#include <stdio.h>

#include "quant.h"
#include "ref_llama.h"

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: random_model PATH [TYPE]\n");
        return 2;
    }
    int type = argc == 3 ? clf_type_from_name(argv[2]) : CLF_Q4_1;
    if (type < 0) {
        fprintf(stderr, "random_model: unknown type %s\n", argv[2]);
        return 2;
    }
    tiny_model tm = {"llama", 30, 9, 3, 64, 1536, 49152, (clf_type)type, 1, 1, 0};
    if (tiny_model_write(&tm, 12345, argv[1]) != 0) {
        fprintf(stderr, "random_model: cannot write %s\n", argv[1]);
        return 1;
    }
    return 0;
}
