/* format/format_rules.h: the category-rules file format, which says what
 * kind of memory an allocation is from the frames of its stack
 * (docs/categories.md, "Rules over stacks").
 *
 * One rule a line, first match wins:
 *
 *     # comment (also after a rule)
 *     optimizer_state  file=/torch/optim/
 *     gradient         function=(^|\.)backward$
 *     parameter        function="^my model::load"  file=\.py$
 *
 * A rule is a category name (as tdm_category_name writes them) and one or
 * both of function=REGEX and file=REGEX, POSIX extended regular
 * expressions as TIDEMARK_CONF's hide= takes them, unanchored.  A value
 * holding blanks or '#' is written in double quotes (\" and \\ inside).
 * A rule matches a frame when every regex it gives matches (function
 * against the frame's function name, file against its source path), and
 * a stack when one of its frames matches.
 *
 * Here because two layers read the format: the recorder checks a
 * `category_rules=FILE` of TIDEMARK_CONF when the program starts (so a bad
 * file is said then, with its file:line), and the readers apply it.  No
 * state; regexes compiled here are the caller's to free.
 */
#ifndef TDM_FORMAT_FORMAT_RULES_H
#define TDM_FORMAT_FORMAT_RULES_H

#include <regex.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tdm_category_rule {
    uint8_t category;  /* tdm_category */
    uint8_t has_function, has_file;
    regex_t function, file;
    char *where;       /* "rules.txt:3": the file and line it came from */
    char *text;        /* the rule as written, comment and edge blanks dropped */
} tdm_category_rule;

typedef struct tdm_category_rules {
    tdm_category_rule *rule; /* in order: the first that matches wins */
    size_t count, cap;
} tdm_category_rules;

/* Parses `text` (a rules file's content) and appends its rules to *rules;
 * `name` names it in `where` and in errors.  Returns 0, or -1 with `err`
 * holding one line "NAME:LINE: why" (or "NAME: out of memory"); *rules then
 * holds what it held before. */
int tdm__category_rules_parse(tdm_category_rules *rules, const char *text, const char *name,
                              char *err, size_t err_len);
/* Reads the file at `path` and parses it as above ("PATH: No such file or
 * directory" when it cannot be read). */
int tdm__category_rules_load(tdm_category_rules *rules, const char *path, char *err,
                             size_t err_len);
void tdm__category_rules_free(tdm_category_rules *rules);

/* regcomp(REG_EXTENDED | REG_NOSUB) of a pattern a user gave (hide=,
 * --hide/--focus, rules files), after refusing what the C library would
 * expand into gigabytes while compiling it: a repetition of a repetition
 * ("a++", "a{2}*") and repetition counts whose product, over nested
 * groups, passes TDM_REGEX_MAX_EXPANSION.  0, or -1 with the reason in
 * why (regerror's text for a pattern regcomp refuses). */
#define TDM_REGEX_MAX_EXPANSION 10000
int tdm__regex_compile(regex_t *re, const char *pattern, char *why, size_t why_len);

/* Nonzero when rule `r` matches a frame with this function name and file
 * (NULL reads as ""). */
int tdm__category_rule_matches(const tdm_category_rule *r, const char *function,
                               const char *file);

#endif
