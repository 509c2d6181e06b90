/*
 * test_cli_files.c — bin/kdalab never loses a file it was not asked to
 * write: `kdalab train --out DIR` replaces only a checkpoint it wrote itself
 * (whatever else DIR is, it is refused before training and kept as it
 * was), and an interrupt at any step of a save, of train's checkpoint or of
 * grad's outputs, leaves the old files or the new ones complete in place.
 *
 * The interrupts come from the tool's test-only hook
 * KDALAB_TEST_INTERRUPT=<step>:<INT|KILL>, which raises the signal at that
 * step of the save (tools/kdalab/replace.c); KDALAB_TEST_NO_EXCHANGE=1
 * makes it replace as on a filesystem without renameat2's exchange.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "kdalab.h"

/* A tiny model: trains in well under a second. */
#define TINY "train --task dense --mixer attention --d-model 8 --heads 2 --seq-len 16 " \
             "--kv-pairs 2 --vocab 9 --batch 2 --test-size 4 --log-every 0"

/* A real .npy file of n float64 values i + seed. */
static void put_npy(const char *path, size_t n, double seed)
{
    double x[16];
    for (size_t i = 0; i < n && i < 16; i++)
        x[i] = (double)i + seed;
    size_t shape[1] = {n};
    if (kdalab_npy_write(path, KDALAB_DTYPE_F64, x, 1, shape) != KDALAB_OK)
        fail_msg("writing %s: %s", path, kdalab_last_error());
}

/* A copy of a file's bytes, to compare with later. */
typedef struct {
    unsigned char *b;
    size_t len;
} snapshot;

static snapshot take(const char *path)
{
    snapshot s;
    s.b = tcli_file_bytes(path, &s.len);
    return s;
}

/* path still holds exactly the snapshot's bytes; frees it. */
static void unchanged(const char *path, snapshot s)
{
    size_t len;
    unsigned char *b = tcli_file_bytes(path, &len);
    if (len != s.len || memcmp(b, s.b, len) != 0)
        fail_msg("%s was changed", path);
    free(b);
    free(s.b);
}

/* The steps= value of dir/config.txt, after checking dir is a complete
 * checkpoint of the TINY model: the format line, then every tensor's .npy
 * readable with its shape, and nothing else. */
static int checkpoint_steps(const char *dir)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/config.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("%s: no config.txt", dir);
    char line[256];
    int steps = -1;
    assert_non_null(fgets(line, sizeof line, f));
    assert_string_equal(line, "format=kdalab-checkpoint/1\n");
    while (fgets(line, sizeof line, f))
        sscanf(line, "steps=%d", &steps);
    fclose(f);
    kdalab_model_config m;
    memset(&m, 0, sizeof m);
    m.vocab = 9;
    m.D = 8;
    m.H = 2;
    m.L = 2;
    m.F = 16;
    m.conv = 1;
    m.mixer[0] = m.mixer[1] = KDALAB_MIXER_ATTENTION;
    size_t n_tensors;
    assert_int_equal(kdalab_model_size(&m, NULL, &n_tensors), KDALAB_OK);
    for (size_t i = 0; i < n_tensors; i++) {
        kdalab_model_tensor t;
        kdalab_model_tensor_at(&m, i, &t);
        snprintf(path, sizeof path, "%s/%s.npy", dir, t.name);
        kdalab_array a;
        if (kdalab_npy_read(path, &a) != KDALAB_OK)
            fail_msg("%s: %s", path, kdalab_last_error());
        assert_int_equal(a.size, t.rows * t.cols);
        kdalab_array_free(&a);
    }
    assert_int_equal(tcli_count_entries(dir, ""), (int)n_tensors + 1 + 2); /* + config, ., .. */
    return steps;
}

/* A fresh checkpoint of TINY trained for `steps` steps at tmp(name). */
static void make_checkpoint(const char *name, int steps)
{
    assert_int_equal(tcli_run(TINY " --steps %d --out %s", steps, tcli_tmp(name)), 0);
    assert_int_equal(checkpoint_steps(tcli_tmp(name)), steps);
}

/* Nothing named <name>.<anything> is left beside name in tmpdir. */
static void no_leftovers(const char *name)
{
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%s.", name);
    assert_int_equal(tcli_count_entries(NULL, prefix), 0);
}

/* A directory holding the user's .npy files (no config.txt: not a
 * checkpoint) is refused before training, every file kept. So is an older
 * checkpoint without the format line (with a message saying what to do),
 * and a checkpoint into which the user put a file of their own. */
static void foreign_files_survive(void **state)
{
    (void)state;
    char data[512];
    snprintf(data, sizeof data, "%s", tcli_tmp("data"));
    assert_int_equal(mkdir(data, 0755), 0);
    const char *names[] = {"q.npy", "k.npy", "v.npy"};
    snapshot keep[3];
    char path[3][600];
    for (int i = 0; i < 3; i++) {
        snprintf(path[i], sizeof path[i], "%s/%s", data, names[i]);
        put_npy(path[i], 5, i);
        keep[i] = take(path[i]);
    }
    tcli_expect_error(tcli_run(TINY " --steps 2 --out %s", data), 2, "--out", data,
                      "not a kdalab checkpoint", NULL);
    for (int i = 0; i < 3; i++)
        unchanged(path[i], keep[i]);
    assert_int_equal(tcli_count_entries(data, ""), 5);
    no_leftovers("data");

    /* a checkpoint of an earlier kdalab: config.txt without the format line */
    make_checkpoint("older", 2);
    char cfg[512];
    snprintf(cfg, sizeof cfg, "%s/config.txt", tcli_tmp("older"));
    tcli_put_bytes(cfg, "task=mqar\nmixer=attention,attention\n", 36);
    tcli_expect_error(tcli_run(TINY " --steps 2 --out %s", tcli_tmp("older")), 2,
                      "format=kdalab-checkpoint/1", "remove it", NULL);
    assert_true(tcli_exists(cfg));

    /* a checkpoint with the user's own .npy added: not ours to delete */
    make_checkpoint("mixed", 2);
    char mine[512];
    snprintf(mine, sizeof mine, "%s/q.npy", tcli_tmp("mixed"));
    put_npy(mine, 3, 7);
    snapshot m = take(mine);
    tcli_expect_error(tcli_run(TINY " --steps 3 --out %s", tcli_tmp("mixed")), 2, "q.npy",
                      NULL);
    unchanged(mine, m);
    unlink(mine);
    assert_int_equal(checkpoint_steps(tcli_tmp("mixed")), 2);
}

/* --out naming a symbolic link to a checkpoint: refused before training;
 * the link stays a link and the directory it points to is untouched. */
static void symlink_refused(void **state)
{
    (void)state;
    make_checkpoint("target", 2);
    char embed[512];
    snprintf(embed, sizeof embed, "%s/embed.npy", tcli_tmp("target"));
    snapshot e = take(embed);
    char link[512];
    snprintf(link, sizeof link, "%s", tcli_tmp("link"));
    assert_int_equal(symlink(tcli_tmp("target"), link), 0);
    tcli_expect_error(tcli_run(TINY " --steps 3 --out %s", link), 2, "symbolic link", NULL);
    struct stat st;
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(checkpoint_steps(tcli_tmp("target")), 2);
    unchanged(embed, e);
    /* with a trailing slash too (a path through the link) */
    char slash[600];
    snprintf(slash, sizeof slash, "%s/", link);
    tcli_expect_error(tcli_run(TINY " --steps 3 --out %s", slash), 2, "symbolic link", NULL);
    assert_int_equal(checkpoint_steps(tcli_tmp("target")), 2);
    no_leftovers("link");
    no_leftovers("target");
}

/* "ckpt/" is ckpt: an existing checkpoint is replaced, nothing left
 * beside it. "." and "ckpt/." (a directory named by '.') are refused
 * before training (one line on stderr: nothing trained), kept whole. */
static void trailing_slash_and_dot(void **state)
{
    (void)state;
    make_checkpoint("slash", 2);
    char arg[512];
    snprintf(arg, sizeof arg, "%s//", tcli_tmp("slash"));
    assert_int_equal(tcli_run(TINY " --steps 3 --out %s", arg), 0);
    assert_non_null(strstr(tcli_out, "accuracy="));
    assert_int_equal(checkpoint_steps(tcli_tmp("slash")), 3);
    no_leftovers("slash");

    char cd[600];
    snprintf(cd, sizeof cd, "cd '%s' && ", tcli_tmp("slash"));
    int st = tcli_run_raw(cd, TINY " --steps 4 --out .");
    assert_true(WIFEXITED(st));
    tcli_expect_error(WEXITSTATUS(st), 2, "--out .", NULL);
    snprintf(arg, sizeof arg, "%s/.", tcli_tmp("slash"));
    tcli_expect_error(tcli_run(TINY " --steps 4 --out %s", arg), 2, "'.'", NULL);
    assert_int_equal(checkpoint_steps(tcli_tmp("slash")), 3);
    no_leftovers("slash");
}

/* Every check the save makes is made before training, including the rules
 * access() cannot see: in a sticky directory (as /tmp is), a checkpoint of
 * another user cannot be renamed away, so --out naming it is refused up
 * front rather than after a whole run. Needs root (to act as two users) and
 * setpriv; skipped otherwise. */
static void sticky_parent_refused_up_front(void **state)
{
    (void)state;
    const char *as_user = "setpriv --reuid=1000 --regid=1000 --clear-groups ";
    if (geteuid() != 0 || system("command -v setpriv >/dev/null 2>&1") != 0) {
        printf("    not root, or no setpriv: skipped\n");
        return;
    }
    int st = tcli_run_raw(as_user, "info");
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        printf("    bin/kdalab cannot be run as uid 1000 here: skipped\n");
        return;
    }
    assert_int_equal(chmod(tcli_tmpdir, 0711), 0);
    const char *sticky = tcli_tmp("sticky");
    assert_int_equal(mkdir(sticky, 0777), 0);
    assert_int_equal(chmod(sticky, 01777), 0);
    char ck[600], cmd[1400];
    snprintf(ck, sizeof ck, "%s/ck", sticky);
    assert_int_equal(tcli_run(TINY " --steps 2 --out %s", ck), 0); /* root's checkpoint */
    snprintf(cmd, sizeof cmd, "chmod -R a+rwX '%s'", ck); /* access() says yes */
    assert_int_equal(system(cmd), 0);
    st = tcli_run_raw(as_user, TINY " --steps 3 --out %s", ck);
    assert_true(WIFEXITED(st));
    tcli_expect_error(WEXITSTATUS(st), 2, "cannot be replaced by a rename", NULL);
    assert_null(strstr(tcli_err, "step 3")); /* refused before training */
    assert_int_equal(checkpoint_steps(ck), 2);
    snprintf(cmd, sizeof cmd, "ls -a '%s' | grep -c kdalab-save >/dev/null", sticky);
    assert_int_not_equal(system(cmd), 0); /* no trial directory left */
    assert_int_equal(chmod(tcli_tmpdir, 0700), 0);
}

/* An interrupt at each step of the save. SIGINT is held until the save is
 * done: the new checkpoint is in place, nothing left beside it, and the
 * signal still ends the program. SIGKILL cannot be held: the old
 * checkpoint or the new one is in place, complete; what the save left is
 * named by the next run, which refuses to go on until it is removed. The
 * user's files beside the checkpoint survive every case. */
static void interrupt_each_step(void **state)
{
    (void)state;
    static const char *const steps[] = {"mkdir", "write", "swap", "remove"};
    char user[512]; /* tcli_tmp's buffers rotate */
    snprintf(user, sizeof user, "%s", tcli_tmp("mine.npy"));
    put_npy(user, 4, 1);
    for (int exch = 0; exch < 2; exch++)
        for (int s = 0; s < 4; s++)
            for (int kill = 0; kill < 2; kill++) {
                snapshot u = take(user);
                make_checkpoint("ck", 2);
                char env[128];
                snprintf(env, sizeof env, "KDALAB_TEST_INTERRUPT=%s:%s %s", steps[s],
                         kill ? "KILL" : "INT", exch ? "KDALAB_TEST_NO_EXCHANGE=1 " : "");
                int st = tcli_run_raw(env, "%s --steps 3 --out %s", TINY, tcli_tmp("ck"));
                /* the shell reports a death by signal n as exit 128 + n */
                int sig = WIFSIGNALED(st) ? WTERMSIG(st)
                          : WIFEXITED(st) && WEXITSTATUS(st) > 128 ? WEXITSTATUS(st) - 128
                                                                   : 0;
                if (sig != (kill ? SIGKILL : SIGINT))
                    fail_msg("%s: status %d, not the signal; stderr: %s", env, st, tcli_err);
                int now = checkpoint_steps(tcli_tmp("ck"));
                int left = tcli_count_entries(NULL, "ck.kdalab-save-");
                if (!kill) {
                    assert_int_equal(now, 3);
                    assert_int_equal(left, 0);
                } else {
                    /* before the swap: the old one; from the swap on: the new one */
                    assert_int_equal(now, s < 2 ? 2 : 3);
                    assert_int_equal(left, s < 3 ? 1 : 0);
                }
                no_leftovers("ck.old");
                no_leftovers("ck.partial");
                if (left) { /* named by the next run, which changes nothing */
                    tcli_expect_error(tcli_run(TINY " --steps 4 --out %s", tcli_tmp("ck")), 2,
                                      "ck.kdalab-save-", "interrupted", NULL);
                    assert_int_equal(checkpoint_steps(tcli_tmp("ck")), now);
                    char cmd[600];
                    snprintf(cmd, sizeof cmd, "rm -rf '%s'/ck.kdalab-save-*", tcli_tmpdir);
                    assert_int_equal(system(cmd), 0);
                }
                unchanged(user, u);
            }
}

/* kdalab grad: an output's temporary file can never be one of the inputs
 * (here --do is named as the temporary file of --dq would have been
 * named, <out>.kdalab-partial-<pid>), and an interrupt while the outputs
 * are replaced leaves each one old or new, never missing. */
static const char *grad_args(const char *d_o)
{
    static char buf[4096];
    const char *dir = grad_golden_dir(), *c = "linear_attention_grad";
    snprintf(buf, sizeof buf, "grad --mechanism linear_attention --scale 0.3535533905932738 "
             "--q %s/%s.q.npy --k %s/%s.k.npy --v %s/%s.v.npy --h0 %s/%s.h0.npy "
             "--dht %s/%s.dht.npy --do %s",
             dir, c, dir, c, dir, c, dir, c, dir, c, d_o);
    return buf;
}

static void grad_temporary_names(void **state)
{
    (void)state;
    char d_o[512];
    snprintf(d_o, sizeof d_o, "%s/linear_attention_grad.do.npy", grad_golden_dir());
    char dq[512], dk[512]; /* tcli_tmp's buffers rotate */
    snprintf(dq, sizeof dq, "%s", tcli_tmp("a.npy"));
    snprintf(dk, sizeof dk, "%s", tcli_tmp("b.npy"));
    /* the reference result */
    assert_int_equal(tcli_run("%s --dq %s --dk %s", grad_args(d_o), dq, dk), 0);
    snapshot want_q = take(dq), want_k = take(dk);

    /* --do at the name the old scheme gave --dq's temporary file ($$ is
     * the shell's pid, which exec hands to kdalab) */
    unlink(dq);
    char env[2048];
    snprintf(env, sizeof env, "cp '%s' '%s'.kdalab-partial-$$ && exec ", d_o, dq);
    char in[600];
    snprintf(in, sizeof in, "%s.kdalab-partial-$$", dq);
    int st = tcli_run_raw(env, "%s --dq %s", grad_args(in), dq);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    /* the input is still do's bytes, and dq is right */
    DIR *dir = opendir(tcli_tmpdir);
    assert_non_null(dir);
    struct dirent *e;
    int found = 0;
    snapshot d = take(d_o);
    while ((e = readdir(dir)) != NULL)
        if (strncmp(e->d_name, "a.npy.kdalab-partial-", 21) == 0) {
            found++;
            unchanged(tcli_tmp(e->d_name), (snapshot){memcpy(malloc(d.len), d.b, d.len), d.len});
            unlink(tcli_tmp(e->d_name));
        }
    closedir(dir);
    free(d.b);
    assert_int_equal(found, 1);
    unchanged(dq, (snapshot){memcpy(malloc(want_q.len), want_q.b, want_q.len), want_q.len});

    /* interrupts while replacing dq and dk (existing, other bytes) */
    static const char *const steps[] = {"write", "swap", "remove"};
    for (int exch = 0; exch < 2; exch++)
        for (int s = 0; s < 3; s++)
            for (int kill = 0; kill < 2; kill++) {
                tcli_put_bytes(dq, "old q", 5);
                tcli_put_bytes(dk, "old k", 5);
                snprintf(env, sizeof env, "KDALAB_TEST_INTERRUPT=%s:%s %s", steps[s],
                         kill ? "KILL" : "INT", exch ? "KDALAB_TEST_NO_EXCHANGE=1 " : "");
                st = tcli_run_raw(env, "%s --dq %s --dk %s", grad_args(d_o), dq, dk);
                int sig = WIFSIGNALED(st) ? WTERMSIG(st)
                          : WIFEXITED(st) && WEXITSTATUS(st) > 128 ? WEXITSTATUS(st) - 128
                                                                   : 0;
                if (sig != (kill ? SIGKILL : SIGINT))
                    fail_msg("%s: status %d, not the signal; stderr: %s", env, st, tcli_err);
                const char *paths[2] = {dq, dk};
                const snapshot *want[2] = {&want_q, &want_k};
                for (int i = 0; i < 2; i++) {
                    size_t len;
                    unsigned char *b = tcli_file_bytes(paths[i], &len); /* never missing */
                    int is_old = len == 5 && memcmp(b, i ? "old k" : "old q", 5) == 0;
                    int is_new = len == want[i]->len && memcmp(b, want[i]->b, len) == 0;
                    assert_true(is_old || is_new);
                    /* held INT: all new; KILL before the swaps: all old */
                    if (!kill)
                        assert_true(is_new);
                    if (kill && s == 0)
                        assert_true(is_old);
                    if (kill && s == 2)
                        assert_true(is_new);
                    free(b);
                }
                if (!kill) {
                    assert_int_equal(tcli_count_entries(NULL, "a.npy."), 0);
                    assert_int_equal(tcli_count_entries(NULL, "b.npy."), 0);
                }
                snprintf(in, sizeof in, "rm -f '%s'/a.npy.* '%s'/b.npy.*", tcli_tmpdir,
                         tcli_tmpdir);
                assert_int_equal(system(in), 0);
            }
    free(want_q.b);
    free(want_k.b);
}

/* Every size flag of train has a bound, refused before anything is
 * allocated, with the bound in the message. (Each run goes through
 * timeout(1): a size that is not refused would otherwise run for days; its
 * exit 124 then fails the test.) */
static int bounded_run(const char *args)
{
    int st = tcli_run_raw("timeout 300 ", "%s", args);
    if (!WIFEXITED(st))
        fail_msg("%s: status %d", args, st);
    return WEXITSTATUS(st);
}

static void train_sizes_bounded(void **state)
{
    (void)state;
    tcli_expect_error(bounded_run("train --task dense --mixer kda --test-size 4611686018427387904"),
                      2, "--test-size", "1e+16", "at most", NULL);
    tcli_expect_error(bounded_run("train --task dense --mixer kda --steps 18446744073709551615"),
                      2, "--steps", "1e+16", NULL);
    tcli_expect_error(bounded_run("train --task dense --mixer attention --seq-len 20000000 "
                                  "--steps 1 --test-size 1"),
                      2, "--seq-len 20000000", "1e+16", NULL);
    tcli_expect_error(bounded_run("train --task dense --mixer kda --batch 10000000 --steps 1 "
                                  "--test-size 1"),
                      2, "--batch 10000000", "GB of memory", "this machine has", NULL);
    tcli_expect_error(bounded_run("train --task dense --mixer kda --d-model 20000 --heads 1 "
                                  "--steps 1 --test-size 1"),
                      2, "--d-model 20000", "GB of memory", NULL);
}

/* The interrupt tests send SIGINT to the command they start: a shell that
 * starts `make test &` without job control has it ignored, and the command
 * would inherit that, so the default action is restored first. */
static int setup(void **state)
{
    signal(SIGINT, SIG_DFL);
    return tcli_setup("kdalab_files_");
}
static int teardown(void **state) { return test_tmpdir_remove(tcli_tmpdir); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(foreign_files_survive),
        cmocka_unit_test(symlink_refused),
        cmocka_unit_test(trailing_slash_and_dot),
        cmocka_unit_test(sticky_parent_refused_up_front),
        cmocka_unit_test(interrupt_each_step),
        cmocka_unit_test(grad_temporary_names),
        cmocka_unit_test(train_sizes_bounded),
    };
    return cmocka_run_group_tests_name("cli_files", tests, setup, teardown);
}
