/* base/visibility.h: TDM__HIDDEN, for the extern declarations of the
 * library's own globals.  The build hides every definition
 * (-fvisibility=hidden), but a declaration in another file says nothing
 * of that, so the compiler reached such a variable through the GOT: one
 * load more per access, on the allocator's and the hooks' hot paths. */
#ifndef TDM_BASE_VISIBILITY_H
#define TDM_BASE_VISIBILITY_H

#define TDM__HIDDEN __attribute__((visibility("hidden")))

#endif
