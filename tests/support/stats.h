/* The chi-square's tail for the tests that check a sampler's law by a
 * goodness-of-fit or homogeneity test (test_spec, test_serve_sched: the
 * latter links the server alone, no testutil, hence a header of static
 * inline functions). Include after math.h. */
#ifndef CLF_TEST_STATS_H
#define CLF_TEST_STATS_H

#include <math.h>

/* The regularized upper incomplete gamma Q(a, x) (Numerical Recipes' gser
 * and gcf): the chi-square's p-value with 2a degrees of freedom at 2x. */
static inline double gamma_q(double a, double x) {
    if (x <= 0) return 1;
    const double gln = lgamma(a);
    if (x < a + 1) { /* the series for P */
        double ap = a, sum = 1 / a, del = sum;
        for (int n = 0; n < 1000 && fabs(del) > fabs(sum) * 1e-15; n++) sum += del *= x / ++ap;
        return 1 - sum * exp(-x + a * log(x) - gln);
    }
    double b = x + 1 - a, c = 1 / 1e-300, d = 1 / b, h = d; /* the continued fraction for Q */
    for (int i = 1; i < 1000; i++) {
        double an = -i * (i - a);
        b += 2;
        d = an * d + b;
        if (fabs(d) < 1e-300) d = 1e-300;
        c = b + an / c;
        if (fabs(c) < 1e-300) c = 1e-300;
        d = 1 / d;
        double del = d * c;
        h *= del;
        if (fabs(del - 1) < 1e-15) break;
    }
    return exp(-x + a * log(x) - gln) * h;
}

/* The chi-square's p-value of x2 with df degrees of freedom (1 for none). */
static inline double chi2_p(double x2, int df) { return df > 0 ? gamma_q(df / 2.0, x2 / 2) : 1; }

#endif
