/* Prepended to every kernel family. OpenCL C 1.2, no extension required. */
#ifndef CLF_COMMON_CL
#define CLF_COMMON_CL
/* Large negative used instead of -INFINITY so masking survives any math
 * flags; exp(CLF_NEG_BIG - m) underflows to exactly 0. */
#define CLF_NEG_BIG (-1.0e30f)
#endif
