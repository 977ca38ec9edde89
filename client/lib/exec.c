/* libsbx request bodies and command results: the create and exec JSON bodies, the exec result
 * (JSON), and the NDJSON stream (a splitter that survives any chunking, and the events it turns
 * into on_output calls and a result). Shared by the sync and async APIs. */
#include "common/grow.h"
#include "client/lib/internal.h"

#include "common/b64.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- request bodies ---- */
static int set_kv_list(json_t *obj, const char *key, const char *const *list, sbx_err *err) {
    if (!list)
        return 0;
    json_t *o = json_object();
    for (size_t i = 0; o && list[i]; i++) {
        const char *eq = strchr(list[i], '=');
        if (!eq || eq == list[i]) {
            json_decref(o);
            sbxi_err_set(err, SBX_E_INVALID, 0, "", "%s entry \"%s\" is not KEY=VALUE", key,
                         list[i]);
            return -EINVAL;
        }
        char *k = strndup(list[i], (size_t)(eq - list[i]));
        json_t *v = json_string(eq + 1);
        if (!k || !v || json_object_set_new(o, k, v) < 0) {
            free(k);
            json_decref(o);
            sbxi_err_set(err, SBX_E_INVALID, 0, "", "%s entry \"%s\" is not valid UTF-8", key,
                         list[i]);
            return -EINVAL;
        }
        free(k);
    }
    if (!o || json_object_set_new(obj, key, o) < 0)
        return sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory"), -ENOMEM;
    return 0;
}

static char *finish_body(json_t *o, sbx_err *err) {
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!s)
        sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    return s;
}

static int set_network(json_t *o, const char *network, sbx_err *err) {
    if (!network || !*network)
        return 0;
    json_t *v;
    if (strcmp(network, "none") == 0 || strcmp(network, "open") == 0)
        v = json_string(network);
    else
        v = json_loads(network, JSON_DECODE_ANY, NULL);
    if (!json_is_string(v) && !json_is_object(v)) {
        json_decref(v);
        sbxi_err_set(err, SBX_E_INVALID, 0, "",
                     "network must be \"none\", \"open\" or a JSON object like "
                     "{\"allow\":[\"10.0.0.0/8\"]}, not %s",
                     network);
        return -EINVAL;
    }
    json_object_set_new(o, "network", v);
    return 0;
}

void sbx_create_opts_init(sbx_create_opts *opts) {
    memset(opts, 0, sizeof(*opts));
}

char *sbxi_create_body(const sbx_create_opts *op, sbx_err *err) {
    sbx_create_opts def;
    if (!op) {
        sbx_create_opts_init(&def);
        op = &def;
    }
    if (op->cpu < 0 || op->max_cost_usd < 0) {
        sbxi_err_set(err, SBX_E_INVALID, 0, "", "cpu and max_cost_usd must not be negative");
        return NULL;
    }
    json_t *o = json_object();
    if (!o)
        return finish_body(NULL, err);
    if (op->image)
        json_object_set_new(o, "image", json_string(op->image));
    if (op->cpu > 0)
        json_object_set_new(o, "cpu", json_real(op->cpu));
    if (op->memory)
        json_object_set_new(o, "memory", json_integer((json_int_t)op->memory));
    if (op->disk)
        json_object_set_new(o, "disk", json_integer((json_int_t)op->disk));
    if (op->pids)
        json_object_set_new(o, "pids", json_integer(op->pids));
    if (op->idle_timeout_ms)
        json_object_set_new(o, "idle_timeout", json_real((double)op->idle_timeout_ms / 1000.0));
    if (op->timeout_ms)
        json_object_set_new(o, "timeout", json_real((double)op->timeout_ms / 1000.0));
    if (op->max_cost_usd > 0)
        json_object_set_new(o, "max_cost_usd", json_real(op->max_cost_usd));
    if (op->lease_id)
        json_object_set_new(o, "lease", json_string(op->lease_id));
    if (op->profile)
        json_object_set_new(o, "profile", json_string(op->profile));
    if (op->gpus)
        json_object_set_new(o, "gpus", json_integer(op->gpus));
    if (op->isolation)
        json_object_set_new(o, "isolation", json_string(op->isolation));
    if (set_kv_list(o, "env", op->env, err) < 0 || set_kv_list(o, "labels", op->labels, err) < 0 ||
        set_network(o, op->network, err) < 0) {
        json_decref(o);
        return NULL;
    }
    return finish_body(o, err);
}

char *sbxi_create_body_with(const sbx_create_opts *o, const char *extra_json, sbx_err *err) {
    char *base = sbxi_create_body(o, err);
    if (!base || !extra_json)
        return base;
    json_t *b = json_loads(base, 0, NULL), *x = json_loads(extra_json, 0, NULL);
    free(base);
    const char *k;
    json_t *v;
    char *s = NULL;
    if (!json_is_object(x))
        sbxi_err_set(err, SBX_E_INVALID, 0, "", "extra create fields: not a JSON object");
    else if (b) {
        json_object_foreach(x, k, v) {
            if (json_object_get(b, k)) {
                sbxi_err_set(err, SBX_E_INVALID, 0, "", "extra create fields: %s is set twice", k);
                goto out;
            }
        }
        json_object_update(b, x);
        if (!(s = json_dumps(b, JSON_COMPACT)))
            sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
    } else
        sbxi_err_set(err, SBX_E_NOMEM, 0, "", "out of memory");
out:
    json_decref(b);
    json_decref(x);
    return s;
}

void sbx_fork_opts_init(sbx_fork_opts *opts) {
    memset(opts, 0, sizeof(*opts));
    opts->count = 1;
}

char *sbxi_fork_body(const sbx_fork_opts *op, sbx_err *err) {
    return sbxi_fork_body_with(op, NULL, err);
}

char *sbxi_fork_body_with(const sbx_fork_opts *op, const char *extra_json, sbx_err *err) {
    unsigned count = op && op->count ? op->count : 1;
    if (count > 256) {
        sbxi_err_set(err, SBX_E_INVALID, 0, "", "fork count must be in [1, 256], not %u", count);
        return NULL;
    }
    _cleanup_free_ char *create =
        sbxi_create_body_with(op ? &op->overrides : NULL, extra_json, err);
    json_t *o = create ? json_loads(create, 0, NULL) : NULL;
    if (!create)
        return NULL;
    if (o && json_object_get(o, "count")) { /* (sbx_fork_opts.count says it) */
        json_decref(o);
        sbxi_err_set(err, SBX_E_INVALID, 0, "", "extra create fields: count is set twice");
        return NULL;
    }
    if (!o || json_object_set_new(o, "count", json_integer(count)) < 0) {
        json_decref(o);
        return finish_body(NULL, err);
    }
    return finish_body(o, err);
}

char *sbxi_exec_body(const sbx_exec_opts *op, sbx_err *err) {
    if (!op || !op->argv || !op->argv[0]) {
        sbxi_err_set(err, SBX_E_INVALID, 0, "", "exec needs a command (argv is empty)");
        return NULL;
    }
    json_t *o = json_object(), *argv = json_array();
    if (!o || !argv) {
        json_decref(argv);
        json_decref(o);
        return finish_body(NULL, err);
    }
    json_object_set_new(o, "argv", argv);
    for (size_t i = 0; op->argv[i]; i++) {
        json_t *a = json_string(op->argv[i]);
        if (!a) {
            json_decref(o);
            sbxi_err_set(err, SBX_E_INVALID, 0, "", "argv[%zu] is not valid UTF-8", i);
            return NULL;
        }
        json_array_append_new(argv, a);
    }
    json_object_set_new(o, "shell", json_boolean(op->shell));
    if (op->user)
        json_object_set_new(o, "user", json_string(op->user));
    if (op->cwd)
        json_object_set_new(o, "cwd", json_string(op->cwd));
    if (op->timeout_ms)
        json_object_set_new(o, "timeout", json_real((double)op->timeout_ms / 1000.0));
    if (op->max_output)
        json_object_set_new(o, "max_output", json_integer((json_int_t)op->max_output));
    if (op->stdin_data && op->stdin_len) {
        json_t *s = memchr(op->stdin_data, 0, op->stdin_len)
                        ? NULL
                        : json_stringn(op->stdin_data, op->stdin_len);
        if (s)
            json_object_set_new(o, "stdin", s);
        else {
            char *b = b64_encode(op->stdin_data, op->stdin_len);
            if (!b) {
                json_decref(o);
                return finish_body(NULL, err);
            }
            json_object_set_new(o, "stdin_b64", json_string(b));
            free(b);
        }
    }
    if (set_kv_list(o, "env", op->env, err) < 0) {
        json_decref(o);
        return NULL;
    }
    return finish_body(o, err);
}

/* ---- results ---- */
/* data from "key" (UTF-8) or "key_b64"; NULL keys give an empty string. */
static int take_data(json_t *o, const char *key, char **ret, size_t *ret_len) {
    char b64key[32];
    snprintf(b64key, sizeof(b64key), "%s_b64", key);
    json_t *s = json_object_get(o, key), *b = json_object_get(o, b64key);
    if (json_is_string(b))
        return b64_decode(json_string_value(b), json_string_length(b), (unsigned char **)ret,
                          ret_len);
    size_t n = json_is_string(s) ? json_string_length(s) : 0;
    char *d = malloc(n + 1);
    if (!d)
        return -ENOMEM;
    if (n)
        memcpy(d, json_string_value(s), n);
    d[n] = 0;
    *ret = d;
    *ret_len = n;
    return 0;
}

int sbxi_take_data(json_t *o, const char *key, char **ret, size_t *ret_len) {
    return take_data(o, key, ret, ret_len);
}

static uint64_t get_u64(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
}

/* The fields shared by the JSON result and the NDJSON exit event. */
sbx_code sbxi_exec_status_fill(json_t *o, sbx_exec_result *r, sbx_err *err) {
    json_t *code = json_object_get(o, "exit_code"), *sig = json_object_get(o, "signal");
    const char *reason = json_string_value(json_object_get(o, "reason"));
    if (!reason)
        return sbxi_err_set(err, SBX_E_PROTOCOL, 200, "", "exec answer without a reason");
    r->exit_code = json_is_integer(code) ? (int)json_integer_value(code) : -1;
    r->signal = json_is_integer(sig) ? (int)json_integer_value(sig) : 0;
    if (r->signal > 0)
        r->exit_code = -1; /* as sbx.h promises, whatever the daemon puts there */
    snprintf(r->reason, sizeof(r->reason), "%s", reason);
    r->duration_s = json_number_value(json_object_get(o, "duration"));
    r->stdout_bytes = get_u64(o, "stdout_bytes");
    r->stderr_bytes = get_u64(o, "stderr_bytes");
    r->stdout_truncated = json_is_true(json_object_get(o, "stdout_truncated"));
    r->stderr_truncated = json_is_true(json_object_get(o, "stderr_truncated"));
    return SBX_OK;
}

sbx_code sbxi_exec_result_parse(const char *body, size_t len, sbx_exec_result *ret, sbx_err *err) {
    json_t *o = json_loadb(body, len, JSON_ALLOW_NUL, NULL);
    sbx_exec_result r = {0};
    sbx_code rc = json_is_object(o) ? sbxi_exec_status_fill(o, &r, err)
                                    : sbxi_err_set(err, SBX_E_PROTOCOL, 200, "",
                                                   "exec answer is not a JSON object");
    if (rc == SBX_OK && (take_data(o, "stdout", &r.stdout_data, &r.stdout_len) < 0 ||
                         take_data(o, "stderr", &r.stderr_data, &r.stderr_len) < 0))
        rc = sbxi_err_set(err, SBX_E_PROTOCOL, 200, "", "exec answer has bad output data");
    json_decref(o);
    if (rc != SBX_OK) {
        sbx_exec_result_free(&r);
        return rc;
    }
    *ret = r;
    return SBX_OK;
}

void sbx_exec_result_free(sbx_exec_result *res) {
    if (!res)
        return;
    free(res->stdout_data);
    free(res->stderr_data);
    res->stdout_data = res->stderr_data = NULL;
    res->stdout_len = res->stderr_len = 0;
}

void sbx_exec_opts_init(sbx_exec_opts *opts) {
    memset(opts, 0, sizeof(*opts));
}

/* ---- NDJSON splitter ---- */
void sbxi_ndjson_init(sbxi_ndjson *s, size_t max, int (*on_line)(void *, const char *, size_t),
                      void *ud) {
    memset(s, 0, sizeof(*s));
    s->max = max;
    s->on_line = on_line;
    s->ud = ud;
}

static int emit(sbxi_ndjson *s, const char *line, size_t len) {
    if (len && line[len - 1] == '\r')
        len--;
    if (len == 0)
        return 0; /* blank lines are keep-alives */
    if (s->on_line(s->ud, line, len) < 0) {
        s->failed = true;
        return -EPROTO;
    }
    return 0;
}

static int append(sbxi_ndjson *s, const char *data, size_t len) {
    if (s->len + len > s->max) {
        s->failed = true;
        return -EMSGSIZE;
    }
    if (grow_reserve((void **)&s->buf, &s->cap, s->len + len, 1) < 0) {
        s->failed = true;
        return -ENOMEM;
    }
    memcpy(s->buf + s->len, data, len);
    s->len += len;
    return 0;
}

int sbxi_ndjson_feed(sbxi_ndjson *s, const char *data, size_t len) {
    while (!s->failed && len > 0) {
        const char *nl = memchr(data, '\n', len);
        if (!nl)
            return append(s, data, len);
        size_t n = (size_t)(nl - data);
        int r;
        if (s->len == 0)
            r = emit(s, data, n); /* a whole line inside this chunk: no copy */
        else {
            r = append(s, data, n);
            if (r == 0)
                r = emit(s, s->buf, s->len);
            s->len = 0;
        }
        if (r < 0)
            return r;
        data = nl + 1;
        len -= n + 1;
    }
    return s->failed ? -EPROTO : 0;
}

int sbxi_ndjson_finish(sbxi_ndjson *s) {
    if (s->failed)
        return -EPROTO;
    int r = s->len ? emit(s, s->buf, s->len) : 0;
    s->len = 0;
    return r;
}

void sbxi_ndjson_done(sbxi_ndjson *s) {
    free(s->buf);
    s->buf = NULL;
    s->len = s->cap = 0;
}

/* ---- the exec event stream ---- */
static int on_event(void *ud, const char *line, size_t len) {
    sbxi_exec_stream *st = ud;
    json_t *o = json_loadb(line, len, JSON_ALLOW_NUL, NULL);
    const char *type = json_string_value(json_object_get(o, "type"));
    int r = 0;
    if (!type && json_object_get(o, "reason")) {
        /* a daemon that ignored Accept sent the plain JSON result: replay it as events */
        char *d = NULL;
        size_t n = 0;
        for (int k = 0; k < 2 && r == 0; k++) {
            if (take_data(o, k ? "stderr" : "stdout", &d, &n) < 0)
                r = -EPROTO;
            else if (n && st->on_output)
                st->on_output(st->userdata, k ? SBX_STREAM_STDERR : SBX_STREAM_STDOUT, d, n);
            free(d);
        }
        if (r == 0 && sbxi_exec_status_fill(o, &st->result, &st->err) == SBX_OK)
            st->got_exit = true;
        else if (r == 0)
            r = -EPROTO;
    } else if (!type) {
        sbxi_err_set(&st->err, SBX_E_PROTOCOL, 200, "", "bad line in the exec stream: %.*s",
                     (int)(len < 120 ? len : 120), line);
        r = -EPROTO;
    } else if (strcmp(type, "stdout") == 0 || strcmp(type, "stderr") == 0) {
        char *d = NULL;
        size_t n = 0;
        if (take_data(o, "data", &d, &n) < 0) {
            sbxi_err_set(&st->err, SBX_E_PROTOCOL, 200, "", "bad data in the exec stream");
            r = -EPROTO;
        } else if (n && st->on_output)
            st->on_output(st->userdata, type[3] == 'o' ? SBX_STREAM_STDOUT : SBX_STREAM_STDERR, d,
                          n);
        free(d);
    } else if (strcmp(type, "exit") == 0) {
        if (sbxi_exec_status_fill(o, &st->result, &st->err) == SBX_OK)
            st->got_exit = true;
        else
            r = -EPROTO;
    } else if (strcmp(type, "error") == 0) {
        const char *m = json_string_value(json_object_get(o, "message"));
        const char *c = json_string_value(json_object_get(o, "code"));
        c = c ? c : "internal";
        sbxi_err_set(&st->err, sbxi_code_from_status(0, c), 200, c, "%s",
                     m ? m : "the daemon reported an error mid-stream");
        r = -EIO;
    } /* "start" and unknown types are ignored (forward compatible) */
    json_decref(o);
    return r;
}

void sbxi_exec_stream_init(sbxi_exec_stream *st, const sbx_exec_opts *o) {
    memset(st, 0, sizeof(*st));
    sbxi_ndjson_init(&st->nd, 64u << 20, on_event, st);
    st->on_output = o->on_output;
    st->userdata = o->userdata;
}

void sbxi_exec_stream_chunk(void *ud, const char *data, size_t len) {
    sbxi_exec_stream *st = ud;
    if (!st->failed && sbxi_ndjson_feed(&st->nd, data, len) < 0) {
        st->failed = true;
        if (st->err.code == SBX_OK)
            sbxi_err_set(&st->err, SBX_E_PROTOCOL, 200, "", "exec stream line too long");
    }
}

sbx_code sbxi_exec_stream_finish(sbxi_exec_stream *st, sbx_exec_result *ret, sbx_err *err) {
    if (!st->failed && sbxi_ndjson_finish(&st->nd) < 0)
        st->failed = true;
    if (st->failed) {
        if (err)
            *err = st->err;
        return st->err.code ? st->err.code : SBX_E_PROTOCOL;
    }
    if (!st->got_exit)
        return sbxi_err_set(err, SBX_E_PROTOCOL, 200, "",
                            "the exec stream ended without an exit event");
    *ret = st->result;
    return SBX_OK;
}

void sbxi_exec_stream_done(sbxi_exec_stream *st) {
    sbxi_ndjson_done(&st->nd);
}
