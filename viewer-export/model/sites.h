/* viewer-export/model/sites.h: naming an allocation site by its frames,
 * the same way in the summary, the gate reports, the diff and JUnit:
 * frames of tidemark itself are skipped, the rest written as "function
 * (file.c:123)".  No state, no locks. */
#ifndef TDM_VIEWER_SITES_H
#define TDM_VIEWER_SITES_H

#include <stdint.h>
#include <stdio.h>

#include "snap_model.h"

/* Nonzero for a frame of tidemark itself (tdm_* functions, libtidemark*
 * modules, the Python frames of tidemark.py, tidemark_torch.py,
 * tidemark_tensors.py and python/autostart): sites are shown, and
 * matched, from the first other frame, and a site shown by its Python
 * frames leaves tidemark's out wherever they are. */
int tdm__site_frame_is_tidemark(const tdm_snap_frame *f);
/* The index of the first frame a site of stack `stack_id` is shown from:
 * with Python frames (format 1.2), the innermost user Python frame (the
 * innermost outside site-packages, dist-packages and the standard library;
 * else the innermost Python frame), the site then shown by its Python
 * frames only; else the first frame that is not tidemark's (0 when all
 * are); the stack's depth when it has none. */
uint32_t tdm__site_first_frame(const tdm_snap *s, uint32_t stack_id);
/* The frame shown after frame `i` of a site of stack `stack_id` (its
 * depth after the last): the next one, or the next Python one when the
 * site is shown by its Python frames. */
uint32_t tdm__site_next_frame(const tdm_snap *s, uint32_t stack_id, uint32_t i);
/* Nonzero when a site of stack `stack_id` is shown by its Python frames. */
int tdm__site_frame_is_python_start(const tdm_snap *s, uint32_t stack_id);
/* With `on`, sites of stacks with Python frames are shown, and matched,
 * by all their frames, native ones merged in (the C++ below the Python
 * call, the interpreter's between Python frames), as for any stack; by
 * default (0) by their Python frames.  Set once, before snapshots are
 * read (the command line's --native-frames). */
void tdm__site_show_native_frames(int on);
/* Nonzero for a Python frame (kind TDM_FRAME_PYTHON). */
int tdm__site_frame_is_python(const tdm_snap_frame *f);
/* "function (file.c:123)", or "0x1234 (module)" when unsymbolized. */
void tdm__site_format_frame(char *buf, size_t len, const tdm_snap_frame *f);
/* Frame `i` of stack `stack_id` as tdm__site_format_frame writes it, or
 * "(frame N missing)" when the stack names a frame the table lacks. */
void tdm__site_format_stack_frame(char *buf, size_t len, const tdm_snap *s, uint32_t stack_id,
                                  uint32_t i);
/* Prints up to `frames` frames of a site: the first on the current line,
 * the others on their own lines after `indent` blanks. */
void tdm__site_print_frames(FILE *out, const tdm_snap *s, uint32_t stack_id,
                            unsigned frames, int indent);
/* A key naming a site by its symbolized frames (function, file's base
 * name, line; module base name for unsymbolized frames), tidemark's own
 * frames left out, so that the same code path in two files gets the same
 * key whatever the stack ids and load addresses.  malloc'd; NULL on
 * allocation failure. */
char *tdm__site_key(const tdm_snap *s, uint32_t stack_id);
/* The functions of a site, innermost first, "f;g;main;", a function
 * repeated right after itself written once: what two builds of the same
 * code still agree on when lines moved.  malloc'd; NULL when out of
 * memory. */
char *tdm__site_chain(const tdm_snap *s, uint32_t stack_id);
/* Nonzero when two chains may name the same site in two builds: equal,
 * or, when `loose`, the functions of one all found in the other in the
 * same order (the other build inlined or tail-called some away). */
int tdm__site_chains_match(const char *a, const char *b, int loose);

#endif
