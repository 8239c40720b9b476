/* Elementwise kernels. */

/* y[i] = a[i] + b[i] */
__kernel void add_f32(__global float *y, __global const float *a, __global const float *b, const int n) {
    int i = get_global_id(0);
    if (i < n) y[i] = a[i] + b[i];
}
