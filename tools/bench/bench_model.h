/* `clinfer bench` (model): prompt processing and generation tokens/s in the
 * shape of llama.cpp's llama-bench, beside the device's roofs. */
#ifndef CLF_BENCH_MODEL_H
#define CLF_BENCH_MODEL_H

int clf_bench_model_main(int argc, char **argv);

#endif
