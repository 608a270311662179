/* viewer-export/model/categories_bytes.c: the bytes of each category live
 * at chosen positions of a device's history (categories.h), from the
 * model's allocations and the category decided for each: what `tidemark
 * categories` tabulates and the Python reader returns, computed once.
 * No state. */
#include "categories.h"
#include "byte_sums.h"

#include <stdlib.h>

typedef struct delta {
    int64_t seq;   /* the change takes effect just after this event */
    int64_t bytes; /* + at alloc, - at free */
    uint8_t cat;
} delta;

static int delta_cmp(const void *pa, const void *pb)
{
    const delta *a = pa, *b = pb;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

tdm_status tdm__categories_bytes_at(const tdm_model *m, const uint8_t *cats, size_t dev,
                                    const int64_t *seqs, size_t n,
                                    int64_t (*out)[TDM_CATEGORY_COUNT_])
{
    size_t nd = 0;
    delta *d = malloc((2 * m->alloc_count + 1) * sizeof *d);
    if (!d)
        return TDM_HOST_OUT_OF_MEMORY;
    for (size_t i = 0; i < m->alloc_count; i++) {
        const tdm_model_alloc *a = &m->allocs[i];
        if (a->device_index != dev)
            continue;
        uint8_t c = cats[i] < TDM_CATEGORY_COUNT_ ? cats[i] : TDM_CATEGORY_UNKNOWN;
        d[nd++] = (delta){a->alloc_seq, tdm__bytes_signed(a->size), c};
        if (a->free_seq != TDM_MODEL_SEQ_NEVER)
            d[nd++] = (delta){a->free_seq, -tdm__bytes_signed(a->size), c};
    }
    qsort(d, nd, sizeof *d, delta_cmp);
    tdm__bytes_wide cur[TDM_CATEGORY_COUNT_] = {0};
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        while (k < nd && d[k].seq <= seqs[i]) {
            cur[d[k].cat] += d[k].bytes;
            k++;
        }
        for (int c = 0; c < TDM_CATEGORY_COUNT_; c++)
            out[i][c] = tdm__bytes_clamp(cur[c]);
    }
    free(d);
    return TDM_OK;
}
