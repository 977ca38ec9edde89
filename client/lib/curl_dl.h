/* libcurl loaded on demand (dlopen at the first TCP request or async engine), so that a program
 * that only talks to the local Unix socket (the sbx CLI, most of all) starts without libcurl
 * and its 30-odd libraries (TLS, LDAP, SSH, IDN, ...): linking them costs ~10 ms per start.
 * libsbx's files call libcurl by its usual names; the macros below route them through the
 * loaded table. The header lists and percent-encoding libsbx builds itself (curl only reads
 * the lists), so requests over the Unix socket (unixhttp.c) never load libcurl. */
#pragma once

#define CURL_DISABLE_TYPECHECK /* setopt/getinfo become plain calls through the table */
#include <curl/curl.h>

#define SBXI_CURL_FUNCS(X)                                                                         \
    X(curl_easy_cleanup)                                                                           \
    X(curl_easy_getinfo)                                                                           \
    X(curl_easy_init)                                                                              \
    X(curl_easy_perform)                                                                           \
    X(curl_easy_reset)                                                                             \
    X(curl_easy_setopt)                                                                            \
    X(curl_easy_strerror)                                                                          \
    X(curl_global_init)                                                                            \
    X(curl_multi_add_handle)                                                                       \
    X(curl_multi_assign)                                                                           \
    X(curl_multi_cleanup)                                                                          \
    X(curl_multi_info_read)                                                                        \
    X(curl_multi_init)                                                                             \
    X(curl_multi_perform)                                                                          \
    X(curl_multi_poll)                                                                             \
    X(curl_multi_remove_handle)                                                                    \
    X(curl_multi_setopt)                                                                           \
    X(curl_multi_socket_action)

typedef struct sbxi_curl_syms {
#define SBXI_CURL_DECL(f) __typeof__(f) *f;
    SBXI_CURL_FUNCS(SBXI_CURL_DECL)
#undef SBXI_CURL_DECL
} sbxi_curl_syms;

extern sbxi_curl_syms sbxi_cu;

/* Load libcurl and run curl_global_init once (thread-safe). 0, or -1 with a message in ret_why
 * (static storage). */
int sbxi_curl_load(const char **ret_why);
/* The ways into libcurl: each loads it first and fails like its namesake when it cannot. */
CURL *sbxi_curl_easy_init(void);
CURLM *sbxi_curl_multi_init(void);
CURLcode sbxi_curl_global_init(long flags);
/* libcurl's header list and escaping, without libcurl (same struct, malloc'd). */
struct curl_slist *sbxi_slist_append(struct curl_slist *l, const char *s);
void sbxi_slist_free_all(struct curl_slist *l);
char *sbxi_curl_escape(CURL *unused, const char *s, int len);

#ifndef SBXI_CURL_NO_ROUTE
#undef curl_easy_setopt
#undef curl_easy_getinfo
#undef curl_multi_setopt
#define curl_easy_cleanup sbxi_cu.curl_easy_cleanup
#define curl_easy_getinfo sbxi_cu.curl_easy_getinfo
#define curl_easy_init sbxi_curl_easy_init
#define curl_easy_perform sbxi_cu.curl_easy_perform
#define curl_easy_reset sbxi_cu.curl_easy_reset
#define curl_easy_setopt sbxi_cu.curl_easy_setopt
#define curl_easy_strerror sbxi_cu.curl_easy_strerror
#define curl_global_init sbxi_curl_global_init
#define curl_multi_add_handle sbxi_cu.curl_multi_add_handle
#define curl_multi_assign sbxi_cu.curl_multi_assign
#define curl_multi_cleanup sbxi_cu.curl_multi_cleanup
#define curl_multi_info_read sbxi_cu.curl_multi_info_read
#define curl_multi_init sbxi_curl_multi_init
#define curl_multi_perform sbxi_cu.curl_multi_perform
#define curl_multi_poll sbxi_cu.curl_multi_poll
#define curl_multi_remove_handle sbxi_cu.curl_multi_remove_handle
#define curl_multi_setopt sbxi_cu.curl_multi_setopt
#define curl_multi_socket_action sbxi_cu.curl_multi_socket_action
#define curl_slist_append sbxi_slist_append
#define curl_slist_free_all sbxi_slist_free_all
#define curl_easy_escape sbxi_curl_escape
#define curl_free free
#endif
