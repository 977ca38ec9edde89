/* The protocol server loop (see server.h). One epoll loop; every source is level-triggered and
 * serves one message per wake-up. */
#include "shim/server.h"

#include "common/end_reason.h"
#include "common/fdutil.h"
#include "common/log.h"
#include "common/shimproto.h"
#include "common/timeutil.h"
#include "shim/grading.h"
#include "shim/exec_msg.h"
#include "shim/gvisor.h"
#include "shim/ipc.h"
#include "shim/pause.h"
#include "shim/ports.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/wait.h>

#define MAX_CONNS 32
#define MAX_AGENT_CONNS 24 /* of MAX_CONNS: sbx-as-agent runs at once in a grading sandbox */
#define MAX_EXECS 4096

enum src_kind { SRC_LISTEN, SRC_CONN, SRC_IPC, SRC_SIG, SRC_OOM, SRC_TIMER, SRC_AGENT_LISTEN };

typedef struct conn {
    enum src_kind kind;
    int fd;
    bool agent; /* a grader's sbx-as-agent on the agent socket (shim/grading.h) */
} conn;

typedef struct exec_rec {
    enum src_kind kind; /* SRC_TIMER */
    uint64_t iid;
    json_t *xid, *seq;
    conn *requester; /* NULL once it replied or the connection closed */
    int tfd;
    uint64_t start_ms, oom0, timeout_ms;
    pid_t pid;
    bool started, timed_out;
    conn *owner; /* sbx-as-agent's connection: its events go there only (NULL: broadcast) */
    bool helper; /* started for sbx-as-agent */
} exec_rec;

typedef struct server {
    shim_sandbox *sb;
    int ep, sfd, oomfd;
    conn *conns[MAX_CONNS];
    exec_rec **execs;
    size_t n_execs, cap_execs;
    uint64_t next_iid, oom_last, oom_start, pids_start;
    bool done;
    int result;
    shim_ipc_msg *ipc_buf;
} server;

static struct {
    enum src_kind kind;
} src_listen = {SRC_LISTEN}, src_agent_listen = {SRC_AGENT_LISTEN}, src_ipc = {SRC_IPC},
  src_sig = {SRC_SIG}, src_oom = {SRC_OOM};

void shim_server_block_signals(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
}

static int ep_add(server *s, int fd, void *ptr) {
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = ptr};
    return epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

/* ---- sending ---- */

static void send_to(conn *c, json_t *msg) {
    if (c && msg) {
        int r = shimproto_send(c->fd, msg, NULL, 0);
        if (r < 0)
            log_warn("send failed err=%d", r);
    }
    json_decref(msg);
}

static void broadcast(server *s, json_t *msg) {
    for (size_t i = 0; i < MAX_CONNS && msg; i++)
        if (s->conns[i])
            shimproto_send(s->conns[i]->fd, msg, NULL, 0);
    json_decref(msg);
}

static void reply_error(conn *c, json_t *seq, int code, const char *fmt, ...) _printf_(4, 5);
static void reply_error(conn *c, json_t *seq, int code, const char *fmt, ...) {
    error_rec e = {.code = code};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.message, sizeof(e.message), fmt, ap);
    va_end(ap);
    send_to(c, shimproto_error(seq, &e));
}

static void reply_ok(conn *c, json_t *seq) {
    send_to(c, json_pack("{s:s, s:O?}", "type", "ok", "seq", seq));
}

/* ---- exec records ---- */

static exec_rec *exec_by_iid(server *s, uint64_t iid) {
    for (size_t i = 0; i < s->n_execs; i++)
        if (s->execs[i]->iid == iid)
            return s->execs[i];
    return NULL;
}

static exec_rec *exec_by_xid(server *s, json_t *xid) {
    for (size_t i = 0; i < s->n_execs; i++)
        if (json_equal(s->execs[i]->xid, xid))
            return s->execs[i];
    return NULL;
}

static void exec_remove(server *s, exec_rec *e) {
    for (size_t i = 0; i < s->n_execs; i++)
        if (s->execs[i] == e) {
            s->execs[i] = s->execs[--s->n_execs];
            break;
        }
    safe_close(e->tfd);
    json_decref(e->xid);
    json_decref(e->seq);
    free(e);
}

static void check_oom(server *s) {
    uint64_t n;
    if (shim_cgroup_oom_kills(s->sb->cg, &n) == 0 && n > s->oom_last) {
        s->oom_last = n;
        broadcast(s, json_pack("{s:s, s:I}", "type", "oom", "oom_kills", (json_int_t)n));
    }
}

/* ---- requests ---- */

static void handle_hello(server *s, conn *c, json_t *seq) {
    json_t *running = json_array();
    for (size_t i = 0; i < s->n_execs; i++)
        if (s->execs[i]->started && !s->execs[i]->helper)
            json_array_append(running, s->execs[i]->xid);
    uint64_t ooms = 0;
    shim_cgroup_oom_kills(s->sb->cg, &ooms);
    send_to(c, json_pack("{s:s, s:O?, s:i, s:s, s:i, s:i, s:s, s:I, s:o, s:I, s:b}", "type",
                         "hello", "seq", seq, "version", SHIMPROTO_VERSION, "id", s->sb->spec->id,
                         "init_pid", (int)s->sb->init_pid, "shim_pid", (int)getpid(), "state",
                         "running", "oom_kills", (json_int_t)ooms, "running", running, "started_ms",
                         (json_int_t)s->sb->started_ms, "exec_file", 1));
}

static void handle_stats(server *s, conn *c, json_t *seq) {
    shim_cgroup_stats st = {0};
    uint64_t disk = 0;
    shim_cgroup_stats_read(s->sb->cg, &st);
    shim_sandbox_disk_used(s->sb, &disk);
    send_to(c,
            json_pack("{s:s, s:O?, s:I, s:I, s:I, s:I, s:I, s:I}", "type", "stats", "seq", seq,
                      "cpu_usec", (json_int_t)st.cpu_usec, "mem_bytes", (json_int_t)st.mem_bytes,
                      "mem_peak_bytes", (json_int_t)st.mem_peak_bytes, "pids", (json_int_t)st.pids,
                      "oom_kills", (json_int_t)st.oom_kills, "disk_used_bytes", (json_int_t)disk));
}

static void handle_kill(server *s, conn *c, json_t *msg, json_t *seq) {
    json_t *xid = json_object_get(msg, "xid"), *sig = json_object_get(msg, "signal");
    json_int_t signo = sig ? json_integer_value(sig) : SIGKILL;
    if (!xid || (sig && !json_is_integer(sig)) || signo < 1 || signo > 64)
        return reply_error(c, seq, -EINVAL, "kill needs xid and a signal in 1..64");
    exec_rec *e = exec_by_xid(s, xid);
    if (!e || (c->agent && e->owner != c))
        return reply_error(c, seq, -ESRCH, "no running command with that xid");
    int r = shim_ipc_send(s->sb->ipc, SHIM_IPC_KILL, e->iid, (int)signo, 0, NULL, 0, NULL, 0);
    if (r < 0)
        return reply_error(c, seq, r, "cannot reach init");
    reply_ok(c, seq);
}

static int exec_new(server *s, conn *c, json_t *xid, json_t *seq, uint64_t timeout_ms,
                    exec_rec **ret) {
    if (s->n_execs == s->cap_execs) {
        size_t nc = s->cap_execs ? s->cap_execs * 2 : 16;
        exec_rec **ne = realloc(s->execs, nc * sizeof(*ne));
        if (!ne)
            return -ENOMEM;
        s->execs = ne;
        s->cap_execs = nc;
    }
    exec_rec *e = calloc(1, sizeof(*e));
    if (!e)
        return -ENOMEM;
    *e = (exec_rec){.kind = SRC_TIMER,
                    .iid = ++s->next_iid,
                    .xid = json_incref(xid),
                    .seq = json_incref(seq),
                    .requester = c,
                    .tfd = -1,
                    .start_ms = now_mono_ms(),
                    .timeout_ms = timeout_ms};
    shim_cgroup_oom_kills(s->sb->cg, &e->oom0);
    s->execs[s->n_execs++] = e;
    *ret = e;
    return 0;
}

/* The timeout runs from the request, so a command that stops its reaper before it reported
 * the start is still killed. Armed before the request goes to init: a command that could not
 * have its timeout does not start. */
static int arm_timeout(server *s, exec_rec *e) {
    if (e->timeout_ms == 0)
        return 0;
    e->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    struct itimerspec its = {.it_value = {.tv_sec = (time_t)(e->timeout_ms / 1000),
                                          .tv_nsec = (long)(e->timeout_ms % 1000) * 1000000}};
    if (e->tfd < 0 || timerfd_settime(e->tfd, 0, &its, NULL) < 0)
        return -errno;
    return ep_add(s, e->tfd, e);
}

/* The init request for an exec: the grader user only in a grading sandbox, only from the
 * daemon; sbx-as-agent's commands always run as the agent. 0 when refused. */
static uint32_t exec_type(server *s, conn *c, json_t *msg) {
    json_t *user = json_object_get(msg, "user");
    const char *u = json_string_value(user);
    if (c->agent)
        return user && !(u && strcmp(u, "agent") == 0) ? 0 : SHIM_IPC_EXEC_HELPER;
    if (!user || (u && strcmp(u, "agent") == 0))
        return SHIM_IPC_EXEC;
    return u && strcmp(u, "grader") == 0 && s->sb->spec->grading ? SHIM_IPC_EXEC_GRADER : 0;
}

static void handle_exec(server *s, conn *c, json_t *msg, json_t *seq, int *fds, size_t nf) {
    static char buf[SHIM_IPC_MAX - 64];
    static uint64_t helper_n;
    json_t *xid = json_object_get(msg, "xid"), *to = json_object_get(msg, "timeout_ms");
    _cleanup_(json_decrefp) json_t *own_xid = NULL;
    uint32_t type = exec_type(s, c, msg);
    if (!type)
        return reply_error(c, seq, -EINVAL,
                           "user: \"grader\" runs only in a grading sandbox, from the daemon");
    if (c->agent) /* the helper's commands are named by the shim, apart from the daemon's */
        xid = own_xid = json_sprintf("sbx-as-agent-%llu", (unsigned long long)++helper_n);
    if (!(json_is_string(xid) && json_string_length(xid) > 0 && json_string_length(xid) <= 128) &&
        !json_is_integer(xid))
        return reply_error(c, seq, -EINVAL, "exec needs an xid (string or integer)");
    if (to && (!json_is_integer(to) || json_integer_value(to) < 0))
        return reply_error(c, seq, -EINVAL, "timeout_ms must be a non-negative integer");
    if (nf != 3)
        return reply_error(c, seq, -EBADF, "exec needs 3 descriptors (stdin, stdout, stderr)");
    if (exec_by_xid(s, xid))
        return reply_error(c, seq, -EEXIST, "a command with that xid is running");
    if (s->n_execs >= MAX_EXECS)
        return reply_error(c, seq, -EAGAIN, "too many commands at once");
    size_t len, pre = 0;
    int argc, envc;
    json_t *tty = json_object_get(msg, "tty");
    if (tty && (pre = shim_exec_msg_tty_prefix(tty, (unsigned char *)buf)) == 0)
        return reply_error(c, seq, -EINVAL, "tty needs rows and cols in 1..1000");
    int r = shim_exec_msg_pack(s->sb->spec, msg, type == SHIM_IPC_EXEC_GRADER, buf + pre,
                               sizeof(buf) - pre, &len, &argc, &envc);
    len += pre;
    if (r == -E2BIG) /* e.g. with an image's Env imported before it was bounded (policy/limits.h) */
        return reply_error(c, seq, r,
                           "argv and env: too large (the image's Env, the sandbox's env and the "
                           "command's argv and env are over %zu bytes)",
                           sizeof(buf) - pre);
    if (r < 0)
        return reply_error(c, seq, r,
                           "exec needs argv (non-empty array of strings), env [\"K=V\"], an "
                           "absolute cwd and a boolean shell");
    json_t *file = json_object_get(msg, "file");
    if (file && (r = shim_exec_msg_pack_file(file, buf, sizeof(buf), &len)) < 0)
        return reply_error(c, seq, r,
                           r == -E2BIG ? "file: too big for one exec request"
                                       : "file needs a non-empty string name and a string data");
    exec_rec *e;
    if ((r = exec_new(s, c, xid, seq, to ? (uint64_t)json_integer_value(to) : 0, &e)) < 0)
        return reply_error(c, seq, r, "out of memory");
    if (c->agent) {
        e->owner = c;
        e->helper = true;
    }
    if ((r = arm_timeout(s, e)) < 0) {
        exec_remove(s, e);
        return reply_error(c, seq, r, "cannot arm the command's timeout");
    }
    type |= (tty ? SHIM_IPC_TTY : 0) | (file ? SHIM_IPC_FILE : 0);
    r = shim_ipc_send(s->sb->ipc, type, e->iid, argc, envc, buf, len, fds, 3);
    if (r < 0) {
        exec_remove(s, e);
        return reply_error(c, seq, r, "cannot reach init");
    }
}

/* port_connect {port} -> connected {port} with the socket attached (shim/ports.c), or error. */
static void handle_port_connect(server *s, conn *c, json_t *msg, json_t *seq) {
    json_t *p = json_object_get(msg, "port");
    error_rec err = {0};
    int fd = -1, r = json_is_integer(p)
                         ? shim_port_connect(s->sb, (int)json_integer_value(p), &fd, &err)
                         : error_set(&err, -EINVAL, "port: must be an integer");
    if (r < 0)
        return send_to(c, shimproto_error(seq, &err));
    json_t *m = json_pack("{s:s, s:O?, s:O}", "type", "connected", "seq", seq, "port", p);
    if (m && (r = shimproto_send(c->fd, m, &fd, 1)) < 0)
        log_warn("send failed err=%d", r);
    json_decref(m);
    close(fd);
}

/* "pause" (shim/pause.h): answered "paused", then the shim ends the sandbox and exits. */
static void handle_pause(server *s, conn *c, json_t *msg, json_t *seq) {
    shim_pause_info info = {0};
    error_rec err = {0};
    epoll_ctl(s->ep, EPOLL_CTL_DEL, s->sb->ipc, NULL);
    if (shim_pause(s->sb, json_string_value(json_object_get(msg, "dir")), s->n_execs, &info, &err) <
        0) { /* the sandbox goes on */
        if (s->sb->ipc >= 0)
            ep_add(s, s->sb->ipc, &src_ipc);
        return send_to(c, shimproto_error(seq, &err));
    }
    send_to(c, json_pack("{s:s, s:O?, s:f, s:f, s:i}", "type", "paused", "seq", seq, "dump_ms",
                         info.dump_ms, "files_ms", info.files_ms, "sockets_ended",
                         (int)info.sockets_ended));
    s->done = true;
}

static void dispatch(server *s, conn *c, json_t *msg, int *fds, size_t nf) {
    const char *type = shimproto_type(msg);
    json_t *seq = json_object_get(msg, "seq");
    if (c->agent && strcmp(type, "exec") != 0 && strcmp(type, "kill") != 0)
        reply_error(c, seq, -EOPNOTSUPP, "the agent socket serves exec and kill only");
    else if (strcmp(type, "exec") == 0)
        handle_exec(s, c, msg, seq, fds, nf);
    else if (strcmp(type, "hello") == 0)
        handle_hello(s, c, seq);
    else if (strcmp(type, "stats") == 0)
        handle_stats(s, c, seq);
    else if (strcmp(type, "kill") == 0)
        handle_kill(s, c, msg, seq);
    else if (strcmp(type, "port_connect") == 0)
        handle_port_connect(s, c, msg, seq);
    else if (strcmp(type, "pause") == 0)
        handle_pause(s, c, msg, seq);
    else if (strcmp(type, "shutdown") == 0) {
        reply_ok(c, seq);
        s->done = true;
    } else
        reply_error(c, seq, -EOPNOTSUPP, "unknown message type \"%s\"", type);
    for (size_t i = 0; i < nf; i++)
        safe_close(fds[i]); /* the command holds its own copies now */
}

static void conn_close(server *s, conn *c) {
    for (size_t i = 0; i < MAX_CONNS; i++)
        if (s->conns[i] == c)
            s->conns[i] = NULL;
    for (size_t i = 0; i < s->n_execs; i++) {
        exec_rec *e = s->execs[i];
        if (e->requester == c)
            e->requester = NULL;
        if (e->owner == c) { /* sbx-as-agent went away: so does its command */
            e->owner = NULL;
            shim_ipc_send(s->sb->ipc, SHIM_IPC_KILL, e->iid, SIGKILL, 0, NULL, 0, NULL, 0);
        }
    }
    epoll_ctl(s->ep, EPOLL_CTL_DEL, c->fd, NULL);
    safe_close(c->fd);
    free(c);
}

/* A connection's message; nothing when an event found it read already (the sockets block for the
 * sends, not for this receive). */
static void on_conn(server *s, conn *c) {
    json_t *msg = NULL;
    int fds[SHIMPROTO_MAX_FDS];
    size_t nf = 0;
    int r = shimproto_recv_nowait(c->fd, &msg, fds, &nf);
    if (r == -EAGAIN)
        return;
    if (r == -EPROTO) {
        reply_error(c, NULL, -EPROTO, "malformed message (JSON object with v=%d and type)",
                    SHIMPROTO_VERSION);
        return;
    }
    if (r < 0)
        return conn_close(s, c);
    dispatch(s, c, msg, fds, nf);
    json_decref(msg);
}

/* The agent socket takes only the grader's uid (its directory already keeps others out). */
static bool peer_is_grader(server *s, int fd) {
    struct ucred cr;
    socklen_t l = sizeof(cr);
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &l) == 0 &&
           cr.uid == s->sb->spec->uid_base + SHIM_GRADER_UID;
}

static void on_listen(server *s, bool agent) {
    int fd = accept4(agent ? s->sb->agent_fd : s->sb->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    if (agent && !peer_is_grader(s, fd)) {
        log_warn("agent socket: a peer that is not the grader was refused");
        close(fd);
        return;
    }
    size_t n_agent = 0; /* the grader never takes the daemon's connection slots */
    for (size_t i = 0; i < MAX_CONNS; i++)
        n_agent += s->conns[i] && s->conns[i]->agent;
    if (agent && n_agent >= MAX_AGENT_CONNS) {
        close(fd);
        return;
    }
    struct timeval tv = {.tv_sec = 2};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    for (size_t i = 0; i < MAX_CONNS; i++)
        if (!s->conns[i]) {
            conn *c = calloc(1, sizeof(*c));
            if (!c)
                break;
            *c = (conn){.kind = SRC_CONN, .fd = fd, .agent = agent};
            if (ep_add(s, fd, c) < 0) {
                free(c);
                break;
            }
            s->conns[i] = c;
            return;
        }
    close(fd);
}

/* ---- init's reports ---- */

/* tty_fd: a terminal's master side (SHIM_IPC_TTY) goes to the requester with the reply. */
static void on_started(server *s, exec_rec *e, pid_t pid, int tty_fd) {
    e->started = true;
    e->pid = pid;
    json_t *msg = json_pack("{s:s, s:O?, s:O, s:i}", "type", "started", "seq", e->seq, "xid",
                            e->xid, "pid", (int)pid);
    if (tty_fd >= 0 && e->requester && msg) {
        int r = shimproto_send(e->requester->fd, msg, &tty_fd, 1);
        if (r < 0)
            log_warn("send failed err=%d", r);
        json_decref(msg);
    } else {
        send_to(e->requester, msg);
    }
    e->requester = NULL;
}

static void on_exit_report(server *s, exec_rec *e, int st, bool reaper_died) {
    int code = 0, sig = 0;
    end_reason reason = END_EXITED;
    if (WIFEXITED(st))
        code = WEXITSTATUS(st);
    else if (WIFSIGNALED(st)) {
        sig = WTERMSIG(st);
        code = 128 + sig;
        reason = END_SIGNALED;
    }
    check_oom(s);
    uint64_t ooms = 0;
    if (e->timed_out && sig == SIGKILL && !reaper_died) /* not an end that raced the timer */
        reason = END_COMMAND_TIMEOUT;
    else if (sig == SIGKILL && shim_cgroup_oom_kills(s->sb->cg, &ooms) == 0 && ooms > e->oom0)
        reason = END_OOM_KILLED;
    if (!e->started) {
        reply_error(e->requester, e->seq, -EIO, "the command's reaper died before it started");
        return exec_remove(s, e);
    }
    json_t *ev = json_pack("{s:s, s:O, s:i, s:i, s:s, s:I}", "type", "exit", "xid", e->xid,
                           "exit_code", code, "signal", sig, "reason", end_reason_name(reason),
                           "duration_ms", (json_int_t)(now_mono_ms() - e->start_ms));
    if (ev && reaper_died)
        json_object_set_new(ev, "message", json_string("the command's reaper was killed"));
    if (e->helper)
        send_to(e->owner, ev);
    else
        broadcast(s, ev);
    exec_remove(s, e);
}

/* The command could not start. A fork inside the sandbox that fails with EAGAIN met the
 * sandbox's pids limit (nothing else limits processes there): the error says so and carries
 * "limit": "pids", so that the daemon answers with the sandbox's code, not a platform one. */
static void on_exec_failed(server *s, exec_rec *e, const shim_ipc_msg *m) {
    int en = m->a > 0 ? m->a : EIO;
    error_rec err = {.code = -en};
    int n = (int)MIN(m->len, 200u);
    if (en == EAGAIN)
        snprintf(err.message, sizeof(err.message),
                 "the sandbox is at its pids limit (%llu processes): exec %.*s: %s",
                 (unsigned long long)s->sb->spec->pids, n, m->data, strerror(en));
    else
        snprintf(err.message, sizeof(err.message), "exec %.*s: %s", n, m->data, strerror(en));
    json_t *reply = shimproto_error(e->seq, &err);
    if (en == EAGAIN)
        json_object_set_new(reply, "limit", json_string("pids"));
    send_to(e->requester, reply);
}

static void on_ipc(server *s) {
    int fds[3];
    size_t nf = 0;
    int r = shim_ipc_recv_nowait(s->sb->ipc, s->ipc_buf, fds, &nf);
    shim_ipc_msg *m = s->ipc_buf;
    exec_rec *e = r == 0 ? exec_by_iid(s, m->id) : NULL;
    if (e && m->type == SHIM_IPC_STARTED)
        on_started(s, e, m->a, nf ? fds[0] : -1);
    for (size_t i = 0; i < nf; i++)
        safe_close(fds[i]);
    if (r == -ECONNRESET) { /* init is gone; SIGCHLD does the rest */
        epoll_ctl(s->ep, EPOLL_CTL_DEL, s->sb->ipc, NULL);
        return;
    }
    if (r < 0)
        return;
    if (!e || m->type == SHIM_IPC_STARTED)
        return;
    if (m->type == SHIM_IPC_EXIT)
        on_exit_report(s, e, m->a, m->b != 0);
    else if (m->type == SHIM_IPC_EXECFAIL) {
        on_exec_failed(s, e, m);
        exec_remove(s, e);
    }
}

static void on_timer(server *s, exec_rec *e) {
    uint64_t n;
    if (read(e->tfd, &n, sizeof(n)) < 0)
        return;
    epoll_ctl(s->ep, EPOLL_CTL_DEL, e->tfd, NULL);
    e->timed_out = true;
    shim_ipc_send(s->sb->ipc, SHIM_IPC_KILL, e->iid, SIGKILL, 0, NULL, 0, NULL, 0);
}

static void on_signal(server *s) {
    struct signalfd_siginfo si;
    while (read(s->sfd, &si, sizeof(si)) == sizeof(si)) {
        if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
            log_info("signal %d: tearing down", (int)si.ssi_signo);
            s->done = true;
        }
    }
    int st;
    pid_t init = s->sb->init_pid;
    if (init > 0 && waitpid(init, &st, WNOHANG) == init) {
        s->sb->init_pid = 0;
        char msg[128];
        if (WIFSIGNALED(st))
            snprintf(msg, sizeof(msg), "sandbox init was killed by signal %d", WTERMSIG(st));
        else
            snprintf(msg, sizeof(msg), "sandbox init exited with status %d", WEXITSTATUS(st));
        const char *why =
            s->sb->spec->runsc
                ? shim_gvisor_end_cause(s->sb, s->oom_start, s->pids_start, msg, sizeof(msg))
                : NULL;
        log_error("%s", msg);
        broadcast(s, json_pack("{s:s, s:s, s:s}", "type", "dead", "reason", why ?: "init_exited",
                               "message", msg));
        s->done = true;
        s->result = 1;
    }
}

static int server_setup(server *s) {
    static union {
        shim_ipc_msg m;
        char raw[SHIM_IPC_MAX];
    } buf;
    s->ipc_buf = &buf.m;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    s->ep = epoll_create1(EPOLL_CLOEXEC);
    s->sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (s->ep < 0 || s->sfd < 0)
        return -errno;
    int r = fd_set_nonblock(s->sb->ipc, 0);
    if (r < 0 || (r = ep_add(s, s->sb->listen_fd, &src_listen)) < 0 ||
        (r = ep_add(s, s->sb->ipc, &src_ipc)) < 0 || (r = ep_add(s, s->sfd, &src_sig)) < 0 ||
        (s->sb->agent_fd >= 0 && (r = ep_add(s, s->sb->agent_fd, &src_agent_listen)) < 0))
        return r;
    s->oomfd = shim_cgroup_oom_fd(s->sb->cg);
    if (s->oomfd >= 0)
        ep_add(s, s->oomfd, &src_oom);
    else
        log_warn("no OOM notification; OOM kills are checked at exits err=%d", s->oomfd);
    shim_cgroup_oom_kills(s->sb->cg, &s->oom_last);
    s->oom_start = s->oom_last;
    shim_cgroup_pids_denials(s->sb->cg, &s->pids_start);
    return 0;
}

static void server_dispatch(server *s, void *ptr) {
    switch (*(enum src_kind *)ptr) {
    case SRC_LISTEN:
        return on_listen(s, false);
    case SRC_AGENT_LISTEN:
        return on_listen(s, true);
    case SRC_CONN:
        return on_conn(s, ptr);
    case SRC_IPC:
        return on_ipc(s);
    case SRC_SIG:
        return on_signal(s);
    case SRC_OOM:
        shim_cgroup_oom_fd_drain(s->oomfd);
        return check_oom(s);
    case SRC_TIMER:
        return on_timer(s, ptr);
    }
}

/* Whether an event's source is still there: one handled earlier in the same batch may have
 * removed (freed) its timer's exec record or its connection, so ptr is only compared, never
 * read, until it is found. */
static bool source_alive(server *s, void *ptr) {
    bool alive = ptr == &src_listen || ptr == &src_agent_listen || ptr == &src_ipc ||
                 ptr == &src_sig || ptr == &src_oom;
    for (size_t i = 0; !alive && i < s->n_execs; i++)
        alive = s->execs[i] == ptr;
    for (size_t i = 0; !alive && i < MAX_CONNS; i++)
        alive = s->conns[i] == ptr;
    return alive;
}

int shim_server_run(shim_sandbox *sb) {
    server s = {.sb = sb, .ep = -1, .sfd = -1, .oomfd = -1};
    int r = server_setup(&s);
    if (r < 0) {
        log_error("server setup failed err=%d", r);
        s.done = true;
        s.result = 1;
    }
    while (!s.done) {
        struct epoll_event evs[32];
        int n = epoll_wait(s.ep, evs, 32, -1);
        if (n < 0 && errno != EINTR) {
            log_error("epoll_wait failed err=%d", -errno);
            s.result = 1;
            break;
        }
        /* Exec records may go away while handling a batch: handle one at a time. */
        for (int i = 0; i < n && !s.done; i++)
            if (source_alive(&s, evs[i].data.ptr))
                server_dispatch(&s, evs[i].data.ptr);
    }
    error_rec err = {0};
    if (shim_sandbox_teardown(sb, &err) < 0)
        log_error("teardown: %s", err.message);
    while (s.n_execs)
        exec_remove(&s, s.execs[0]);
    free(s.execs);
    for (size_t i = 0; i < MAX_CONNS; i++)
        if (s.conns[i])
            conn_close(&s, s.conns[i]);
    safe_close(s.ep);
    safe_close(s.sfd);
    safe_close(s.oomfd);
    return s.result;
}
