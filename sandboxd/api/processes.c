/* The process table over HTTP (docs/API.md "Processes and attach"): background starts (201
 * with the process object), GET .../processes[/{pid}[?tail=N]], POST .../{pid}/signal and
 * DELETE .../{pid} (the whole tree). The table itself is core/process.c. */
#include "sandboxd/api/api.h"
#include "sandboxd/api/exec_answer.h"

#include "common/b64.h"
#include "common/jsonkeys.h"
#include "common/macro.h"
#include "common/timeutil.h"
#include "sandboxd/core/process.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *time_json(uint64_t ms) {
    char buf[40];
    if (!ms)
        return json_null();
    time_format_rfc3339(ms, buf, sizeof(buf));
    return json_string(buf);
}

static unsigned watches_of(const sd_process *p) {
    return p->n_watches;
}

static json_t *process_json(const sd_process *p) {
    json_t *x = p->exit;
    json_t *j =
        json_pack("{s:i,s:O,s:b,s:b,s:s,s:o,s:o,s:I,s:I,s:i}", "pid", p->pid, "argv", p->argv,
                  "tty", p->tty, "background", p->background, "state",
                  p->running ? "running" : "exited", "started_at", time_json(p->started_ms),
                  "ended_at", time_json(p->ended_ms), "stdout_bytes", (json_int_t)p->bytes[0],
                  "stderr_bytes", (json_int_t)p->bytes[1], "attached", (int)watches_of(p));
    const char *keys[] = {"exit_code", "signal", "reason", "duration"};
    for (size_t i = 0; j && i < ARRAY_SIZE(keys); i++) {
        json_t *v = x ? json_object_get(x, keys[i]) : NULL;
        json_object_set(j, keys[i], v ? v : json_null());
    }
    if (j && x && json_object_get(x, "message"))
        json_object_set(j, "message", json_object_get(x, "message"));
    return j;
}

static void add_tail(json_t *j, const sd_process *p, size_t max) {
    static const char *const names[2] = {"stdout", "stderr"};
    for (int i = 0; i < 2; i++) {
        char *data;
        size_t len;
        if (sd_process_tail(p, i, max, &data, &len) < 0)
            continue;
        json_t *t = json_stringn(data, len);
        char key[16];
        snprintf(key, sizeof(key), "%s%s", names[i], t ? "" : "_b64");
        if (!t) {
            char *b = b64_encode(data, len);
            t = json_string(b ? b : "");
            free(b);
        }
        json_object_set_new(j, key, t);
        free(data);
    }
}

/* ---- background starts ---- */

typedef struct bg_start {
    sd_request *req;
    sd_watch *w;
} bg_start;

static void bg_started(void *ud, sd_process *p) {
    bg_start *b = ud;
    b->req->on_close = NULL;
    sd_watch_leave(b->w); /* the command goes on without an attachment: "attached" is 0 */
    sd_reply_json(b->req, 201, process_json(p));
    free(b);
}

static bool bg_output(void *ud, int which, const char *data, size_t len) {
    return false;
}

static void bg_ended(void *ud, json_t *exit, const error_rec *err) {
    bg_start *b = ud; /* it failed to start (a started one has no watch of ours) */
    b->req->on_close = NULL;
    if (err)
        sd_api_exec_reply_error(b->req, err);
    else
        sd_reply_error(b->req, 500, "internal", "the command ended before it started");
    free(b);
}

static const sd_watch_ops bg_ops = {.started = bg_started, .output = bg_output, .ended = bg_ended};

static void bg_gone(sd_request *req, void *ud) {
    bg_start *b = ud; /* the client left before the start: the command goes on */
    sd_watch_leave(b->w);
    free(b);
}

void sd_api_exec_background(sd_daemon *d, sd_request *req, sd_sandbox *sb, policy_exec *pe,
                            const policy_process *pp) {
    error_rec err = {0};
    bg_start *b = calloc(1, sizeof(*b));
    if (!b) {
        sd_reply_error(req, 500, "internal", "out of memory");
        return;
    }
    b->req = req;
    int r = sd_process_start(sb, pe, pp, &bg_ops, b, &b->w, &err);
    if (r < 0) {
        free(b);
        sd_api_exec_reply_error(req, &err);
        return;
    }
    req->on_close = bg_gone;
    req->close_ud = b;
}

/* ---- the table ---- */

static void list(sd_request *req, sd_sandbox *sb) {
    json_t *arr = json_array();
    for (sd_process *p = sb->processes; p; p = p->next)
        if (p->pid)
            json_array_append_new(arr, process_json(p));
    sd_reply_json(req, 200, json_pack("{s:o}", "processes", arr));
}

/* "123" -> 123; -1 for anything else. */
static int parse_pid(const char *s, size_t n) {
    if (n == 0 || n > 9 || strspn(s, "0123456789") < n)
        return -1;
    return (int)strtol(s, NULL, 10);
}

static sd_process *find(sd_request *req, sd_sandbox *sb, const char *s, size_t n) {
    int pid = parse_pid(s, n);
    sd_process *p = pid > 0 ? sd_process_find(sb, pid) : NULL;
    if (!p)
        sd_reply_error(req, 404, "not_found", "no process %.*s in sandbox %s", (int)MIN(n, 32), s,
                       sb->id);
    return p;
}

static void get_one(sd_request *req, sd_process *p) {
    const char *t = sd_req_query(req, "tail");
    long long max = 0;
    if (t) {
        char *end;
        max = strtoll(t, &end, 10);
        if (!*t || *end || max < 0 || max > (64ll << 20)) {
            sd_reply_error(req, 400, "invalid_argument", "tail: must be a byte count in 0..%d",
                           64 << 20);
            return;
        }
    }
    json_t *j = process_json(p);
    if (t)
        add_tail(j, p, (size_t)max);
    sd_reply_json(req, 200, j);
}

static void ended_error(sd_request *req, sd_process *p) {
    sd_reply_error(req, 409, "process_ended", "process %d has ended", p->pid);
}

static void signal_one(sd_request *req, sd_process *p) {
    json_t *body = sd_req_json(req);
    if (!body)
        return;
    int signo;
    error_rec err = {0};
    static const char *const keys[] = {"signal", NULL};
    int r = jsonkeys_check(body, keys, NULL, &err);
    if (r >= 0)
        r = policy_signal_parse(json_object_get(body, "signal"), &signo, &err);
    json_decref(body);
    if (r < 0)
        return sd_reply_error_rec(req, &err);
    if (!p->running)
        return ended_error(req, p);
    r = sd_process_signal(p, signo);
    if (r < 0)
        sd_reply_error(req, 500, "internal", "cannot signal process %d: %s", p->pid, strerror(-r));
    else
        sd_reply_data(req, 204, NULL, NULL, 0);
}

static void kill_one(sd_request *req, sd_process *p) {
    if (!p->running)
        return ended_error(req, p);
    int r = sd_process_signal(p, 9);
    if (r < 0)
        sd_reply_error(req, 500, "internal", "cannot kill process %d: %s", p->pid, strerror(-r));
    else
        sd_reply_data(req, 204, NULL, NULL, 0);
}

void sd_api_processes_route(sd_daemon *d, sd_request *req, sd_sandbox *sb, const char *rest) {
    bool get = strcmp(req->method, "GET") == 0;
    if (!*rest || strcmp(rest, "/") == 0) {
        if (get)
            list(req, sb);
        else
            sd_reply_error(req, 405, "method_not_allowed", "method %s is not allowed on %s",
                           req->method, req->path);
        return;
    }
    rest++;
    size_t n = strcspn(rest, "/");
    const char *sub = rest + n;
    if (*sub && strcmp(sub, "/signal") != 0) {
        sd_reply_error(req, 404, "not_found", "no such endpoint: %s", req->path);
        return;
    }
    bool post = strcmp(req->method, "POST") == 0, del = strcmp(req->method, "DELETE") == 0;
    if (*sub ? !post : !(get || del)) {
        sd_reply_error(req, 405, "method_not_allowed", "method %s is not allowed on %s",
                       req->method, req->path);
        return;
    }
    sd_process *p = find(req, sb, rest, n);
    if (!p)
        return;
    if (*sub)
        signal_one(req, p);
    else if (get)
        get_one(req, p);
    else
        kill_one(req, p);
}
