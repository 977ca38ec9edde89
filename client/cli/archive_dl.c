/* `sbx cp`'s libarchive, loaded on demand (see archive_dl.h). */
#include "client/cli/cli.h"

#define CLI_ARCHIVE_NO_ROUTE /* here the names are the real functions' (for dlsym and typeof) */
#include "client/cli/archive_dl.h"

#include <dlfcn.h>

cli_archive_syms cli_la;

int cli_archive_load(void) {
    static void *handle;
    if (handle)
        return 0;
    void *h = dlopen("libarchive.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return cli_error("cannot load libarchive (needed to copy directories): %s", dlerror());
#define CLI_LA_LOAD(f)                                                                             \
    if (!(*(void **)&cli_la.f = dlsym(h, #f))) {                                                   \
        dlclose(h);                                                                                \
        return cli_error("libarchive lacks %s", #f);                                               \
    }
    CLI_ARCHIVE_FUNCS(CLI_LA_LOAD)
#undef CLI_LA_LOAD
    handle = h;
    return 0;
}
