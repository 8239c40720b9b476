#!/bin/bash
# One prepared GPU pass: devices, selftest, model bench (random weights in
# the default model's shapes), tiny-model correctness, kernel bench.
D=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$D/lib:$LD_LIBRARY_PATH CLINFER_CACHE_DIR=/tmp/kc
lib=$(find /usr/local/nvidia /lib /usr/lib -name 'libnvidia-opencl.so.1' 2>/dev/null | head -1)
mkdir -p /tmp/icd && echo "$lib" > /tmp/icd/nvidia.icd && export OCL_ICD_VENDORS=/tmp/icd
nvidia-smi -L
$D/clinfer devices | tee $OUT/devices.txt
(timeout 60 $D/clinfer selftest --seed 11 > $OUT/selftest.txt 2>&1; echo "selftest rc $?"; tail -2 $OUT/selftest.txt)
for t in Q4_1 Q8_0; do $D/random_model /tmp/$t.gguf $t & done; wait
for t in Q4_1 Q8_0; do
  timeout 45 $D/clinfer bench -m /tmp/$t.gguf -p 512 -n 128 -r 3 2>&1 | tee $OUT/bench_$t.txt
done
(timeout 30 $D/test_model > $OUT/test_model.txt 2>&1; echo "test_model rc $?"; grep -E "rel err|PASSED|FAILED" $OUT/test_model.txt)
(timeout 40 $D/test_attention > $OUT/test_attention.txt 2>&1; echo "test_attention rc $?"; tail -2 $OUT/test_attention.txt)
timeout 50 $D/clinfer bench kernels > $OUT/kernels.txt 2>&1; echo "kernels rc $?"; grep -A40 "matrix products" $OUT/kernels.txt | head -60
