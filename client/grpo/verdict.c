/* How a grader's run becomes an episode's verdict (docs/GRPO.md "Failure attribution"): a reward,
 * the agent's fault (scored with the task's failure reward) or the platform's (infrastructure
 * failure), with the sentence the log gets. Reads the exec result only; episode.c acts on it. */
#include "client/grpo/runner.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Exit codes of a grader that say the platform could not run it: 125 from sbx-as-agent's own
 * failure (or a verl scorer's configuration: sbx_verl.py), 126/127 from a shell that cannot
 * execute the grader's interpreter or command. */
static bool platform_exit(int code) {
    return code == 125 || code == 126 || code == 127;
}

/* The last 160 bytes of s (n bytes): the end of a traceback says what went wrong. */
static const char *tail(const char *s, size_t n) {
    if (!s)
        return "";
    return n > 160 ? s + n - 160 : s;
}

/* "score S [remark]" as the last non-blank line of the grader's stdout: S finite into *ret, the
 * remark (why a verl scorer gave 0: "(reward function timed out after 10s)") into note, cut to
 * note_len: a remark of any length leaves the score readable. */
static bool score_line(const sbx_exec_result *res, double *ret, char *note, size_t note_len) {
    const char *s = res->stdout_data;
    size_t n = s ? res->stdout_len : 0;
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' '))
        n--;
    size_t a = n;
    while (a && s[a - 1] != '\n')
        a--;
    if (n - a < 7 || memcmp(s + a, "score ", 6) != 0)
        return false;
    size_t i = a + 6, k = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t'))
        i++;
    while (i + k < n && s[i + k] != ' ')
        k++;
    char num[64], *end;
    if (k == 0 || k >= sizeof(num))
        return false;
    memcpy(num, s + i, k);
    num[k] = 0;
    double v = strtod(num, &end);
    if (end != num + k || !isfinite(v))
        return false;
    *ret = v;
    i += k < n - i ? k + 1 : k;
    snprintf(note, note_len, "%.*s", (int)(n - i), s + i);
    return true;
}

/* An exited grader under the "score" rule. */
static grpo_verdict by_score(const sbx_exec_result *res, double *ret_reward, char *msg,
                             size_t len) {
    double v;
    if (!platform_exit(res->exit_code) && score_line(res, &v, msg, len)) {
        if (grpo_reward_ok(v)) {
            *ret_reward = v;
            return GRPO_VERDICT_SCORED;
        }
        snprintf(msg, len, "grader failed: score %g is outside [-1e6, 1e6] (exit code %d)", v,
                 res->exit_code);
        return GRPO_VERDICT_PLATFORM;
    }
    if (platform_exit(res->exit_code))
        snprintf(msg, len, "grader failed: exit code %d (the platform could not run it): %s",
                 res->exit_code, tail(res->stderr_data, res->stderr_len));
    else
        snprintf(msg, len, "grader failed: no \"score S\" line (exit code %d): %s", res->exit_code,
                 tail(res->stderr_data, res->stderr_len));
    return GRPO_VERDICT_PLATFORM;
}

/* Under a reward rule. The grader runs as its own user: agent code cannot signal, trace or
 * write into it (docs/GRPO.md), so a grader that dies by a signal or exits outside its rule
 * failed on its own (the platform's fault). Its time and memory are shared with the agent's
 * programs it starts: running out of either is the agent's fault; a completion answer (a verl
 * row) starts no program, so running out of memory there is the platform's. */
static grpo_verdict by_rule(const grpo_task *t, const sbx_exec_result *res, double *ret_reward,
                            char *msg, size_t len) {
    const char *why = res->reason;
    if (strcmp(why, "command_timeout") == 0) {
        snprintf(msg, len, "the grader ran out of time (%.1fs) running the agent's code",
                 (double)t->grader_timeout_ms / 1000.0);
        return GRPO_VERDICT_AGENT;
    }
    if (strcmp(why, "oom_killed") == 0 && t->completion_answer) { /* no agent code ran there */
        snprintf(msg, len, "the grading sandbox ran out of memory scoring a completion");
        return GRPO_VERDICT_PLATFORM;
    }
    if (strcmp(why, "oom_killed") == 0) {
        snprintf(msg, len, "the grading sandbox ran out of memory");
        return GRPO_VERDICT_AGENT;
    }
    if (strcmp(why, "exited") != 0) {
        snprintf(msg, len, "grader failed: %s (signal %d)", why, res->signal);
        return GRPO_VERDICT_PLATFORM;
    }
    if (t->reward_kind == GRPO_REWARD_SCORE)
        return by_score(res, ret_reward, msg, len);
    if (grpo_task_exit_reward(t, res->exit_code, ret_reward))
        return GRPO_VERDICT_SCORED;
    snprintf(msg, len, "grader failed: exit code %d%s: %s", res->exit_code,
             platform_exit(res->exit_code) ? " (the platform could not run it)" : "",
             tail(res->stderr_data, res->stderr_len));
    return GRPO_VERDICT_PLATFORM;
}

/* msg: why, when not scored (or a scored grader's remark) */
grpo_verdict grpo_verdict_of(const grpo_task *t, const sbx_exec_result *res, bool injected,
                             double *ret_reward, char *msg, size_t len) {
    msg[0] = 0;
    /* an injected crash is the platform's under any rule */
    if (t->reward_kind != GRPO_REWARD_EXPECTED_OUTPUT || injected)
        return by_rule(t, res, ret_reward, msg, len);
    if (strcmp(res->reason, "exited") == 0) {
        /* the command is the agent's program: its exit status is not a verdict */
        *ret_reward = grpo_output_matches(t, res) ? 1.0 : 0.0;
        return GRPO_VERDICT_SCORED;
    }
    snprintf(msg, len, "the agent's program did not finish: %s (signal %d)", res->reason,
             res->signal);
    return GRPO_VERDICT_AGENT;
}

/* A sandbox end the agent's own programs cause: out of memory (a class whose OOM ends the whole
 * sandbox: gvisor) or its process limit (docs/GRPO.md "Failure attribution"). */
bool grpo_end_is_agents(const char *end_reason) {
    return strcmp(end_reason, "oom_killed") == 0 || strcmp(end_reason, "pids_limit") == 0;
}
