/* libcurl loaded on demand, and the header lists and percent-encoding libsbx builds without
 * it (see curl_dl.h). */
#define SBXI_CURL_NO_ROUTE /* the real names, for typeof and dlsym */
#include "client/lib/curl_dl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

sbxi_curl_syms sbxi_cu;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static const char *load_why = "libcurl is not loaded"; /* NULL once loaded */
static char load_msg[256];

static void load(void) {
    void *h = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(load_msg, sizeof(load_msg), "cannot load libcurl: %s", dlerror());
        load_why = load_msg;
        return;
    }
#define SBXI_CURL_LOAD(f)                                                                          \
    if (!(*(void **)&sbxi_cu.f = dlsym(h, #f))) {                                                  \
        snprintf(load_msg, sizeof(load_msg), "libcurl lacks %s", #f);                              \
        load_why = load_msg;                                                                       \
        dlclose(h);                                                                                \
        return;                                                                                    \
    }
    SBXI_CURL_FUNCS(SBXI_CURL_LOAD)
#undef SBXI_CURL_LOAD
    if (sbxi_cu.curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        load_why = "libcurl failed to initialise";
        return; /* kept loaded: it may hold state */
    }
    load_why = NULL;
}

int sbxi_curl_load(const char **ret_why) {
    pthread_once(&load_once, load);
    if (load_why && ret_why)
        *ret_why = load_why;
    return load_why ? -1 : 0;
}

CURL *sbxi_curl_easy_init(void) {
    return sbxi_curl_load(NULL) < 0 ? NULL : sbxi_cu.curl_easy_init();
}

CURLM *sbxi_curl_multi_init(void) {
    return sbxi_curl_load(NULL) < 0 ? NULL : sbxi_cu.curl_multi_init();
}

CURLcode sbxi_curl_global_init(long flags) {
    (void)flags; /* load() ran curl_global_init(CURL_GLOBAL_DEFAULT), as every caller asks */
    return sbxi_curl_load(NULL) < 0 ? CURLE_FAILED_INIT : CURLE_OK;
}

struct curl_slist *sbxi_slist_append(struct curl_slist *l, const char *s) {
    struct curl_slist *n = calloc(1, sizeof(*n));
    if (!n || !(n->data = strdup(s))) {
        free(n);
        return NULL;
    }
    if (!l)
        return n;
    struct curl_slist *t = l;
    while (t->next)
        t = t->next;
    t->next = n;
    return l;
}

void sbxi_slist_free_all(struct curl_slist *l) {
    while (l) {
        struct curl_slist *next = l->next;
        free(l->data);
        free(l);
        l = next;
    }
}

char *sbxi_curl_escape(CURL *unused, const char *s, int len) {
    (void)unused;
    size_t n = len > 0 ? (size_t)len : strlen(s);
    char *out = malloc(n * 3 + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '.' || c == '_' || c == '~') {
            *o++ = (char)c;
        } else {
            static const char hex[] = "0123456789ABCDEF";
            *o++ = '%';
            *o++ = hex[c >> 4];
            *o++ = hex[c & 15];
        }
    }
    *o = 0;
    return out;
}
