/* What is read off an episode without driving it (episode.c drives it): the create options of
 * its sandboxes, a setup file's mode, whether a command's output is the expected one, the
 * episode as the trainer gets it and its line in the step log. Calls no other file of the
 * folder; episode.c, group.c and report.c use it. */
#include "client/grpo/runner.h"

#include <stdio.h>
#include <string.h>

void grpo_episode_create_opts(const grpo_episode *ep, const char *role, grpo_create *ret) {
    const grpo_task *t = ep->task;
    const grpo_limits *l = &t->sandbox;
    sbx_create_opts_init(&ret->o);
    ret->o.image = t->image;
    ret->o.cpu = l->cpu;
    ret->o.memory = l->memory;
    ret->o.disk = l->disk;
    ret->o.pids = l->pids;
    ret->o.timeout_ms = l->timeout_ms;
    ret->o.idle_timeout_ms = l->idle_timeout_ms;
    ret->o.max_cost_usd = l->max_cost_usd;
    bool grading = strcmp(role, "grader") == 0;
    ret->o.network = !grading && t->network_text ? t->network_text : "none";
    ret->o.profile = grading ? "grading" : NULL;
    /* the agent's sandbox in the task's class; a grading sandbox is always native (docs/GRPO.md) */
    ret->o.isolation = grading ? "native" : t->isolation;
    snprintf(ret->labels[0], sizeof(ret->labels[0]), "grpo_run=%s", ep->run->run_id);
    snprintf(ret->labels[1], sizeof(ret->labels[1]), "grpo_role=%s", role);
    snprintf(ret->labels[2], sizeof(ret->labels[2]), "grpo_task=%s", t->id);
    for (size_t i = 0; i < 3; i++)
        ret->label_v[i] = ret->labels[i];
    ret->label_v[3] = NULL;
    ret->o.labels = ret->label_v;
}

unsigned grpo_file_mode(const grpo_file *f) {
    return f->len > 2 && f->data[0] == '#' && f->data[1] == '!' ? 0755 : 0;
}

static size_t trimmed(const char *s, size_t n, const char **ret) {
    static const char ws[] = " \n\t\r";
    while (n && memchr(ws, *s, 4))
        s++, n--;
    while (n && memchr(ws, s[n - 1], 4))
        n--;
    *ret = s;
    return n;
}

/* expected_output: the command's whole stdout, trimmed, byte for byte (a NUL or a cut-off
 * stream never matches). */
bool grpo_output_matches(const grpo_task *t, const sbx_exec_result *res) {
    const char *got, *want;
    size_t ng = trimmed(res->stdout_data ?: "", res->stdout_data ? res->stdout_len : 0, &got);
    size_t nw = trimmed(t->expected_output, strlen(t->expected_output), &want);
    return !res->stdout_truncated && ng == nw && memcmp(got, want, nw) == 0;
}

static json_t *ids_json(const int *v, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_integer(v[i]));
    return a;
}

/* The episode as the trainer gets it (only scored episodes of training groups). */
json_t *grpo_episode_train_json(const grpo_episode *ep) {
    json_t *lp = json_array();
    for (size_t i = 0; i < ep->logprobs.n; i++)
        json_array_append_new(lp, json_real(ep->logprobs.v[i]));
    return json_pack("{s:s, s:o, s:o, s:o, s:o, s:f, s:f, s:I}", "task_id", ep->task->id,
                     "prompt_ids", ids_json(ep->prompt.v, ep->prompt.n), "completion_ids",
                     ids_json(ep->completion.v, ep->completion.n), "loss_mask",
                     ids_json(ep->mask.v, ep->mask.n), "sampling_logprobs", lp, "reward",
                     ep->reward, "advantage", ep->advantage, "policy_version",
                     (json_int_t)ep->policy_version);
}

static const char *status_name(grpo_ep_status s) {
    switch (s) {
    case GRPO_EP_SCORED:
        return "scored";
    case GRPO_EP_INFRA:
        return "infrastructure_failure";
    case GRPO_EP_ABORTED:
        return "aborted";
    default:
        return "pending";
    }
}

json_t *grpo_episode_log(const grpo_episode *ep) {
    bool scored = ep->status == GRPO_EP_SCORED;
    json_t *o = json_pack(
        "{s:I, s:s, s:I, s:I, s:s, s:o, s:o, s:b, s:I, s:s?, s:I, s:{s:f, s:f, s:f, s:f}, "
        "s:f, s:I, s:O}",
        "step", (json_int_t)ep->run->step, "task", ep->task->id, "group", (json_int_t)ep->group,
        "index", (json_int_t)ep->index, "status", status_name(ep->status), "reward",
        scored ? json_real(ep->reward) : json_null(), "advantage",
        scored ? json_real(ep->advantage) : json_null(), "trained", ep->trained, "turns",
        (json_int_t)ep->turn, "stop", ep->stop, "completion_tokens", (json_int_t)ep->completion.n,
        "durations", "total", (double)(ep->t_end - ep->t_start) / 1000.0, "generate",
        (double)ep->gen_ms / 1000.0, "execute", (double)ep->exec_ms / 1000.0, "grade",
        (double)ep->grade_ms / 1000.0, "cost_usd", ep->cost_usd, "policy_version",
        (json_int_t)ep->policy_version, "trace", ep->trace);
    if (o && ep->message[0])
        json_object_set_new(o, "message", json_string(ep->message));
    if (o && ep->fault)
        json_object_set_new(o, "fault", json_string(ep->fault));
    if (o)
        json_object_set_new(o, "dropped_symlinks", json_integer(ep->dropped_symlinks));
    return o;
}

size_t grpo_episode_extra_files(const grpo_episode *ep, grpo_file *ret) {
    size_t n = 0;
    if (ep->env_state)
        ret[n++] = (grpo_file){(char *)GRPO_GRADER_DIR "/env_state.json", ep->env_state,
                               strlen(ep->env_state)};
    if (ep->solution)
        ret[n++] = (grpo_file){(char *)GRPO_GRADER_DIR "/solution.txt", ep->solution,
                               strlen(ep->solution)};
    if (ep->task->shared_file)
        ret[n++] = *ep->task->shared_file;
    return n;
}

bool grpo_text_blank(const char *s) {
    for (; s && *s; s++)
        if (*s != ' ' && *s != '\n' && *s != '\t' && *s != '\r')
            return false;
    return true;
}

/* Appends len bytes of src at buf[at] (up to max in all), a NUL byte as '?'; returns the end.
 * Cut short, it never ends inside a UTF-8 character src goes on to complete: a character split
 * there made the whole text invalid UTF-8, and grpo_text_for_log then turned all of it to '?'. */
size_t grpo_text_append(char *buf, size_t at, size_t max, const char *src, size_t len) {
    size_t start = at, i = 0;
    for (; src && i < len && at < max; i++)
        buf[at++] = src[i] ? src[i] : '?';
    if (i == len || i == 0 || ((unsigned char)src[i] & 0xc0) != 0x80)
        return at;    /* all of it, or the cut falls between characters */
    size_t lead = at; /* back to the character's first byte (at most 3 before) */
    while (lead > start && at - lead < 4 && ((unsigned char)buf[lead - 1] & 0xc0) == 0x80)
        lead--;
    return lead > start && (unsigned char)buf[lead - 1] >= 0xc0 ? lead - 1 : at;
}

bool grpo_task_has_file(const grpo_task *t, const char *path) {
    for (size_t i = 0; i < t->n_grader_files; i++)
        if (strcmp(t->grader_files[i].path, path) == 0)
            return true;
    return false;
}

/* Text the agent may have written (its output, a grader's stderr) as valid UTF-8 for the logs:
 * cut at the first NUL, every byte of a string that is not UTF-8 as '?'. */
void grpo_text_for_log(char *s) {
    json_t *valid = json_string(s);
    for (char *p = s; !valid && *p; p++)
        if ((unsigned char)*p >= 0x80)
            *p = '?';
    json_decref(valid);
}
