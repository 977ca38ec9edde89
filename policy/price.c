/* Price table and cost arithmetic (see price.h). */
#include "policy/price.h"

#include <math.h>

#define GIB 1073741824.0

policy_price policy_price_default(void) {
    return (policy_price){.vcpu_hour_usd = 0.0119, .gib_hour_usd = 0.0030, .gpu_hour_usd = 2.00};
}

double policy_price_per_hour(const policy_price *price, double cpu, uint64_t mem_bytes) {
    return price->vcpu_hour_usd * cpu + price->gib_hour_usd * ((double)mem_bytes / GIB);
}

double policy_price_gpu_per_hour(const policy_price *price, unsigned gpus) {
    return price->gpu_hour_usd * gpus;
}

double policy_cost_usd(const policy_price *price, double cpu, uint64_t mem_bytes,
                       uint64_t elapsed_ms) {
    return policy_price_per_hour(price, cpu, mem_bytes) * ((double)elapsed_ms / 3600000.0);
}

uint64_t policy_cost_time_to_limit_ms(const policy_price *price, double cpu, uint64_t mem_bytes,
                                      double limit_usd) {
    double per_hour = policy_price_per_hour(price, cpu, mem_bytes);
    if (per_hour <= 0)
        return UINT64_MAX;
    double ms = ceil(limit_usd / per_hour * 3600000.0);
    return ms >= 1.8e19 ? UINT64_MAX : (uint64_t)ms;
}
