/*
 * lib/recurrent.c — the recurrent forms and decode steps of linear attention,
 * DeltaNet, Gated DeltaNet and KDA (REFERENCE.md update table; chapters 02,
 * 03, 05, 06), in float64 and float32. The algorithm is in
 * lib/recurrent_impl.h, written once.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define KDALAB_REAL 64
#include "real.h"
#include "recurrent_impl.h"
#include "real_undef.h"

#define KDALAB_REAL 32
#include "real.h"
#include "recurrent_impl.h"
#include "real_undef.h"
