/* The super-block K-quants and IQ4_NL (host/quant_k.c): the conversions
 * the type table in quant.c points at, n blocks at a time. */
#ifndef CLF_QUANT_K_H
#define CLF_QUANT_K_H

#include <stdint.h>

void clf_q2_K_to_float(const void *src, float *dst, int64_t nb);
void clf_q3_K_to_float(const void *src, float *dst, int64_t nb);
void clf_q4_K_to_float(const void *src, float *dst, int64_t nb);
void clf_q5_K_to_float(const void *src, float *dst, int64_t nb);
void clf_q6_K_to_float(const void *src, float *dst, int64_t nb);

void clf_q2_K_from_float(const float *src, void *dst, int64_t nb);
void clf_q3_K_from_float(const float *src, void *dst, int64_t nb);
void clf_q4_K_from_float(const float *src, void *dst, int64_t nb);
void clf_q5_K_from_float(const float *src, void *dst, int64_t nb);
void clf_q6_K_from_float(const float *src, void *dst, int64_t nb);
void clf_iq4_nl_from_float(const float *src, void *dst, int64_t nb);

#endif
