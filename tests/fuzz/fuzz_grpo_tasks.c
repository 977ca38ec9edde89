/* libFuzzer target: the GRPO task-set parser (client/grpo/taskset.h, JSONL). A parsed set must
 * have tasks with ids, its held-out split must be round(n * held_out) tasks, and the exit-code
 * rule must map 0 for pass_fail tasks. */
#include "client/grpo/taskset.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 1 << 20)
        return 0;
    grpo_taskset *ts = NULL;
    error_rec err = {0};
    if (grpo_taskset_parse((const char *)data, size, "fuzz.jsonl", &ts, &err) < 0) {
        if (err.message[0] == '\0')
            abort();
        return 0;
    }
    size_t held = 0;
    for (size_t i = 0; i < ts->n_tasks; i++) {
        const grpo_task *t = &ts->tasks[i];
        if (!t->id || (!t->grader_command && !t->grader_argv))
            abort();
        held += t->held_out;
        double r;
        if (t->reward_kind == GRPO_REWARD_PASS_FAIL &&
            (!grpo_task_exit_reward(t, 0, &r) || r != 1.0))
            abort();
    }
    if (held != (size_t)llround((double)ts->n_tasks * ts->held_out_fraction))
        abort();
    grpo_taskset_free(ts);
    return 0;
}
