#include "CProcessControl.h"

#include <errno.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif

int pushprov_process_dumpable(void) {
#if defined(__linux__)
    return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
#else
    return -1;
#endif
}

int pushprov_process_set_not_dumpable(void) {
#if defined(__linux__)
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
#else
    errno = ENOSYS;
    return -1;
#endif
}
