/*
 * lib/simd/scalar_vocab.h — the vector vocabulary of the scalar level
 * (lib/simd/kernel_common.h lists it), one lane of `real`: plain C
 * arithmetic, the same text for float and double, so scalar.c and
 * scalar_f64.c define only their element type, SIMD_LEVEL and scalar_exp
 * (exp of x <= 0, exactly 0 below the floor the vector levels of the
 * precision use), then include this file.
 */
typedef real vf;
#define VLEN 1
#define VZERO() ((real)0)
typedef int vmask;
/* a lane mask: lanes < n set (0 <= n <= VLEN); VBLEND: a where set, else b */
#define VMASK_LO(n) ((n) > 0)
#define VBLEND(m, a, b) ((m) ? (a) : (b))
#define VSET1(x) ((real)(x))
#define VLOAD(p) (*(p))
#define VSTORE(p, v) (*(p) = (v))
#define VADD(a, b) ((a) + (b))
#define VSUB(a, b) ((a) - (b))
#define VMUL(a, b) ((a) * (b))
#define VFMA(a, b, c) ((a) * (b) + (c))
#define VHSUM(v) (v)
#define VEXP(v) scalar_exp(v)
#define VFLUSH(v) ((v) < SIMD_TINY ? (real)0 : (v))
#define VMAX(a, b) ((a) > (b) ? (a) : (b))
#define VMIN(a, b) ((a) < (b) ? (a) : (b))
#define VALL_LE(v, x) ((v) <= (x))
#define VALL_GE(v, x) ((v) >= (x))
