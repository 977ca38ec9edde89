/* SandboxFusion's languages and the checks of its request bodies (api/sf_request.c), below
 * api/sandboxfusion.c that checks the requests and api/sf_job.c that runs the jobs. */
#pragma once

#include "sandboxd/core/sandbox.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* One language: its source file, an optional compile command (sh -c in /workspace), the run
 * command (an argv, NULL-terminated, in /workspace: no shell) and the programs the image must
 * have. */
typedef struct sf_lang {
    const char *name, *file, *compile;
    const char *run[8];
    const char *need[3];
    bool classpath; /* java: "." and the request's files named *.jar as -cp (compile's $1) */
} sf_lang;

/* The python3 language (what /run_jupyter's kernel needs too). */
const sf_lang *sd_sf_lang_python(void);
/* The argv that compiles the request's code (sh -c with the language's compile) and the one that
 * runs it; NULL when out of memory. */
json_t *sd_sf_compile_argv(const sf_lang *l, json_t *body);
json_t *sd_sf_run_argv(const sf_lang *l, json_t *body);
/* Fields the daemon does not know, or knows and does not implement ("args" other than []):
 * -EINVAL naming the field (a 400, as on every endpoint). */
int sd_sf_check_known(json_t *b, bool jupyter, error_rec *err);
/* A files entry SandboxFusion's restore_files skips, as it does: a path with IGNORE_THIS_FILE
 * anywhere in it is neither decoded nor written. */
bool sd_sf_file_ignored(const char *path);
/* Checks the fields both endpoints share (files' base64, a memory_limit_MB the host can give);
 * NULL when fine, else what is wrong. Here and below, a numeric field given as SandboxFusion's
 * pydantic takes it (1024.0 for an int, "5" for a float, true) is replaced in b by its number. */
const char *sd_sf_check_common(json_t *b, uint64_t host_memory);
/* /run_code's fields: NULL when fine (*ret_lang the language, or *ret_refusal the SandboxError
 * message for a language SandboxFusion knows and this node does not run), else what is wrong. */
const char *sd_sf_check_run_code(json_t *b, const char **ret_refusal, const sf_lang **ret_lang);
/* /run_jupyter's fields: NULL when fine, else what is wrong. */
const char *sd_sf_check_jupyter(json_t *b);
/* The toolchain a language needs, missing from the daemon's default image (NULL: none missing):
 * refused as SandboxError. */
const char *sd_sf_missing_program(sd_daemon *d, const sf_lang *l);
/* b's number at key, else dflt. */
double sd_sf_num_or(json_t *b, const char *key, double dflt);
