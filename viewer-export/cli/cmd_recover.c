/* viewer-export/cli/cmd_recover.c: `tidemark recover SPILL -o OUT.tdm`: a
 * snapshot from the spill file a killed or crashed program left
 * (docs/cli.md, docs/spill.md).
 *
 * The spill file is read and checked (format_spill.h: a cut or corrupt
 * file is an error naming the byte offset, exit 2), its complete events
 * are kept (slots being written are skipped), its native frames are
 * symbolized from the recorded module files (recover_symbols.c) and the
 * snapshot, marked partial in its notes, is written through a temporary.
 * No state, no lock.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "recover.h"

#define CMD "recover"

static const tdm_cli_option options[] = {
    {.name = "output", .short_name = 'o', .has_arg = required_argument, .metavar = "OUT",
     .help = "where to write (default: SPILL without .spill, + .tdm)"},
    {.name = "force", .code = 'F', .help = "replace OUT if it exists"},
    {.name = "quiet", .short_name = 'q', .help = "no line about what was written"},
    TDM_CLI_HELP_ROW("this help"),
    {0},
};

const tdm_cli_spec tdm__cli_recover_spec = {
    .usage = "usage: tidemark recover SPILL [-o OUT.tdm] [--force] [--quiet]\n"
             "\n"
             "Makes a snapshot from the spill file of a program that was killed or\n"
             "crashed (SIGKILL, out-of-memory killer, a segfault): the events it had\n"
             "recorded, complete ones only, and the allocator state their replay gives.\n"
             "Native frames are symbolized from the module files at their recorded\n"
             "load addresses; a module missing or changed since the run keeps raw\n"
             "addresses.  The snapshot's notes say it is partial and when its last\n"
             "event happened.\n"
             "\n",
    .options = {options, 21},
};

static char *default_output(const char *spill)
{
    size_t len = strlen(spill);
    if (len > 6 && strcmp(spill + len - 6, ".spill") == 0)
        len -= 6;
    char *out = malloc(len + 5);
    if (out)
        snprintf(out, len + 5, "%.*s.tdm", (int)len, spill);
    return out;
}

int tdm__cli_recover(int argc, char **argv)
{
    const char *input = NULL, *out_opt = NULL;
    int quiet = 0, force = 0, c;
    tdm_cli_parse p;
    if (tdm__cli_parse_begin(&p, CMD, argc, argv) != 0)
        return p.exit;
    while ((c = tdm__cli_parse_next(&p)) > 0) {
        switch (c) {
        case 'o':
            out_opt = optarg;
            break;
        case 'F':
            force = 1;
            break;
        case 'q':
            quiet = 1;
            break;
        }
    }
    if (c < 0)
        return p.exit;
    if (argc - optind > 1)
        return tdm__cli_usage(CMD, "one spill file at a time (got '%s' and '%s')",
                              argv[optind], argv[optind + 1]);
    input = optind < argc ? argv[optind] : NULL;
    if (!input)
        return tdm__cli_usage(CMD, "no spill file given");
    char *def = default_output(input);
    char *out_path = NULL;
    int rc = tdm__cli_output_choose(CMD, out_opt, def, force, &out_path);
    if (rc == TDM_EXIT_OK)
        rc = tdm__recover_file(CMD, input, out_path, force, quiet ? NULL : stderr, NULL);
    free(out_path);
    free(def);
    return rc;
}

int tdm__recover_file(const char *cmd, const char *input, const char *out_path, int force,
                      FILE *said, size_t *events)
{
    tdm_spill_data *d = NULL;
    tdm_snap *snap = NULL;
    tdm_recover_symbols *sym = NULL;
    int rc = TDM_EXIT_OK;
    if (events)
        *events = 0;
    tdm_read_error err;
    tdm_status st = tdm__spill_read_file(input, &d, &err);
    if (st != TDM_OK) {
        if (st == TDM_IO_ERROR) /* the system's word is the cause */
            fprintf(stderr, "tidemark %s: %s: %s\n", cmd, input, err.message);
        else
            fprintf(stderr, "tidemark %s: %s: %s: %s\n", cmd, input, tdm_strerror(st),
                    err.message);
        rc = st == TDM_HOST_OUT_OF_MEMORY ? TDM_EXIT_TOOL_ERROR : TDM_EXIT_BAD_INPUT;
        goto out;
    }
    if (!d->has_ring)
        fprintf(stderr, "tidemark %s: %s holds no event ring (recording was not "
                        "record=all, had not started, or the spill's file system had no "
                        "room for it)\n", cmd, input);
    size_t changed = 0, missing = 0;
    sym = tdm__recover_symbols_open(d, stderr, &changed, &missing);
    char notes[256] = "";
    if (changed || missing || d->torn_slots || d->bad_slots)
        snprintf(notes, sizeof notes,
                 "%zu module(s) changed and %zu missing since the run (raw addresses); "
                 "%llu event(s) being written and %llu malformed were left out",
                 changed, missing, (unsigned long long)d->torn_slots,
                 (unsigned long long)d->bad_slots);
    st = tdm__recover_build(d, sym, notes, &snap);
    if (st != TDM_OK) {
        fprintf(stderr, "tidemark %s: %s\n", cmd, tdm_strerror(st));
        rc = TDM_EXIT_TOOL_ERROR;
        goto out;
    }
    if ((rc = tdm__cli_make_parents(cmd, out_path)) != TDM_EXIT_OK)
        goto out;
    st = tdm__snap_write_as(snap, out_path, force);
    if (st != TDM_OK) {
        int e = errno;
        if (st == TDM_IO_ERROR && e == EEXIST) {
            rc = tdm__cli_output_check(cmd, out_path, 0, 1);
        } else {
            fprintf(stderr, "tidemark %s: cannot write %s: %s\n", cmd, out_path,
                    st == TDM_IO_ERROR && e ? tdm__out_strerror(e) : tdm_strerror(st));
            rc = TDM_EXIT_TOOL_ERROR;
        }
        goto out;
    }
    if (events)
        *events = snap->event_count;
    if (said)
        fprintf(said, "tidemark %s: wrote %s (%zu events, %llu being written left "
                      "out, %llu malformed left out, %zu live blocks; partial)\n",
                cmd, out_path, snap->event_count, (unsigned long long)d->torn_slots,
                (unsigned long long)d->bad_slots, snap->block_count);
out:
    tdm__recover_snap_free(snap);
    tdm__recover_symbols_close(sym);
    tdm__spill_data_free(d);
    return rc;
}
