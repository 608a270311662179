/* runtime/private_abi.c: the version of libtidemark's private interface
 * (tidemark_private.h), which the command-line tool checks after dlopen
 * and before it calls any tdm__* function by name: a tool and a library
 * from two builds then say so instead of calling with the wrong types. */
#include "tidemark.h"
#include "tidemark_private.h"

TDM_API unsigned tdm__private_abi(void);

TDM_API unsigned tdm__private_abi(void)
{
    return TDM_PRIVATE_ABI_VERSION;
}
