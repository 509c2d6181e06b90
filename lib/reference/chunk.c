/*
 * lib/chunk.c — the chunkwise forms of linear attention, DeltaNet, Gated
 * DeltaNet and KDA with the UT transform and the four decay modes
 * (REFERENCE.md "Chunkwise form" and "Where the floating-point range problem
 * lives"; chapters 04-06), in float64 and float32 with emulated bf16/fp16
 * storage. The algorithm is in lib/chunk_impl.h, written once.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define KDALAB_REAL 64
#include "real.h"
#include "chunk_impl.h"
#include "real_undef.h"

#define KDALAB_REAL 32
#include "real.h"
#include "chunk_impl.h"
#include "real_undef.h"
