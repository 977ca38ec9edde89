/* libFuzzer target: verl dataset rows as GRPO tasks (client/grpo/verlset.h, JSONL). A parsed set
 * has one completion-answer task per row, each with an id, chat messages, its row.json and the
 * sbx_verl.py grader scored by the "score" rule; a refusal always says why. */
#include "client/grpo/verlset.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 1 << 20)
        return 0;
    grpo_taskset *ts = NULL;
    error_rec err = {0};
    if (grpo_verlset_parse((const char *)data, size, "fuzz.jsonl", NULL, 10, &ts, &err) < 0) {
        if (err.message[0] == '\0')
            abort();
        return 0;
    }
    for (size_t i = 0; i < ts->n_tasks; i++) {
        const grpo_task *t = &ts->tasks[i];
        if (!t->id || !t->completion_answer || !json_is_array(t->prompt_messages) ||
            json_array_size(t->prompt_messages) == 0 || t->n_grader_files != 1 ||
            t->n_grader_argv != 6 || strcmp(t->grader_argv[1], "sbx_verl.py") != 0 ||
            t->reward_kind != GRPO_REWARD_SCORE || t->max_turns != 1)
            abort();
    }
    grpo_taskset_free(ts);
    return 0;
}
