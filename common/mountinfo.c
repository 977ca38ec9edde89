/* Reading /proc/self/mountinfo (see mountinfo.h). */
#include "common/mountinfo.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mountinfo_unescape(char *s) {
    char *w = s;
    for (const char *p = s; *p; w++)
        if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' &&
            p[3] >= '0' && p[3] <= '7') {
            *w = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
            p += 4;
        } else
            *w = *p++;
    *w = 0;
}

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
        mountinfo_unescape(mnt);
        r = cb(mnt, fstype, opts, ud);
    }
    free(line);
    fclose(f);
    return r > 0 ? 0 : r;
}
