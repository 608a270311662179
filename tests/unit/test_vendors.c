/* tests/unit/test_vendors.c: every vendor of base/vendors.def is added
 * whole (docs/adding-a-vendor.md): its name round-trips through
 * TIDEMARK_CONF's device= and the files' text, its columns are filled and
 * agree, alloc/ has its provider, hooks/preload/ its interposer's exports,
 * tests/fakes/ its fake library, docs/configuration.md its device= forms
 * and docs/format.md its name.  A row added alone fails here, naming what
 * it lacks. */
#include <regex.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "config_fixtures.h"
#include "provider.h"
#include "vendor.h"

#define SOURCE_DIR TDM_TEST_DATA_DIR "/../.."

/* Whether alloc/vendor_providers.def has a row for each vendor (the sim
 * device's provider is built in). */
static int has_provider(tdm_vendor v)
{
    static const int rows[TDM_VENDOR_COUNT] = {
        [TDM_VENDOR_SIM] = 1,
#define TDM_VENDOR_PROVIDER(id, create, fns) [TDM_VENDOR_##id] = 1,
#include "vendor_providers.def"
    };
    return rows[v];
}

static const tdm_vendor_info *row_of(int v)
{
    const tdm_vendor_info *row = tdm__vendor_info((tdm_vendor)v);
    assert_non_null(row);
    return row;
}

/* Calls fn(form, len, ctx) for each '|'-joined form of `forms`. */
static void each_form(const char *forms, void (*fn)(const char *, size_t, void *), void *ctx)
{
    for (const char *p = forms; *p;) {
        size_t n = strcspn(p, "|");
        fn(p, n, ctx);
        p += n + (p[n] == '|');
    }
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    static char text[256 * 1024];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = '\0';
    return text;
}

static void names_round_trip(void **state)
{
    (void)state;
    for (int v = 0; v < TDM_VENDOR_COUNT; v++) {
        const char *name = row_of(v)->name;
        assert_non_null(name);
        if (strlen(name) == 0 || strlen(name) >= 32) /* spill_layout.h's device_kind */
            fail_msg("vendor %d: a name of 1 to 31 characters, not '%s'", v, name);
        assert_int_equal(tdm__vendor_of_name(name), v);
        assert_string_equal(tdm__vendor_name((tdm_vendor)v), name);
        char text[64];
        snprintf(text, sizeof text, "device=%s", name);
        parse_ok(text);
        if ((int)cfg.alloc.device_kind != v)
            fail_msg("'%s' parses to vendor %d, not %d", text, (int)cfg.alloc.device_kind, v);
        for (int w = 0; w < v; w++)
            if (strcasecmp(name, row_of(w)->name) == 0)
                fail_msg("vendors %d and %d are both '%s'", w, v, name);
    }
    assert_string_equal(tdm__vendor_name(TDM_VENDOR_UNKNOWN), "unknown");
    assert_int_equal(tdm__vendor_of_name("metal"), TDM_VENDOR_UNKNOWN);
    assert_int_equal(tdm__vendor_of_name(NULL), TDM_VENDOR_UNKNOWN);
}

typedef struct form_check {
    const char *name, *values, *doc_row;
    size_t doc_row_len;
} form_check;

static void check_form(const char *form, size_t n, void *ctx)
{
    const form_check *c = ctx;
    if (n < strlen(c->name) || strncmp(form, c->name, strlen(c->name)) != 0)
        fail_msg("vendor %s: device= form '%.*s' does not start with its name", c->name,
                 (int)n, form);
    char want[80];
    snprintf(want, sizeof want, "`%.*s`", (int)n, form);
    char *row = strndup(c->doc_row, c->doc_row_len);
    assert_non_null(row);
    int documented = strstr(row, want) != NULL;
    free(row);
    if (!documented)
        fail_msg("docs/configuration.md: the row of 'device' lacks %s", want);
    /* The key's help lists it: the values are '|'-joined forms. */
    char plain[80];
    snprintf(plain, sizeof plain, "%.*s", (int)n, form);
    const char *at = c->values;
    int listed = 0;
    while (!listed && (at = strstr(at, plain)) != NULL) {
        listed = (at == c->values || at[-1] == '|') && (at[n] == '|' || at[n] == '\0');
        at++;
    }
    if (!listed)
        fail_msg("the device key's values '%s' lack %.*s", c->values, (int)n, form);
}

static void forms_are_documented(void **state)
{
    (void)state;
    size_t n;
    const tdm__conf_key *keys = tdm__config_keys(&n);
    const char *values = NULL;
    for (size_t i = 0; i < n; i++)
        if (strcmp(keys[i].name, "device") == 0)
            values = keys[i].values;
    assert_non_null(values);
    const char *doc = read_text(SOURCE_DIR "/docs/configuration.md");
    const char *row = strstr(doc, "| `device` |");
    if (!row)
        fail_msg("docs/configuration.md has no row for 'device'");
    const char *eol = strchr(row, '\n');
    for (int v = 0; v < TDM_VENDOR_COUNT; v++) {
        form_check c = {row_of(v)->name, values, row, eol ? (size_t)(eol - row) : strlen(row)};
        assert_non_null(row_of(v)->conf_forms);
        each_form(row_of(v)->conf_forms, check_form, &c);
    }
}

/* docs/format.md's devices table lists every vendor name a file holds. */
static void names_are_in_the_format(void **state)
{
    (void)state;
    const char *doc = read_text(SOURCE_DIR "/docs/format.md");
    const char *row = strstr(doc, "| `vendor`");
    if (!row)
        fail_msg("docs/format.md has no row for the devices' vendor");
    const char *eol = strchr(row, '\n');
    for (int v = 0; v < TDM_VENDOR_COUNT; v++) {
        char want[48];
        snprintf(want, sizeof want, "`\"%s\"`", row_of(v)->name);
        const char *at = strstr(row, want);
        if (!at || (eol && at > eol))
            fail_msg("docs/format.md: the devices' vendor row lacks %s", want);
    }
}

static void columns_are_filled(void **state)
{
    (void)state;
    for (int v = 0; v < TDM_VENDOR_COUNT; v++) {
        const tdm_vendor_info *row = row_of(v);
        if (row->torch_device != TDM_TORCH_DEVICE_CUDA && row->torch_device != TDM_TORCH_DEVICE_XPU)
            fail_msg("vendor %s: torch_device %d is no c10::DeviceType tidemark knows",
                     row->name, (int)row->torch_device);
        if (!has_provider((tdm_vendor)v))
            fail_msg("vendor %s: no row in alloc/vendor_providers.def", row->name);
        if (v == TDM_VENDOR_SIM)
            continue; /* the sim device's frames are tidemark's own */
        if (!row->api_frames || !row->c10_namespace)
            fail_msg("vendor %s: api_frames and c10_namespace are needed to name sites",
                     row->name);
        regex_t re;
        if (regcomp(&re, row->api_frames, REG_EXTENDED | REG_NOSUB) != 0)
            fail_msg("vendor %s: api_frames '%s' is not a POSIX extended regex", row->name,
                     row->api_frames);
        regfree(&re);
    }
}

/* torch_allocator is "c10::NS::CLASS::"; its mangled spelling is
 * "3c10" len(NS) NS len(CLASS) CLASS, and NS is the c10_namespace. */
static void torch_allocators_agree(void **state)
{
    (void)state;
    for (int v = 0; v < TDM_VENDOR_COUNT; v++) {
        const tdm_vendor_info *row = row_of(v);
        int set = !!row->torch_allocator + !!row->torch_allocator_mangled + !!row->torch_library;
        if (set == 0)
            continue;
        if (set != 3)
            fail_msg("vendor %s: torch_allocator, its mangled name and torch_library go "
                     "together", row->name);
        char ns[32], cls[64], mangled[128], library[64];
        if (sscanf(row->torch_allocator, "c10::%31[A-Za-z0-9_]::%63[A-Za-z0-9_]::", ns, cls) != 2)
            fail_msg("vendor %s: torch_allocator '%s' is not c10::NS::CLASS::", row->name,
                     row->torch_allocator);
        assert_non_null(row->c10_namespace);
        assert_string_equal(ns, row->c10_namespace);
        snprintf(mangled, sizeof mangled, "3c10%zu%s%zu%s", strlen(ns), ns, strlen(cls), cls);
        assert_string_equal(row->torch_allocator_mangled, mangled);
        snprintf(library, sizeof library, "libc10_%s.so", ns);
        assert_string_equal(row->torch_library, library);
    }
}

/* Each vendor but sim has an interposer in the preload library (its
 * exports in hooks/preload/NAME.syms) and a fake of its library to test it
 * on (tests/fakes/NAME/). */
static void hooks_and_fakes_exist(void **state)
{
    (void)state;
    for (int v = 0; v < TDM_VENDOR_COUNT; v++) {
        if (v == TDM_VENDOR_SIM)
            continue;
        const char *name = row_of(v)->name;
        char path[512];
        struct stat st;
        snprintf(path, sizeof path, SOURCE_DIR "/hooks/preload/%s.syms", name);
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            fail_msg("vendor %s: no hooks/preload/%s.syms", name, name);
        snprintf(path, sizeof path, SOURCE_DIR "/tests/fakes/%s/CMakeLists.txt", name);
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            fail_msg("vendor %s: no fake library in tests/fakes/%s/", name, name);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(names_round_trip),
        cmocka_unit_test(forms_are_documented),
        cmocka_unit_test(names_are_in_the_format),
        cmocka_unit_test(columns_are_filled),
        cmocka_unit_test(torch_allocators_agree),
        cmocka_unit_test(hooks_and_fakes_exist),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
