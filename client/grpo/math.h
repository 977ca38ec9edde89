/* GRPO group statistics: per-group advantages with infrastructure failures excluded. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

typedef struct grpo_group_stats {
    size_t n_valid; /* episodes with a reward (not infrastructure failures) */
    double mean;    /* of the valid rewards */
    double std;     /* Bessel-corrected (n - 1), 0 when n_valid < 2 */
    bool trains;    /* n_valid >= 2 and the rewards are not all equal */
} grpo_group_stats;

#define GRPO_ADV_EPS 1e-6

/* rewards[i] is used only where valid[i]. Writes advantages[i] for every valid episode of a
 * training group ((r - mean) / (std + 1e-6), or r - mean with dr_grpo) and 0 elsewhere.
 * Returns the group's statistics. */
grpo_group_stats grpo_group_advantages(const double *rewards, const bool *valid, size_t n,
                                       bool dr_grpo, double *advantages);
