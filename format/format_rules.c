/* format/format_rules.c: the category-rules file format (format_rules.h):
 * a line-by-line parser that names the file and line of every error, and
 * the frame matcher.  No state. */
#include "format_rules.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tidemark.h"

/* Longest rules file read: rules are a handful of lines; anything larger
 * is not a rules file. */
#define RULES_FILE_MAX (1u << 20)

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

static void say(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
}

static void rule_free(tdm_category_rule *r)
{
    if (r->has_function)
        regfree(&r->function);
    if (r->has_file)
        regfree(&r->file);
    free(r->where);
    free(r->text);
    memset(r, 0, sizeof *r);
}

/* Reads one word at *p (up to a blank, '\n' or the end), or a double-quoted
 * value with \" and \\ escapes when `quoted_ok` and it starts with '"'.
 * Returns a malloc'd copy, or NULL with *why set. */
static char *read_word(const char **p, int quoted_ok, const char **why)
{
    const char *s = *p;
    size_t cap = strcspn(s, "\n") + 1, n = 0;
    char *out = malloc(cap);
    if (!out) {
        *why = "out of memory";
        return NULL;
    }
    if (quoted_ok && *s == '"') {
        for (s++; *s != '"'; s++) {
            if (!*s || *s == '\n') {
                free(out);
                *why = "a quoted value has no closing '\"'";
                return NULL;
            }
            if (*s == '\\' && (s[1] == '"' || s[1] == '\\'))
                s++;
            out[n++] = *s;
        }
        s++;
        if (*s && *s != '\n' && !is_blank(*s)) {
            free(out);
            *why = "text right after a closing '\"'";
            return NULL;
        }
    } else {
        while (*s && *s != '\n' && !is_blank(*s))
            out[n++] = *s++;
    }
    out[n] = '\0';
    *p = s;
    return out;
}

/* The bracket expression at p ('['): where it ends (past its ']'). */
static const char *skip_bracket(const char *p)
{
    p++;
    if (*p == '^')
        p++;
    if (*p == ']')
        p++; /* a leading ']' is a member */
    while (*p && *p != ']') {
        if (p[0] == '[' && (p[1] == ':' || p[1] == '.' || p[1] == '=')) {
            char end = p[1];
            const char *q = strchr(p + 2, end);
            p = q && q[1] == ']' ? q + 2 : p + 1;
        } else {
            p++;
        }
    }
    return *p ? p + 1 : p;
}

/* 0 when `pattern` compiles to a tree of bounded size; else -1 and why.
 * Weights: an atom 1; a group the sum of its atoms; "+" doubles what it
 * follows (the library copies it), "{m,n}" multiplies it by max(m,n)+1. */
static int regex_bounded(const char *pattern, char *why, size_t why_len)
{
    enum { DEPTH = 64 };
    uint64_t group[DEPTH], last = 0;
    int depth = 0, after_rep = 0;
    group[0] = 0;
    for (const char *p = pattern; *p;) {
        uint64_t factor = 0, atom = 0;
        if (*p == '*' || *p == '?' || *p == '+') {
            factor = *p == '+' ? 2 : 1;
            p++;
        } else if (*p == '{' && p[1] >= '0' && p[1] <= '9') {
            char *end;
            unsigned long m = strtoul(p + 1, &end, 10), n = m;
            if (*end == ',')
                n = end[1] >= '0' && end[1] <= '9' ? strtoul(end + 1, &end, 10) : m, end++;
            if (*end != '}')
                return 0; /* regcomp says what is wrong */
            factor = (m > n ? m : n) + 1;
            p = end + 1;
        } else if (*p == '(') {
            if (depth + 1 >= DEPTH) {
                snprintf(why, why_len, "groups nested more than %d deep", DEPTH - 1);
                return -1;
            }
            group[++depth] = 0;
            after_rep = 0;
            p++;
            continue;
        } else if (*p == ')' && depth > 0) {
            atom = group[depth--];
            atom = atom ? atom : 1;
            p++;
        } else if (*p == '|') {
            after_rep = 0;
            p++;
            continue;
        } else if (*p == '[') {
            atom = 1;
            p = skip_bracket(p);
        } else {
            atom = 1;
            p += *p == '\\' && p[1] ? 2 : 1;
        }
        if (factor) {
            if (after_rep) {
                snprintf(why, why_len, "stacked repetition (a repeat of a repeat, such as "
                                       "'a++' or 'a{2}*') is not supported");
                return -1;
            }
            after_rep = 1;
            if (factor > TDM_REGEX_MAX_EXPANSION)
                factor = TDM_REGEX_MAX_EXPANSION + 1;
            group[depth] += last * (factor - 1);
            last *= factor;
        } else {
            after_rep = 0;
            group[depth] += atom;
            last = atom;
        }
        if (group[depth] > TDM_REGEX_MAX_EXPANSION || last > TDM_REGEX_MAX_EXPANSION) {
            snprintf(why, why_len, "too large once its repetitions are expanded "
                                   "(more than %d pieces)", TDM_REGEX_MAX_EXPANSION);
            return -1;
        }
    }
    return 0;
}

int tdm__regex_compile(regex_t *re, const char *pattern, char *why, size_t why_len)
{
    if (regex_bounded(pattern, why, why_len) != 0)
        return -1;
    int rc = regcomp(re, pattern, REG_EXTENDED | REG_NOSUB);
    if (rc != 0) {
        regerror(rc, re, why, why_len);
        return -1;
    }
    return 0;
}

static int compile(regex_t *re, const char *key, const char *value, char *why, size_t len)
{
    if (!value[0]) {
        say(why, len, "%s= is empty", key);
        return -1;
    }
    char msg[128];
    if (tdm__regex_compile(re, value, msg, sizeof msg) != 0) {
        say(why, len, "%s='%s' is not a regular expression: %s", key, value, msg);
        return -1;
    }
    return 0;
}

static int category_of(const char *word)
{
    for (int c = 0; c < TDM_CATEGORY_COUNT_; c++)
        if (strcmp(word, tdm_category_name((tdm_category)c)) == 0)
            return c;
    return -1;
}

/* Parses the rule on the line starting at `line` into *r (zeroed).
 * Returns 1 for a rule, 0 for a blank or comment line, -1 with `why`. */
static int parse_line(const char *line, tdm_category_rule *r, char *why, size_t len)
{
    const char *p = line, *bad = NULL;
    while (is_blank(*p))
        p++;
    if (!*p || *p == '\n' || *p == '#')
        return 0;
    char *word = read_word(&p, 0, &bad);
    if (!word) {
        say(why, len, "%s", bad);
        return -1;
    }
    int cat = category_of(word);
    if (cat < 0) {
        if (strchr(word, '='))
            say(why, len, "a rule starts with its category, not '%s'", word);
        else
            say(why, len,
                "'%s' is not a category (parameter, optimizer_state, gradient, "
                "activation, input, temporary, unknown)", word);
        free(word);
        return -1;
    }
    free(word);
    r->category = (uint8_t)cat;
    const char *end = line;
    for (;;) {
        end = p;
        while (is_blank(*p))
            p++;
        if (!*p || *p == '\n' || *p == '#')
            break;
        const char *key = p;
        size_t klen = 0;
        while (key[klen] && key[klen] != '=' && key[klen] != '\n' && !is_blank(key[klen]))
            klen++;
        int is_fn = klen == 8 && strncmp(key, "function", 8) == 0;
        int is_file = klen == 4 && strncmp(key, "file", 4) == 0;
        if (key[klen] != '=' || (!is_fn && !is_file)) {
            say(why, len, "'%.*s' is not function=REGEX or file=REGEX",
                (int)strcspn(key, " \t\r\n"), key);
            return -1;
        }
        if ((is_fn && r->has_function) || (is_file && r->has_file)) {
            say(why, len, "%s= given twice", is_fn ? "function" : "file");
            return -1;
        }
        p = key + klen + 1;
        char *value = read_word(&p, 1, &bad);
        if (!value) {
            say(why, len, "%s", bad);
            return -1;
        }
        int rc = compile(is_fn ? &r->function : &r->file, is_fn ? "function" : "file", value,
                         why, len);
        free(value);
        if (rc != 0)
            return -1;
        if (is_fn)
            r->has_function = 1;
        else
            r->has_file = 1;
    }
    if (!r->has_function && !r->has_file) {
        say(why, len, "a rule needs function=REGEX, file=REGEX or both");
        return -1;
    }
    const char *b = line;
    while (is_blank(*b))
        b++;
    r->text = strndup(b, (size_t)(end - b));
    if (!r->text) {
        say(why, len, "out of memory");
        return -1;
    }
    return 1;
}

/* Room for one more rule: 0, or -1 when out of memory. */
static int grow(tdm_category_rules *rules)
{
    if (rules->count < rules->cap)
        return 0;
    size_t cap = rules->cap ? 2 * rules->cap : 16;
    tdm_category_rule *g = realloc(rules->rule, cap * sizeof *g);
    if (!g)
        return -1;
    rules->rule = g;
    rules->cap = cap;
    return 0;
}

int tdm__category_rules_parse(tdm_category_rules *rules, const char *text, const char *name,
                              char *err, size_t err_len)
{
    size_t before = rules->count;
    unsigned lineno = 0;
    for (const char *line = text; *line;) {
        lineno++;
        tdm_category_rule r;
        memset(&r, 0, sizeof r);
        char why[512];
        int rc = parse_line(line, &r, why, sizeof why);
        if (rc > 0) {
            char where[64];
            snprintf(where, sizeof where, ":%u", lineno);
            size_t nlen = strlen(name);
            r.where = malloc(nlen + strlen(where) + 1);
            if (r.where) {
                memcpy(r.where, name, nlen);
                strcpy(r.where + nlen, where);
            }
            if (!r.where || grow(rules) != 0) {
                rc = -1;
                snprintf(why, sizeof why, "out of memory");
            } else {
                rules->rule[rules->count++] = r;
            }
        }
        if (rc < 0) {
            rule_free(&r);
            say(err, err_len, "%s:%u: %s", name, lineno, why);
            while (rules->count > before)
                rule_free(&rules->rule[--rules->count]);
            return -1;
        }
        const char *nl = strchr(line, '\n');
        line = nl ? nl + 1 : line + strlen(line);
    }
    return 0;
}

int tdm__category_rules_load(tdm_category_rules *rules, const char *path, char *err,
                             size_t err_len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        say(err, err_len, "%s: %s", path, strerror(errno));
        return -1;
    }
    char *text = malloc(RULES_FILE_MAX + 1);
    size_t n = text ? fread(text, 1, RULES_FILE_MAX + 1, f) : 0;
    int failed = text && ferror(f);
    int e = failed ? errno : 0; /* the cause, e.g. a directory's EISDIR */
    fclose(f);
    if (!text || failed || n > RULES_FILE_MAX || memchr(text, '\0', n)) {
        say(err, err_len, "%s: %s", path,
            !text ? "out of memory"
            : failed ? (e ? strerror(e) : "read error")
            : n > RULES_FILE_MAX ? "larger than 1 MiB: not a rules file"
                                 : "holds a NUL byte: not a rules file");
        free(text);
        return -1;
    }
    text[n] = '\0';
    int rc = tdm__category_rules_parse(rules, text, path, err, err_len);
    free(text);
    return rc;
}

void tdm__category_rules_free(tdm_category_rules *rules)
{
    for (size_t i = 0; i < rules->count; i++)
        rule_free(&rules->rule[i]);
    free(rules->rule);
    memset(rules, 0, sizeof *rules);
}

int tdm__category_rule_matches(const tdm_category_rule *r, const char *function,
                               const char *file)
{
    if (r->has_function && regexec(&r->function, function ? function : "", 0, NULL, 0) != 0)
        return 0;
    if (r->has_file && regexec(&r->file, file ? file : "", 0, NULL, 0) != 0)
        return 0;
    return 1;
}
