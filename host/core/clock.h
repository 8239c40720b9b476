/* The one clock of the library: monotonic wall time, in seconds (load
 * progress, benches, speeds, the grammar cache's deadlines). */
#ifndef CLF_CLOCK_H
#define CLF_CLOCK_H

double clf_now_s(void);

#endif
