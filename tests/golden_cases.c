/*
 * tests/golden_cases.c — loading the golden cases (tests/golden: forward
 * inputs and outputs; tests/golden_grad: the same with the gradients), as
 * tests/common.h declares them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

const char *golden_dir(void)
{
    const char *d = getenv("KDALAB_GOLDEN");
    return d && *d ? d : "tests/golden";
}

static void load_array_in(const char *dir, const char *name, const char *key, kdalab_array *a,
                          int required)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.%s.npy", dir, name, key);
    memset(a, 0, sizeof *a);
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (required)
            fail_msg("golden file %s is missing", path);
        return;
    }
    fclose(f);
    kdalab_status s = kdalab_npy_read(path, a);
    if (s != KDALAB_OK)
        fail_msg("reading %s: %s (%s)", path, kdalab_strerror(s), kdalab_last_error());
}

static void load_array(const char *name, const char *key, kdalab_array *a, int required)
{
    load_array_in(golden_dir(), name, key, a, required);
}

const char *grad_golden_dir(void)
{
    const char *d = getenv("KDALAB_GOLDEN_GRAD");
    return d && *d ? d : "tests/golden_grad";
}

size_t grad_load_all(grad_case *cases, size_t max)
{
    char path[512], line[512];
    const char *dir = grad_golden_dir();
    snprintf(path, sizeof path, "%s/MANIFEST.tsv", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("cannot open %s (run the tests from the repository root)", path);
    size_t n = 0;
    while (fgets(line, sizeof line, f) && n < max) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        grad_case *c = &cases[n];
        memset(c, 0, sizeof *c);
        char mech[64];
        if (sscanf(line, "%63s %63s %zu %zu %zu %zu %zu %lf %d %d", c->name, mech, &c->dims.B,
                   &c->dims.T, &c->dims.H, &c->dims.K, &c->dims.V, &c->scale, &c->has_h0,
                   &c->has_dht) != 10)
            fail_msg("malformed MANIFEST line: %s", line);
        if (kdalab_mechanism_parse(mech, &c->mech) != KDALAB_OK)
            fail_msg("unknown mechanism %s in MANIFEST", mech);
        int has_beta = kdalab_mechanism_has_beta(c->mech);
        int has_g = kdalab_mechanism_g_width(c->mech, 1) > 0;
        load_array_in(dir, c->name, "q", &c->q, 1);
        load_array_in(dir, c->name, "k", &c->k, 1);
        load_array_in(dir, c->name, "v", &c->v, 1);
        load_array_in(dir, c->name, "beta", &c->beta, has_beta);
        load_array_in(dir, c->name, "g", &c->g, has_g);
        load_array_in(dir, c->name, "h0", &c->h0, c->has_h0);
        load_array_in(dir, c->name, "do", &c->d_o, 1);
        load_array_in(dir, c->name, "dht", &c->dht, c->has_dht);
        load_array_in(dir, c->name, "o", &c->o, 1);
        load_array_in(dir, c->name, "ht", &c->ht, 1);
        load_array_in(dir, c->name, "dq", &c->dq, 1);
        load_array_in(dir, c->name, "dk", &c->dk, 1);
        load_array_in(dir, c->name, "dv", &c->dv, 1);
        load_array_in(dir, c->name, "dbeta", &c->dbeta, has_beta);
        load_array_in(dir, c->name, "dg", &c->dg, has_g);
        load_array_in(dir, c->name, "dh0", &c->dh0, c->has_h0);
        const int ab = kdalab_mechanism_has_ab(c->mech);
        load_array_in(dir, c->name, "a", &c->a, ab);
        load_array_in(dir, c->name, "b", &c->b, ab);
        load_array_in(dir, c->name, "da", &c->da, ab);
        load_array_in(dir, c->name, "db", &c->db, ab);
        n++;
    }
    fclose(f);
    assert_true(n > 0);
    return n;
}

void grad_case_free(grad_case *c)
{
    kdalab_array *all[] = {&c->q,  &c->k,   &c->v,  &c->beta, &c->g,  &c->h0,
                           &c->d_o, &c->dht, &c->o,  &c->ht,   &c->dq, &c->dk,
                           &c->dv, &c->dbeta, &c->dg, &c->dh0, &c->a, &c->b,
                           &c->da, &c->db};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        kdalab_array_free(all[i]);
}

size_t golden_load_all(golden_case *cases, size_t max)
{
    char path[512], line[512];
    snprintf(path, sizeof path, "%s/MANIFEST.tsv", golden_dir());
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("cannot open %s (run the tests from the repository root)", path);
    size_t n = 0;
    while (fgets(line, sizeof line, f) && n < max) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        golden_case *c = &cases[n];
        memset(c, 0, sizeof *c);
        char mech[64];
        if (sscanf(line, "%63s %63s %zu %zu %zu %zu %zu %lf %d", c->name, mech, &c->dims.B,
                   &c->dims.T, &c->dims.H, &c->dims.K, &c->dims.V, &c->scale, &c->has_h0) != 9)
            fail_msg("malformed MANIFEST line: %s", line);
        if (kdalab_mechanism_parse(mech, &c->mech) != KDALAB_OK)
            fail_msg("unknown mechanism %s in MANIFEST", mech);
        load_array(c->name, "q", &c->q, 1);
        load_array(c->name, "k", &c->k, 1);
        load_array(c->name, "v", &c->v, 1);
        load_array(c->name, "beta", &c->beta, kdalab_mechanism_has_beta(c->mech));
        load_array(c->name, "g", &c->g, kdalab_mechanism_g_width(c->mech, 1) > 0);
        load_array(c->name, "h0", &c->h0, c->has_h0);
        load_array(c->name, "a", &c->a, kdalab_mechanism_has_ab(c->mech));
        load_array(c->name, "b", &c->b, kdalab_mechanism_has_ab(c->mech));
        load_array(c->name, "o", &c->o, 1);
        load_array(c->name, "ht", &c->ht, 1);
        n++;
    }
    fclose(f);
    assert_true(n > 0);
    return n;
}

void golden_free(golden_case *c)
{
    kdalab_array *all[] = {&c->q, &c->k, &c->v, &c->beta, &c->g, &c->h0, &c->o, &c->ht,
                           &c->a, &c->b};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        kdalab_array_free(all[i]);
}

