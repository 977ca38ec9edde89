/* The cost preview (sbx_grpo_preview_compute): GPU and sandbox spend of a planned run. */
#include <sbx_grpo.h>

void sbx_grpo_preview_compute(sbx_grpo_preview *p) {
    double hours = p->steps * p->step_seconds / 3600.0;
    p->gpu_usd = hours * p->gpus * p->gpu_hour_usd;
    p->sandbox_usd = hours * p->sandboxes * p->sandbox_hour_usd;
    p->total_usd = p->gpu_usd + p->sandbox_usd;
    p->sandbox_share = p->total_usd > 0 ? p->sandbox_usd / p->total_usd : 0;
}
