/* The price table and cost arithmetic: what a sandbox of a given size costs per hour and how
 * much it has cost after running for some time. Pure functions, no state. */
#pragma once

#include <stdint.h>

typedef struct policy_price {
    double vcpu_hour_usd; /* dollars per vCPU per hour */
    double gib_hour_usd;  /* dollars per GiB of memory per hour */
    double gpu_hour_usd;  /* dollars per whole GPU per hour (default 2.00) */
} policy_price;

/* The default table: 1 vCPU + 2 GiB = $0.0179/h (0.0119 per vCPU-hour, 0.0030 per GiB-hour). */
policy_price policy_price_default(void);
/* Dollars per hour for cpu vCPUs and mem_bytes of memory; linear in both. */
double policy_price_per_hour(const policy_price *price, double cpu, uint64_t mem_bytes);
/* Dollars per hour of gpus whole GPUs (added to the above for a GPU sandbox). */
double policy_price_gpu_per_hour(const policy_price *price, unsigned gpus);
/* Dollars spent after elapsed_ms of wall-clock time. */
double policy_cost_usd(const policy_price *price, double cpu, uint64_t mem_bytes,
                       uint64_t elapsed_ms);
/* Milliseconds until the cost reaches limit_usd (UINT64_MAX if the price is zero). */
uint64_t policy_cost_time_to_limit_ms(const policy_price *price, double cpu, uint64_t mem_bytes,
                                      double limit_usd);
