/*
 * test_results_page.c — scripts/results_page.sh, the page `make run` ends with.
 *
 * A small fixture stands in for a results folder (no experiment or gnuplot
 * runs): a stand-in file for every figure the plot scripts write (their "set
 * output" lines) but one, left undrawn; machine.txt, run_time.txt, one
 * experiment's printed summary (with characters HTML must escape), one
 * reduced-sweep TSV header and one figure drawn from the full sweep. The page
 * must name every figure and every claim of plots/claims.tsv, state the
 * machine, the run's time and the sweep, link only files that exist (relative
 * links, nothing from elsewhere), and escape what it quotes. A claim whose
 * verdict rests on the full sweep links the full sweep's figure in its row
 * (or the variant run's, full-sweeps/NN-name/, that the claim names) and
 * shows its experiment's other variant runs as such, which the experiment's
 * section shows too; every row shows its drawn figures as thumbnails that link the full size, a
 * timed claim's row quotes its experiment's "spread:" lines (median and range
 * of its rounds) and the "verdict:" lines it computed, says they move from
 * machine to machine, and printouts
 * wrap their long lines. A results folder
 * that does not exist is one error and no page.
 *
 * Runs from the repository root, where `make test` runs the tests.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <glob.h>
#include <unistd.h>

#include "common.h"

#define MAX_FIGS 64
#define MAX_CLAIMS 128

static char tmpdir[256];
static char figs[MAX_FIGS][128];
static size_t nfigs;

static void write_text(const char *dir, const char *name, const char *text)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    test_write_text(p, text);
}

/* Every "set output <var>.'/NAME.png'" of plots/NN_*.gp. */
static void load_figures(void)
{
    glob_t g;
    nfigs = 0;
    assert_int_equal(glob("plots/[0-9][0-9]_*.gp", 0, NULL, &g), 0);
    for (size_t i = 0; i < g.gl_pathc; i++) {
        FILE *f = fopen(g.gl_pathv[i], "r");
        assert_non_null(f);
        char line[1024];
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "set output ", 11) != 0)
                continue;
            char *a = strstr(line, ".'/"), *b = a ? strstr(a + 3, ".png'") : NULL;
            if (!a || !b)
                continue;
            assert_true(nfigs < MAX_FIGS);
            snprintf(figs[nfigs++], sizeof figs[0], "%.*s.png", (int)(b - (a + 3)), a + 3);
        }
        fclose(f);
    }
    globfree(&g);
    assert_true(nfigs >= 21);
}

static int run_page(const char *dir)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "sh scripts/results_page.sh '%s' >'%s.out' 2>'%s.err'", dir, tmpdir, tmpdir);
    int st = system(cmd);
    assert_true(st != -1 && WIFEXITED(st));
    return WEXITSTATUS(st);
}

/* s with & < > " escaped as HTML does (malloc'd). */
static char *html_escape(const char *s)
{
    char *o = malloc(strlen(s) * 6 + 1), *w = o;
    for (; *s; s++) {
        const char *r = *s == '&' ? "&amp;" : *s == '<' ? "&lt;" : *s == '>' ? "&gt;" : *s == '"' ? "&quot;" : NULL;
        if (r) {
            strcpy(w, r);
            w += strlen(r);
        } else
            *w++ = *s;
    }
    *w = '\0';
    return o;
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/kdalab_page_XXXXXX");
    if (!mkdtemp(tmpdir))
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s.out' '%s.err'", tmpdir, tmpdir, tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Does needle occur between the first `open` of html and the first `close`
 * after it? Both must be there. */
static int in_block(const char *html, const char *open, const char *close, const char *needle)
{
    const char *start = strstr(html, open);
    if (!start)
        fail_msg("index.html has no %s", open);
    const char *end = strstr(start, close);
    if (!end)
        fail_msg("index.html has no %s after %s", close, open);
    const char *at = strstr(start, needle);
    return at && at < end;
}

/* a claim's findings row, as in_block takes it */
#define ROW(id) "<tr id=\"claim-" id "\">", "</tr>"

static void page_names_every_figure_and_claim(void **state)
{
    (void)state;
    load_figures();
    char res[400], p[600];
    snprintf(res, sizeof res, "%s/results", tmpdir);
    assert_int_equal(mkdir(res, 0755), 0);
    snprintf(p, sizeof p, "%s/full-sweeps", res);
    assert_int_equal(mkdir(p, 0755), 0);
    /* every figure drawn but the first */
    for (size_t i = 1; i < nfigs; i++)
        write_text(res, figs[i], "stand-in for a PNG");
    write_text(res, "full-sweeps/17_nope_needs_position.png", "stand-in for a PNG");
    /* variant runs' figures (make figures-full: full-sweeps/NN-name/): one a
     * claim names as its verdict's (plots/claims.tsv: 20-regime/...), one no
     * claim names */
    snprintf(p, sizeof p, "%s/full-sweeps/20-regime", res);
    assert_int_equal(mkdir(p, 0755), 0);
    write_text(res, "full-sweeps/20-regime/20_output_gate.png", "stand-in for a PNG");
    snprintf(p, sizeof p, "%s/full-sweeps/17-pairs16", res);
    assert_int_equal(mkdir(p, 0755), 0);
    write_text(res, "full-sweeps/17-pairs16/17_nope_needs_position.png", "stand-in for a PNG");
    write_text(res, "machine.txt", "cpu=Fixture CPU 9000\nsimd_level=avx2\ncpus_online=2\n");
    write_text(res, "run_time.txt", "seconds=125\n");
    write_text(res, "02_two_timescales.txt", "err <0.1 & \"cos\" > 0.9\n");
    write_text(res, "06_scaling.txt",
               "a table\nspread: exponent of softmax_attention_f64: median 1.999 (range 1.963 .. 2.029, 5 rounds)\n"
               "spread: kda_chunkwise_f64 / gated_deltanet_chunkwise_f64 at T = 8192: median 0.96x (range 0.84 .. 1.09x, 5 rounds)\n"
               "verdict: per-channel decay costs no extra asymptotic cost: does not hold (fixture)\n");
    write_text(res, "10_chunk_cost.txt",
               "a table\nspread: pairwise / safe at C = 256 (float64): median 2.7x (range 2.6 .. 2.7x, 5 rounds)\n"
               "Verdict (medians of the rounds): the fixture's tensor is avoided\n");
    write_text(res, "14_recall_by_mechanism.tsv",
               "# 14_recall_by_mechanism: fixture\n"
               "# parameters: reduced sweep (fp32): D=32 H=2 T=40 vocab=65 steps=600 batch=16 seeds=1 test=512\n"
               "# label\tseed\taccuracy\nkda_p4\t1\t0.5\n");

    assert_int_equal(run_page(res), 0);
    snprintf(p, sizeof p, "%s/index.html", res);
    char *html = test_read_text(p);
    assert_non_null(html);

    /* every figure is named (the undrawn one as not drawn) */
    for (size_t i = 0; i < nfigs; i++)
        if (!strstr(html, figs[i]))
            fail_msg("index.html does not name the figure %s", figs[i]);
    char link[300];
    snprintf(link, sizeof link, "src=\"%s\"", figs[0]);
    if (strstr(html, link))
        fail_msg("index.html shows %s, which the fixture did not draw", figs[0]);
    assert_non_null(strstr(html, "full-sweeps/17_nope_needs_position.png"));
    /* a verdict from the full sweep: its findings row links the full sweep's figure too */
    if (!in_block(html, ROW("nope-trained"), "href=\"full-sweeps/17_nope_needs_position.png\""))
        fail_msg("the findings row of nope-trained does not link full-sweeps/17_nope_needs_position.png");
    /* a full-sweep verdict's row shows its experiment's variant runs too, and
     * the experiment's section shows them as figures */
    if (!in_block(html, ROW("output-gate"),
                  "<img class=\"thumb\" src=\"full-sweeps/20-regime/20_output_gate.png\""))
        fail_msg("the findings row of output-gate does not show full-sweeps/20-regime/20_output_gate.png");
    if (!in_block(html, ROW("output-gate"), "full-sweeps/20-regime/20_output_gate.png (the verdict&#39;s)") ||
        !in_block(html, ROW("output-gate"), "variant run (full-sweeps/20-regime/"))
        fail_msg("the findings row of output-gate does not call the variant run the verdict's source");
    /* a variant run no claim names is shown, not called the verdict's */
    if (!in_block(html, ROW("nope-trained"),
                  "full-sweeps/17-pairs16/17_nope_needs_position.png (a variant run"))
        fail_msg("the findings row of nope-trained does not show its variant run as one");
    if (in_block(html, ROW("nope-trained"), "17-pairs16/17_nope_needs_position.png (the verdict"))
        fail_msg("the findings row of nope-trained calls a variant run the verdict's");
    if (!in_block(html, "<section id=\"20_output_gate\">", "</section>",
                  "<figure><a href=\"full-sweeps/20-regime/20_output_gate.png\">"))
        fail_msg("the section of 20_output_gate does not show its variant run's figure");
    /* a claim's figure is a thumbnail in its row, linking the full size */
    if (!in_block(html, ROW("dplr"), "<a href=\"08_dplr.png\"><img class=\"thumb\" src=\"08_dplr.png\""))
        fail_msg("the findings row of dplr does not show 08_dplr.png as a linked thumbnail");
    if (!in_block(html, ROW("nope-trained"),
                  "<img class=\"thumb\" src=\"full-sweeps/17_nope_needs_position.png\""))
        fail_msg("the findings row of nope-trained does not show the full sweep's figure as a thumbnail");
    /* a timed claim quotes the spread lines of its experiment, and what they are */
    if (!in_block(html, ROW("no-extra-cost"),
                  "kda_chunkwise_f64 / gated_deltanet_chunkwise_f64 at T = 8192: median 0.96x (range 0.84 .. 1.09x, 5 rounds)") ||
        !in_block(html, ROW("no-extra-cost"), "move from machine to machine"))
        fail_msg("the findings row of no-extra-cost does not quote 06's spread lines and say they move");
    /* and the verdict its experiment computed from them */
    if (!in_block(html, ROW("no-extra-cost"),
                  "this run's verdict: per-channel decay costs no extra asymptotic cost: does not hold (fixture)"))
        fail_msg("the findings row of no-extra-cost does not quote 06's own verdict line");
    if (!in_block(html, ROW("chunk-tensor"), "this run's verdict: the fixture's tensor is avoided"))
        fail_msg("the findings row of chunk-tensor does not quote 10's Verdict line");
    /* a timed claim whose experiment printed nothing says so */
    if (!in_block(html, ROW("dense-no-collapse"), "no spread lines printed"))
        fail_msg("the findings row of dense-no-collapse does not say its experiment printed no spread lines");
    /* printouts wrap their long lines instead of scrolling sideways */
    assert_non_null(strstr(html, "white-space:pre-wrap"));

    /* every claim: its anchor and its text */
    char *claims = test_read_text("plots/claims.tsv");
    assert_non_null(claims);
    size_t nclaims = 0;
    for (char *line = strtok(claims, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#' || strncmp(line, "id\t", 3) == 0)
            continue;
        char *tab = strchr(line, '\t');
        assert_non_null(tab);
        *tab = '\0';
        char *text = tab + 1, *tab2 = strchr(text, '\t');
        assert_non_null(tab2);
        *tab2 = '\0';
        char anchor[200];
        snprintf(anchor, sizeof anchor, "id=\"claim-%s\"", line);
        if (!strstr(html, anchor))
            fail_msg("index.html has no row for the claim %s", line);
        char *esc = html_escape(text);
        if (!strstr(html, esc))
            fail_msg("index.html does not quote the claim %s: %s", line, text);
        free(esc);
        nclaims++;
    }
    assert_true(nclaims >= 30 && nclaims < MAX_CLAIMS);
    free(claims);

    /* the machine, the run's time, the sweep, the summary escaped */
    assert_non_null(strstr(html, "Fixture CPU 9000"));
    assert_non_null(strstr(html, "avx2"));
    assert_non_null(strstr(html, "2 min 5 s"));
    assert_non_null(strstr(html, "reduced sweep: 1 seed, 600 steps"));
    assert_non_null(strstr(html, "err &lt;0.1 &amp; &quot;cos&quot; &gt; 0.9"));

    /* every file the page references exists beside it; nothing from elsewhere */
    size_t nref = 0;
    for (const char *s = html; (s = strpbrk(s, "sh")) != NULL; s++) {
        const char *val;
        if (strncmp(s, "src=\"", 5) == 0)
            val = s + 5;
        else if (strncmp(s, "href=\"", 6) == 0)
            val = s + 6;
        else
            continue;
        const char *end = strchr(val, '"');
        assert_non_null(end);
        if (*val == '#')
            continue;
        char ref[300], path[800];
        snprintf(ref, sizeof ref, "%.*s", (int)(end - val), val);
        if (strstr(ref, "://") || ref[0] == '/')
            fail_msg("index.html references %s, not a file beside it", ref);
        snprintf(path, sizeof path, "%s/%s", res, ref);
        if (!tcli_exists(path))
            fail_msg("index.html references %s, which does not exist", ref);
        nref++;
    }
    assert_true(nref >= nfigs);
    free(html);
}

static void missing_results_folder_is_one_error(void **state)
{
    (void)state;
    char res[400], p[600];
    snprintf(res, sizeof res, "%s/no_such_results", tmpdir);
    assert_int_not_equal(run_page(res), 0);
    snprintf(p, sizeof p, "%s/index.html", res);
    assert_false(tcli_exists(p));
    snprintf(p, sizeof p, "%s.err", tmpdir);
    char *err = test_read_text(p);
    assert_non_null(err);
    assert_non_null(strstr(err, "no_such_results"));
    assert_non_null(strstr(err, "not a directory"));
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(page_names_every_figure_and_claim),
        cmocka_unit_test(missing_results_folder_is_one_error),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
