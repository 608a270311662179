/* tests/cli/stream_prog.c: a small program linked to libtidemark.so for
 * cli/test_replay_streams.sh.  Under TIDEMARK_CONF (dump=..., and the
 * allocator settings under test) it allocates a fixed pseudo-random mix
 * of small and large blocks on three streams; a third of the frees are of
 * blocks first marked with tdm_record_stream as used on another stream,
 * so their reuse waits for that stream's tdm_stream_synchronize, which
 * comes every few requests (and now and then tdm_device_synchronize).
 *
 *   stream_prog [STEPS]   (default 3000)
 *
 * Exit status 0 on success, 2 on a failed tidemark call. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "tidemark.h"

#define SLOTS 48
#define STREAMS 3
#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint32_t next_random(void)
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(rng >> 33);
}

/* Sizes like a training loop's: many small tensors, some of a few MiB,
 * a few large ones, and odd sizes that rounding settings treat apart. */
static size_t pick_size(void)
{
    uint32_t r = next_random() % 100;
    if (r < 45)
        return 512 + (size_t)(next_random() % (1024 * KiB - 512));
    if (r < 85)
        return 1 * MiB + (size_t)(next_random() % (12 * MiB));
    return 12 * MiB + (size_t)(next_random() % (36 * MiB));
}

int main(int argc, char **argv)
{
    long steps = argc > 1 ? strtol(argv[1], NULL, 10) : 3000;
    void *ptr[SLOTS] = {0};
    tdm_stream stream_of[SLOTS] = {0};
    for (long i = 0; i < steps; i++) {
        int s = (int)(next_random() % SLOTS);
        if (ptr[s]) {
            if (next_random() % 3 == 0) {
                tdm_stream other = (stream_of[s] + 1 + next_random() % (STREAMS - 1)) % STREAMS;
                if (tdm_record_stream(ptr[s], other) != TDM_OK)
                    return 2;
            }
            if (tdm_free(ptr[s]) != TDM_OK)
                return 2;
            ptr[s] = NULL;
        } else {
            size_t size = pick_size();
            tdm_stream stream = next_random() % STREAMS;
            if (tdm_malloc(&ptr[s], size, 0, stream) != TDM_OK)
                return 2;
            stream_of[s] = stream;
        }
        if (i % 7 == 6 && tdm_stream_synchronize(next_random() % STREAMS) != TDM_OK)
            return 2;
        if (i % 500 == 499 && tdm_device_synchronize(0) != TDM_OK)
            return 2;
    }
    for (int s = 0; s < SLOTS; s++)
        if (ptr[s] && tdm_free(ptr[s]) != TDM_OK)
            return 2;
    printf("ok\n");
    return 0;
}
