/* What the parts of the OpenCL runtime (runtime.c, device.c, program.c,
 * launch.c) share and nothing else sees. */
#ifndef CLF_RUNTIME_IMPL_H
#define CLF_RUNTIME_IMPL_H

#include "runtime.h"

/* Generated at build time from the cl/ folder (cmake/embed.cmake). */
typedef struct { const char *name; const unsigned char *data; size_t len; } clf_cl_source;
extern const clf_cl_source clf_cl_sources[];
extern const int clf_cl_nsources;

/* cold: compiled from source by this runtime (PoCL compiles each kernel at
 * its first launch, which clf_launch then times) */
struct clf_program_entry { uint64_t key; cl_program program; int cold; };
struct clf_kernel_entry { uint64_t key; char *name; cl_kernel kernel; int cold; };

/* Points PoCL's compiler cache at a writable folder before the platform is
 * first touched (runtime.c). */
void clf_pocl_cache_init(void);

/* Sets rt->dev.caps (probe.c): from the kernel cache's caps file, else by
 * running cl/probe.cl (builds through rt->tune, resolved before). */
void clf_device_probe(clf_runtime *rt);

#endif
