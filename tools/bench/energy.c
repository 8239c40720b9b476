#include "energy.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One number from a sysfs file: 0, or an errno. One read(), as sysfs
 * hands an attribute over whole (and as a test's FIFO serves one reading). */
static int read_number(const char *path, double *v) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return errno ? errno : EIO;
    char buf[64], *end;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    int err = n < 0 ? errno : 0;
    close(fd);
    if (n < 0) return err ? err : EIO;
    buf[n] = 0;
    errno = 0;
    double x = strtod(buf, &end);
    if (end == buf || errno || x < 0 || (*end && *end != '\n')) return EINVAL;
    *v = x;
    return 0;
}

/* intel-rapl:N exactly: a package, not a sub-zone (intel-rapl:N:M) */
static int is_package(const char *name) {
    unsigned k;
    int used = 0;
    return sscanf(name, "intel-rapl:%u%n", &k, &used) == 1 && name[used] == 0 && !strncmp(name, "intel-rapl:", 11);
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

void clf_energy_open(clf_energy *e) {
    memset(e, 0, sizeof *e);
    const char *dir = getenv("CLINFER_POWERCAP_DIR");
    if (!dir || !*dir) dir = "/sys/class/powercap";
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(e->why, sizeof e->why, "no %s (%s): the host exposes no energy counters", dir, strerror(errno));
        return;
    }
    char *names[CLF_ENERGY_MAX_DOMAINS];
    int n = 0;
    for (struct dirent *de; (de = readdir(d)) && n < CLF_ENERGY_MAX_DOMAINS;)
        if (is_package(de->d_name) && (names[n] = strdup(de->d_name))) n++;
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, by_name);
    for (int i = 0; i < n; i++) {
        char p[sizeof e->path[0]];
        double v;
        snprintf(p, sizeof p, "%s/%s/energy_uj", dir, names[i]);
        int err = read_number(p, &v);
        if (err && !e->why[0])
            snprintf(e->why, sizeof e->why, "%s is not readable (%s)%s", p, strerror(err),
                     err == EACCES ? ": RAPL counters are root's since Linux 5.10" : "");
        if (err) continue;
        int k = e->n++;
        snprintf(e->path[k], sizeof e->path[k], "%s", p);
        snprintf(p, sizeof p, "%s/%s/max_energy_range_uj", dir, names[i]);
        if (read_number(p, &e->max_uj[k])) e->max_uj[k] = 0;
        snprintf(p, sizeof p, "%s/%s/name", dir, names[i]);
        FILE *f = fopen(p, "r");
        if (!f || !fgets(e->name[k], sizeof e->name[k], f)) snprintf(e->name[k], sizeof e->name[k], "%s", names[i]);
        if (f) fclose(f);
        e->name[k][strcspn(e->name[k], "\n")] = 0;
    }
    for (int i = 0; i < n; i++) free(names[i]);
    if (e->n) e->why[0] = 0; /* one unreadable of several: the figure is the readable ones' */
    else if (!e->why[0])
        snprintf(e->why, sizeof e->why, "no RAPL package domain (intel-rapl:N) under %s", dir);
}

clf_energy_mark clf_energy_read(const clf_energy *e) {
    clf_energy_mark m = {.ok = e->n > 0};
    for (int i = 0; i < e->n; i++)
        if (read_number(e->path[i], &m.uj[i])) m.ok = 0;
    return m;
}

double clf_energy_joules(const clf_energy *e, const clf_energy_mark *before, const clf_energy_mark *after) {
    if (!e->n || !before->ok || !after->ok) return -1;
    double uj = 0;
    for (int i = 0; i < e->n; i++) {
        double d = after->uj[i] - before->uj[i];
        if (d < 0) { /* wrapped: the counter restarts at 0 after max_energy_range_uj */
            if (e->max_uj[i] <= 0) return -1;
            d += e->max_uj[i];
        }
        uj += d;
    }
    return uj * 1e-6;
}

void clf_energy_names(const clf_energy *e, char *buf, int n) {
    int used = 0;
    buf[0] = 0;
    for (int i = 0; i < e->n && used < n; i++)
        used += snprintf(buf + used, (size_t)(n - used), "%s%s", i ? ", " : "", e->name[i]);
}
