/*
 * tools/kdalab/replace.c — putting a complete new file or directory in the
 * place of an existing one in one step, for every output bin/kdalab writes
 * (grad's and run's .npy files through outputs.c, train's checkpoint
 * directory through checkpoint.c).
 *
 * The new entry is made whole under a fresh temporary name beside its path
 * (replace_make_temp: mkstemp or mkdtemp, so the name never existed before
 * and cannot be any input of the call); replace_swap then exchanges the two
 * names with renameat2(RENAME_EXCHANGE), one atomic step, after which the
 * temporary name holds the previous entry until the caller removes it (or
 * swaps it back to undo). While the swap and the clean-up run, SIGINT,
 * SIGTERM, SIGHUP and SIGQUIT are held (replace_hold_signals) and take effect only
 * after, so an interrupt finds either the old entry or the new one in place,
 * never neither, and leaves no temporary name behind.
 *
 * defines: replace_make_temp, replace_swap, replace_hold_signals,
 *          replace_release_signals, replace_test_point (declared in cli.h)
 */
#define _GNU_SOURCE /* syscall(), SYS_renameat2 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cli.h"

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1) /* linux/fs.h */
#endif

int replace_make_temp(const char *path, const char *tag, int is_dir, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "%s.%s-XXXXXX", path, tag);
    if (n < 0 || (size_t)n >= cap) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (is_dir)
        return mkdtemp(buf) ? 0 : -1;
    int fd = mkstemp(buf);
    if (fd < 0)
        return -1;
    (void)fchmod(fd, 0644); /* mkstemp makes 0600; a data file is world-readable */
    close(fd);
    return 0;
}

/* renameat2(a, b, RENAME_EXCHANGE) through the system call itself (glibc
 * declares renameat2 only from 2.28, and only with _GNU_SOURCE). */
static int exchange(const char *a, const char *b)
{
#ifdef SYS_renameat2
    return (int)syscall(SYS_renameat2, AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE);
#else
    (void)a;
    (void)b;
    errno = ENOSYS;
    return -1;
#endif
}

int replace_swap(const char *fresh, const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? rename(fresh, path) : -1;
    /* TEST ONLY: KDALAB_TEST_NO_EXCHANGE=1 takes the path below, as on a
     * filesystem without RENAME_EXCHANGE */
    const char *no_exchange = getenv("KDALAB_TEST_NO_EXCHANGE");
    if (!(no_exchange && strcmp(no_exchange, "1") == 0)) {
        if (exchange(fresh, path) == 0)
            return 0;
        if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
            return -1;
    }
    /* The filesystem (or kernel) cannot exchange: three renames through a
     * third name made like fresh's (same stem, so a leftover is recognised
     * as this save's). Only a signal that cannot be held (SIGKILL) or a
     * crash between the first two leaves path missing; the previous entry
     * is then under that third name. */
    size_t len = strlen(fresh);
    if (len < 7 || fresh[len - 7] != '-') { /* not replace_make_temp's name */
        errno = EINVAL;
        return -1;
    }
    char aside[4096];
    if (len >= sizeof aside) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(aside, fresh, len - 6);
    memcpy(aside + len - 6, "XXXXXX", 7);
    const int is_dir = S_ISDIR(st.st_mode);
    int fd = -1;
    if (is_dir ? mkdtemp(aside) == NULL : (fd = mkstemp(aside)) < 0)
        return -1;
    if (fd >= 0)
        close(fd);
    if (rename(path, aside) != 0) {
        int e = errno;
        is_dir ? rmdir(aside) : unlink(aside);
        errno = e;
        return -1;
    }
    if (rename(fresh, path) != 0) {
        int e = errno;
        rename(aside, path); /* the previous entry back */
        errno = e;
        return -1;
    }
    if (rename(aside, fresh) != 0) /* the previous entry under fresh's name, as an exchange leaves it */
        return -1;
    return 0;
}

/* The first held signal that arrived, 0 if none: set by note_signal, which
 * is the disposition of every held signal while they are held. */
static volatile sig_atomic_t held_signal;

static void note_signal(int sig)
{
    if (!held_signal)
        held_signal = sig;
}

static const int held_signals[REPLACE_N_HELD] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

void replace_hold_signals(replace_held *h)
{
    /* A disposition, not a mask: a mask is one thread's, and a signal sent
     * to the process goes to any thread that does not block it (OpenMP's and
     * OpenBLAS's workers included), which would die in the middle of the
     * save. A disposition is the whole process's. */
    struct sigaction note;
    memset(&note, 0, sizeof note);
    note.sa_handler = note_signal;
    sigemptyset(&note.sa_mask);
    held_signal = 0;
    for (int i = 0; i < REPLACE_N_HELD; i++)
        sigaction(held_signals[i], &note, &h->old[i]);
}

void replace_release_signals(const replace_held *h)
{
    for (int i = 0; i < REPLACE_N_HELD; i++)
        sigaction(held_signals[i], &h->old[i], NULL);
    int sig = held_signal;
    held_signal = 0;
    if (sig) /* delivered now, with the disposition the program had */
        raise(sig);
}

void replace_test_point(const char *step)
{
    /* TEST ONLY: KDALAB_TEST_INTERRUPT=<step>:<INT|KILL> sends that signal
     * to the process at the named point of a save, so the tests can show
     * what an interrupt there leaves. Sent as a Ctrl-C or kill(1) sends it,
     * to the process, not to this thread: any thread may take it (OpenMP's
     * idle workers included). Not a user setting; nothing else reads it. */
    const char *want = getenv("KDALAB_TEST_INTERRUPT");
    if (!want)
        return;
    size_t n = strlen(step);
    if (strncmp(want, step, n) != 0 || want[n] != ':')
        return;
    if (strcmp(want + n + 1, "KILL") == 0)
        kill(getpid(), SIGKILL);
    else if (strcmp(want + n + 1, "INT") == 0)
        kill(getpid(), SIGINT);
}
