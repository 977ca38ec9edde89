/* Image name validation (see image_name.h). */
#include "policy/image_name.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static bool part_ok(const char *s, size_t n, bool tag) {
    if (n == 0 || n > 128 || strstr(s, "..") != NULL)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                     (tag && ((c >= 'A' && c <= 'Z') || c == '_'));
        if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-')))
            return false;
    }
    return true;
}

int policy_image_name(const char *in, const char *field, char out[POLICY_IMAGE_NAME_MAX],
                      error_rec *err) {
    if (strcmp(in, "host") == 0) {
        snprintf(out, POLICY_IMAGE_NAME_MAX, "host");
        return 0;
    }
    const char *colon = strchr(in, ':');
    size_t n = colon ? (size_t)(colon - in) : strlen(in);
    const char *tag = colon ? colon + 1 : "latest";
    char name[130];
    if (n >= sizeof(name) || strchr(tag, ':'))
        goto bad;
    memcpy(name, in, n);
    name[n] = 0;
    if (!part_ok(name, n, false) || !part_ok(tag, strlen(tag), true) || strcmp(name, "host") == 0)
        goto bad;
    snprintf(out, POLICY_IMAGE_NAME_MAX, "%s:%s", name, tag);
    return 0;
bad:
    return error_set(err, -EINVAL,
                     "%s: \"%.64s\" is not an image name: expected NAME or NAME:TAG (NAME "
                     "[a-z0-9._-], TAG [A-Za-z0-9_.-], at most 128 each, no \"/\" or \"..\")",
                     field, in);
}
