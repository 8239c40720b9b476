/* `clinfer bench --json-schema F | --grammar-file F | --grammar GBNF`:
 * generation under a grammar against free generation. */
#ifndef CLF_BENCH_GRAMMAR_H
#define CLF_BENCH_GRAMMAR_H

int clf_bench_grammar_main(int argc, char **argv);

#endif
