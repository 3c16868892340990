/* gnuplot, run without a shell (gnuplot.h). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gnuplot.h"

/* The gnuplot to run: $QAT_GNUPLOT, or "gnuplot" found on the PATH (as
 * `command -v gnuplot`); NULL if there is none. */
const char *find_gnuplot(char *buf, size_t len) {
    const char *env = getenv("QAT_GNUPLOT");
    if (env && *env) return access(env, X_OK) == 0 ? env : NULL;
    const char *path = getenv("PATH");
    for (const char *s = path ? path : "/usr/bin:/bin"; *s;) {
        size_t n = strcspn(s, ":");
        if ((size_t)snprintf(buf, len, "%.*s/gnuplot", (int)n, n ? s : ".") < len && access(buf, X_OK) == 0) return buf;
        s += n + (s[n] == ':');
    }
    return NULL;
}

/* Sends the script down a pipe to gnuplot's standard input (no shell:
 * the program's name is taken as it is); 0 when gnuplot ran it and
 * exited 0. SIGPIPE is ignored while writing, so a gnuplot that dies
 * early is an error here, not the end of this process. gnuplot's stderr
 * is kept aside and shown only when it fails: on success it holds only
 * warnings about the data (an axis of one value widened), which say
 * nothing to the user. */
int run_gnuplot(const char *gnuplot, const char *script, size_t len) {
    int fd[2];
    FILE *said = tmpfile();
    if (pipe(fd) != 0) return said ? fclose(said) : 0, -1;
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) return close(fd[0]), close(fd[1]), said ? fclose(said) : 0, -1;
    if (pid == 0) {
        dup2(fd[0], 0);
        if (said) dup2(fileno(said), 2);
        close(fd[0]), close(fd[1]);
        execl(gnuplot, gnuplot, (char *)NULL);
        _exit(127);
    }
    close(fd[0]);
    struct sigaction ign = {.sa_handler = SIG_IGN}, old;
    sigemptyset(&ign.sa_mask);
    sigaction(SIGPIPE, &ign, &old);
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd[1], script + done, len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        done += (size_t)w;
    }
    close(fd[1]);
    sigaction(SIGPIPE, &old, NULL);
    int st, rc = 0;
    while (rc == 0 && waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) rc = -1;
    if (rc == 0) rc = done == len && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
    if (said && rc) { /* what gnuplot said, for the failure */
        char buf[4096];
        rewind(said);
        for (size_t n; (n = fread(buf, 1, sizeof buf, said)) > 0;) fwrite(buf, 1, n, stderr);
    }
    if (said) fclose(said);
    return rc;
}

