/* alloc/provider_vendor.c: the vendor error code of a thread's last failed
 * provider call, shared by the vendor providers (provider_cuda.c,
 * provider_hip.c, provider_ze.c).
 *
 * A hook serving a vendor call from the cache gets a tdm_status back; when
 * that is TDM_VENDOR_ERROR (or TDM_OUT_OF_MEMORY) it hands the program the
 * vendor's own code, which the provider noted here.  Per thread, so no
 * lock; no initial-exec TLS model, so libtidemark.so stays dlopen()able.
 */
#include "provider.h"

static __thread int last_vendor_error;

void tdm__provider_set_vendor_error(int code)
{
    last_vendor_error = code;
}

int tdm__provider_last_vendor_error(void)
{
    return last_vendor_error;
}
