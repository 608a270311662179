/* simcuda/core/simcuda_stub.h: what the generated stubs (gen/stubs_*.c)
 * need, and nothing else: they declare every symbol as int(void), so they
 * must not see the vendors' real prototypes. */
#ifndef SIMCUDA_STUB_H
#define SIMCUDA_STUB_H
/* An unimplemented entry point: log once (per *once) and return code. */
int tdm__simcuda_unsupported(const char *name, int *once, int code);
#endif
