/* GRPO group statistics (see math.h): mean, Bessel-corrected std, advantages. */
#include "client/grpo/math.h"

#include <math.h>

static void group_moments(const double *r, const bool *valid, size_t n, grpo_group_stats *st) {
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        if (valid[i]) {
            sum += r[i];
            st->n_valid++;
        }
    if (st->n_valid == 0)
        return;
    st->mean = sum / (double)st->n_valid;
    if (st->n_valid < 2)
        return;
    double ss = 0;
    for (size_t i = 0; i < n; i++)
        if (valid[i])
            ss += (r[i] - st->mean) * (r[i] - st->mean);
    st->std = sqrt(ss / (double)(st->n_valid - 1));
}

grpo_group_stats grpo_group_advantages(const double *rewards, const bool *valid, size_t n,
                                       bool dr_grpo, double *advantages) {
    grpo_group_stats st = {0};
    group_moments(rewards, valid, n, &st);
    /* Zero variance means every valid reward is the same value: nothing to learn from. */
    bool all_equal = true;
    for (size_t i = 0; i < n; i++)
        if (valid[i] && rewards[i] != st.mean && fabs(rewards[i] - st.mean) > 1e-12)
            all_equal = false;
    /* non-finite statistics (rewards out of any sane range) train nothing */
    st.trains = st.n_valid >= 2 && !all_equal && isfinite(st.mean) && isfinite(st.std);
    for (size_t i = 0; i < n; i++) {
        advantages[i] = 0;
        if (!st.trains || !valid[i])
            continue;
        double d = rewards[i] - st.mean;
        advantages[i] = dr_grpo ? d : d / (st.std + GRPO_ADV_EPS);
    }
    return st;
}
