/* libsbx against a real sandboxd: forks, leases and sandbox status, through the sync API and
 * through the async API on one loop (split from test_client.c, which has the rest of the
 * client's flow). */
#include "client/lib/internal.h"
#include "common/macro.h"
#include "common/timeutil.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#include <errno.h>
#include <jansson.h>
#include <sbx.h>
#include <stdbool.h>
#include <stdio.h>
#include <unistd.h>
#include <uv.h>

/* One private daemon with --max-sandboxes max (tests/lib/daemon.h), or $SBX_TEST_HOST when
 * set, as in test_client.c. */
static const char *daemon_start(unsigned max_sandboxes) {
    const char *env = getenv("SBX_TEST_HOST");
    if (env && *env)
        return env;
    char max[32];
    snprintf(max, sizeof(max), "%u", max_sandboxes);
    const char *flags[] = {"--max-sandboxes", max, NULL};
    return test_daemon_up("d0", &(test_daemon_opts){.flags = flags, .log_level = ""})->sock;
}

/* ---- forks, leases and status (sync) ---- */
static void exec_out(sbx_sandbox *sb, const char *script, char *out, size_t n) {
    sbx_exec_opts o;
    sbx_exec_opts_init(&o);
    const char *argv[] = {script, NULL};
    o.argv = argv;
    o.shell = 1;
    sbx_exec_result r;
    sbx_err err = {0};
    CHECK_MSG(sbx_sandbox_exec(sb, &o, &r, &err) == SBX_OK, "exec: %s", err.message);
    snprintf(out, n, "%s", r.stdout_data);
    sbx_exec_result_free(&r);
}

static sbx_sandbox *small_sandbox(sbx_client *c, const char *lease) {
    sbx_create_opts co;
    sbx_create_opts_init(&co);
    co.memory = 128ull << 20;
    co.lease_id = lease;
    sbx_sandbox *sb = NULL;
    sbx_err err = {0};
    CHECK_MSG(sbx_sandbox_create(c, &co, &sb, &err) == SBX_OK, "create: %s", err.message);
    return sb;
}

TEST_T(sync_fork_leases_status, 120) {
    const char *host = daemon_start(12);
    sbx_client *c = NULL;
    sbx_err err = {0};
    CHECK_EQ(sbx_client_new(host, &c, &err), SBX_OK);
    sbx_sandbox *src = small_sandbox(c, NULL);
    CHECK_MSG(sbx_sandbox_write_file_mode(src, "/workspace/run.sh", "#!/bin/sh\necho hi\n", 18,
                                          0755, &err) == SBX_OK,
              "write_file_mode: %s", err.message);
    char out[256];
    exec_out(src, "stat -c %a /workspace/run.sh; /workspace/run.sh", out, sizeof(out));
    CHECK_STREQ(out, "755\nhi\n");
    CHECK_EQ(sbx_sandbox_write_file_mode(src, "/workspace/x", "", 0, 01000, &err), SBX_E_INVALID);

    sbx_fork_opts fo;
    sbx_fork_opts_init(&fo);
    CHECK_EQ(fo.count, 1);
    fo.count = 3;
    const char *labels[] = {"role=fork", NULL};
    fo.overrides.labels = labels;
    sbx_sandbox **forks = NULL;
    size_t n = 0;
    CHECK_MSG(sbx_sandbox_fork(src, &fo, &forks, &n, &err) == SBX_OK, "fork: %s", err.message);
    CHECK_EQ(n, 3);
    for (size_t i = 0; i < n; i++) {
        CHECK(strcmp(sbx_sandbox_id(forks[i]), sbx_sandbox_id(src)) != 0);
        exec_out(forks[i], "/workspace/run.sh", out, sizeof(out)); /* the copy, mode included */
        CHECK_STREQ(out, "hi\n");
    }
    CHECK_EQ(sbx_sandbox_write_file(forks[0], "/workspace/own", "0", 1, &err), SBX_OK);
    void *data = NULL;
    size_t len = 0;
    CHECK_EQ(sbx_sandbox_read_file(forks[1], "/workspace/own", &data, &len, &err), SBX_E_NOT_FOUND);
    char *json = NULL;
    CHECK_EQ(sbx_sandbox_inspect(forks[2], &json, &err), SBX_OK);
    json_t *j = json_loads(json, 0, NULL);
    CHECK_STREQ(json_string_value(json_object_get(j, "forked_from")), sbx_sandbox_id(src));
    CHECK_STREQ(json_string_value(json_object_get(json_object_get(j, "labels"), "role")), "fork");
    json_decref(j);
    free(json);
    /* refused before any request, and by the daemon */
    fo.count = 257;
    CHECK_EQ(sbx_sandbox_fork(src, &fo, &forks, &n, &err), SBX_E_INVALID);
    CHECK_EQ(n, 3);

    sbx_sandbox_status st;
    CHECK_EQ(sbx_sandbox_get_status(forks[0], &st, &err), SBX_OK);
    CHECK_STREQ(st.state, "running");
    CHECK_STREQ(st.end_reason, "");
    for (size_t i = 0; i < n; i++)
        CHECK_EQ(sbx_sandbox_terminate(forks[i], &err), SBX_OK);
    CHECK_EQ(sbx_sandbox_get_status(forks[0], &st, &err), SBX_OK);
    CHECK_STREQ(st.state, "ended");
    CHECK_STREQ(st.end_reason, "terminated");
    CHECK(st.cost_usd > 0);
    sbx_sandbox_array_free(forks, n);
    CHECK_EQ(sbx_sandbox_terminate(src, &err), SBX_OK);
    fo.count = 1;
    CHECK_EQ(sbx_sandbox_fork(src, &fo, &forks, &n, &err), SBX_E_CONFLICT); /* src ended */
    sbx_sandbox_free(src);

    /* deleting a lease ends its sandboxes */
    char *lease = NULL;
    CHECK_MSG(sbx_lease_create(c, 60000, &lease, &err) == SBX_OK, "lease: %s", err.message);
    sbx_sandbox *leased = small_sandbox(c, lease);
    CHECK_EQ(sbx_lease_delete(c, lease, &err), SBX_OK);
    CHECK_EQ(sbx_sandbox_get_status(leased, &st, &err), SBX_OK);
    for (int i = 0; i < 100 && strcmp(st.state, "ended") != 0; i++) {
        usleep(50000);
        CHECK_EQ(sbx_sandbox_get_status(leased, &st, &err), SBX_OK);
    }
    CHECK_STREQ(st.state, "ended");
    CHECK_EQ(sbx_lease_renew(c, lease, &err), SBX_E_NOT_FOUND);
    CHECK_EQ(sbx_lease_delete(c, "ls-doesnotexist", &err), SBX_E_NOT_FOUND);
    CHECK_EQ(sbx_lease_delete(c, "../x", &err), SBX_E_INVALID);
    free(lease);
    sbx_sandbox_free(leased);
    sbx_client_free(c);
}

/* ---- forks, leases and status (async) ---- */
struct fork_box {
    int calls;
    sbx_err err;
    bool ok;
    sbx_sandbox *sbs[8];
    size_t n;
    char lease[128];
    sbx_sandbox_status st;
    sbx_sandbox *created;
};

/* Count the call and keep the error; true on success. */
static bool fbox_hit(struct fork_box *b, const sbx_err *err) {
    b->calls++;
    b->ok = !err;
    if (err)
        b->err = *err;
    return !err;
}

static void fbox_fork(void *ud, sbx_sandbox **sbs, size_t n, const sbx_err *err) {
    struct fork_box *b = ud;
    b->n = fbox_hit(b, err) ? n : 0;
    for (size_t i = 0; i < b->n && i < 8; i++)
        b->sbs[i] = sbs[i];
}

static void fbox_lease(void *ud, const char *id, const sbx_err *err) {
    struct fork_box *b = ud;
    if (fbox_hit(b, err))
        snprintf(b->lease, sizeof(b->lease), "%s", id);
}

static void fbox_status(void *ud, const sbx_sandbox_status *st, const sbx_err *err) {
    struct fork_box *b = ud;
    if (fbox_hit(b, err))
        b->st = *st;
}

static void fbox_create(void *ud, sbx_sandbox *sb, const sbx_err *err) {
    struct fork_box *b = ud;
    fbox_hit(b, err);
    b->created = sb;
}

static void fbox_inspect(void *ud, const void *data, size_t len, const sbx_err *err) {
    struct fork_box *b = ud;
    if (!fbox_hit(b, err))
        return;
    json_t *j = json_loadb(data, len, 0, NULL);
    snprintf(b->lease, sizeof(b->lease), "%s",
             json_string_value(json_object_get(j, "forked_from")) ?: "");
    json_decref(j);
}

static void fbox_done(void *ud, const sbx_err *err) {
    fbox_hit(ud, err);
}

/* Run the loop until b has been called back once. */
#define ASYNC_RUN(loop, b, what)                                                                   \
    do {                                                                                           \
        uv_run(loop, UV_RUN_DEFAULT);                                                              \
        CHECK_MSG((b).calls == 1 && (b).ok, "%s: %s", what, (b).err.message);                      \
    } while (0)

TEST_T(async_fork_leases_status, 120) {
    const char *host = daemon_start(12);
    sbx_client *c = NULL;
    sbx_err err = {0};
    CHECK_EQ(sbx_client_new(host, &c, &err), SBX_OK);
    uv_loop_t loop;
    uv_loop_init(&loop);
    sbx_async *as = NULL;
    CHECK_EQ(sbx_async_new(c, &loop, &as, &err), SBX_OK);

    struct fork_box b = {0};
    CHECK_EQ(sbx_async_lease_create(as, 60000, fbox_lease, &b), SBX_OK);
    ASYNC_RUN(&loop, b, "lease create");
    CHECK(strncmp(b.lease, "ls-", 3) == 0);
    char lease[128];
    snprintf(lease, sizeof(lease), "%s", b.lease);
    b = (struct fork_box){0};
    CHECK_EQ(sbx_async_lease_renew(as, lease, fbox_done, &b), SBX_OK);
    ASYNC_RUN(&loop, b, "lease renew");

    sbx_create_opts co;
    sbx_create_opts_init(&co);
    co.memory = 128ull << 20;
    co.lease_id = lease;
    b = (struct fork_box){0};
    CHECK_EQ(sbx_async_create(as, &co, fbox_create, &b), SBX_OK);
    ASYNC_RUN(&loop, b, "create");
    sbx_sandbox *src = b.created;
    b = (struct fork_box){0};
    CHECK_EQ(sbx_async_write_file_mode(as, src, "/workspace/t.sh", "#!/bin/sh\necho t\n", 17, 0700,
                                       fbox_done, &b),
             SBX_OK);
    ASYNC_RUN(&loop, b, "write_file_mode");

    sbx_fork_opts fo;
    sbx_fork_opts_init(&fo);
    fo.count = 2;
    b = (struct fork_box){0};
    CHECK_EQ(sbx_async_fork(as, src, &fo, fbox_fork, &b), SBX_OK);
    CHECK_EQ(sbx_async_pending(as), 1);
    ASYNC_RUN(&loop, b, "fork");
    CHECK_EQ(b.n, 2);
    sbx_sandbox *f0 = b.sbs[0], *f1 = b.sbs[1];
    char out[64];
    exec_out(f1, "stat -c %a /workspace/t.sh; /workspace/t.sh", out, sizeof(out));
    CHECK_STREQ(out, "700\nt\n");

    b = (struct fork_box){0};
    CHECK_EQ(sbx_async_inspect(as, f0, fbox_inspect, &b), SBX_OK);
    ASYNC_RUN(&loop, b, "inspect");
    CHECK_STREQ(b.lease, sbx_sandbox_id(src)); /* forked_from */
    b = (struct fork_box){0};
    CHECK_EQ(sbx_async_get_status(as, f0, fbox_status, &b), SBX_OK);
    ASYNC_RUN(&loop, b, "status");
    CHECK_STREQ(b.st.state, "running");

    /* bad calls are refused up front */
    fo.count = 1000;
    CHECK_EQ(sbx_async_fork(as, src, &fo, fbox_fork, &b), SBX_E_INVALID);
    CHECK_EQ(sbx_async_lease_renew(as, "a/b", fbox_done, &b), SBX_E_INVALID);
    CHECK_EQ(sbx_async_lease_create(as, 0, fbox_lease, &b), SBX_E_INVALID);

    /* the lease goes: so does the sandbox created under it (forks keep theirs: none) */
    b = (struct fork_box){0};
    CHECK_EQ(sbx_async_lease_delete(as, lease, fbox_done, &b), SBX_OK);
    ASYNC_RUN(&loop, b, "lease delete");
    for (int i = 0; i < 100; i++) {
        b = (struct fork_box){0};
        CHECK_EQ(sbx_async_get_status(as, src, fbox_status, &b), SBX_OK);
        ASYNC_RUN(&loop, b, "status");
        if (strcmp(b.st.state, "ended") == 0)
            break;
        usleep(50000);
    }
    CHECK_STREQ(b.st.state, "ended");
    b = (struct fork_box){0};
    CHECK_EQ(sbx_async_lease_renew(as, lease, fbox_done, &b), SBX_OK);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(b.calls == 1 && b.err.code == SBX_E_NOT_FOUND);
    b = (struct fork_box){0};
    CHECK_EQ(sbx_async_fork(as, src, &fo, fbox_fork, &b), SBX_E_INVALID); /* count 1000 */
    fo.count = 1;
    CHECK_EQ(sbx_async_fork(as, src, &fo, fbox_fork, &b), SBX_OK);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(b.calls == 1 && b.err.code == SBX_E_CONFLICT && b.n == 0);

    sbx_sandbox *all[] = {f0, f1};
    for (size_t i = 0; i < 2; i++) {
        b = (struct fork_box){0};
        CHECK_EQ(sbx_async_terminate(as, all[i], fbox_done, &b), SBX_OK);
        ASYNC_RUN(&loop, b, "terminate");
        b = (struct fork_box){0};
        CHECK_EQ(sbx_async_get_status(as, all[i], fbox_status, &b), SBX_OK);
        ASYNC_RUN(&loop, b, "status");
        CHECK_STREQ(b.st.end_reason, "terminated");
        CHECK(b.st.cost_usd > 0);
        sbx_sandbox_free(all[i]);
    }
    sbx_async_free(as);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(uv_loop_close(&loop), 0);
    sbx_sandbox_free(src);
    sbx_client_free(c);
}
