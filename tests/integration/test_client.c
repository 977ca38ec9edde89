/* libsbx against a real sandboxd: the synchronous flow (create, files, archives, exec with JSON
 * and streamed results, inspect, timeout, terminate, errors), the same flow under valgrind, and
 * 200 sandboxes created, exec'd and terminated concurrently through the async API on one loop
 * (and 16 through a standalone handle driven by poll()),
 * and placement across endpoints falling back on connection failure and 503 (sync and async).
 * Forks, leases and status: test_client_fork.c. */
#include "client/lib/internal.h"
#include "common/macro.h"
#include "common/timeutil.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <sbx.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

/* ---- private daemons for this case (tests/lib/daemon.h) ---- */
/* Daemon instance k with --max-sandboxes max; returns its socket path. */
static const char *daemon_start_k(int k, unsigned max_sandboxes) {
    char name[16], max[32];
    snprintf(name, sizeof(name), "d%d", k);
    snprintf(max, sizeof(max), "%u", max_sandboxes);
    const char *flags[] = {"--max-sandboxes", max, NULL};
    return test_daemon_up(name, &(test_daemon_opts){.flags = flags, .log_level = ""})->sock;
}

/* One daemon, or $SBX_TEST_HOST when set (the valgrind case runs the flow against its own). */
static const char *daemon_start(unsigned max_sandboxes) {
    const char *env = getenv("SBX_TEST_HOST");
    if (env && *env)
        return env;
    return daemon_start_k(0, max_sandboxes);
}

/* ---- the synchronous flow ---- */
struct streamed {
    char out[4096], err[4096], order[64];
    size_t out_len, err_len, n;
};

static void on_output(void *ud, enum sbx_stream s, const char *data, size_t len) {
    struct streamed *st = ud;
    char *buf = s == SBX_STREAM_STDOUT ? st->out : st->err;
    size_t *n = s == SBX_STREAM_STDOUT ? &st->out_len : &st->err_len;
    CHECK(*n + len < sizeof(st->out));
    memcpy(buf + *n, data, len);
    *n += len;
    if (st->n + 1 < sizeof(st->order))
        st->order[st->n++] = s == SBX_STREAM_STDOUT ? 'o' : 'e';
}

static la_ssize_t tar_write(struct archive *a, void *ud, const void *buf, size_t n) {
    struct streamed *m = ud; /* reuse the struct as a buffer */
    if (m->out_len + n > sizeof(m->out))
        return -1;
    memcpy(m->out + m->out_len, buf, n);
    m->out_len += n;
    return (la_ssize_t)n;
}

/* A tar holding sub/hello.txt = "tar content\n". */
static size_t make_tar(struct streamed *buf) {
    struct archive *w = archive_write_new();
    archive_write_set_format_pax_restricted(w);
    archive_write_set_bytes_in_last_block(w, 1);
    CHECK_EQ(archive_write_open2(w, buf, NULL, tar_write, NULL, NULL), ARCHIVE_OK);
    struct archive_entry *e = archive_entry_new();
    archive_entry_set_pathname(e, "sub");
    archive_entry_set_filetype(e, AE_IFDIR);
    archive_entry_set_perm(e, 0755);
    CHECK_EQ(archive_write_header(w, e), ARCHIVE_OK);
    archive_entry_clear(e);
    archive_entry_set_pathname(e, "sub/hello.txt");
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, 12);
    CHECK_EQ(archive_write_header(w, e), ARCHIVE_OK);
    CHECK_EQ(archive_write_data(w, "tar content\n", 12), 12);
    archive_entry_free(e);
    CHECK_EQ(archive_write_close(w), ARCHIVE_OK);
    archive_write_free(w);
    return buf->out_len;
}

/* Whether a tar holds a regular file whose name ends in `name` with `content`. */
static bool tar_has(const void *tar, size_t len, const char *name, const char *content) {
    struct archive *r = archive_read_new();
    archive_read_support_format_tar(r);
    CHECK_EQ(archive_read_open_memory(r, tar, len), ARCHIVE_OK);
    struct archive_entry *e;
    bool found = false;
    while (!found && archive_read_next_header(r, &e) == ARCHIVE_OK) {
        const char *p = archive_entry_pathname(e);
        size_t pl = strlen(p), nl = strlen(name);
        if (pl >= nl && strcmp(p + pl - nl, name) == 0) {
            char buf[256] = {0};
            la_ssize_t n = archive_read_data(r, buf, sizeof(buf) - 1);
            found = n == (la_ssize_t)strlen(content) && memcmp(buf, content, (size_t)n) == 0;
        }
    }
    archive_read_free(r);
    return found;
}

static void exec_ok(sbx_sandbox *sb, const char *script, sbx_exec_result *r) {
    sbx_exec_opts o;
    sbx_exec_opts_init(&o);
    const char *argv[] = {script, NULL};
    o.argv = argv;
    o.shell = 1;
    sbx_err err = {0};
    CHECK_MSG(sbx_sandbox_exec(sb, &o, r, &err) == SBX_OK, "exec %s: %s", script, err.message);
}

static void sync_files(sbx_sandbox *sb) {
    sbx_err err = {0};
    const char data[] = "line one\nbinary \x01\x02\xff end\n";
    CHECK_MSG(sbx_sandbox_write_file(sb, "/workspace/in/a.txt", data, sizeof(data) - 1, &err) ==
                  SBX_OK,
              "write_file: %s", err.message);
    void *back = NULL;
    size_t len = 0;
    CHECK_EQ(sbx_sandbox_read_file(sb, "/workspace/in/a.txt", &back, &len, &err), SBX_OK);
    CHECK_EQ(len, sizeof(data) - 1);
    CHECK(memcmp(back, data, len) == 0);
    free(back);
    back = NULL;
    CHECK_EQ(sbx_sandbox_read_file(sb, "/workspace/missing", &back, &len, &err), SBX_E_NOT_FOUND);
    CHECK(back == NULL && err.http_status == 404);
    CHECK_EQ(sbx_sandbox_read_file(sb, "relative/path", &back, &len, &err), SBX_E_INVALID);
    /* archives both ways */
    struct streamed tarbuf = {0};
    size_t tlen = make_tar(&tarbuf);
    CHECK_MSG(sbx_sandbox_put_archive(sb, "/workspace/t", tarbuf.out, tlen, &err) == SBX_OK,
              "put_archive: %s", err.message);
    sbx_exec_result r;
    exec_ok(sb, "cat /workspace/t/sub/hello.txt", &r);
    CHECK_STREQ(r.stdout_data, "tar content\n");
    sbx_exec_result_free(&r);
    CHECK_EQ(sbx_sandbox_get_archive(sb, "/workspace/t", &back, &len, &err), SBX_OK);
    CHECK(tar_has(back, len, "sub/hello.txt", "tar content\n"));
    free(back);
    /* a directory is not a file, and a file is not an archive */
    back = NULL;
    CHECK_EQ(sbx_sandbox_read_file(sb, "/workspace/t", &back, &len, &err), SBX_E_INVALID);
    CHECK_STREQ(err.api_code, "is_a_directory");
    CHECK_EQ(sbx_sandbox_get_archive(sb, "/workspace/in/a.txt", &back, &len, &err), SBX_E_INVALID);
    CHECK(back == NULL);
    /* read_path takes either, and says which came */
    int is_tar = -1;
    CHECK_EQ(sbx_sandbox_read_path(sb, "/workspace/t", &back, &len, &is_tar, &err), SBX_OK);
    CHECK(is_tar == 1 && tar_has(back, len, "sub/hello.txt", "tar content\n"));
    free(back);
    CHECK_EQ(sbx_sandbox_read_path(sb, "/workspace/t/sub/hello.txt", &back, &len, &is_tar, &err),
             SBX_OK);
    CHECK(is_tar == 0 && len == 12 && memcmp(back, "tar content\n", 12) == 0);
    free(back);
    back = NULL;
    CHECK_EQ(sbx_sandbox_read_path(sb, "/workspace/missing", &back, &len, &is_tar, &err),
             SBX_E_NOT_FOUND);
    CHECK(back == NULL && is_tar == 0);
}

static void sync_exec(sbx_sandbox *sb) {
    sbx_err err = {0};
    sbx_exec_opts o;
    sbx_exec_opts_init(&o);
    const char *argv[] = {"/bin/sh", "-c", "read x; echo \"got $x $FOO\"; echo oops >&2; exit 7",
                          NULL};
    const char *env[] = {"FOO=bar", NULL};
    o.argv = argv;
    o.env = env;
    o.stdin_data = "hello\n";
    o.stdin_len = 6;
    sbx_exec_result r;
    CHECK_MSG(sbx_sandbox_exec(sb, &o, &r, &err) == SBX_OK, "exec: %s", err.message);
    CHECK_EQ(r.exit_code, 7);
    CHECK_EQ(r.signal, 0);
    CHECK_STREQ(r.reason, "exited");
    CHECK_STREQ(r.stdout_data, "got hello bar\n");
    CHECK_STREQ(r.stderr_data, "oops\n");
    CHECK_EQ(r.stdout_bytes, 14);
    sbx_exec_result_free(&r);

    /* streamed: output arrives through the callback, in order, before the result */
    struct streamed st = {0};
    const char *argv2[] = {"echo a; sleep 0.2; echo b >&2; sleep 0.2; echo c; kill -9 $$", NULL};
    o.argv = argv2;
    o.shell = 1;
    o.env = NULL;
    o.stdin_data = NULL;
    o.stdin_len = 0;
    o.on_output = on_output;
    o.userdata = &st;
    CHECK_MSG(sbx_sandbox_exec(sb, &o, &r, &err) == SBX_OK, "exec: %s", err.message);
    CHECK(r.stdout_data == NULL);
    CHECK_EQ(r.signal, 9);
    CHECK_EQ(r.exit_code, -1);
    CHECK_STREQ(r.reason, "signaled");
    CHECK_EQ(st.out_len, 4);
    CHECK(memcmp(st.out, "a\nc\n", 4) == 0);
    CHECK(st.err_len == 2 && memcmp(st.err, "b\n", 2) == 0);
    CHECK(strncmp(st.order, "oeo", 3) == 0);
    sbx_exec_result_free(&r);

    /* per-command timeout */
    sbx_exec_opts_init(&o);
    const char *argv3[] = {"sleep", "30", NULL};
    o.argv = argv3;
    o.timeout_ms = 500;
    CHECK_EQ(sbx_sandbox_exec(sb, &o, &r, &err), SBX_OK);
    CHECK_STREQ(r.reason, "command_timeout");
    sbx_exec_result_free(&r);

    sbx_exec_opts_init(&o);
    CHECK_EQ(sbx_sandbox_exec(sb, &o, &r, &err), SBX_E_INVALID); /* no argv */
}

static void sync_flow(const char *host) {
    sbx_client *c = NULL;
    sbx_err err = {0};
    CHECK_EQ(sbx_client_new(host, &c, &err), SBX_OK);
    char *js = NULL;
    CHECK_EQ(sbx_client_info(c, &js, &err), SBX_OK);
    json_t *info = json_loads(js, 0, NULL);
    CHECK(json_is_integer(json_object_get(info, "free_slots")));
    json_decref(info);
    free(js);

    sbx_create_opts co;
    sbx_create_opts_init(&co);
    char label[64];
    snprintf(label, sizeof(label), "test=sync-%d", (int)getpid());
    const char *labels[] = {label, NULL};
    co.labels = labels;
    co.memory = 256ull << 20;
    co.timeout_ms = 120000;
    sbx_sandbox *sb = NULL;
    CHECK_MSG(sbx_sandbox_create(c, &co, &sb, &err) == SBX_OK, "create: %s", err.message);
    CHECK(strncmp(sbx_sandbox_id(sb), "sb-", 3) == 0);

    sync_files(sb);
    sync_exec(sb);

    CHECK_EQ(sbx_sandbox_set_timeout(sb, 600000, &err), SBX_OK);
    CHECK_EQ(sbx_sandbox_inspect(sb, &js, &err), SBX_OK);
    json_t *o = json_loads(js, 0, NULL);
    CHECK_STREQ(json_string_value(json_object_get(o, "state")), "running");
    CHECK(json_is_number(json_object_get(o, "cost_usd")));
    CHECK_EQ(json_integer_value(json_object_get(json_object_get(o, "limits"), "memory")),
             256ll << 20);
    json_decref(o);
    free(js);

    CHECK_EQ(sbx_client_list(c, label, &js, &err), SBX_OK);
    o = json_loads(js, 0, NULL);
    CHECK_EQ(json_array_size(o), 1);
    json_decref(o);
    free(js);

    sbx_sandbox *again = NULL;
    CHECK_EQ(sbx_sandbox_open(c, sbx_sandbox_id(sb), &again, &err), SBX_OK);
    CHECK_EQ(sbx_sandbox_terminate(again, &err), SBX_OK);
    CHECK_EQ(sbx_sandbox_terminate(sb, &err), SBX_OK); /* idempotent */
    sbx_sandbox_free(again);
    CHECK_EQ(sbx_sandbox_inspect(sb, &js, &err), SBX_OK);
    o = json_loads(js, 0, NULL);
    CHECK_STREQ(json_string_value(json_object_get(o, "state")), "ended");
    CHECK_STREQ(json_string_value(json_object_get(json_object_get(o, "end"), "reason")),
                "terminated");
    json_decref(o);
    free(js);
    sbx_exec_result r;
    sbx_exec_opts eo;
    sbx_exec_opts_init(&eo);
    const char *argv[] = {"true", NULL};
    eo.argv = argv;
    CHECK_EQ(sbx_sandbox_exec(sb, &eo, &r, &err), SBX_E_CONFLICT);
    CHECK_EQ(err.http_status, 409);
    sbx_sandbox_free(sb);

    sb = NULL;
    CHECK_EQ(sbx_sandbox_open(c, "sb-0000000000000000", &sb, &err), SBX_E_NOT_FOUND);
    CHECK(sb == NULL);
    CHECK_EQ(sbx_sandbox_open(c, "../etc", &sb, &err), SBX_E_INVALID);
    /* the lazy handle asks nothing: the first call with it reports the missing sandbox */
    CHECK_EQ(sbx_sandbox_open_lazy(c, "sb-0000000000000000", &sb, &err), SBX_OK);
    CHECK_EQ(sbx_sandbox_exec(sb, &eo, &r, &err), SBX_E_NOT_FOUND);
    CHECK_EQ(err.http_status, 404);
    sbx_sandbox_free(sb);
    sb = NULL;
    CHECK_EQ(sbx_sandbox_open_lazy(c, "../etc", &sb, &err), SBX_E_INVALID);
    CHECK(sb == NULL);
    co.memory = 1; /* below the minimum: the daemon's 400 names the field */
    CHECK_EQ(sbx_sandbox_create(c, &co, &sb, &err), SBX_E_INVALID);
    CHECK_MSG(strstr(err.message, "memory"), "message: %s", err.message);
    sbx_client_free(c);
}

TEST_T(sync_api, 120) {
    sync_flow(daemon_start(8));
}

/* The same flow under valgrind: libsbx must be clean (no leaks, no invalid accesses). Under
 * ASan (SANITIZE=1 builds) valgrind cannot run, and ASan's leak checker does the same job. */
TEST_T(sync_api_valgrind, 300) {
    const char *host = daemon_start(8);
#ifdef __SANITIZE_ADDRESS__
    sync_flow(host);
#else
    char self[512];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    CHECK(n > 0);
    self[n] = 0;
    CHECK_MSG(access("/usr/bin/valgrind", X_OK) == 0, "valgrind is missing (tests/deps.sh)");
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        setenv("SBX_TEST_HOST", host, 1);
        execl("/usr/bin/valgrind", "valgrind", "--quiet", "--leak-check=full",
              "--errors-for-leak-kinds=definite,indirect,possible", "--error-exitcode=1", self,
              "sync_api", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "the sync flow under valgrind failed (status %d)", status);
#endif
}

/* ---- 200 sandboxes through the async API on one loop ---- */
#define N_ASYNC 200

struct fleet;
struct slot {
    struct fleet *f;
    int i;
    sbx_sandbox *sb;
    bool created, execd, terminated;
    char out[32];
};
struct fleet {
    sbx_async *as;
    struct slot s[N_ASYNC];
    int done, failures;
    char first_error[512];
};

static void fail_slot(struct slot *s, const char *what, const sbx_err *err) {
    if (s->f->failures++ == 0)
        snprintf(s->f->first_error, sizeof(s->f->first_error), "slot %d %s: %s", s->i, what,
                 err ? err->message : "unexpected result");
    s->f->done++;
}

static void on_terminated(void *ud, const sbx_err *err) {
    struct slot *s = ud;
    if (err)
        return fail_slot(s, "terminate", err);
    s->terminated = true;
    s->f->done++;
}

static void on_exec(void *ud, const sbx_exec_result *r, const sbx_err *err) {
    struct slot *s = ud;
    if (err)
        return fail_slot(s, "exec", err);
    snprintf(s->out, sizeof(s->out), "%s", r->stdout_data ? r->stdout_data : "");
    s->execd = r->exit_code == 0;
    if (sbx_async_terminate(s->f->as, s->sb, on_terminated, s) != SBX_OK)
        fail_slot(s, "terminate submit", NULL);
}

static void on_created(void *ud, sbx_sandbox *sb, const sbx_err *err) {
    struct slot *s = ud;
    if (err)
        return fail_slot(s, "create", err);
    s->sb = sb;
    s->created = true;
    char script[64];
    snprintf(script, sizeof(script), "echo sandbox-%d", s->i);
    const char *argv[] = {script, NULL};
    sbx_exec_opts o;
    sbx_exec_opts_init(&o);
    o.argv = argv;
    o.shell = 1;
    if (sbx_async_exec(s->f->as, sb, &o, on_exec, s) != SBX_OK)
        fail_slot(s, "exec submit", NULL);
}

/* The daemon runs no sandbox any more. */
static void check_none_active(sbx_client *c) {
    char *js = NULL;
    sbx_err err = {0};
    CHECK_EQ(sbx_client_info(c, &js, &err), SBX_OK);
    json_t *info = json_loads(js, 0, NULL);
    CHECK_EQ(json_integer_value(json_object_get(info, "active_sandboxes")), 0);
    json_decref(info);
    free(js);
}

TEST_T(async_200_sandboxes, 300) {
    const char *host = daemon_start(N_ASYNC + 10);
    uv_loop_t loop;
    uv_loop_init(&loop);
    sbx_client *c = NULL;
    sbx_err err = {0};
    CHECK_EQ(sbx_client_new(host, &c, &err), SBX_OK);
    static struct fleet f;
    CHECK_EQ(sbx_async_new(c, &loop, &f.as, &err), SBX_OK);
    char label[64];
    snprintf(label, sizeof(label), "test=async-%d", (int)getpid());
    const char *labels[] = {label, NULL};
    sbx_create_opts co;
    sbx_create_opts_init(&co);
    co.labels = labels;
    co.memory = 64ull << 20;
    co.timeout_ms = 240000;
    for (int i = 0; i < N_ASYNC; i++) {
        f.s[i] = (struct slot){.f = &f, .i = i};
        CHECK_EQ(sbx_async_create(f.as, &co, on_created, &f.s[i]), SBX_OK);
    }
    CHECK_EQ(sbx_async_pending(f.as), N_ASYNC);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_MSG(f.failures == 0, "%d failures; first: %s", f.failures, f.first_error);
    CHECK_EQ(f.done, N_ASYNC);
    CHECK_EQ(sbx_async_pending(f.as), 0);
    int ids_seen = 0;
    for (int i = 0; i < N_ASYNC; i++) {
        char want[32];
        snprintf(want, sizeof(want), "sandbox-%d\n", i);
        CHECK(f.s[i].created && f.s[i].execd && f.s[i].terminated);
        CHECK_STREQ(f.s[i].out, want);
        for (int j = 0; j < i && i < 20; j++) /* ids are distinct (spot check) */
            CHECK(strcmp(sbx_sandbox_id(f.s[i].sb), sbx_sandbox_id(f.s[j].sb)) != 0);
        ids_seen++;
    }
    CHECK_EQ(ids_seen, N_ASYNC);
    for (int i = 0; i < N_ASYNC; i++)
        sbx_sandbox_free(f.s[i].sb);
    sbx_async_free(f.as);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(uv_loop_close(&loop), 0); /* the engine left no libuv handle behind */
    /* none leak: every one of them is ended, and the daemon runs nothing */
    char *js = NULL;
    CHECK_EQ(sbx_client_list(c, label, &js, &err), SBX_OK);
    json_t *arr = json_loads(js, 0, NULL), *s;
    size_t i;
    CHECK_EQ(json_array_size(arr), N_ASYNC);
    json_array_foreach(arr, i, s)
        CHECK_STREQ(json_string_value(json_object_get(s, "state")), "ended");
    json_decref(arr);
    free(js);
    check_none_active(c);
    sbx_client_free(c);
}

/* A standalone handle (its own loop) driven by poll() on sbx_async_fd and sbx_async_timeout_ms,
 * as Python's asyncio drives it: 16 sandboxes created, exec'd and terminated, no uv_run here. */
#define N_STANDALONE 16
TEST_T(async_standalone_poll_loop, 120) {
    const char *host = daemon_start(N_STANDALONE + 4);
    sbx_client *c = NULL;
    sbx_err err = {0};
    CHECK_EQ(sbx_client_new(host, &c, &err), SBX_OK);
    static struct fleet f;
    uv_loop_t loop;
    uv_loop_init(&loop);
    sbx_async *plain;
    CHECK_EQ(sbx_async_new(c, &loop, &plain, &err), SBX_OK);
    CHECK_EQ(sbx_async_fd(plain), -1); /* not its loop to give away */
    sbx_async_free(plain);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(uv_loop_close(&loop), 0);
    CHECK_EQ(sbx_async_new_standalone(c, &f.as, &err), SBX_OK);
    CHECK(sbx_async_fd(f.as) >= 0);
    sbx_create_opts co;
    sbx_create_opts_init(&co);
    co.memory = 64ull << 20;
    for (int i = 0; i < N_STANDALONE; i++) {
        f.s[i] = (struct slot){.f = &f, .i = i};
        CHECK_EQ(sbx_async_create(f.as, &co, on_created, &f.s[i]), SBX_OK);
    }
    uint64_t deadline = now_mono_ms() + 100000;
    while (f.done < N_STANDALONE && now_mono_ms() < deadline) {
        struct pollfd p = {.fd = sbx_async_fd(f.as), .events = POLLIN};
        int t = sbx_async_timeout_ms(f.as);
        CHECK(poll(&p, 1, t < 0 || t > 1000 ? 1000 : t) >= 0 || errno == EINTR);
        sbx_async_run(f.as);
    }
    CHECK_MSG(f.failures == 0, "%d failures; first: %s", f.failures, f.first_error);
    CHECK_EQ(f.done, N_STANDALONE);
    for (int i = 0; i < N_STANDALONE; i++) {
        char want[32];
        snprintf(want, sizeof(want), "sandbox-%d\n", i);
        CHECK(f.s[i].created && f.s[i].execd && f.s[i].terminated);
        CHECK_STREQ(f.s[i].out, want);
        sbx_sandbox_free(f.s[i].sb);
    }
    CHECK_EQ(sbx_async_pending(f.as), 0);
    sbx_async_free(f.as); /* closes its own loop (ASan: nothing leaks) */
    check_none_active(c);
    sbx_client_free(c);
}

/* ---- placement: a dead endpoint and a full one are skipped ---- */
/* Make the cached capacity claim: dead endpoint best, then A, then B, fresh now. */
static void rig_cache(sbx_client *c) {
    long slots[3] = {100, 50, 1};
    for (int i = 0; i < 3; i++) {
        c->eps[i].free_slots = slots[i];
        c->eps[i].info_at_ms = now_mono_ms();
    }
}

static void on_placed(void *ud, sbx_sandbox *sb, const sbx_err *err) {
    sbx_sandbox **out = ud;
    CHECK_MSG(!err, "async create: %s", err ? err->message : "");
    *out = sb;
}

TEST_T(multi_endpoint_fallback, 120) {
    const char *a = daemon_start_k(0, 1);
    const char *b = daemon_start_k(1, 4);
    char hosts[1024];
    snprintf(hosts, sizeof(hosts), "%s/dead.sock,%s,%s", test_tmpdir(), a, b);
    sbx_client *c = NULL;
    sbx_err err = {0};
    CHECK_EQ(sbx_client_new(hosts, &c, &err), SBX_OK);
    sbx_create_opts co;
    sbx_create_opts_init(&co);
    co.memory = 128ull << 20;
    /* 1: the dead endpoint fails to connect -> A (one free slot) takes it */
    rig_cache(c);
    sbx_sandbox *s1 = NULL, *s2 = NULL, *s3 = NULL;
    CHECK_MSG(sbx_sandbox_create(c, &co, &s1, &err) == SBX_OK, "create: %s", err.message);
    CHECK_EQ(s1->ep, 1);
    /* 2: dead -> A answers 503 (full) -> B */
    rig_cache(c);
    CHECK_MSG(sbx_sandbox_create(c, &co, &s2, &err) == SBX_OK, "create: %s", err.message);
    CHECK_EQ(s2->ep, 2);
    CHECK_EQ(c->eps[1].free_slots, 0); /* A is now known to be full */
    /* 3: the same through the async API */
    uv_loop_t loop;
    uv_loop_init(&loop);
    sbx_async *as = NULL;
    CHECK_EQ(sbx_async_new(c, &loop, &as, &err), SBX_OK);
    rig_cache(c);
    CHECK_EQ(sbx_async_create(as, &co, on_placed, &s3), SBX_OK);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(s3 != NULL);
    CHECK_EQ(s3->ep, 2);
    /* the handles remember their endpoints: exec on each works */
    sbx_sandbox *all[] = {s1, s2, s3};
    for (int i = 0; i < 3; i++) {
        sbx_exec_result r;
        exec_ok(all[i], "echo placed", &r);
        CHECK_STREQ(r.stdout_data, "placed\n");
        sbx_exec_result_free(&r);
    }
    /* stale cache: placement asks every endpoint's /v1/info (B has the free slots) */
    c->eps[0].info_at_ms = c->eps[1].info_at_ms = c->eps[2].info_at_ms = 0;
    sbx_sandbox *s4 = NULL;
    CHECK_MSG(sbx_sandbox_create(c, &co, &s4, &err) == SBX_OK, "create: %s", err.message);
    CHECK_EQ(s4->ep, 2);
    CHECK_EQ(c->eps[0].free_slots, -1); /* dead */
    CHECK_EQ(c->eps[1].free_slots, 0);
    /* the same with a stale cache through the async API: /v1/info is fetched asynchronously */
    c->eps[0].info_at_ms = c->eps[1].info_at_ms = c->eps[2].info_at_ms = 0;
    sbx_sandbox *s5 = NULL;
    CHECK_EQ(sbx_async_create(as, &co, on_placed, &s5), SBX_OK);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(s5 != NULL);
    CHECK_EQ(s5->ep, 2);
    CHECK(c->eps[2].info_at_ms != 0);
    CHECK_EQ(sbx_sandbox_terminate(s5, &err), SBX_OK);
    sbx_sandbox_free(s5);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(sbx_sandbox_terminate(all[i], &err), SBX_OK);
        sbx_sandbox_free(all[i]);
    }
    CHECK_EQ(sbx_sandbox_terminate(s4, &err), SBX_OK);
    sbx_sandbox_free(s4);
    sbx_async_free(as);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(uv_loop_close(&loop), 0);
    sbx_client_free(c);
}

/* ---- the rest of the async API, one operation at a time, and leases ---- */
struct async_box {
    int calls;
    sbx_err err;
    bool ok;
    char data[256];
    size_t len;
    struct streamed st;
    sbx_exec_result res;
};

static void box_done(void *ud, const sbx_err *err) {
    struct async_box *b = ud;
    b->calls++;
    b->ok = !err;
    if (err)
        b->err = *err;
}

static void box_data(void *ud, const void *data, size_t len, const sbx_err *err) {
    struct async_box *b = ud;
    b->calls++;
    b->ok = !err;
    if (err)
        b->err = *err;
    else if (len <= sizeof(b->data)) {
        memcpy(b->data, data, len);
        b->len = len;
    } else {
        b->len = len; /* an archive: keep its size; contents checked below */
    }
}

static void box_exec(void *ud, const sbx_exec_result *r, const sbx_err *err) {
    struct async_box *b = ud;
    b->calls++;
    b->ok = !err;
    if (err)
        b->err = *err;
    else {
        b->res = *r;
        b->res.stdout_data = b->res.stderr_data = NULL; /* only valid during the callback */
    }
}

TEST_T(async_files_exec_leases, 120) {
    const char *host = daemon_start(8);
    sbx_client *c = NULL;
    sbx_err err = {0};
    CHECK_EQ(sbx_client_new(host, &c, &err), SBX_OK);
    /* a lease: sandboxes created under it stay while it is renewed */
    char *lease = NULL;
    CHECK_MSG(sbx_lease_create(c, 30000, &lease, &err) == SBX_OK, "lease: %s", err.message);
    CHECK(strncmp(lease, "ls-", 3) == 0);
    CHECK_EQ(sbx_lease_renew(c, lease, &err), SBX_OK);
    CHECK_EQ(sbx_lease_renew(c, "ls-doesnotexist", &err), SBX_E_NOT_FOUND);
    sbx_create_opts co;
    sbx_create_opts_init(&co);
    co.memory = 128ull << 20;
    co.lease_id = lease;
    sbx_sandbox *sb = NULL;
    char key[64];
    snprintf(key, sizeof(key), "idem-%d", (int)getpid());
    co.idempotency_key = key;
    CHECK_MSG(sbx_sandbox_create(c, &co, &sb, &err) == SBX_OK, "create: %s", err.message);
    sbx_sandbox *same = NULL; /* a retry with the same key creates nothing new */
    CHECK_MSG(sbx_sandbox_create(c, &co, &same, &err) == SBX_OK, "create: %s", err.message);
    CHECK_STREQ(sbx_sandbox_id(same), sbx_sandbox_id(sb));
    sbx_sandbox_free(same);
    free(lease);

    uv_loop_t loop;
    uv_loop_init(&loop);
    sbx_async *as = NULL;
    CHECK_EQ(sbx_async_new(c, &loop, &as, &err), SBX_OK);
    struct async_box b = {0};
    CHECK_EQ(sbx_async_write_file(as, sb, "/workspace/x/f.txt", "async data\n", 11, box_done, &b),
             SBX_OK);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_MSG(b.calls == 1 && b.ok, "write_file: %s", b.err.message);
    b = (struct async_box){0};
    CHECK_EQ(sbx_async_read_file(as, sb, "/workspace/x/f.txt", box_data, &b), SBX_OK);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_MSG(b.calls == 1 && b.ok, "read_file: %s", b.err.message);
    CHECK(b.len == 11 && memcmp(b.data, "async data\n", 11) == 0);
    b = (struct async_box){0};
    CHECK_EQ(sbx_async_read_file(as, sb, "/workspace/x", box_data, &b), SBX_OK);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(b.calls == 1 && !b.ok && b.err.code == SBX_E_INVALID);
    CHECK_STREQ(b.err.api_code, "is_a_directory");
    b = (struct async_box){0};
    CHECK_EQ(sbx_async_read_file(as, sb, "/workspace/none", box_data, &b), SBX_OK);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(b.calls == 1 && b.err.code == SBX_E_NOT_FOUND);

    struct streamed tarbuf = {0};
    size_t tlen = make_tar(&tarbuf);
    b = (struct async_box){0};
    CHECK_EQ(sbx_async_put_archive(as, sb, "/workspace/t", tarbuf.out, tlen, box_done, &b), SBX_OK);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_MSG(b.calls == 1 && b.ok, "put_archive: %s", b.err.message);
    b = (struct async_box){0};
    CHECK_EQ(sbx_async_get_archive(as, sb, "/workspace/t", box_data, &b), SBX_OK);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_MSG(b.calls == 1 && b.ok, "get_archive: %s", b.err.message);
    CHECK(b.len >= 512);

    /* streamed exec through the async API */
    b = (struct async_box){0};
    sbx_exec_opts o;
    sbx_exec_opts_init(&o);
    const char *argv[] = {"cat /workspace/t/sub/hello.txt; echo e >&2; exit 9", NULL};
    o.argv = argv;
    o.shell = 1;
    o.on_output = on_output;
    o.userdata = &b.st;
    CHECK_EQ(sbx_async_exec(as, sb, &o, box_exec, &b), SBX_OK);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_MSG(b.calls == 1 && b.ok, "exec: %s", b.err.message);
    CHECK_EQ(b.res.exit_code, 9);
    CHECK(b.st.out_len == 12 && memcmp(b.st.out, "tar content\n", 12) == 0);
    CHECK(b.st.err_len == 2 && memcmp(b.st.err, "e\n", 2) == 0);
    /* bad calls are refused up front */
    sbx_exec_opts_init(&o);
    CHECK_EQ(sbx_async_exec(as, sb, &o, box_exec, &b), SBX_E_INVALID);
    CHECK_EQ(sbx_async_terminate(as, NULL, box_done, &b), SBX_E_INVALID);

    b = (struct async_box){0};
    CHECK_EQ(sbx_async_terminate(as, sb, box_done, &b), SBX_OK);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(b.calls == 1 && b.ok);
    sbx_async_free(as);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(uv_loop_close(&loop), 0);
    sbx_sandbox_free(sb);
    sbx_client_free(c);
}
