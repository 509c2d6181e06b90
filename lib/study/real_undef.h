/* lib/study/real_undef.h — end one instantiation started by lib/study/real.h. */
#undef real
#undef EXP
#undef FN
#undef KDALAB_REAL
