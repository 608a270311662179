/* runtime/config_ranks.c: the `ranks` key of TIDEMARK_CONF, which ranks of a
 * multi-rank job record (`ranks=0,8-15`, `ranks=local:0`), and the test
 * autoinit.c applies at load time.
 *
 * Invariants: the parser accepts exactly `all`, or one to
 * TDM__CONF_RANKS_MAX ranks and inclusive ranges A-B (A <= B <= INT32_MAX)
 * separated by commas, optionally inside [...], optionally after `local:`;
 * it never prints, allocates or touches globals (config.c's rule).  A
 * process with no rank in its environment is rank 0 and local rank 0 here,
 * exactly as the dump template's %r and %l name it, so the file called r0
 * always comes from a process that `ranks=0` selects.
 *
 * Lock: none; pure functions over caller memory.
 */
#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Digits at [*p, e) into *out (at most INT32_MAX), moving *p past them. */
static int number(const char **p, const char *e, int32_t *out)
{
    int64_t v = 0;
    const char *s = *p;
    if (s >= e || !isdigit((unsigned char)*s))
        return -1;
    for (; s < e && isdigit((unsigned char)*s); s++) {
        v = v * 10 + (*s - '0');
        if (v > INT32_MAX)
            return -1;
    }
    *p = s;
    *out = (int32_t)v;
    return 0;
}

/* One item, [b, e) trimmed: "N" or "A-B", blanks allowed around '-'. */
static int range_item(const char *b, const char *e, int32_t *first, int32_t *last)
{
    if (number(&b, e, first) != 0)
        return -1;
    *last = *first;
    while (b < e && tdm__config_is_blank(*b))
        b++;
    if (b < e && *b == '-') {
        for (b++; b < e && tdm__config_is_blank(*b); b++)
            ;
        if (number(&b, e, last) != 0)
            return -1;
    }
    return b == e && *first <= *last ? 0 : -1;
}

int tdm__config_parse_ranks(const tdm__conf_key *key, const char *value,
                            void *field, char *why, size_t why_len)
{
    tdm__conf_ranks r;
    memset(&r, 0, sizeof r);
    if (strcasecmp(value, "all") == 0) {
        memcpy(field, &r, sizeof r);
        return 0;
    }
    const char *p = value, *stop = value + strlen(value);
    if (strncasecmp(p, "local:", 6) == 0) {
        r.local = 1;
        p += 6;
    }
    while (p < stop && tdm__config_is_blank(*p))
        p++;
    if (p < stop && *p == '[' && stop[-1] == ']') {
        p++;
        stop--;
    }
    while (p < stop) {
        const char *b = p, *e = memchr(p, ',', (size_t)(stop - p));
        if (!e)
            e = stop;
        p = e < stop ? e + 1 : e;
        tdm__config_trim(&b, &e);
        int32_t first, last;
        if (range_item(b, e, &first, &last) != 0) {
            snprintf(why, why_len,
                     "'%.*s' is not a rank or a range A-B with A <= B; expected all, or "
                     "a list such as 0,8-15 or local:0",
                     (int)(e - b > 32 ? 32 : e - b), b);
            return -1;
        }
        if (r.count == TDM__CONF_RANKS_MAX) {
            snprintf(why, why_len, "at most %d ranks or ranges", TDM__CONF_RANKS_MAX);
            return -1;
        }
        r.range[r.count].first = first;
        r.range[r.count].last = last;
        r.count++;
    }
    if (r.count == 0) {
        snprintf(why, why_len, "no rank listed; expected %s", key->values);
        return -1;
    }
    memcpy(field, &r, sizeof r);
    return 0;
}

int tdm__config_rank_selected(const tdm__config *cfg, int32_t rank, int32_t local_rank)
{
    const tdm__conf_ranks *r = &cfg->ranks;
    if (r->count == 0)
        return 1;
    int32_t who = r->local ? local_rank : rank;
    if (who < 0)
        who = 0;
    for (unsigned i = 0; i < r->count && i < TDM__CONF_RANKS_MAX; i++)
        if (who >= r->range[i].first && who <= r->range[i].last)
            return 1;
    return 0;
}
