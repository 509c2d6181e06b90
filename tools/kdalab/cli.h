/*
 * tools/kdalab/cli.h — what the subcommands of bin/kdalab share: exit codes,
 * the one-line error, flag parsing on top of getopt_long, number parsing,
 * reading and shape-checking .npy inputs, and output-path checks.
 *
 * defines: EXIT_FAIL, EXIT_BAD, cli_who, cli_fail, cli_exit_for,
 *          cli_shape_str, cli_index_str,
 *          cli_parser, cli_arg, cli_begin, cli_next, cli_store, CLI_ARG, CLI_END,
 *          CLI_ERROR,
 *          cli_parse_size, cli_parse_double, cli_parse_scale, CLI_INPUT_OPTIONS,
 *          cli_input_to_f32,
 *          cli_input, cli_read_input, cli_check_values, cli_shape_is,
 *          cli_shape_mismatch,
 *          cli_check_output_path, cli_same_output (in cli.c);
 *          cli_inputs, IN_*, cli_inputs_plan, cli_inputs_read, cli_inputs_free
 *          (in inputs.c); cli_output, cli_write_all (in outputs.c);
 *          declares the subcommands cmd_run (run.c), cmd_compare (compare.c),
 *          cmd_info (info.c), cmd_grad (grad.c), cmd_train (train.c);
 *          ckpt_plan, ckpt_save (checkpoint.c);
 *          replace_make_temp, replace_swap, replace_hold_signals,
 *          replace_release_signals, replace_test_point (replace.c)
 *
 * Every error is ONE line on stderr, "<cli_who>: <message>", and the exit
 * status says what kind:
 *   0  success (compare: within tolerance)
 *   1  compare: outside tolerance; run: the computation overflowed (outputs
 *      written for study), memory ran out, or an output could not be written
 *   2  bad command line or bad input (unreadable or malformed file, wrong
 *      shape, NaN/Inf, g > 0, beta outside [0, 2], ...)
 */
#ifndef KDALAB_TOOL_CLI_H
#define KDALAB_TOOL_CLI_H

#include <getopt.h> /* struct option, getopt_long: POSIX systems with GNU extensions */
#include <signal.h> /* struct sigaction */
#include <stddef.h>
#include <stdint.h>

#include "kdalab.h"

#define EXIT_FAIL 1 /* computation or output failed; compare: outside tolerance */
#define EXIT_BAD 2  /* bad command line or bad input                          */

/* ---- errors ---------------------------------------------------------------- */

/* The prefix of every error line: "kdalab", "kdalab run", ... */
extern const char *cli_who;

/* Print "<cli_who>: <message>" as one line on stderr (line breaks in the
 * message become spaces) and return code. */
int cli_fail(int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* The exit status for a library status: EXIT_FAIL for ENOMEM and ERANGE (a
 * real failure), EXIT_BAD for the rest (bad input). */
int cli_exit_for(kdalab_status s);

/* "(1, 37, 2, 16)", "(5,)", "()": the shape of a. */
const char *cli_shape_str(const kdalab_array *a, char *buf, size_t cap);

/* The multi-index of flat element i of a C-order array a, as "(0, 3, 1, 2)". */
const char *cli_index_str(const kdalab_array *a, size_t i, char *buf, size_t cap);

/* ---- flags ------------------------------------------------------------------ */

/*
 * Flags are long options ("--name value" or "--name=value") plus "-h" for
 * help; each subcommand lists them as a getopt_long table (struct option,
 * <getopt.h>) whose val fields are distinct and >= 256, with "help" given
 * val 'h'. Flags and positional arguments may come in any order; "--" ends
 * the flags. A flag must be spelled in full (no abbreviations).
 *
 * A cli_parser walks one subcommand's arguments: cli_begin, then cli_next
 * until CLI_END. cli_next returns, one per call:
 *   an option's val   got->name is its long name, got->value its value (NULL
 *                     for a switch)
 *   CLI_ARG           a positional argument, in got->value
 *   CLI_END           no more arguments
 *   CLI_ERROR         an unknown flag, a missing value, a value given to a
 *                     switch, a flag other than --help given twice (which
 *                     one would count is a guess we do not make): the
 *                     one-line error is printed; exit EXIT_BAD
 * getopt_long keeps its state in globals (optind, optarg, ...): one parser
 * at a time.
 */
enum { CLI_END = -1, CLI_ERROR = -2, CLI_ARG = 1 };

#define CLI_MAX_OPTIONS 64 /* flags per subcommand */

typedef struct {
    int argc;                  /* the subcommand's arguments; argv[0] is its name */
    char **argv;
    const struct option *opts; /* the flags, ending with an all-zero entry        */
    int rest;                  /* after "--": the next positional; else -1        */
    unsigned char seen[CLI_MAX_OPTIONS]; /* by index in opts: given already     */
} cli_parser;

typedef struct {
    const char *name;  /* long name without "--"; NULL for a positional */
    const char *value; /* the value, the positional argument, or NULL  */
} cli_arg;

/* Start parsing a subcommand: argc and argv as main received them (argv[1]
 * is the subcommand's name). */
void cli_begin(cli_parser *p, int argc, char **argv, const struct option *opts);
int cli_next(cli_parser *p, cli_arg *got);

/* Store got->value in *slot: refused (one line, EXIT_BAD) when the flag was
 * given before or the value is empty. Returns 0 or the exit status. */
int cli_store(const cli_arg *got, const char **slot);

/* ---- numbers ---------------------------------------------------------------- */

/* An integer >= min, written in decimal and nothing else, as the value of
 * --flagname. Returns 0 or EXIT_BAD after the one-line error. */
int cli_parse_size(const char *flagname, const char *s, size_t min, size_t *out);

/* A number as strtod reads it, the whole of s. A value beyond double's range
 * reads as +-inf; one below it as the nearest double (subnormals included),
 * except that a nonzero number rounding to 0 is refused. Prints nothing;
 * returns 0, or -1 when s is not such a number (the caller words the error). */
int cli_parse_double(const char *s, double *out);

/* --scale's value: any number the library's rule accepts (kdalab_check_scale,
 * subnormals included). Returns 0 or EXIT_BAD after the one-line error. */
int cli_parse_scale(const char *s, double *out);

/* ---- inputs ------------------------------------------------------------------ */

/* One .npy input: the flag that named it, the path (NULL when not given) and,
 * once read, its values as float64. */
typedef struct {
    const char *flag; /* "--q" */
    const char *path; /* NULL when not given */
    kdalab_array a;
} cli_input;

/* Read in->path into in->a (kdalab_npy_read). Returns 0 or the exit status
 * after "<flag>: <reason>". */
int cli_read_input(cli_input *in);

/* A float32 copy of in's values in *out (NULL when in is absent or empty;
 * the caller frees it, also on error), checked by the library's rule in
 * float32: a finite value beyond float32's range is refused as such.
 * Returns 0 or the exit status after the one-line error. */
int cli_input_to_f32(const cli_input *in, kdalab_value_rule rule, const char *name, float **out);

/* Check every value of in against the library's rule (kdalab_check_values_f64)
 * and name the flag, the file and the element's multi-index when one breaks
 * it. name is the tensor's name in the library's message ("g", "beta").
 * Returns 0 or the exit status. */
int cli_check_values(const cli_input *in, kdalab_value_rule rule, const char *name);

/* Does a have exactly the shape want[0..nd)? */
int cli_shape_is(const kdalab_array *a, int nd, const size_t *want);

/* Refuse in's shape: "<flag> <path>: shape S, expected <layout> = W from
 * <ref flag> <ref path> shape R". Returns EXIT_BAD. */
int cli_shape_mismatch(const cli_input *in, const char *layout, int nd, const size_t *want,
                       const cli_input *ref);

/* ---- the forward inputs (inputs.c) ------------------------------------------- */

enum { IN_Q, IN_K, IN_V, IN_BETA, IN_G, IN_H0, IN_A, IN_B, N_IN };

/* The getopt_long rows of the eight input flags, with val = base + IN_*. */
#define CLI_INPUT_OPTIONS(base)                                                          \
    {"q", required_argument, NULL, (base) + IN_Q},                                       \
        {"k", required_argument, NULL, (base) + IN_K},                                   \
        {"v", required_argument, NULL, (base) + IN_V},                                   \
        {"beta", required_argument, NULL, (base) + IN_BETA},                             \
        {"g", required_argument, NULL, (base) + IN_G},                                   \
        {"h0", required_argument, NULL, (base) + IN_H0},                                 \
        {"a", required_argument, NULL, (base) + IN_A},                                   \
        {"b", required_argument, NULL, (base) + IN_B}

/* Each input's flag, its name in the library's messages, and the library's
 * rule for its values, by IN_*. */
extern const char *const IN_FLAG[N_IN];
extern const char *const IN_NAME[N_IN];
extern const kdalab_value_rule IN_RULE[N_IN];

/* The forward inputs of one call: set mech, then plan, then read. */
typedef struct {
    kdalab_mechanism mech;
    cli_input in[N_IN];   /* by IN_*; path NULL when not given                 */
    cli_input cu;         /* --cu-seqlens, path NULL when not given             */
    kdalab_dims dims;     /* fixed by q (B, T, H, K) and v (V) once read        */
    size_t HV, N;         /* value heads (v's), sequences (cu_seqlens's, or B)  */
    size_t n_state;       /* N * HV * K * V, the elements of h0/ht, checked      */
    int64_t *cu_seqlens;  /* the boundaries, or NULL                           */
    size_t n_seqs;        /* cu_seqlens's N, or 0 without                      */
} cli_inputs;

/* The library call of these inputs (kdalab_call.h): their dims, value heads
 * and cu_seqlens, with the rest as given. */
kdalab_call cli_call(const cli_inputs *fw, double scale, int chunk_form, int simd,
                     const kdalab_chunk_opts *opts, kdalab_workspace *work);

/* Does the call need the batch path (varlen or grouped value heads)? */
#define CLI_IS_BATCH(fw) ((fw)->cu_seqlens != NULL || (fw)->HV != (fw)->dims.H)

/* Record the paths (by IN_*, NULL when not given) and refuse a missing q, k,
 * v, a missing beta/g/a/b the mechanism needs, or one it does not use. Returns 0
 * or the exit status after the one-line error. */
int cli_inputs_plan(cli_inputs *fw, const char *const path[N_IN], const char *cu_seqlens);
/* Read every given input, check shapes against q's and v's and values by
 * the library's rules; fills dims, HV, N and n_state (refused when N * HV *
 * K * V doubles overflow size_t). Returns 0 or the exit status. */
int cli_inputs_read(cli_inputs *fw);
void cli_inputs_free(cli_inputs *fw);

/* ---- outputs ----------------------------------------------------------------- */

/* Can path be written as an output? Its directory must exist and be
 * writable, and an existing path must be a regular file (kdalab_npy_write
 * refuses to replace anything else). which is the flag ("--o"). Returns 0 or
 * the exit status after the one-line reason. */
int cli_check_output_path(const char *which, const char *path);

/* Do two output paths name the same file? (the same inode if both exist,
 * else the same directory and file name) */
int cli_same_output(const char *a, const char *b);

/* One float64 output: its flag, path, data and shape (C order). */
typedef struct {
    const char *flag, *path;
    const double *data;
    int ndim;
    size_t shape[KDALAB_NPY_MAX_DIMS];
} cli_output;

/* Write n (<= 16) outputs all or nothing (outputs.c): each whole to a
 * fresh temporary file beside its path (replace_make_temp), then, only when
 * all are written, each swapped into place (replace_swap), interrupts held
 * until the previous files are removed. Returns 0 or the exit status after
 * the one-line error. */
int cli_write_all(size_t n, const cli_output *out);

/* ---- the subcommands ----------------------------------------------------------- */

/* Each takes main's argc and argv (argv[1] is the subcommand's name) and
 * returns the exit status. */
int cmd_run(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_grad(int argc, char **argv);
int cmd_train(int argc, char **argv);

/* train's --out DIR (checkpoint.c). A checkpoint is a directory in the
 * library's format (kdalab_checkpoint.h: config.txt, whose first line is
 * KDALAB_CHECKPOINT_FORMAT, and the .npy files of the tensors that config
 * names) holding nothing else. ckpt_plan, before training,
 * makes every check the save will make and refuses (one line, EXIT_BAD)
 * anything else: a DIR that is a symbolic link, names "." or "..", is a
 * file, holds anything but a checkpoint, lies on another filesystem than
 * its parent, or whose parent cannot take the temporary directory; a
 * leftover DIR.kdalab-save-* of an interrupted save is reported by name.
 * It fills *plan (DIR without trailing slashes). ckpt_save writes every
 * tensor as <name>.npy and config.txt into a fresh DIR.kdalab-save-XXXXXX
 * and swaps it with DIR in one step (replace_swap), then removes the
 * earlier checkpoint: DIR is always the old checkpoint or the new one. Each
 * returns 0 or the exit status after the one-line error. */
typedef struct {
    char dir[4096]; /* --out's value without trailing slashes */
    int exists;     /* DIR holds an earlier checkpoint (to be replaced) */
} ckpt_plan_t;
int ckpt_plan(const char *out, ckpt_plan_t *plan);
int ckpt_save(const ckpt_plan_t *plan, const kdalab_train_config *c, const double *theta,
              const kdalab_train_result *r, const char *precision);

/* ---- replacing an output in one step (replace.c) ------------------------------ */

/* A fresh entry "<path>.<tag>-XXXXXX" (mkdtemp when is_dir, else an empty
 * file by mkstemp, mode 0644) in buf[cap]: a name that did not exist, so it
 * is never an input of the call. Returns 0, or -1 with errno. */
int replace_make_temp(const char *path, const char *tag, int is_dir, char *buf, size_t cap);

/* Put fresh (a replace_make_temp name, complete) at path in one step. When
 * path exists the two are exchanged (renameat2 RENAME_EXCHANGE; where the
 * filesystem refuses it, three renames through a third name made like
 * fresh's) and fresh then names the previous entry, for the caller to
 * remove, or to swap back to undo; when path does not exist fresh is
 * renamed to it. Returns 0, or -1 with errno and both names as they were. */
int replace_swap(const char *fresh, const char *path);

/* Hold SIGINT, SIGTERM, SIGHUP and SIGQUIT while outputs are replaced, for
 * the whole process (every thread): each is only noted (the previous
 * dispositions kept in *h); release restores them and delivers the first
 * one that came meanwhile. */
#define REPLACE_N_HELD 4
typedef struct {
    struct sigaction old[REPLACE_N_HELD];
} replace_held;
void replace_hold_signals(replace_held *h);
void replace_release_signals(const replace_held *h);

/* Test only: raise the signal KDALAB_TEST_INTERRUPT=<step>:<INT|KILL> names
 * when step is the named one (the tests' way to interrupt a save at each
 * step); does nothing otherwise. */
void replace_test_point(const char *step);

#endif /* KDALAB_TOOL_CLI_H */
