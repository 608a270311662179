/* viewer-export/model/names.c: names for display (names.h).  The
 * demangler is libstdc++'s, linked into the tool: a well-kept demangler
 * that follows the Itanium C++ ABI as the compiler does.  No state, no
 * locks. */
#include "names.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* libstdc++'s demangler (cxxabi.h, C++ only): a malloc'd name, or NULL
 * with *status nonzero when `mangled` is no C++ name. */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

static const char *const clone_tokens[] = {
    "isra", "constprop", "part", "cold", "lto_priv", "localalias", "clone", "llvm", "__uniq",
};

static int is_clone_token(const char *s, size_t n)
{
    for (size_t i = 0; i < sizeof clone_tokens / sizeof clone_tokens[0]; i++)
        if (strlen(clone_tokens[i]) == n && memcmp(clone_tokens[i], s, n) == 0)
            return 1;
    return 0;
}

/* Nonzero when `s` (starting at a '.') is only clone tokens and numbers. */
static int only_clone_suffixes(const char *s)
{
    int tokens = 0;
    while (*s) {
        if (*s != '.')
            return 0;
        s++;
        size_t n = 0;
        while (s[n] && s[n] != '.')
            n++;
        if (n == 0)
            return 0;
        int digits = 1;
        for (size_t i = 0; i < n; i++)
            digits &= isdigit((unsigned char)s[i]) != 0;
        if (digits) {
            if (!tokens) /* a number only after a token: "v1.2" is a name */
                return 0;
        } else if (is_clone_token(s, n)) {
            tokens++;
        } else {
            return 0;
        }
        s += n;
    }
    return tokens > 0;
}

size_t tdm__name_clone_suffix_start(const char *name)
{
    size_t len = strlen(name);
    for (size_t i = 1; i < len; i++)
        if (name[i] == '.' && only_clone_suffixes(name + i))
            return i;
    return len;
}

char *tdm__name_for_display(const char *raw, int *oom)
{
    *oom = 0;
    if (!raw || !raw[0])
        return NULL;
    size_t keep = tdm__name_clone_suffix_start(raw);
    int mangled = raw[0] == '_' && raw[1] == 'Z';
    if (keep == strlen(raw) && !mangled)
        return NULL;
    char *base = strndup(raw, keep);
    if (!base) {
        *oom = 1;
        return NULL;
    }
    if (mangled) {
        int status = 0;
        char *demangled = __cxa_demangle(base, NULL, NULL, &status);
        if (demangled) {
            free(base);
            return demangled;
        }
        if (status == -1) { /* the demangler ran out of memory */
            free(base);
            *oom = 1;
            return NULL;
        }
    }
    if (keep == strlen(raw)) { /* not a C++ name after all, and no suffix */
        free(base);
        return NULL;
    }
    return base;
}
