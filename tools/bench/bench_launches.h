/* `clinfer bench launches`: a decode token's kernel launches (SmolLM2-135M
 * shapes, 30 layers of 7 or 11 launches) enqueued one by one against the
 * same launches recorded once into a command buffer (cl_khr_command_buffer)
 * and replayed, medians of interleaved rounds: what replay would save. */
#ifndef CLF_BENCH_LAUNCHES_H
#define CLF_BENCH_LAUNCHES_H

int clf_bench_launches_main(int argc, char **argv);

#endif
