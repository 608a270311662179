/* format/common.h: text helpers of the format library (format/common.c)
 * that every layer and the command-line tool share, for messages.
 *
 * "Did you mean": TIDEMARK_CONF's unknown keys (runtime/config.c) and the
 * tool's subcommands and options name the closest known word; control
 * characters in messages are written as \xNN.  Pure functions: no
 * allocation, no globals, any thread.
 */
#ifndef TDM_FORMAT_COMMON_H
#define TDM_FORMAT_COMMON_H

#include <stddef.h>

/* Longest string, in bytes, whose edit distance is measured. */
#define TDM__EDIT_DISTANCE_MAX 128

/* The Levenshtein distance of `a` and `b` (insertions, deletions and
 * substitutions of one byte each; case counts).  SIZE_MAX when either is
 * longer than TDM__EDIT_DISTANCE_MAX. */
size_t tdm__edit_distance(const char *a, const char *b);

/* The candidate closest to `word` if it is within 2 edits, else NULL.
 * Case is no edit here ("DUMP" is 0 from "dump"); among equally close
 * candidates the one closer in exact case wins, then the first.  NULL
 * entries of `candidates` are skipped; a NULL word matches nothing. */
const char *tdm__did_you_mean(const char *word, const char *const *candidates, size_t n);

/* Writes byte `b` as the four characters \xNN (lower-case hex) at `out`,
 * as every message writes a control character; returns 4. */
static inline size_t tdm__hex_escape(char *out, unsigned char b)
{
    static const char hex[] = "0123456789abcdef";
    out[0] = '\\';
    out[1] = 'x';
    out[2] = hex[b >> 4];
    out[3] = hex[b & 15];
    return 4;
}

/* The one escaping of text tidemark prints (messages, summaries, file
 * names, configuration values) so that no input can drive a terminal:
 * copies in[0, n) into out (at most `cap` bytes), writing as \xNN each
 * byte of a C0 control (but newline and tab when `keep_lines`), DEL, a
 * UTF-8-encoded C1 control (U+0080..U+009F) and every byte that is not
 * part of valid UTF-8.  Stops before a sequence whose escaped form does
 * not fit, and before one the input may end inside of (an incomplete
 * UTF-8 sequence at its end) unless `final`.  Returns the bytes written;
 * *used gets the input bytes taken. */
size_t tdm__escape_text(const char *in, size_t n, char *out, size_t cap, int keep_lines,
                        int final, size_t *used);

#endif
