#!/bin/bash
# One prepared GPU pass: devices, selftest, tests of the gpu kernel variant,
# the GEMV targets of issue 15, model bench (random weights in the default
# model's shapes), kernel bench; a table of what issue 15 asks at the end.
#
# Stage here (builds, then copies the binaries and the libraries they need
# beyond the C library into DIR, an ignored folder of the checkout that the
# device tool carries: ~58 MB, OpenBLAS the most, under the 64 MiB that
# travels with the ~3 MB tree):
#   echo /.h200/ >> "$(git rev-parse --git-common-dir)/info/exclude"
#   bench/results/h200/run.sh stage .h200
# then on the lent machine (run, carry [".h200"], timeout_s 600):
#   .h200/run.sh
# Outputs go to $OUT (the device tool brings them back).
set -u
if [ "${1:-}" = stage ]; then
  R=$(cd "$(dirname "$0")/../../.." && pwd) S=${2:?stage DIR}
  cmake -S "$R" -B "$R/build" -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build "$R/build" -j 2 || exit 1
  mkdir -p "$S/lib"
  for b in clinfer test_matmul test_model test_attention random_model; do
    f=$(find "$R/build" -name $b -type f -perm -u+x | head -1)
    cp "$f" "$S/" && ldd "$f" | awk '/=> \// {print $3}' |
      grep -vE '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*)\.so' | xargs -r cp -L -t "$S/lib"
  done
  cp "$0" "$S/run.sh" && echo "staged in $S: $(du -sh "$S" | cut -f1)"
  exit 0
fi
D=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/h200out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$D/lib:${LD_LIBRARY_PATH:-} CLINFER_CACHE_DIR=/tmp/kc
lib=$(find /usr/local/nvidia /lib /usr/lib -name 'libnvidia-opencl.so.1' 2>/dev/null | head -1)
mkdir -p /tmp/icd && echo "$lib" > /tmp/icd/nvidia.icd && export OCL_ICD_VENDORS=/tmp/icd
nvidia-smi -L
$D/clinfer devices | tee $OUT/devices.txt
# a GPU takes the gpu variant by itself; forced so a tuning change cannot skip it
export CLINFER_MATMUL_VARIANT=gpu
(timeout 60 $D/clinfer selftest --seed 11 > $OUT/selftest.txt 2>&1; echo "selftest rc $?"; grep -E "gemv_q|failed" $OUT/selftest.txt)
(timeout 40 $D/test_model > $OUT/test_model.txt 2>&1; echo "test_model rc $?"; grep -E "rel err|PASSED|FAILED" $OUT/test_model.txt | tail -4)
for t in Q4_1 Q8_0 Q4_0; do $D/random_model /tmp/$t.gguf $t & done; wait
timeout 150 $D/clinfer bench kernels > $OUT/kernels.txt 2>&1; echo "kernels rc $?"
for t in Q4_1 Q8_0 Q4_0; do
  timeout 45 $D/clinfer bench -m /tmp/$t.gguf -p 512 -n 128 -r 3 > $OUT/bench_$t.txt 2>&1
done
# every variant's sweep, the int8 GEMV's own test among them (last: the
# measurements above come back even if this runs out of time)
(timeout 150 $D/test_matmul > $OUT/test_matmul.txt 2>&1; echo "test_matmul rc $?"; grep -E "gpu int8|PASSED|FAILED" $OUT/test_matmul.txt)

echo; echo "== issue 15, GPU GEMVs: weights cold, decode x as its producer quantizes it (int8 for Q8_0/Q4_0/Q4_1) =="
grep -m1 "^roofs:" $OUT/kernels.txt
printf '%-6s %12s %9s %8s %6s   (target: >= 50%% of copy)\n' type in-\>out ms GB/s %copy
awk '$1 == "gemv_cold" && ($3 == "576->49152" || $3 == "4096->4096" || $3 == "4096->11008") {
  printf "%-6s %12s %9s %8s %6s\n", $2, $3, $5, $7, $8 }' $OUT/kernels.txt
echo; echo "== tg128 / pp512 on random weights, SmolLM2-135M shapes (issue 15: tg128 >= 2x the 356 t/s before) =="
for t in Q4_1 Q8_0 Q4_0; do grep -hE "\| (tg128|pp512) \|" $OUT/bench_$t.txt | awk -F'|' '{printf "%-12s %-6s %22s %18s %s\n", $2, $7, $8, $9, $10}'; done
