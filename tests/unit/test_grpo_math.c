/* GRPO math fixtures: advantages with the Bessel-corrected std, dr_grpo, zero-variance and
 * singleton groups, infrastructure failures excluded from the statistics. */
#include "client/grpo/math.h"
#include "tests/lib/test.h"

#include <math.h>

#define NEAR(a, b) CHECK_MSG(fabs((a) - (b)) < 1e-9, "%s = %.12f, want %.12f", #a, (a), (b))

TEST(grpo_math_basic) {
    /* rewards 1,0,0,1: mean 0.5, sample std sqrt(1/3) */
    double r[] = {1, 0, 0, 1}, adv[4];
    bool v[] = {1, 1, 1, 1};
    grpo_group_stats st = grpo_group_advantages(r, v, 4, false, adv);
    double sd = sqrt(1.0 / 3.0);
    CHECK(st.trains);
    CHECK_EQ(st.n_valid, 4);
    NEAR(st.mean, 0.5);
    NEAR(st.std, sd);
    NEAR(adv[0], 0.5 / (sd + 1e-6));
    NEAR(adv[1], -0.5 / (sd + 1e-6));
    NEAR(adv[0] + adv[1] + adv[2] + adv[3], 0.0);
}

TEST(grpo_math_uneven) {
    /* rewards 1, 0.4, 0.15, 0: mean 0.3875; std with n-1 */
    double r[] = {1, 0.4, 0.15, 0}, adv[4];
    bool v[] = {1, 1, 1, 1};
    grpo_group_stats st = grpo_group_advantages(r, v, 4, false, adv);
    double m = 1.55 / 4, ss = 0;
    for (int i = 0; i < 4; i++)
        ss += (r[i] - m) * (r[i] - m);
    double sd = sqrt(ss / 3);
    NEAR(st.std, sd);
    for (int i = 0; i < 4; i++)
        NEAR(adv[i], (r[i] - m) / (sd + 1e-6));
}

TEST(grpo_math_dr_grpo) {
    double r[] = {1, 0, 0, 0}, adv[4];
    bool v[] = {1, 1, 1, 1};
    grpo_group_stats st = grpo_group_advantages(r, v, 4, true, adv);
    CHECK(st.trains);
    NEAR(adv[0], 0.75);
    NEAR(adv[1], -0.25);
}

TEST(grpo_math_zero_variance) {
    double r[] = {0.4, 0.4, 0.4}, adv[3] = {9, 9, 9};
    bool v[] = {1, 1, 1};
    grpo_group_stats st = grpo_group_advantages(r, v, 3, false, adv);
    CHECK(!st.trains);
    NEAR(st.std, 0.0);
    NEAR(adv[0], 0.0);
    NEAR(adv[2], 0.0);
    double ones[] = {1, 1};
    bool v2[] = {1, 1};
    CHECK(!grpo_group_advantages(ones, v2, 2, true, adv).trains);
}

TEST(grpo_math_singleton) {
    double r[] = {1}, adv[1] = {9};
    bool v[] = {1};
    grpo_group_stats st = grpo_group_advantages(r, v, 1, false, adv);
    CHECK(!st.trains);
    CHECK_EQ(st.n_valid, 1);
    NEAR(adv[0], 0.0);
    /* one valid episode left after failures is a singleton too */
    double r2[] = {1, 0, 0}, adv2[3];
    bool v2[] = {1, 0, 0};
    CHECK(!grpo_group_advantages(r2, v2, 3, false, adv2).trains);
}

TEST(grpo_math_failures_excluded) {
    /* the invalid episodes' "rewards" (garbage) must not move the statistics */
    double r[] = {1, 0, 123, -7, 1, 0}, adv[6];
    bool v[] = {1, 1, 0, 0, 1, 1};
    grpo_group_stats st = grpo_group_advantages(r, v, 6, false, adv);
    double ref_r[] = {1, 0, 1, 0}, ref_adv[4];
    bool ref_v[] = {1, 1, 1, 1};
    grpo_group_stats ref = grpo_group_advantages(ref_r, ref_v, 4, false, ref_adv);
    CHECK(st.trains);
    CHECK_EQ(st.n_valid, 4);
    NEAR(st.mean, ref.mean);
    NEAR(st.std, ref.std);
    NEAR(adv[0], ref_adv[0]);
    NEAR(adv[1], ref_adv[1]);
    NEAR(adv[2], 0.0);
    NEAR(adv[3], 0.0);
    /* all failed: nothing */
    bool none[] = {0, 0, 0, 0, 0, 0};
    st = grpo_group_advantages(r, none, 6, false, adv);
    CHECK(!st.trains);
    CHECK_EQ(st.n_valid, 0);
}

TEST(grpo_math_non_finite) {
    /* statistics that overflow (rewards past any sane range) train nothing, advantages 0 */
    double r[] = {1e308, 0, -1e308, 1e308}, adv[4];
    bool v[] = {1, 1, 1, 1};
    grpo_group_stats st = grpo_group_advantages(r, v, 4, false, adv);
    CHECK(!st.trains);
    for (int i = 0; i < 4; i++)
        CHECK(adv[i] == 0.0);
}
