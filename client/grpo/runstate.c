/* The run's state that every room of client/grpo below run.c reads or sets: stopping the run
 * (the first failure wins), its cost so far, and the growable vectors of tokens and numbers.
 * Calls no other file of the folder. */
#include "common/grow.h"
#include "client/grpo/runner.h"

#include "common/timeutil.h"

#include <stdarg.h>
#include <stdio.h>

int grpo_ivec_push(grpo_ivec *a, int x) {
    if (grow_reserve((void **)&a->v, &a->cap, a->n + 1, sizeof(*a->v)) < 0)
        return -ENOMEM;
    a->v[a->n++] = x;
    return 0;
}

int grpo_dvec_push(grpo_dvec *a, double x) {
    if (grow_reserve((void **)&a->v, &a->cap, a->n + 1, sizeof(*a->v)) < 0)
        return -ENOMEM;
    a->v[a->n++] = x;
    return 0;
}

int grpo_run_fail(grpo_run *run, int code, const char *reason, const char *fmt, ...) {
    if (run->fatal)
        return code;
    run->fatal = code < 0 ? code : -EIO;
    snprintf(run->fatal_reason, sizeof(run->fatal_reason), "%s", reason);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(run->fatal_msg, sizeof(run->fatal_msg), fmt, ap);
    va_end(ap);
    uv_timer_stop(&run->timer);
    return code;
}

double grpo_run_cost(const grpo_run *run) {
    double hours = (double)(now_mono_ms() - run->t_run_start) / 3.6e6;
    return run->sandbox_cost + run->o.gpu_hour_usd * run->o.gpus * hours;
}
