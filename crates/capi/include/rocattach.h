/* rocattach.h: the rocattach C interface, as implemented by rocprof-attach's
 * librocprofiler-sdk-rocattach.so.1 (a drop-in for ROCm's library of the same name).
 *
 * Installed by `rocprof-attach install-library --prefix DIR` as
 * DIR/include/rocprofiler-sdk-rocattach/rocattach.h. Same names, types and values as ROCm's
 * <rocprofiler-sdk-rocattach/rocattach.h>; see docs/library.md for the differences in behaviour
 * (no spinning threads, status 1 on timeouts, 6 when the target exits).
 *
 * Environment read at each call: ROCPROF_ATTACH_TOOL_LIBRARY (tool library string sent to the
 * target; default librocprofiler-sdk-tool.so.1), every ROCP* variable (sent to the target),
 * ROCATTACH_LOG_LEVEL (trace, info, warning [default], error, fatal, off), ROCATTACH_AGENT (path
 * of the rocprof-attach executable that performs the injection, when not in ../bin). */
#ifndef ROCPROFILER_SDK_ROCATTACH_ROCATTACH_H_
#define ROCPROFILER_SDK_ROCATTACH_ROCATTACH_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ROCATTACH_VERSION_MAJOR 1
#define ROCATTACH_VERSION_MINOR 0
#define ROCATTACH_VERSION_PATCH 0

/* Status codes. */
typedef enum rocattach_status_t {
    ROCATTACH_STATUS_SUCCESS = 0,
    ROCATTACH_STATUS_ERROR = 1,                                  /* no listener, rejected, timeout */
    ROCATTACH_STATUS_ERROR_INVALID_ARGUMENT = 2,                 /* bad PID/tool, session state */
    ROCATTACH_STATUS_ERROR_NOT_SUPPORTED = 3,                    /* not x86-64 */
    ROCATTACH_STATUS_ERROR_PTRACE_ERROR = 4,                     /* other ptrace errno */
    ROCATTACH_STATUS_ERROR_PTRACE_OPERATION_NOT_PERMITTED = 5,  /* EPERM */
    ROCATTACH_STATUS_ERROR_PTRACE_PROCESS_NOT_FOUND = 6,        /* ESRCH, target exited */
    ROCATTACH_STATUS_LAST = 7
} rocattach_status_t;

typedef struct rocattach_version_triplet_t {
    uint32_t major;
    uint32_t minor;
    uint32_t patch;
} rocattach_version_triplet_t;

/* Version of the interface; NULL pointers are skipped. Always SUCCESS. */
rocattach_status_t rocattach_get_version(uint32_t* major, uint32_t* minor, uint32_t* patch);

/* Same as one struct; INVALID_ARGUMENT for NULL. */
rocattach_status_t rocattach_get_version_triplet(rocattach_version_triplet_t* info);

/* Attach one process (its 'rocp-bg-attach' listener must exist). */
rocattach_status_t rocattach_attach(int pid);

/* Attach pid (mandatory: its failure is returned and nothing else is tried), then the
 * descendants of a snapshot taken now; those without a listener are skipped with a warning,
 * other failures are logged and the last one is returned. */
rocattach_status_t rocattach_attach_tree(int pid);

/* Detach one process; pid 0 detaches every session of this process and returns SUCCESS.
 * A pid this process did not attach, whose session another front end left active (a failed
 * detach, a killed front end), is finished. INVALID_ARGUMENT when pid has no session. Attaching
 * a pid that another session holds, or that has a session left active, is INVALID_ARGUMENT. */
rocattach_status_t rocattach_detach(int pid);

/* Detach exactly the processes the matching rocattach_attach_tree(pid) attached (recorded list,
 * no re-enumeration). INVALID_ARGUMENT when there is no such tree. */
rocattach_status_t rocattach_detach_tree(int pid);

/* Enum name / message of a status; NULL when out of range. */
const char* rocattach_get_status_name(rocattach_status_t status);
const char* rocattach_get_status_string(rocattach_status_t status);

/* Older interface of librocprofv3-attach.so (same library file): attach one process, detach
 * every process attached. Failures are logged. */
void attach(uint32_t pid);
void detach(void);

#ifdef __cplusplus
}
#endif

#endif /* ROCPROFILER_SDK_ROCATTACH_ROCATTACH_H_ */
