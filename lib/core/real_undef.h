/* lib/real_undef.h — end one instantiation started by lib/real.h. */
#undef real
#undef EXP
#undef SQRT
#undef FABS
#undef REAL_IS_FINITE
#undef FN
#undef KDALAB_REAL
