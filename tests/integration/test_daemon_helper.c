/* The C daemon helper (tests/lib/daemon.h) itself: two instances at once with their own
 * sockets, directories and cgroups; a restart on the same directories re-adopts a sandbox; and
 * the end of a case leaves nothing: no directory, cgroup or process of its daemon. */
#include "common/macro.h"
#include "tests/lib/daemon.h"
#include "tests/lib/test.h"

#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <jansson.h>
#include <sbx.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char *create_sandbox(const char *sock) {
    sbx_client *c = NULL;
    sbx_sandbox *sb = NULL;
    sbx_err err = {0};
    CHECK_EQ(sbx_client_new(sock, &c, NULL), SBX_OK);
    sbx_create_opts co;
    sbx_create_opts_init(&co);
    co.memory = 128u << 20;
    CHECK_MSG(sbx_sandbox_create(c, &co, &sb, &err) == SBX_OK, "create: %s", err.message);
    char *id = strdup(sbx_sandbox_id(sb));
    sbx_sandbox_free(sb);
    sbx_client_free(c);
    return id;
}

static char *inspect_state(const char *sock, const char *id) {
    sbx_client *c = NULL;
    sbx_sandbox *sb = NULL;
    char *js = NULL;
    CHECK_EQ(sbx_client_new(sock, &c, NULL), SBX_OK);
    CHECK_EQ(sbx_sandbox_open(c, id, &sb, NULL), SBX_OK);
    CHECK_EQ(sbx_sandbox_inspect(sb, &js, NULL), SBX_OK);
    json_t *j = json_loads(js, 0, NULL);
    char *state = strdup(json_string_value(json_object_get(j, "state")));
    json_decref(j);
    free(js);
    sbx_sandbox_free(sb);
    sbx_client_free(c);
    return state;
}

TEST_T(two_instances_and_restart, 60) {
    test_daemon *a = test_daemon_up("a", NULL);
    const char *flags[] = {"--max-sandboxes", "1", NULL};
    test_daemon *b = test_daemon_up("b", &(test_daemon_opts){.flags = flags});
    CHECK(a->pid > 0 && b->pid > 0 && a->pid != b->pid);
    CHECK(strcmp(a->sock, b->sock) != 0 && strcmp(a->dir, b->dir) != 0);
    CHECK(strcmp(a->cg, b->cg) != 0);
    CHECK(test_daemon_use("a") == a);
    /* b got its flag */
    sbx_client *c = NULL;
    char *js = NULL;
    CHECK_EQ(sbx_client_new(b->sock, &c, NULL), SBX_OK);
    CHECK_EQ(sbx_client_info(c, &js, NULL), SBX_OK);
    json_t *info = json_loads(js, 0, NULL);
    CHECK_EQ(json_integer_value(json_object_get(info, "max_sandboxes")), 1);
    json_decref(info);
    free(js);
    sbx_client_free(c);
    /* a restarted on its directories still has its sandbox */
    char *id = create_sandbox(a->sock);
    test_daemon_stop(a);
    CHECK_EQ(a->pid, 0);
    test_daemon_start(a, NULL);
    char *state = inspect_state(a->sock, id);
    CHECK_STREQ(state, "running");
    free(state);
    free(id);
}

/* Does a process other than us name path in its command line? */
static bool process_names(const char *path) {
    DIR *d = opendir("/proc");
    CHECK(d);
    struct dirent *e;
    bool found = false;
    while (!found && (e = readdir(d))) {
        char p[300], buf[4096];
        if (atoi(e->d_name) <= 0 || atoi(e->d_name) == getpid())
            continue;
        snprintf(p, sizeof(p), "/proc/%s/cmdline", e->d_name);
        FILE *f = fopen(p, "r");
        if (!f)
            continue;
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        for (size_t i = 0; i < n; i++)
            buf[i] = buf[i] ? buf[i] : ' ';
        buf[n] = 0;
        found = strstr(buf, path) != NULL;
    }
    closedir(d);
    return found;
}

TEST_T(case_end_leaves_nothing, 60) {
    test_require_root();
    int p[2];
    CHECK(pipe(p) == 0);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) { /* a case: a daemon with a sandbox, then a normal exit */
        close(p[0]);
        test_daemon *d = test_daemon_up("x", NULL);
        free(create_sandbox(d->sock));
        dprintf(p[1], "%s %s\n", d->dir, d->cg);
        exit(0);
    }
    close(p[1]);
    char line[512] = "", dir[400] = "", cg[100] = "";
    FILE *f = fdopen(p[0], "r");
    CHECK(f && fgets(line, sizeof(line), f));
    fclose(f);
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the case failed: 0x%x", st);
    CHECK(sscanf(line, "%399s %99s", dir, cg) == 2);
    struct stat sbuf;
    CHECK_MSG(stat(dir, &sbuf) < 0 && errno == ENOENT, "%s left behind", dir);
    char pat[200];
    snprintf(pat, sizeof(pat), "/sys/fs/cgroup/*/%s", cg);
    glob_t g = {0};
    CHECK_MSG(glob(pat, 0, NULL, &g) == GLOB_NOMATCH, "cgroup %s left behind", cg);
    globfree(&g);
    snprintf(pat, sizeof(pat), "/sys/fs/cgroup/%s", cg);
    CHECK_MSG(stat(pat, &sbuf) < 0, "cgroup %s left behind", pat);
    CHECK_MSG(!process_names(dir), "a process still names %s", dir);
}
