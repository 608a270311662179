/* alloc/alloc.h: the allocator layer as hooks/ and the public API see it.
 *
 * alloc/ serves device memory from a provider (the sim device here; cuda,
 * hip and ze later) and tells the recorder what happened.  It owns the
 * per-device state (segments, blocks, stats) and hands it to the dump
 * through the recorder's state-source interface.
 *
 * Configuration happens once, before the first allocation: hooks/ calls
 * tdm__alloc_configure() from TIDEMARK_CONF at load time; a program that
 * never configures gets the defaults on its first tdm_malloc().
 */
#ifndef TDM_ALLOC_ALLOC_H
#define TDM_ALLOC_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#include "tidemark.h"

typedef struct tdm__alloc_config {
    char device_kind[16];     /* "sim" (default) */
    int device_count;         /* sim: number of devices (default 1) */
    uint64_t device_capacity; /* sim: bytes per device (default 16 GiB) */
    int host_accessible;      /* sim: nonzero maps memory read/write */
} tdm__alloc_config;

void tdm__alloc_config_defaults(tdm__alloc_config *cfg);

/* Sets the configuration.  TDM_BAD_CONFIG once devices are in use (the
 * first configuration stays); TDM_NOT_AVAILABLE for an unknown kind. */
tdm_status tdm__alloc_configure(const tdm__alloc_config *cfg);

/* Tears everything down (tests only): frees every segment back to the
 * provider and forgets the configuration. */
void tdm__alloc_reset_for_tests(void);

#endif
