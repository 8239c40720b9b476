/* Platforms and devices: listing, the default, selection by index or name. */
#include "runtime_impl.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- devices ---------------------------------------------------------- */

static void dev_str(cl_device_id d, cl_device_info what, char *buf, size_t n) {
    buf[0] = 0;
    if (clGetDeviceInfo(d, what, n, buf, NULL) != CL_SUCCESS) buf[0] = 0;
    buf[n - 1] = 0;
}

static void fill_device(clf_device *o, int pi, int di, cl_platform_id p, cl_device_id d) {
    memset(o, 0, sizeof *o);
    o->platform_index = pi;
    o->device_index = di;
    o->platform = p;
    o->id = d;
    clGetPlatformInfo(p, CL_PLATFORM_NAME, sizeof o->platform_name, o->platform_name, NULL);
    clGetPlatformInfo(p, CL_PLATFORM_VERSION, sizeof o->platform_version, o->platform_version, NULL);
    o->platform_name[sizeof o->platform_name - 1] = o->platform_version[sizeof o->platform_version - 1] = 0;
    dev_str(d, CL_DEVICE_NAME, o->name, sizeof o->name);
    dev_str(d, CL_DEVICE_VENDOR, o->vendor, sizeof o->vendor);
    dev_str(d, CL_DRIVER_VERSION, o->driver, sizeof o->driver);
    dev_str(d, CL_DEVICE_VERSION, o->version, sizeof o->version);
    dev_str(d, CL_DEVICE_OPENCL_C_VERSION, o->c_version, sizeof o->c_version);
    cl_uint u = 0;
    cl_ulong ul = 0;
    clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof o->type, &o->type, NULL);
    if (clGetDeviceInfo(d, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof u, &u, NULL) == CL_SUCCESS) o->compute_units = u;
    if (clGetDeviceInfo(d, CL_DEVICE_MAX_CLOCK_FREQUENCY, sizeof u, &u, NULL) == CL_SUCCESS) o->clock_mhz = u;
    if (clGetDeviceInfo(d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof ul, &ul, NULL) == CL_SUCCESS) o->global_mem = ul;
    if (clGetDeviceInfo(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof ul, &ul, NULL) == CL_SUCCESS) o->max_alloc = ul;
    if (clGetDeviceInfo(d, CL_DEVICE_LOCAL_MEM_SIZE, sizeof ul, &ul, NULL) == CL_SUCCESS) o->local_mem = ul;
    /* Testing aid: CLINFER_MAX_ALLOC_MB and CLINFER_GLOBAL_MEM_MB (MiB,
     * fractions allowed) lower what clinfer believes the device offers, so
     * that the "model too large for the device" paths can be tested with a
     * tiny model on any device. They never raise a limit. */
    const char *lim[2] = {getenv("CLINFER_MAX_ALLOC_MB"), getenv("CLINFER_GLOBAL_MEM_MB")};
    uint64_t *field[2] = {&o->max_alloc, &o->global_mem};
    for (int i = 0; i < 2; i++) {
        if (!lim[i] || !*lim[i]) continue;
        char *end;
        double mb = strtod(lim[i], &end);
        if (!*end && mb >= 0 && mb * 1048576.0 < (double)*field[i]) *field[i] = (uint64_t)(mb * 1048576.0);
    }
    clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof o->max_work_group, &o->max_work_group, NULL);
    size_t n = 0;
    if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, 0, NULL, &n) == CL_SUCCESS && n) {
        char *ext = malloc(n + 1);
        if (ext && clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, n, ext, NULL) == CL_SUCCESS) {
            ext[n] = 0;
            o->fp16 = strstr(ext, "cl_khr_fp16") != NULL;
            o->fp64 = strstr(ext, "cl_khr_fp64") != NULL;
        }
        free(ext);
    }
}

clf_status clf_devices_list(clf_device **devs, int *n) {
    static pthread_once_t pocl_once = PTHREAD_ONCE_INIT;
    pthread_once(&pocl_once, clf_pocl_cache_init); /* before the platform is first touched */
    *devs = NULL;
    *n = 0;
    cl_uint np = 0;
    cl_int err = clGetPlatformIDs(0, NULL, &np);
    if (err == -1001 /* CL_PLATFORM_NOT_FOUND_KHR */ || (err == CL_SUCCESS && np == 0))
        return clf_fail(CLF_ERR_DEVICE, "no OpenCL platform found (is an ICD such as pocl-opencl-icd installed? "
                                        "OCL_ICD_VENDORS=%s)",
                        getenv("OCL_ICD_VENDORS") ? getenv("OCL_ICD_VENDORS") : "unset");
    CLF_TRY(clf_cl_check(err, "clGetPlatformIDs"));
    cl_platform_id *plats = calloc(np, sizeof *plats);
    if (!plats) return clf_fail(CLF_ERR_MEMORY, "out of host memory");
    err = clGetPlatformIDs(np, plats, NULL);
    if (err != CL_SUCCESS) {
        free(plats);
        return clf_cl_check(err, "clGetPlatformIDs");
    }
    clf_device *out = NULL;
    int count = 0;
    for (cl_uint p = 0; p < np; p++) {
        cl_uint nd = 0;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 0, NULL, &nd) != CL_SUCCESS || nd == 0) continue;
        cl_device_id *ids = calloc(nd, sizeof *ids);
        clf_device *grown = realloc(out, (size_t)(count + (int)nd) * sizeof *out);
        if (!ids || !grown) {
            free(ids);
            free(grown ? grown : out);
            free(plats);
            return clf_fail(CLF_ERR_MEMORY, "out of host memory");
        }
        out = grown;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, nd, ids, NULL) == CL_SUCCESS)
            for (cl_uint d = 0; d < nd; d++) fill_device(&out[count++], (int)p, (int)d, plats[p], ids[d]);
        free(ids);
    }
    free(plats);
    *devs = out;
    *n = count;
    return CLF_OK;
}

const char *clf_device_type_name(cl_device_type t) {
    if (t & CL_DEVICE_TYPE_GPU) return "GPU";
    if (t & CL_DEVICE_TYPE_ACCELERATOR) return "accelerator";
    if (t & CL_DEVICE_TYPE_CPU) return "CPU";
    return "other";
}

int clf_device_default(const clf_device *devs, int n) {
    static const cl_device_type order[] = {CL_DEVICE_TYPE_GPU, CL_DEVICE_TYPE_ACCELERATOR, CL_DEVICE_TYPE_CPU};
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < n; i++)
            if (devs[i].type & order[k]) return i;
    return 0;
}

static int contains_nocase(const char *hay, const char *needle) {
    size_t nl = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < nl && hay[i] && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i])) i++;
        if (i == nl) return 1;
    }
    return nl == 0;
}

clf_status clf_device_select(const clf_device *devs, int n, const char *sel, int *index) {
    if (!sel || !*sel) sel = getenv("CLINFER_DEVICE");
    if (n <= 0) return clf_fail(CLF_ERR_DEVICE, "no OpenCL device found");
    if (!sel || !*sel) {
        *index = clf_device_default(devs, n);
        return CLF_OK;
    }
    int p, d, used = 0;
    if (sscanf(sel, "%d:%d%n", &p, &d, &used) == 2 && sel[used] == 0) {
        for (int i = 0; i < n; i++)
            if (devs[i].platform_index == p && devs[i].device_index == d) {
                *index = i;
                return CLF_OK;
            }
    } else {
        for (int i = 0; i < n; i++)
            if (contains_nocase(devs[i].name, sel) || contains_nocase(devs[i].platform_name, sel)) {
                *index = i;
                return CLF_OK;
            }
    }
    char list[1536] = "";
    size_t off = 0;
    for (int i = 0; i < n && off < sizeof list - 1; i++)
        off += (size_t)snprintf(list + off, sizeof list - off, "%s%d:%d %s (%s)", i ? "; " : "",
                                devs[i].platform_index, devs[i].device_index, devs[i].name,
                                devs[i].platform_name);
    return clf_fail(CLF_ERR_DEVICE, "no OpenCL device matches '%s'; available: %s", sel, list);
}
