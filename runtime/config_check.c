/* runtime/config_check.c: checking a TIDEMARK_CONF text before anything
 * changes (the constructor and tdm_conf_check run the same checks), and
 * the help text.  Applying it is autoinit.c's. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "procinfo.h"
#include "tidemark.h"

int tdm__config_blank(const char *s)
{
    for (; *s; s++)
        if (!strchr(" \t\n\r\v\f", *s))
            return 0;
    return 1;
}

/* The device line, for a configuration the allocator refused with st. */
void tdm__config_device_error(char *err, size_t err_len, const tdm__config *cfg,
                               tdm_status st)
{
    snprintf(err, err_len,
             "tidemark: TIDEMARK_CONF: cannot set up device %s (%d x %llu "
             "bytes, alloc_mode %s): %s; recording is off",
             tdm__vendor_name(cfg->alloc.device_kind), cfg->alloc.device_count,
             (unsigned long long)cfg->alloc.device_capacity, cfg->alloc.mode,
             tdm_strerror(st));
}

/* See config.h. */
tdm_status tdm__config_prepare(const char *text, tdm__config *cfg, char *tmpl, uint64_t start_us,
                               char *err, size_t err_len)
{
    if (tdm__config_parse(text, cfg, err, err_len) != TDM_OK)
        return TDM_BAD_CONFIG;
    if (cfg->help)
        return TDM_OK;
    char probe[TDM__CONF_PATH_MAX];
    if (tdm__dump_template_absolute(cfg->dump, tmpl, TDM__CONF_PATH_MAX) != 0 ||
        tdm__dump_path_for_process(tmpl, start_us, probe, sizeof probe) != TDM_OK) {
        snprintf(err, err_len,
                 "tidemark: TIDEMARK_CONF: dump path '%s' is too long once expanded; "
                 "recording is off", cfg->dump);
        return TDM_BAD_CONFIG;
    }
    tdm_status st = tdm__alloc_config_check(&cfg->alloc);
    if (st != TDM_OK) {
        tdm__config_device_error(err, err_len, cfg, st);
        return st;
    }
    return TDM_OK;
}

tdm_status tdm_conf_check(const char *conf, char *message, size_t message_len)
{
    if (message && message_len)
        message[0] = '\0';
    if (!conf || tdm__config_blank(conf))
        return TDM_OK;
    /* 13 KiB and more: off the caller's stack. */
    struct {
        tdm__config cfg;
        char tmpl[TDM__CONF_PATH_MAX];
        char err[TDM_CONF_MESSAGE_MAX];
    } *w = malloc(sizeof *w);
    if (!w)
        return TDM_HOST_OUT_OF_MEMORY;
    w->err[0] = '\0';
    tdm_status st = tdm__config_prepare(conf, &w->cfg, w->tmpl, tdm__now_us(), w->err, sizeof w->err);
    if (st != TDM_OK && message && message_len)
        snprintf(message, message_len, "%s", w->err);
    free(w);
    return st;
}

void tdm__config_print_help(void)
{
    size_t need = tdm__config_format_help(NULL, 0);
    char *text = malloc(need + 1);
    if (!text)
        return;
    tdm__config_format_help(text, need + 1);
    for (size_t off = 0; off < need;) {
        ssize_t w = write(STDERR_FILENO, text + off, need - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    free(text);
}
