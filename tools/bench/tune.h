/* `clinfer tune`: measures this device's kernel variants and tile sizes on a
 * model's shapes and stores the winners (host/cl/tuning.h). */
#ifndef CLF_TUNE_H
#define CLF_TUNE_H

int clf_tune_main(int argc, char **argv);

#endif
