/* The GRPO runner's internals shared by its files: the run, its episodes and their helpers.
 * run.c drives steps and the training plane, episode.c one episode's state machine, group.c a
 * group's template and forks, report.c the logs, summary and reward curve, runstate.c and
 * trainer.c the run's state and the trainer's HTTP that all of them use. Calls go one way:
 * run.c -> {group.c, report.c} -> episode.c -> {runstate.c, trainer.c}; episode.c reaches
 * run.c and group.c only through the callbacks run.c sets in grpo_run. Sandboxes go through
 * libsbx's async API only; the trainer through libsbx's internal HTTP engine. */
#pragma once

#include "client/grpo/taskset.h"
#include "client/lib/http_async.h"

#include <jansson.h>
#include <sbx_grpo.h>
#include <stdbool.h>
#include <uv.h>

typedef struct grpo_ivec {
    int *v;
    size_t n, cap;
} grpo_ivec;

typedef struct grpo_dvec {
    double *v;
    size_t n, cap;
} grpo_dvec;

/* runstate.c (with grpo_run_fail, grpo_run_cost) */
int grpo_ivec_push(grpo_ivec *a, int x);
int grpo_dvec_push(grpo_dvec *a, double x);

typedef enum grpo_ep_status {
    GRPO_EP_PENDING,
    GRPO_EP_SCORED,
    GRPO_EP_INFRA,  /* infrastructure_failure: no reward, excluded everywhere, counted */
    GRPO_EP_ABORTED /* the run stopped before the episode finished */
} grpo_ep_status;

typedef struct grpo_run grpo_run;
typedef struct grpo_group grpo_group;

typedef struct grpo_episode {
    grpo_run *run;
    const grpo_task *task;
    size_t group, index;
    int state;
    unsigned turn, attempts;
    size_t setup_i;
    sbx_sandbox *agent, *grader; /* created and not yet released */
    grpo_ivec prompt, completion, mask;
    grpo_dvec logprobs;
    json_t *trace; /* [{"command": ..., "output": ...}] for the log */
    void *tar;     /* the workspace, its escaping symlinks dropped (contain.c) */
    size_t tar_len;
    unsigned dropped_symlinks;
    grpo_ep_status status;
    char message[256];
    const char *fault; /* who caused a failure: "agent" (scored) or "platform" (infra); NULL */
    const char *stop;  /* "policy_stopped" or "max_turns" */
    double reward, advantage;
    bool in_batch; /* sent in the step's /v1/train_step; trained once it answers 200 */
    bool trained, inject_failure;
    double cost_usd;
    uint64_t t_start, t_end, t_mark, gen_ms, exec_ms, grade_ms;
    unsigned long long policy_version;
    uv_timer_t timer; /* retries */
    /* a server environment (envserver.c): /state's answer, the stop it was fetched for */
    char *env_state;
    const char *env_stop;
    uint64_t env_deadline_ms;
    char *solution;   /* a completion-answer task's (verl row's) completion text */
    json_t *req_body; /* the trainer request being retried */
    char req_path[256];
} grpo_episode;

/* The create options of an episode's sandbox, with the storage its labels point into. */
typedef struct grpo_create {
    sbx_create_opts o;
    char labels[3][192];
    const char *label_v[4];
} grpo_create;

struct grpo_run {
    sbx_grpo_opts o;
    uv_loop_t *loop;
    sbx_client *client;       /* sandboxd: the host list, placement, the token */
    sbx_async *sbx;           /* every sandbox call of the run, on the loop */
    sbxi_http_async *trainer; /* the generation + training server (not sandboxd) */
    bool closing;             /* sbx_async_free is cancelling: callbacks only return */
    grpo_taskset *ts;
    const grpo_task **pool; /* tasks of the chosen split, in seeded order */
    size_t n_pool, next_task;
    char trainer_base[512];
    char run_id[32];
    unsigned step;
    grpo_episode **eps;
    size_t n_eps, next_ep, inflight, done;
    grpo_group **groups; /* one per task of the step: its template sandbox (group.c) */
    size_t n_groups;
    unsigned long long policy_version;
    int fatal;             /* negative errno once the run must stop */
    char fatal_reason[32]; /* summary stop_reason */
    char fatal_msg[512];
    bool cost_stop;
    double sandbox_cost;
    size_t templates; /* groups' template sandboxes whose cost is not counted yet */
    bool step_waits;  /* the next step (or the summary) waits for them: templates_gone */
    bool reported;    /* summary written */
    uint64_t t_run_start, t_step_start;
    unsigned train_attempts;
    uv_timer_t timer;
    uv_signal_t sig_int, sig_term;
    /* totals and curves */
    size_t episodes, scored, infra, trained, passes;
    size_t *task_episodes, *task_infra; /* per task of ts (index t - ts->tasks), whole run */
    double episode_seconds;
    grpo_dvec step_reward, step_seconds;
    json_t *train_body;
    sbx_grpo_summary *sum;
    bool finished;
    bool step_request; /* GET /v1/state or POST /v1/train_step in flight */
    /* Set by run.c (the owner) so that the files below it never call up into it: an episode
     * reached its final status (grpo_run_episode_done); whether ep's group takes care of its
     * sandbox (group.c's grpo_group_want; NULL: every episode creates its own). */
    void (*episode_done)(grpo_run *run, grpo_episode *ep);
    bool (*group_want)(grpo_episode *ep);
    void (*templates_gone)(grpo_run *run); /* the last template's cost was counted */
    /* server environments: envserver.c's grpo_env_*, set by run.c */
    void (*env_begin)(grpo_episode *ep);
    void (*env_poll)(grpo_episode *ep);
    void (*env_step)(grpo_episode *ep, const char *action);
    void (*env_finish)(grpo_episode *ep, const char *stop);
};

/* episode.c: the state machine */
grpo_episode *grpo_episode_new(grpo_run *run, const grpo_task *t, size_t group, size_t index);
void grpo_episode_start(grpo_episode *ep);
void grpo_episode_free(grpo_episode *ep); /* closes its timer; frees on the loop */
/* The run failed (a signal): a retry or poll waiting on the episode's timer goes now (and, the
 * run failed, releases the episode's sandboxes). */
void grpo_episode_hurry(grpo_episode *ep);
/* For envserver.c (episode.c): whether a callback may act (grpo_episode_live); an
 * infrastructure failure; envserver's poll again after ms; an observation for the policy (a
 * turn's when turn is true: logged, counted against max_turns); the agent is done. */
bool grpo_episode_live(grpo_episode *ep);
void grpo_episode_infra(grpo_episode *ep, const char *msg);
/* A call on the agent's sandbox refused (err): the agent's fault when its programs filled or
 * ended the sandbox (docs/GRPO.md "Failure attribution"), else the platform's. */
void grpo_episode_refused(grpo_episode *ep, const sbx_err *err, const char *what);
void grpo_episode_later(grpo_episode *ep, uint64_t ms);
void grpo_episode_observe(grpo_episode *ep, const char *obs, bool turn);
void grpo_episode_agent_done(grpo_episode *ep, const char *stop);
/* envserver.c (client/grpo/envserver.h): wait for the port then /reset; a turn's /step; /state,
 * then grpo_episode_agent_done. */
void grpo_env_begin(grpo_episode *ep);
void grpo_env_poll(grpo_episode *ep);
void grpo_env_step(grpo_episode *ep, const char *action);
void grpo_env_finish(grpo_episode *ep, const char *stop);
/* episode_view.c: the episode's log line and its record for the trainer */
json_t *grpo_episode_log(const grpo_episode *ep);
json_t *grpo_episode_train_json(const grpo_episode *ep);
/* expected_output: the command's whole stdout, trimmed, byte for byte (a NUL or a cut-off
 * stream never matches). */
bool grpo_output_matches(const grpo_task *t, const sbx_exec_result *res);
/* For group.c (episode_view.c, but _create_cold and _forked: episode.c): the create options of an
 * episode's sandbox (role "agent", "grader" or "template"), the cold create (the old path), and a
 * sandbox forked for it (setup files already written in the template; the handle is the episode's
 * now). */
void grpo_episode_create_opts(const grpo_episode *ep, const char *role, grpo_create *ret);
void grpo_episode_create_cold(grpo_episode *ep);
void grpo_episode_forked(grpo_episode *ep, sbx_sandbox *sb);
/* The files an episode adds beside its task's hidden tests (episode_view.c): a server
 * environment's /state (env_state.json), a completion-answer task's answer (solution.txt), the
 * set's shared file (the verl reward file). At most GRPO_EPISODE_FILES into ret. */
#define GRPO_EPISODE_FILES 3
size_t grpo_episode_extra_files(const grpo_episode *ep, grpo_file *ret);
/* verdict.c: a grader's run as the episode's verdict (docs/GRPO.md "Failure attribution"); msg
 * (len bytes) says why when it is not scored. injected: the grader was made to crash. */
typedef enum grpo_verdict {
    GRPO_VERDICT_SCORED,  /* *ret_reward */
    GRPO_VERDICT_AGENT,   /* the agent caused it: the task's failure reward */
    GRPO_VERDICT_PLATFORM /* infrastructure failure */
} grpo_verdict;
grpo_verdict grpo_verdict_of(const grpo_task *t, const sbx_exec_result *res, bool injected,
                             double *ret_reward, char *msg, size_t len);
bool grpo_end_is_agents(const char *end_reason); /* oom_killed, pids_limit */
#define GRPO_OBS_MAX 4096 /* bytes of a turn's output (or observation) the policy and log get */
/* Only blanks (or NULL); append len bytes of src at buf[at] (up to max in all, a NUL byte as
 * '?', never ending inside a UTF-8 character that src completes), returning the end
 * (episode_view.c). */
bool grpo_text_blank(const char *s);
size_t grpo_text_append(char *buf, size_t at, size_t max, const char *src, size_t len);
void grpo_text_for_log(char *s); /* valid UTF-8: cut at a NUL, other bytes '?' */
bool grpo_task_has_file(const grpo_task *t, const char *path); /* among its grader files */
/* The file's mode: 0755 for scripts ("#!"), else the default. */
unsigned grpo_file_mode(const grpo_file *f);
/* group.c: a task's group sets up one template sandbox and forks its episodes from it
 * (sbx_async_fork); any failure sends the episodes down the cold path. */
grpo_group *grpo_group_new(grpo_run *run, const grpo_task *t, size_t n_episodes);
/* True when the group takes care of ep's sandbox (grpo_episode_forked or _create_cold).
 * Registered by run.c as run->group_want; episode.c calls it only through that. */
bool grpo_group_want(grpo_episode *ep);
void grpo_group_stop(grpo_group *g); /* no more episodes start: release the template soon */
void grpo_group_free(grpo_group *g);
/* run.c: an episode reached its final status (episode.c calls it through run->episode_done) */
void grpo_run_episode_done(grpo_run *run, grpo_episode *ep);
/* runstate.c. Stop the run: first caller wins. Returns code. */
int grpo_run_fail(grpo_run *run, int code, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
double grpo_run_cost(const grpo_run *run);
/* trainer.c. A JSON request to the trainer (body may be NULL; it is stolen). cb also runs, with
 * res->cancelled set, when the run tears down (run->closing: return at once then) and when a
 * signal stops the run (run->fatal is set: clean up as after any failure). */
int grpo_trainer_request(grpo_run *run, const char *method, const char *path, json_t *body,
                         sbxi_http_cb cb, void *ud);
/* A /v1/completions answer's choices[0]: token_ids integers in [0, INT32_MAX], token_logprobs
 * finite numbers <= 0, as many, at most max_tokens. Else the run fails (trainer_failed, naming
 * what is wrong) and false. */
bool grpo_completion_check(grpo_run *run, json_t *ids, json_t *lps, size_t max_tokens);
/* A /tokenize answer's "tokens": an array of integers in [0, INT32_MAX]. Else the run fails
 * (trainer_failed, naming what is wrong) and false. */
bool grpo_tokenize_check(grpo_run *run, json_t *toks);
/* The wait before retrying a trainer request that failed `attempts` times already (docs/GRPO.md
 * "Retries": 250 ms, doubling, at most 4 s). */
uint64_t grpo_trainer_backoff_ms(unsigned attempts);
/* "HTTP 503: message" or the transport's error, for the trainer's failures. */
const char *grpo_trainer_error(const sbxi_http_result *r, char *buf, size_t len);
/* contain.c: copy the workspace tar without the symbolic links that leave /workspace (counted
 * in *ret_dropped); *ret is malloc'd. */
int grpo_workspace_contain(const void *tar, size_t len, void **ret, size_t *ret_len,
                           unsigned *ret_dropped, error_rec *err);
/* Whether a link at path (relative to /workspace) to target stays under /workspace. */
bool grpo_link_contained(const char *path, const char *target);
/* The daemon refused the agent's workspace for its size (413: too large, the grading sandbox's
 * disk is full) or its content (400: an entry it will not unpack): the agent made it so. 507 is
 * the daemon's own disk: not the agent's. */
bool grpo_workspace_refused(const sbx_err *err);
/* gradelib.c: the grading helper library's files (paths under GRPO_GRADER_DIR, static data),
 * at most max into ret; returns how many there are. */
#define GRPO_GRADELIB_FILES 3
size_t grpo_gradelib_files(grpo_file *ret, size_t max);
/* report.c. A task whose infrastructure failures are at least GRPO_INFRA_WARN_RATE of its
 * episodes (and at least GRPO_INFRA_WARN_MIN of them) gets a warning in the step log, the
 * summary and sbx_grpo_summary.warning. */
#define GRPO_INFRA_WARN_RATE 0.2
#define GRPO_INFRA_WARN_MIN 2
int grpo_report_step(grpo_run *run);
int grpo_report_finish(grpo_run *run);
