#ifndef PUSHPROV_C_PROCESS_CONTROL_H
#define PUSHPROV_C_PROCESS_CONTROL_H

/// Whether processes of the same user may dump or attach to this one: 1 yes, 0 no, -1 where
/// the system has no such switch (anything but Linux) or refused to say.
int pushprov_process_dumpable(void);

/// Marks this process not dumpable (Linux `PR_SET_DUMPABLE` 0): no core file, no ptrace attach
/// or `/proc/<pid>/mem` read by other processes of its user. 0 on success, -1 on failure or
/// where the system has no such switch (errno says which: ENOSYS elsewhere).
int pushprov_process_set_not_dumpable(void);

#endif
