// Settings read from the environment (SPKDDP_*), one reader each. A value that is none of the
// accepted forms is a usage error naming the variable and what it accepts, never a silent
// fallback to the default: a mistyped switch would otherwise measure or run the wrong thing.
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

// Unset, "" or "0": 0; "1": 1.
int spk_env_switch(const char *name);
// choices "a|b|c": the index of the value among them; unset or "": -1.
int spk_env_choice(const char *name, const char *choices);
// A number from lo to hi; unset or "": fallback.
double spk_env_number(const char *name, double fallback, double lo, double hi);

#ifdef __cplusplus
}
#endif
