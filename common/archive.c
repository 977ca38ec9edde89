/* libarchive loaded on demand, and archive path normalization (see archive.h). */
#include "common/archive.h"

#include <dlfcn.h>
#include <errno.h>
#include <string.h>

libarchive_syms la;

int libarchive_load(error_rec *err) {
    static void *handle;
    if (handle)
        return 0;
    void *h = dlopen("libarchive.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return error_set(err, -ENOENT, "image: cannot load libarchive: %s", dlerror());
#define LA_LOAD(f)                                                                                 \
    if (!(*(void **)&la.f = dlsym(h, #f))) {                                                       \
        dlclose(h);                                                                                \
        return error_set(err, -ENOENT, "image: libarchive lacks %s", #f);                          \
    }
    LIBARCHIVE_FUNCS(LA_LOAD)
#undef LA_LOAD
    handle = h;
    return 0;
}

int libarchive_clean_path(const char *in, char *buf, size_t len) {
    if (!in || in[0] == '/')
        return -EINVAL;
    size_t o = 0;
    for (const char *p = in; *p;) {
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return -EINVAL;
        if (n > 0 && !(n == 1 && p[0] == '.')) {
            if (o + n + 2 > len)
                return -ENAMETOOLONG;
            if (o)
                buf[o++] = '/';
            memcpy(buf + o, p, n);
            o += n;
        }
        p += n;
        while (*p == '/')
            p++;
    }
    buf[o] = '\0';
    return 0;
}
