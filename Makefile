# kdalab — build, test and run everything.
#
#   make            library, command-line tool, experiments, chapters, benchmark
#   make run        the main job: every experiment, then every plot (results/);
#                   FULL=1 runs the training experiments' (14-24) full sweeps (hours)
#                   RESUME=1 reuses the models of 14-17 and 19-24 already in the ledgers, $(RESULTS)/mqar_models.tsv and
#                   $(RESULTS)/mqar_jobs/*.tsv (an interrupted sweep, a sweep run as jobs); without it both are removed first;
#                   TRAIN_MISSING=1 with it trains what an assembling run of jobs would refuse to (experiments/README.md);
#                   ends with results/index.html (every claim with its figure and numbers) and the time it took
#   make figures-full  the figures of 14-24 from the published full sweeps (full-sweeps/), no training,
#                   into results/full-sweeps/ (a variant run's, full-sweeps/NN-name/, into
#                   results/full-sweeps/NN-name/)
#   make test       the layout, mechanism-table and docs checks (scripts/check_layout.sh, check_mechanisms.sh,
#                   check_docs.sh), the cmocka suites and the Python module's pytest suite; builds
#                   what they need in parallel (TEST_JOBS, default: the CPUs)
#   make check-asan the test suite under AddressSanitizer + UBSan
#   make fuzz       libFuzzer on the .npy reader (FUZZ_SECONDS, default 60)
#   make bench      the SIMD benchmark (not a test: prints speeds)
#   make peer-ggml  its peer, bin/peer_ggml, against a ggml build (GGML_DIR=, GGML_BUILD=; bench/README.md)
#   make chapters   the side-by-side chapter programs and their diffs
#   make f32        rewrite the generated float32 twins (lib/reference/*_f32.*, lib/train/*_f32.c)
#                   from lib/reference/ and lib/train/
#   make clean
#
# Files are found by pattern, so a new experiment, chapter or test needs no
# edit here: experiments/NN_name.c -> bin/NN_name, chapters/NN_name.c ->
# bin/chapters/NN_name, tests/test_name.c -> $(BUILD)/tests/test_name.
# Tests find the programs through the environment variable KDALAB_BIN (bin, or build-asan/bin).

.DEFAULT_GOAL := all

CC      ?= cc
OPT     ?= -O2
CFLAGS  ?= $(OPT) -g
BUILD   ?= build
BIN     ?= bin
CPPFLAGS += -Ilib -Ilib/core
WARN    := -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Wshadow -Wno-unused-parameter
ALL_CFLAGS = $(WARN) $(CFLAGS) -fPIC -fopenmp
# The library exports exactly what its public headers declare (KDALAB_BEGIN_DECLS).
LIB_CFLAGS = -fvisibility=hidden
# The CBLAS behind GSL and the model's projections: OpenBLAS when it links
# (libopenblas-dev, which scripts/deps.sh installs; 1.5-2.5x faster training
# here), else GSL's own. Decided once, when first linking (after deps-build).
BLAS    = $(eval BLAS := $(shell echo 'int main(void){return 0;}' | $(CC) -x c - -lopenblas \
              -o /dev/null 2>/dev/null && echo -lopenblas || echo -lgslcblas))$(BLAS)
LDLIBS  = -lgsl $(BLAS) -lm
SAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

# ---- the library --------------------------------------------------------------
LIB_SRC  := $(sort $(wildcard lib/*/*.c))
LIB_OBJ  := $(patsubst %.c,$(BUILD)/%.o,$(LIB_SRC))
LIB_A    := $(BUILD)/libkdalab.a
LIB_SO   := $(BUILD)/libkdalab.so
LIB_PC   := $(BUILD)/kdalab.pc
HEADERS  := $(wildcard lib/*.h) $(wildcard lib/*/*.h)

# Per-file instruction sets for the SIMD kernels (the dispatcher picks one at run time).
$(BUILD)/lib/simd/avx512.o: ISA := -mavx512f -mavx512dq -mavx512vl -mavx2 -mfma
$(BUILD)/lib/simd/avx2.o:   ISA := -mavx2 -mfma
$(BUILD)/lib/simd/avx512_f64.o: ISA := -mavx512f -mavx512dq -mavx512vl -mavx2 -mfma
$(BUILD)/lib/simd/avx2_f64.o:   ISA := -mavx2 -mfma

# The training layers' elementwise loops (SiLU, sigmoid, AdamW's sqrt; the
# softmax of the tiled attention training runs, in lib/reference/attention.c;
# with lib/core/vectorise.h's train_expf) vectorise only if the compiler may
# evaluate both sides of a select and need not set errno: nothing in kdalab
# reads the floating-point exception flags or errno, and the values are the same.
TRAIN_FPFLAGS := -fno-trapping-math -fno-math-errno
$(BUILD)/lib/train/%.o: FPFLAGS := $(TRAIN_FPFLAGS)
$(BUILD)/lib/reference/attention.o $(BUILD)/lib/reference/attention_f32.o: FPFLAGS := $(TRAIN_FPFLAGS)

$(BUILD)/lib/%.o: lib/%.c $(HEADERS) | deps-build
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) $(LIB_CFLAGS) $(ISA) $(FPFLAGS) -c $< -o $@

$(BUILD)/%.o: %.c $(HEADERS) | deps-build
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -c $< -o $@

# the programs' own headers: a changed struct there rebuilds every program that uses it
$(patsubst %.c,$(BUILD)/%.o,$(wildcard experiments/*.c)): $(wildcard experiments/*.h)
$(patsubst %.c,$(BUILD)/%.o,$(wildcard tools/*/*.c)): $(wildcard tools/*/*.h)

$(LIB_A): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(LIB_SO): $(LIB_OBJ)
	$(CC) -shared -fopenmp -o $@ $^ $(LDLIBS)

$(LIB_PC): Makefile
	@mkdir -p $(dir $@)
	printf 'prefix=%s\nlibdir=$${prefix}/$(BUILD)\nincludedir=$${prefix}/lib\n\nName: kdalab\nDescription: numerical reference for the lineage ending in Kimi Delta Attention\nVersion: 0.1.0\nLibs: -L$${libdir} -Wl,-rpath,$${libdir} -lkdalab -fopenmp -lgsl $(BLAS) -lm\nCflags: -I$${includedir}\n' "$(CURDIR)" > $@

lib: $(LIB_A) $(LIB_SO) $(LIB_PC)

# ---- programs -------------------------------------------------------------------
EXP_SRC   := $(wildcard experiments/[0-9][0-9]_*.c)
EXP_BIN   := $(patsubst experiments/%.c,$(BIN)/%,$(EXP_SRC))
EXP_COMMON_SRC := $(filter-out $(EXP_SRC),$(wildcard experiments/*.c))
EXP_COMMON := $(patsubst %.c,$(BUILD)/%.o,$(EXP_COMMON_SRC))
CHAP_SRC  := $(wildcard chapters/[0-9][0-9]_*.c)
CHAP_BIN  := $(patsubst chapters/%.c,$(BIN)/chapters/%,$(CHAP_SRC))
# A tool is a folder tools/NAME/ of .c files (one per subcommand) -> bin/NAME.
TOOL_DIRS := $(patsubst tools/%/,%,$(sort $(dir $(wildcard tools/*/*.c))))
TOOL_BIN  := $(patsubst %,$(BIN)/%,$(TOOL_DIRS))
BENCH_BIN := $(patsubst bench/%.c,$(BIN)/bench_%,$(wildcard bench/*.c))

all: lib $(TOOL_BIN) $(EXP_BIN) $(CHAP_BIN) $(BENCH_BIN)

define tool_rule
$(BIN)/$(1): $(patsubst %.c,$(BUILD)/%.o,$(wildcard tools/$(1)/*.c)) $(LIB_A)
	@mkdir -p $(BIN)
	$$(CC) -fopenmp $$(CFLAGS) -o $$@ $$^ $$(LDLIBS)
endef
$(foreach t,$(TOOL_DIRS),$(eval $(call tool_rule,$(t))))

$(BIN)/%: $(BUILD)/experiments/%.o $(EXP_COMMON) $(LIB_A)
	@mkdir -p $(BIN)
	$(CC) -fopenmp $(CFLAGS) -o $@ $^ $(LDLIBS)

# the benchmark's headers: its shared problem, its floors, its backward table
$(BUILD)/bench/simd.o: bench/problem.h bench/floors.h bench/backward.h

$(BIN)/bench_%: $(BUILD)/bench/%.o $(LIB_A)
	@mkdir -p $(BIN)
	$(CC) -fopenmp $(CFLAGS) -o $@ $^ $(LDLIBS)

# Chapters are self-contained: no lib/, only libm.
$(BIN)/chapters/%: chapters/%.c
	@mkdir -p $(BIN)/chapters
	$(CC) $(WARN) $(CFLAGS) -o $@ $< -lm

chapters: $(CHAP_BIN)
	@if [ -x chapters/diffs.sh ]; then sh chapters/diffs.sh; fi

# ---- the main job -----------------------------------------------------------------
RESULTS ?= results

run: all
	@sh scripts/deps.sh run
	@mkdir -p $(RESULTS)
	@date +%s > $(RESULTS)/run_started
	@sh scripts/machine.sh $(BIN) $(RESULTS)
	@# the ledgers and each experiment's printed summary (NN_name.txt): the script's header
	@sh scripts/run_experiments.sh $(if $(filter-out 0,$(FULL)),--full) \
	  $(if $(filter-out 0,$(RESUME)),--resume) $(if $(filter-out 0,$(TRAIN_MISSING)),--train-missing) \
	  $(RESULTS) $(EXP_BIN)
	@for p in $(wildcard plots/*.gp); do \
	  echo "== gnuplot $$p" >&2; \
	  gnuplot -e "dir='$(RESULTS)'" $$p || exit 1; \
	done
	@$(MAKE) --no-print-directory figures-full
	@echo "seconds=$$(( $$(date +%s) - $$(cat $(RESULTS)/run_started) ))" > $(RESULTS)/run_time.txt
	@rm -f $(RESULTS)/run_started
	@FULL_SWEEPS=$(FULL_SWEEPS) sh scripts/results_page.sh $(RESULTS)
	@echo "results: $$(ls $(RESULTS)/*.tsv 2>/dev/null | wc -l) TSV files, $$(ls $(RESULTS)/*.png 2>/dev/null | wc -l) PNG figures in $(RESULTS)/, one page of them: $(RESULTS)/index.html"
	@s=$$(sed -n 's/^seconds=//p' $(RESULTS)/run_time.txt); \
	  printf 'make run: experiments and figures took %d min %d s on %s (SIMD level %s, %s CPUs online)%s\n' \
	    $$((s / 60)) $$((s % 60)) "$$(sed -n 's/^cpu=//p' $(RESULTS)/machine.txt)$$(awk -F= '$$1 == "cpu_family" {f = $$2} $$1 == "cpu_model" {m = $$2} END {if (f != "" && f != "unknown") printf " (family %s model %s)", f, m}' $(RESULTS)/machine.txt)" \
	    "$$(sed -n 's/^simd_level=//p' $(RESULTS)/machine.txt)" "$$(sed -n 's/^cpus_online=//p' $(RESULTS)/machine.txt)" \
	    "$$([ -n "$(FULL)" ] && [ "$(FULL)" != 0 ] && echo ', full sweeps' || echo ', reduced sweeps')"

# The figures of the training experiments from the published full sweeps' TSVs
# (full-sweeps/), without training: every plot whose experiment has TSVs there,
# drawn into $(RESULTS)/full-sweeps/, and those of each sweep's own folder
# (full-sweeps/NN-name/: a variant run) into $(RESULTS)/full-sweeps/NN-name/.
# The figures are drawn into a new folder that replaces $(RESULTS)/full-sweeps/
# only when every one is drawn: a failed gnuplot leaves the old figures (and
# the partial new ones in $(RESULTS)/full-sweeps.new/, which the next run
# removes), and a variant folder that is no longer published leaves none
# behind. A variant folder that lacks a TSV its plot needs (the plot's
# "# Reads" lines) is named and skipped.
FULL_SWEEPS ?= full-sweeps
figures-full:
	@sh scripts/deps.sh run
	@rm -rf $(RESULTS)/full-sweeps.new && mkdir -p $(RESULTS)/full-sweeps.new
	@for p in $(wildcard plots/[0-9][0-9]_*.gp); do \
	  n=$$(basename $$p | cut -c1-3); \
	  ls $(FULL_SWEEPS)/$$n*.tsv >/dev/null 2>&1 || continue; \
	  echo "== gnuplot $$p (from $(FULL_SWEEPS)/)" >&2; \
	  gnuplot -e "dir='$(FULL_SWEEPS)'; out='$(RESULTS)/full-sweeps.new'" $$p || exit 1; \
	done
	@for d in $(wildcard $(FULL_SWEEPS)/[0-9][0-9][-_]*/); do \
	  n=$$(basename $$d | cut -c1-2); \
	  for p in plots/$${n}_*.gp; do \
	    [ -f $$d$$(basename $$p .gp).tsv ] || continue; \
	    miss=$$(for f in $$(sed -n '/^# Reads/,/^# Writes/p' $$p | grep -o 'DIR/[A-Za-z0-9_]*\.tsv' | cut -c5-); do [ -f $$d$$f ] || printf ' %s' $$f; done); \
	    if [ -n "$$miss" ]; then echo "== $$p: $$d lacks$$miss; not drawn" >&2; continue; fi; \
	    mkdir -p $(RESULTS)/full-sweeps.new/$$(basename $$d); \
	    echo "== gnuplot $$p (from $$d)" >&2; \
	    gnuplot -e "dir='$${d%/}'; out='$(RESULTS)/full-sweeps.new/$$(basename $$d)'" $$p || exit 1; \
	  done; \
	done
	@rm -rf $(RESULTS)/full-sweeps && mv $(RESULTS)/full-sweeps.new $(RESULTS)/full-sweeps

# ---- tests ----------------------------------------------------------------------------
TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC))
# what the suites share: every tests/*.c that is not a suite
TEST_COMMON := $(patsubst tests/%.c,$(BUILD)/tests/%.o,$(filter-out tests/test_%.c,$(wildcard tests/*.c)))

$(BUILD)/tests/%.o: tests/%.c $(wildcard tests/*.h) $(HEADERS) | deps-test
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/tests/test_%: $(BUILD)/tests/test_%.o $(TEST_COMMON) $(LIB_A)
	$(CC) -fopenmp $(CFLAGS) -o $@ $^ -lcmocka $(LDLIBS)

# the verdict rule's suite tests the experiments' code it names
$(BUILD)/tests/test_verdict: $(BUILD)/experiments/verdict.o

# Tests that drive the command-line tool need it built first.
# The Python module's tests (pytest) run with the Debian interpreter, where
# python3-numpy and python3-pytest are installed (a pyenv python3 may lack them).
PYTHON ?= $(shell [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3)
PYTEST_RUN ?= $(PYTHON) -m pytest -q -p no:cacheprovider python/tests

# The programs and test suites build in parallel, one job per CPU (TEST_JOBS), unless
# make was given -j itself (then its jobs are used): on an otherwise idle machine the
# build is CPU-bound, and one file at a time left a core unused.
TEST_JOBS ?= $(shell nproc 2>/dev/null || echo 2)
test: deps-test
	@$(MAKE) --no-print-directory $(if $(findstring j,$(filter-out --%,$(MAKEFLAGS))),,-j$(TEST_JOBS)) all $(TEST_BIN)
	@sh scripts/check_layout.sh $(LIB_SO)
	@sh scripts/check_mechanisms.sh
	@sh scripts/check_docs.sh
	@KDALAB_BIN=$(BIN) KDALAB_LIBRARY=$(CURDIR)/$(LIB_SO) PYTHONPATH=$(CURDIR)/python \
	  PYTEST="$(PYTEST_RUN)" sh tests/run.sh $(TEST_BIN)

check-asan:
	$(MAKE) BUILD=build-asan BIN=build-asan/bin CFLAGS="-O1 -g $(SAN_FLAGS)" PYTEST_RUN= test

# ---- fuzzing ----------------------------------------------------------------------------
FUZZ_SECONDS ?= 60
$(BUILD)/fuzz/fuzz_npy: fuzz/fuzz_npy.c lib/io/npy_read.c lib/io/npy_header.c lib/core/status.c $(HEADERS)
	@sh scripts/deps.sh fuzz
	@mkdir -p $(dir $@)
	clang $(CPPFLAGS) -g -O1 -fsanitize=fuzzer,address,undefined -o $@ fuzz/fuzz_npy.c lib/io/npy_read.c lib/io/npy_header.c \
	  lib/core/status.c -lm

fuzz: $(BUILD)/fuzz/fuzz_npy
	@mkdir -p $(BUILD)/fuzz/corpus
	$(BUILD)/fuzz/fuzz_npy -max_total_time=$(FUZZ_SECONDS) -max_len=4096 $(BUILD)/fuzz/corpus fuzz/corpus

# ---- benchmark ---------------------------------------------------------------------------
bench: $(BENCH_BIN)
	@for b in $(BENCH_BIN); do ./$$b || exit 1; done

# bench_simd's peer, ggml's fused op (bench/README.md): make peer-ggml GGML_DIR=src GGML_BUILD=build
ifdef GGML_DIR
GGML_BUILD ?= $(GGML_DIR)/build
GGML_LIBS = $(foreach d,src bin,-L$(GGML_BUILD)/$(d) -Wl,-rpath,$(abspath $(GGML_BUILD))/$(d))
peer-ggml: bench/peer/ggml_peer.c $(LIB_A)
	@mkdir -p $(BIN)
	$(CC) $(CPPFLAGS) -isystem $(GGML_DIR)/include $(WARN) $(CFLAGS) -fopenmp -o $(BIN)/peer_ggml \
	  $< $(LIB_A) $(GGML_LIBS) -lggml -lggml-base -lggml-cpu $(LDLIBS)
else
peer-ggml:
	@echo "peer-ggml: set GGML_DIR (ggml's source) and GGML_BUILD (its cmake build); see bench/README.md"
endif

# ---- the float32 twins of the reference (generated, committed) --------------------------
f32:
	sh scripts/make_f32.sh

# ---- housekeeping --------------------------------------------------------------------------
deps-build:
	@sh scripts/deps.sh build

deps-test:
	@PYTHON=$(PYTHON) sh scripts/deps.sh test

clean:
	rm -rf build build-asan bin

.PHONY: all lib run figures-full test check-asan fuzz bench peer-ggml chapters deps-build deps-test clean
.SECONDARY:
