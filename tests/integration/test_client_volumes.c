/* libsbx against a real sandboxd, issue 24's calls: named volumes (sbx_volume_*, a create with
 * "volumes" through sbx_sandbox_create_with), the async volume and commit calls
 * (sbx_async_volume_create, sbx_async_create_with, sbx_async_commit, sbx_async_volume_remove)
 * on one loop, and pause and resume (sbx_sandbox_pause/resume, sbx_async_pause/resume). */
#include "common/macro.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#include <jansson.h>
#include <sbx.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

static const char *daemon_start(void) {
    return test_daemon_up("d0", &(test_daemon_opts){.log_level = ""})->sock;
}

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

static json_t *parse(const char *js) {
    json_t *j = json_loads(js, 0, NULL);
    CHECK_MSG(j != NULL, "not JSON: %s", js);
    return j;
}

TEST_T(sync_volumes, 90) {
    sbx_client *c = NULL;
    sbx_err err = {0};
    CHECK_EQ(sbx_client_new(daemon_start(), &c, &err), SBX_OK);
    char *js = NULL;
    CHECK_MSG(sbx_volume_create(c, "libsbx-v", 32ull << 20, &js, &err) == SBX_OK, "%s",
              err.message);
    json_t *j = parse(js);
    CHECK_EQ(json_integer_value(json_object_get(j, "size")), 32 << 20);
    json_decref(j);
    free(js);
    CHECK_EQ(sbx_volume_create(c, "libsbx-v", 0, NULL, &err), SBX_E_CONFLICT);
    CHECK_EQ(sbx_volume_create(c, "Bad Name", 0, NULL, &err), SBX_E_INVALID);
    CHECK(strstr(err.message, "name") != NULL);
    sbx_create_opts co;
    sbx_create_opts_init(&co);
    co.memory = 128ull << 20;
    sbx_sandbox *sb = NULL;
    CHECK_MSG(sbx_sandbox_create_with(c, &co,
                                      "{\"volumes\":[{\"name\":\"libsbx-v\",\"path\":\"/v\"}]}",
                                      &sb, &err) == SBX_OK,
              "create: %s", err.message);
    char out[256];
    exec_out(sb, "echo kept > /v/f && cat /v/f", out, sizeof(out));
    CHECK_STREQ(out, "kept\n");
    CHECK_EQ(sbx_volume_remove(c, "libsbx-v", &err), SBX_E_CONFLICT);
    CHECK(strstr(err.message, sbx_sandbox_id(sb)) != NULL);
    CHECK_EQ(sbx_volume_inspect(c, "libsbx-v", &js, &err), SBX_OK);
    j = parse(js);
    CHECK_STREQ(json_string_value(
                    json_object_get(json_array_get(json_object_get(j, "in_use_by"), 0), "sandbox")),
                sbx_sandbox_id(sb));
    json_decref(j);
    free(js);
    CHECK_EQ(sbx_sandbox_terminate(sb, &err), SBX_OK);
    sbx_sandbox_free(sb);
    CHECK_EQ(sbx_volume_list(c, &js, &err), SBX_OK);
    j = parse(js);
    CHECK_EQ(json_array_size(j), 1);
    json_decref(j);
    free(js);
    CHECK_EQ(sbx_volume_remove(c, "libsbx-v", &err), SBX_OK);
    CHECK_EQ(sbx_volume_inspect(c, "libsbx-v", &js, &err), SBX_E_NOT_FOUND);
    CHECK_EQ(sbx_volume_remove(c, "libsbx-v", &err), SBX_E_NOT_FOUND);
    sbx_client_free(c);
}

/* ---- async ---- */
typedef struct box {
    int calls;
    sbx_err err;
    bool ok;
    char data[4096];
    sbx_sandbox *sb;
} box;

static void on_data(void *ud, const void *data, size_t len, const sbx_err *err) {
    box *b = ud;
    b->calls++;
    b->ok = !err;
    if (err)
        b->err = *err;
    else
        snprintf(b->data, sizeof(b->data), "%.*s", (int)MIN(len, sizeof(b->data) - 1),
                 (const char *)data);
}

static void on_done(void *ud, const sbx_err *err) {
    on_data(ud, "", 0, err);
}

static void on_created(void *ud, sbx_sandbox *sb, const sbx_err *err) {
    box *b = ud;
    on_data(ud, "", 0, err);
    b->sb = sb;
}

static void run_loop(uv_loop_t *loop, box *b) {
    uv_run(loop, UV_RUN_DEFAULT);
    CHECK_EQ(b->calls, 1);
}

/* A store image to commit from (mkimage.py, the rootfs format), imported as name. */
static void import_image(sbx_client *c, const char *name) {
    char cmd[2048], tar[1024];
    const char *src = getenv("SBX_SRC_DIR"), *dir = getenv("SBX_CASE_DIR");
    snprintf(tar, sizeof(tar), "%s/img.tar", dir ? dir : "/tmp");
    snprintf(cmd, sizeof(cmd), "python3 %s/tests/integration/mkimage.py rootfs %s", src ? src : ".",
             tar);
    CHECK_MSG(system(cmd) == 0, "%s failed", cmd);
    FILE *f = fopen(tar, "rb");
    CHECK(f != NULL);
    sbx_err err = {0};
    CHECK_MSG(sbx_image_import(c, name, fileno(f), 0, NULL, &err) == SBX_OK, "import: %s",
              err.message);
    fclose(f);
}

TEST_T(async_volume_and_commit, 120) {
    sbx_client *c = NULL;
    sbx_err err = {0};
    CHECK_EQ(sbx_client_new(daemon_start(), &c, &err), SBX_OK);
    import_image(c, "base:1");
    uv_loop_t loop;
    uv_loop_init(&loop);
    sbx_async *as = NULL;
    CHECK_EQ(sbx_async_new(c, &loop, &as, &err), SBX_OK);
    box b = {0};
    CHECK_EQ(sbx_async_volume_create(as, "async-v", 16ull << 20, on_data, &b), SBX_OK);
    run_loop(&loop, &b);
    CHECK_MSG(b.ok && strstr(b.data, "\"async-v\""), "volume create: %s %s", b.err.message, b.data);
    sbx_create_opts co;
    sbx_create_opts_init(&co);
    co.image = "base:1";
    co.memory = 128ull << 20;
    b = (box){0};
    CHECK_EQ(sbx_async_create_with(
                 as, &co, "{\"volumes\":[{\"name\":\"async-v\",\"path\":\"/workspace/v\"}]}",
                 on_created, &b),
             SBX_OK);
    run_loop(&loop, &b);
    CHECK_MSG(b.ok && b.sb, "create: %s", b.err.message);
    sbx_sandbox *sb = b.sb;
    char out[256];
    exec_out(sb, "echo vol > /workspace/v/f && echo own > /workspace/own && cat /workspace/v/f",
             out, sizeof(out));
    CHECK_STREQ(out, "vol\n");
    b = (box){0};
    CHECK_EQ(sbx_async_commit(as, sb, "committed:1", 0, on_data, &b), SBX_OK);
    run_loop(&loop, &b);
    CHECK_MSG(b.ok, "commit: %s", b.err.message);
    json_t *j = parse(b.data);
    CHECK_STREQ(json_string_value(json_object_get(j, "name")), "committed:1");
    CHECK(json_is_number(json_object_get(j, "freeze_ms")));
    json_decref(j);
    b = (box){0};
    CHECK_EQ(sbx_async_commit(as, sb, "committed:1", 0, on_data, &b), SBX_OK);
    run_loop(&loop, &b);
    CHECK(!b.ok && b.err.code == SBX_E_CONFLICT);
    b = (box){0};
    CHECK_EQ(sbx_async_volume_remove(as, "async-v", on_done, &b), SBX_OK);
    run_loop(&loop, &b);
    CHECK(!b.ok && b.err.code == SBX_E_CONFLICT);
    CHECK_EQ(sbx_sandbox_terminate(sb, &err), SBX_OK);
    sbx_sandbox_free(sb);
    /* the commit has the sandbox's own files, not the volume's (a mount point at most) */
    co.image = "committed:1";
    sbx_sandbox *sb2 = NULL;
    CHECK_MSG(sbx_sandbox_create(c, &co, &sb2, &err) == SBX_OK, "create: %s", err.message);
    exec_out(sb2, "cat /workspace/own; ls -A /workspace/v", out, sizeof(out));
    CHECK_STREQ(out, "own\n"); /* the volume's f is not in the image */
    CHECK_EQ(sbx_sandbox_terminate(sb2, &err), SBX_OK);
    sbx_sandbox_free(sb2);
    b = (box){0};
    CHECK_EQ(sbx_async_volume_remove(as, "async-v", on_done, &b), SBX_OK);
    run_loop(&loop, &b);
    CHECK_MSG(b.ok, "volume remove: %s", b.err.message);
    CHECK_EQ(sbx_async_volume_remove(as, "Bad Name", on_done, &b), SBX_E_INVALID);
    sbx_async_free(as);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(uv_loop_close(&loop), 0);
    sbx_client_free(c);
}

/* ---- pause and resume ---- */

/* The counter a Python process keeps in its memory (written to /tmp/c every 50 ms). */
#define COUNTER                                                                                    \
    "python3 -c 'import os, time\nx = 1000\nwhile True:\n    x += 1\n    open(\"/tmp/n\", "        \
    "\"w\").write(str(x)); os.rename(\"/tmp/n\", \"/tmp/c\")\n    time.sleep(0.05)' </dev/null "   \
    ">/dev/null 2>&1 &"

static long counter(sbx_sandbox *sb) {
    char out[64];
    exec_out(sb, "cat /tmp/c", out, sizeof(out));
    return atol(out);
}

static const char *state_of(const char *js, char *buf, size_t n) {
    json_t *j = parse(js);
    snprintf(buf, n, "%s", json_string_value(json_object_get(j, "state")));
    json_decref(j);
    return buf;
}

TEST_T(pause_resume, 120) {
    sbx_client *c = NULL;
    sbx_err err = {0};
    CHECK_EQ(sbx_client_new(daemon_start(), &c, &err), SBX_OK);
    sbx_create_opts co;
    sbx_create_opts_init(&co);
    co.memory = 256ull << 20;
    sbx_sandbox *sb = NULL, *plain = NULL;
    CHECK_MSG(sbx_sandbox_create_with(c, &co, "{\"pausable\":true}", &sb, &err) == SBX_OK,
              "create: %s", err.message);
    char out[64], *js = NULL;
    exec_out(sb, COUNTER " sleep 0.3", out, sizeof(out));
    long before = counter(sb);
    CHECK_MSG(sbx_sandbox_pause(sb, &js, &err) == SBX_OK, "pause: %s", err.message);
    CHECK_STREQ(state_of(js, out, sizeof(out)), "paused");
    free(js);
    CHECK_EQ(sbx_sandbox_pause(sb, NULL, &err), SBX_E_CONFLICT);
    CHECK_MSG(sbx_sandbox_resume(sb, &js, &err) == SBX_OK, "resume: %s", err.message);
    CHECK_STREQ(state_of(js, out, sizeof(out)), "running");
    free(js);
    CHECK_EQ(sbx_sandbox_resume(sb, NULL, &err), SBX_E_CONFLICT);
    long after = counter(sb);
    CHECK_MSG(after >= before, "the counter went back: %ld -> %ld", before, after);
    /* the same on a loop */
    uv_loop_t loop;
    uv_loop_init(&loop);
    sbx_async *as = NULL;
    CHECK_EQ(sbx_async_new(c, &loop, &as, &err), SBX_OK);
    box b = {0};
    CHECK_EQ(sbx_async_pause(as, sb, on_data, &b), SBX_OK);
    run_loop(&loop, &b);
    CHECK_MSG(b.ok, "async pause: %s", b.err.message);
    CHECK_STREQ(state_of(b.data, out, sizeof(out)), "paused");
    b = (box){0};
    CHECK_EQ(sbx_async_resume(as, sb, on_data, &b), SBX_OK);
    run_loop(&loop, &b);
    CHECK_MSG(b.ok, "async resume: %s", b.err.message);
    CHECK_STREQ(state_of(b.data, out, sizeof(out)), "running");
    CHECK(counter(sb) >= after);
    /* not pausable: refused, naming why */
    CHECK_EQ(sbx_sandbox_create(c, &co, &plain, &err), SBX_OK);
    CHECK_EQ(sbx_sandbox_pause(plain, NULL, &err), SBX_E_CONFLICT);
    CHECK(strstr(err.message, "pausable") != NULL);
    sbx_async_free(as);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(uv_loop_close(&loop), 0);
    CHECK_EQ(sbx_sandbox_terminate(sb, &err), SBX_OK);
    CHECK_EQ(sbx_sandbox_terminate(plain, &err), SBX_OK);
    sbx_sandbox_free(sb);
    sbx_sandbox_free(plain);
    sbx_client_free(c);
}
