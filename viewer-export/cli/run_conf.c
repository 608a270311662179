/* viewer-export/cli/run_conf.c: the TIDEMARK_CONF `tidemark run` gives its
 * command (run.h): composed from the user's settings, the dump folder and
 * what a snapshot on interruption needs, and checked by libtidemark.so
 * itself (tdm_conf_check, loaded with dlopen: the tool is not linked
 * with the library) before the command starts, so that a typo stops the
 * run at once instead of leaving the whole program unrecorded.
 *
 * Items are split as the library splits them: on commas outside [...],
 * blanks around keys and values ignored, keys exact, the last value of a
 * key winning.  No state, no locks.
 */
#define _GNU_SOURCE /* asprintf */
#include "run.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "tidemark.h"

/* ---- finding the libraries -------------------------------------------------- */

void tdm__run_find_library(const char *name, const char *first, char *path, size_t len)
{
    char self[PATH_MAX], pattern[2 * PATH_MAX];
    path[0] = '\0';
    if (first && first[0]) {
        snprintf(pattern, sizeof pattern, "%s/%s", first, name);
        if (access(pattern, R_OK) == 0 && realpath(pattern, self) && strlen(self) < len) {
            memcpy(path, self, strlen(self) + 1);
            return;
        }
    }
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash)
        return;
    *slash = '\0';
    const char *const where[] = {"/", "/../lib*/", "/../lib*/*/"};
    for (size_t i = 0; i < sizeof where / sizeof where[0]; i++) {
        snprintf(pattern, sizeof pattern, "%s%s%s", self, where[i], name);
        glob_t g;
        if (glob(pattern, 0, NULL, &g) == 0) {
            for (size_t k = 0; k < g.gl_pathc; k++)
                if (access(g.gl_pathv[k], R_OK) == 0 && realpath(g.gl_pathv[k], path) &&
                    strlen(path) < len) {
                    globfree(&g);
                    return;
                }
            globfree(&g);
        }
        path[0] = '\0';
    }
}

static int has_autostart(const char *dir, char *path, size_t len)
{
    char file[PATH_MAX + 32];
    int n = snprintf(file, sizeof file, "%s/autostart/sitecustomize.py", dir);
    if (n < 0 || (size_t)n >= sizeof file || access(file, R_OK) != 0 || strlen(file) >= len)
        return 0;
    *strrchr(file, '/') = '\0';
    return realpath(file, path) && strlen(path) < len;
}

/* Appends ", what" (or "what" first) to the list of places looked in. */
static void looked_in(char *looked, size_t len, const char *what)
{
    size_t n = looked ? strlen(looked) : 0;
    if (looked && n + 1 < len)
        snprintf(looked + n, len - n, "%s%s", n ? ", " : "", what);
}

void tdm__run_find_autostart(char *path, size_t len, char *looked, size_t looked_len)
{
    char self[PATH_MAX], dir[PATH_MAX + 64];
    if (looked && looked_len)
        looked[0] = '\0';
    const char *env = getenv("TIDEMARK_PYTHON_DIR");
    if (env && env[0]) {
        if (has_autostart(env, path, len))
            return;
        snprintf(dir, sizeof dir, "TIDEMARK_PYTHON_DIR=%s", env);
        looked_in(looked, looked_len, dir);
    }
    self[0] = '\0';
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    char *slash = n > 0 ? (self[n] = '\0', strrchr(self, '/')) : NULL;
    if (slash) {
        *slash = '\0';
        /* An installed tree, then a build folder inside the source tree
         * (which may have moved since it was built). */
        const char *const rel[] = {"/../" TDM_INSTALL_PYTHON_DIR, "/../python"};
        for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
            snprintf(dir, sizeof dir, "%s%s", self, rel[i]);
            if (has_autostart(dir, path, len))
                return;
            looked_in(looked, looked_len, dir);
        }
    }
    /* The tree this binary was built from, only while the binary is still
     * where it was built: a copy elsewhere may be of another version. */
    char built[PATH_MAX];
    if (slash && realpath(TDM_BINARY_DIR, built) && strcmp(built, self) == 0) {
        if (has_autostart(TDM_SOURCE_PYTHON_DIR, path, len))
            return;
        looked_in(looked, looked_len, TDM_SOURCE_PYTHON_DIR);
    }
    path[0] = '\0';
}

/* ---- items ---------------------------------------------------------------------- */

/* Calls fn(key, key_len, value, value_len, arg) for each KEY=VALUE item of
 * conf (blanks trimmed; an item without '=' has an empty value). */
static void each_item(const char *conf,
                      void (*fn)(const char *, size_t, const char *, size_t, void *),
                      void *arg)
{
    const char *p = conf;
    while (p && *p) {
        const char *start = p;
        int depth = 0;
        while (*p && (*p != ',' || depth > 0)) {
            depth += *p == '[' ? 1 : *p == ']' && depth ? -1 : 0;
            p++;
        }
        const char *end = p, *eq = memchr(start, '=', (size_t)(end - start));
        const char *k = start, *ke = eq ? eq : end, *v = eq ? eq + 1 : end, *ve = end;
        while (k < ke && isspace((unsigned char)*k))
            k++;
        while (ke > k && isspace((unsigned char)ke[-1]))
            ke--;
        while (v < ve && isspace((unsigned char)*v))
            v++;
        while (ve > v && isspace((unsigned char)ve[-1]))
            ve--;
        if (ke > k)
            fn(k, (size_t)(ke - k), v, (size_t)(ve - v), arg);
        if (*p)
            p++;
    }
}

typedef struct one_value {
    const char *key, *v;
    size_t vn;
} one_value;

static void take_value(const char *k, size_t kn, const char *v, size_t vn, void *arg)
{
    one_value *o = arg;
    if (kn == strlen(o->key) && memcmp(k, o->key, kn) == 0)
        o->v = v, o->vn = vn;
}

/* The dump of --conf values, split into its folder and file name. */
int tdm__run_conf_dump(const char *conf, const char **folder_out, char *folder,
                       size_t folder_len, char *name, size_t name_len)
{
    char v[PATH_MAX];
    *folder_out = NULL;
    name[0] = '\0';
    if (!tdm__run_conf_value(conf, "dump", v, sizeof v))
        return 0;
    char *slash = strrchr(v, '/');
    const char *base = slash ? slash + 1 : v;
    size_t n = strlen(base);
    if (n < 5 || strcmp(base + n - 4, ".tdm") != 0) {
        fprintf(stderr, "tidemark run: --conf dump=%s: name the snapshot files with a template "
                        "ending in .tdm (e.g. dump=out/%%h-r%%r.tdm)\n", v);
        return -1;
    }
    if (n >= name_len) {
        fprintf(stderr, "tidemark run: --conf dump=%s: the name is too long\n", v);
        return -1;
    }
    memcpy(name, base, n + 1);
    if (slash) {
        *slash = '\0';
        if (strchr(v, '%')) {
            fprintf(stderr, "tidemark run: --conf dump=%s/%s: codes (%%h, %%r...) go in the "
                            "file's name, not its folder\n", v, base);
            return -1;
        }
        if (strlen(v) + 2 > folder_len) {
            fprintf(stderr, "tidemark run: --conf dump=%s/%s: the folder is too long\n", v, base);
            return -1;
        }
        snprintf(folder, folder_len, "%s", v[0] ? v : "/");
        *folder_out = folder;
    }
    return 1;
}

int tdm__run_conf_value(const char *conf, const char *key, char *out, size_t len)
{
    one_value o = {key, NULL, 0};
    each_item(conf, take_value, &o);
    if (!o.v || o.vn >= len)
        return 0;
    memcpy(out, o.v, o.vn);
    out[o.vn] = '\0';
    return 1;
}

void tdm__run_find_simcuda(char *dir, size_t len)
{
    char lib[PATH_MAX], self[PATH_MAX];
    dir[0] = '\0';
    const char *over = getenv("TIDEMARK_SIMCUDA_DIR");
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = '\0';
    /* The build tree's simcuda/ beside the binary; an installed tree's
     * tidemark/simcuda in the ../lib folders or their TRIPLET
     * subfolders. */
    char build[PATH_MAX + 16];
    snprintf(build, sizeof build, "%s/simcuda", self);
    tdm__run_find_library("libsimcuda.so", over && over[0] ? over : build, lib, sizeof lib);
    static const char *const installed[] = {"/../lib*/tidemark/simcuda/libsimcuda.so",
                                            "/../lib*/*/tidemark/simcuda/libsimcuda.so"};
    for (size_t i = 0; !lib[0] && !(over && over[0]) && i < sizeof installed / sizeof installed[0];
         i++) {
        glob_t g;
        char pattern[PATH_MAX + 64];
        snprintf(pattern, sizeof pattern, "%s%s", self, installed[i]);
        if (glob(pattern, 0, NULL, &g) == 0) {
            if (g.gl_pathc && !realpath(g.gl_pathv[0], lib))
                lib[0] = '\0';
            globfree(&g);
        }
    }
    char *end = strrchr(lib, '/');
    if (!lib[0] || !end || (size_t)(end - lib) >= len)
        return;
    memcpy(dir, lib, (size_t)(end - lib));
    dir[end - lib] = '\0';
}

typedef struct last_values {
    const char *dump_on, *signal;
    size_t dump_on_len, signal_len;
} last_values;

static void remember(const char *k, size_t kn, const char *v, size_t vn, void *arg)
{
    last_values *l = arg;
    if (kn == 7 && memcmp(k, "dump_on", 7) == 0)
        l->dump_on = v, l->dump_on_len = vn;
    else if (kn == 6 && memcmp(k, "signal", 6) == 0)
        l->signal = v, l->signal_len = vn;
}

/* Whether the dump_on value v (events joined by + or |) has `word`. */
static int has_event(const char *v, size_t n, const char *word)
{
    size_t wl = strlen(word);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && v[j] != '+' && v[j] != '|')
            j++;
        size_t a = i, b = j;
        while (a < b && isspace((unsigned char)v[a]))
            a++;
        while (b > a && isspace((unsigned char)v[b - 1]))
            b--;
        if (b - a == wl && strncasecmp(v + a, word, wl) == 0)
            return 1;
        i = j + 1;
    }
    return 0;
}

/* The number of a `signal` value as the library reads it (a number;
 * USR1, USR2, HUP, WINCH, URG, RTMIN+n, RTMAX-n, with or without SIG, in
 * any case); 0 when it is none of them. */
static int signal_number(const char *v, size_t n)
{
    char s[32];
    if (n == 0 || n >= sizeof s)
        return 0;
    memcpy(s, v, n);
    s[n] = '\0';
    char *end;
    if (isdigit((unsigned char)s[0])) {
        long x = strtol(s, &end, 10);
        return *end || x < 1 || x > SIGRTMAX ? 0 : (int)x;
    }
    const char *p = strncasecmp(s, "SIG", 3) == 0 ? s + 3 : s;
    static const struct { const char *name; int number; } named[] = {
        {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"HUP", SIGHUP},
        {"WINCH", SIGWINCH}, {"URG", SIGURG},
    };
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        if (strcasecmp(p, named[i].name) == 0)
            return named[i].number;
    int min = strncasecmp(p, "RTMIN", 5) == 0, max = strncasecmp(p, "RTMAX", 5) == 0;
    if (!min && !max)
        return 0;
    p += 5;
    if (!*p)
        return min ? SIGRTMIN : SIGRTMAX;
    if (*p != (min ? '+' : '-') || !isdigit((unsigned char)p[1]))
        return 0;
    long x = strtol(p + 1, &end, 10);
    if (*end || x > SIGRTMAX - SIGRTMIN)
        return 0;
    return min ? SIGRTMIN + (int)x : SIGRTMAX - (int)x;
}

/* `dir` into the text with each '%' doubled (a '%' in a folder is no code). */
static void put_folder(FILE *m, const char *dir)
{
    for (const char *p = dir; *p; p++)
        if (*p == '%')
            fputs("%%", m);
        else
            fputc(*p, m);
}

char *tdm__run_conf_make(const char *inherited, const char *conf, const char *dir,
                         const char *dump_name, const char *spill_dir, int *dump_signal)
{
    *dump_signal = 0;
    char *out = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&out, &len);
    if (!m)
        return NULL;
    if (inherited && inherited[strspn(inherited, " \t,")])
        fprintf(m, "%s,", inherited);
    if (conf && conf[0])
        fprintf(m, "%s,", conf);
    if (!dump_name)
        dump_name = TDM_RUN_DUMP_NAME;
    fputs("dump=", m);
    put_folder(m, dir);
    fprintf(m, "/%s", dump_name);
    /* The spill files of this run's processes in a folder of its own,
     * named as their snapshots would be (with the pid, so two processes
     * of one rank never share one): what a killed process leaves is
     * found there, and only there, when the command has ended. */
    if (spill_dir) {
        const char *dot = strrchr(dump_name, '.');
        int stem = (int)(dot && dot != dump_name ? (size_t)(dot - dump_name) : strlen(dump_name));
        fputs(",spill=", m);
        put_folder(m, spill_dir);
        fprintf(m, "/%.*s%s.spill", stem, dump_name,
                strstr(dump_name, "%p") ? "" : "-%p");
    }

    /* A snapshot on interruption: dump_on needs `signal`, and run needs
     * to know which signal that is. */
    last_values l = {0};
    each_item(inherited, remember, &l);
    each_item(conf, remember, &l);
    int none = l.dump_on && has_event(l.dump_on, l.dump_on_len, "none");
    if (!none) {
        if (!l.dump_on)
            fputs(",dump_on=exit+signal", m);
        else if (!has_event(l.dump_on, l.dump_on_len, "signal"))
            fprintf(m, ",dump_on=%.*s+signal", (int)l.dump_on_len, l.dump_on);
        if (l.signal) {
            *dump_signal = signal_number(l.signal, l.signal_len);
        } else {
            fputs(",signal=" TDM_RUN_DUMP_SIGNAL, m);
            *dump_signal = signal_number(TDM_RUN_DUMP_SIGNAL, strlen(TDM_RUN_DUMP_SIGNAL));
        }
        /* Run asks for the snapshot on SIGINT/SIGTERM itself, with that
         * signal, before passing them on. */
        fputs(",stop_signals=off", m);
    }
    if (fclose(m) != 0) {
        free(out);
        return NULL;
    }
    return out;
}

/* ---- the check ---------------------------------------------------------------- */

typedef tdm_status (*conf_check_fn)(const char *, char *, size_t);

/* Refused: a status other than OK, with the line that says why (out of
 * memory in the check refuses nothing). */
static int bad(conf_check_fn check, const char *conf, char *message)
{
    return check(conf, message, TDM_CONF_MESSAGE_MAX) != TDM_OK && message[0];
}

/* Prints the library's line about `conf`, from `what`: "tidemark run:
 * WHAT: BODY; the command was not started", BODY without the library's
 * own "tidemark: TIDEMARK_CONF: " and "; recording is off". */
static void refused(const char *what, const char *message)
{
    static const char head[] = "tidemark: TIDEMARK_CONF: ", tail[] = "; recording is off";
    const char *body = message;
    if (strncmp(body, head, sizeof head - 1) == 0)
        body += sizeof head - 1;
    size_t n = strlen(body);
    if (n >= sizeof tail - 1 && strcmp(body + n - (sizeof tail - 1), tail) == 0)
        n -= sizeof tail - 1;
    fprintf(stderr, "tidemark run: %s: %.*s; the command was not started\n", what, (int)n,
            body[0] ? body : "refused");
}

int tdm__run_conf_check(const char *preload, const char *inherited, char *const *confs,
                        size_t conf_count, const char *composed)
{
    char dir[PATH_MAX] = "", lib[PATH_MAX];
    if (preload && preload[0]) {
        snprintf(dir, sizeof dir, "%s", preload);
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = '\0';
        else
            dir[0] = '\0';
    }
    tdm__run_find_library(TDM_RUN_LIBRARY_NAME, dir, lib, sizeof lib);
    if (!lib[0])
        return 0;
    void *h = dlopen(lib, RTLD_LOCAL | RTLD_NOW);
    if (!h)
        return 0;
    conf_check_fn check;
    *(void **)&check = dlsym(h, "tdm_conf_check");
    int rc = 0;
    char *message = check ? malloc(TDM_CONF_MESSAGE_MAX) : NULL;
    if (check && message) {
        if (inherited && bad(check, inherited, message)) {
            refused("TIDEMARK_CONF (from the environment)", message);
            rc = -1;
        }
        for (size_t i = 0; i < conf_count && !rc; i++)
            if (bad(check, confs[i], message)) {
                char *what;
                if (asprintf(&what, "--conf %s", confs[i]) < 0)
                    what = NULL;
                refused(what ? what : "--conf", message);
                free(what);
                rc = -1;
            }
        if (!rc && bad(check, composed, message)) {
            char *what;
            if (asprintf(&what, "TIDEMARK_CONF=%s", composed) < 0)
                what = NULL;
            refused(what ? what : "TIDEMARK_CONF", message);
            free(what);
            rc = -1;
        }
    }
    free(message);
    dlclose(h);
    return rc;
}

int tdm__run_is_launcher(const char *argv0)
{
    static const char *const names[] = {"mpirun", "mpiexec", "mpiexec.hydra", "orterun",
                                        "prterun", "srun", "torchrun", "jsrun", "aprun",
                                        "mpirun.openmpi", "mpiexec.openmpi", "mpirun.mpich",
                                        "mpiexec.mpich"};
    const char *slash = strrchr(argv0, '/');
    const char *base = slash ? slash + 1 : argv0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(base, names[i]) == 0)
            return 1;
    return 0;
}
