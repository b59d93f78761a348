/* What Swift cannot call directly: memfd_create, posix_spawn with fd
 * remapping, and the wait-status macros. Used by the bot side only. */
#define _GNU_SOURCE
#include "roomkit_plugin_wire.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int roomkit_wire_progress_create(roomkit_wire_progress **out) {
    int fd = memfd_create("roomkit-plugin-progress", MFD_CLOEXEC);
    if (fd < 0) return -errno;
    if (ftruncate(fd, (off_t)sizeof(roomkit_wire_progress)) != 0) { int e = errno; close(fd); return -e; }
    void *page = mmap(NULL, sizeof(roomkit_wire_progress), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (page == MAP_FAILED) { int e = errno; close(fd); return -e; }
    memset(page, 0, sizeof(roomkit_wire_progress));
    *out = page;
    return fd;
}

void roomkit_wire_progress_release(roomkit_wire_progress *page) {
    if (page) munmap(page, sizeof(roomkit_wire_progress));
}

pid_t roomkit_wire_spawn(const char *path, char *const argv[], char *const envp[], const char *cwd,
                         int socket_fd, int progress_fd, int out_fd, int err_fd) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_fd >= 0) posix_spawn_file_actions_adddup2(&actions, null_fd, 0);
    posix_spawn_file_actions_adddup2(&actions, out_fd, 1);
    posix_spawn_file_actions_adddup2(&actions, err_fd, 2);
    posix_spawn_file_actions_adddup2(&actions, socket_fd, ROOMKIT_WIRE_SOCKET_FD);
    if (progress_fd >= 0) posix_spawn_file_actions_adddup2(&actions, progress_fd, ROOMKIT_WIRE_PROGRESS_FD);
    if (cwd) posix_spawn_file_actions_addchdir_np(&actions, cwd);
    /* Default signal dispositions and an empty mask in the child. */
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    sigset_t all, none;
    sigfillset(&all);
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&attributes, &all);
    posix_spawnattr_setsigmask(&attributes, &none);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    pid_t pid = 0;
    int result = posix_spawn(&pid, path, &actions, &attributes, argv, envp ? envp : environ);
    posix_spawnattr_destroy(&attributes);
    posix_spawn_file_actions_destroy(&actions);
    if (null_fd >= 0) close(null_fd);
    return result == 0 ? pid : -result;
}

int roomkit_wire_reap(pid_t pid, int block, int *signal_number, int *exit_code) {
    int status = 0;
    pid_t done;
    do { done = waitpid(pid, &status, block ? 0 : WNOHANG); } while (done < 0 && errno == EINTR);
    if (done != pid) return done < 0 ? -1 : 0;
    *signal_number = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return 1;
}

int roomkit_wire_pipe(int fds[2]) {
    return pipe2(fds, O_CLOEXEC) == 0 ? 0 : -errno;
}

/* A sanitizer's shadow memory needs terabytes of address space: under
   `make check-sanitizers` the address-space limit is not set (the
   memory-limit test is skipped there; ROOMKIT_SANITIZED). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ROOMKIT_SANITIZED_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define ROOMKIT_SANITIZED_BUILD 1
#endif
#endif

int roomkit_wire_limit(pid_t pid, unsigned long memory_mb, unsigned long cpu_seconds) {
#ifndef ROOMKIT_SANITIZED_BUILD
    if (memory_mb > 0) {
        struct rlimit limit = {(rlim_t)memory_mb << 20, (rlim_t)memory_mb << 20};
        if (prlimit(pid, RLIMIT_AS, &limit, NULL) != 0) return -errno;
    }
#else
    (void)memory_mb;
#endif
    if (cpu_seconds > 0) {
        struct rlimit limit = {(rlim_t)cpu_seconds, (rlim_t)cpu_seconds + 1};
        if (prlimit(pid, RLIMIT_CPU, &limit, NULL) != 0) return -errno;
    }
    return 0;
}
