/* Reading /proc/self/mountinfo (see mountinfo.h). */
#include "common/mountinfo.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int mountinfo_walk(int (*cb)(const char *mnt, const char *fstype, const char *opts, void *ud),
                   void *ud) {
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return -errno;
    char *line = NULL;
    size_t cap = 0;
    int r = 0;
    while (r == 0 && getline(&line, &cap, f) > 0) {
        char mnt[512], fstype[64], opts[512];
        char *sep = strstr(line, " - ");
        if (!sep || sscanf(line, "%*s %*s %*s %*s %511s", mnt) != 1 ||
            sscanf(sep + 3, "%63s %*s %511s", fstype, opts) != 2)
            continue;
        r = cb(mnt, fstype, opts, ud);
    }
    free(line);
    fclose(f);
    return r > 0 ? 0 : r;
}
