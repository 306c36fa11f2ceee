/* seccomp-exec: install one classic-BPF seccomp filter, then execv the container's process.
 *
 * runc-direct (sandbox/docker/seccomp_once.py) runs this as a container's first process instead of
 * letting runc compile the engine's seccomp profile with libseccomp in every container (about
 * 9 ms of CPU each). The filter is the one runc itself installed from the same spec, read back
 * from the kernel once per template, so every process from the container's init on runs under
 * the same bytes with the same flags (none) as under runc.
 *
 *   seccomp-exec HEX PROGRAM [ARG...]
 *
 * HEX: the filter's struct sock_filter array, lowercase hex. PROGRAM must be an absolute path.
 * runc hands this binary over as fd 3 (--preserve-fds 1) and starts it as /proc/self/fd/3; fd 3
 * is closed before the filter goes in, so nothing after it can reach this file. Any failure
 * exits 127 before PROGRAM runs: a container never runs unfiltered past this point.
 */
#define _GNU_SOURCE
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define FAIL 127

static int nibble(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

int main(int argc, char **argv) {
    if (argc < 3 || argv[2][0] != '/') {
        fputs("seccomp-exec: usage: seccomp-exec HEX /ABSOLUTE/PROGRAM [ARG...]\n", stderr);
        return FAIL;
    }
    const char *hex = argv[1];
    size_t digits = strlen(hex);
    size_t unit = 2 * sizeof(struct sock_filter);
    if (digits == 0 || digits % unit != 0 || digits / unit > BPF_MAXINSNS) {
        fputs("seccomp-exec: the filter is not a whole number of instructions\n", stderr);
        return FAIL;
    }
    unsigned char *bytes = malloc(digits / 2);
    if (bytes == NULL) return FAIL;
    for (size_t i = 0; i < digits / 2; i++) {
        int high = nibble(hex[2 * i]), low = nibble(hex[2 * i + 1]);
        if (high < 0 || low < 0) {
            fputs("seccomp-exec: the filter is not lowercase hex\n", stderr);
            return FAIL;
        }
        bytes[i] = (unsigned char)(high << 4 | low);
    }
    close(3);
    struct sock_fprog program = {
        .len = (unsigned short)(digits / unit),
        .filter = (struct sock_filter *)bytes,
    };
    /* Flags 0, as runc passes them for a spec that names none. */
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &program) != 0) {
        perror("seccomp-exec: seccomp");
        return FAIL;
    }
    execv(argv[2], argv + 2);
    perror("seccomp-exec: execv");
    return FAIL;
}
