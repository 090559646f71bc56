/* options.c — the HAKMEM_* environment options: their table (name, range, default per profile), the
 * one-time parse into hak_opts at initialisation, and hak_option_get/set. A malformed or out-of-range
 * value prints one line naming the variable and the value used instead. A program in secure-execution
 * mode (setuid, setgid, file capabilities) reads none of them: its caller's environment must not tune it
 * or make it print (secure_getenv, as glibc does with its own tunables). Nothing here allocates. */
#include <errno.h>
#include <stdlib.h>
#include <strings.h>
#include <string.h>

#include "internal.h"

hak_options hak_opts;

enum { PROFILE_FAST = 0, PROFILE_BALANCED = 1, PROFILE_LEAN = 2 };

static const struct option_spec {
  const char *env;
  const char *alias; /* older name still accepted */
  long min, max;
  long preset[3];    /* default under the fast, balanced and lean profiles */
  const char *names[3]; /* symbolic values for 0, 1, 2 where the option has them */
} specs[HAK_OPT_COUNT] = {
    [HAK_OPT_STATS] = {"HAKMEM_STATS", NULL, 0, 1, {0, 0, 0}, {NULL}},
    [HAK_OPT_VERBOSE] = {"HAKMEM_VERBOSE", NULL, 0, 2, {1, 1, 1}, {NULL}},
    [HAK_OPT_PROFILE] = {"HAKMEM_PROFILE", NULL, 0, 2, {0, 1, 2}, {"fast", "balanced", "lean"}},
    [HAK_OPT_PURGE_DELAY_MS] = {"HAKMEM_PURGE_DELAY_MS", NULL, -1, 3600000, {1000, 100, 10}, {NULL}},
    [HAK_OPT_PURGE_MODE] = {"HAKMEM_PURGE_MODE", NULL, 0, 1, {1, 0, 0}, {"dontneed", "free", NULL}},
    [HAK_OPT_HUGE_PAGES] = {"HAKMEM_HUGE_PAGES", NULL, 0, 1, {1, 0, 0}, {NULL}},
    [HAK_OPT_DRAIN_INTERVAL] = {"HAKMEM_DRAIN_INTERVAL", "HAKMEM_TINY_SLL_DRAIN_INTERVAL", 0, 1000000, {0, 0, 8}, {NULL}},
    [HAK_OPT_LARGE_CACHE_MB] = {"HAKMEM_LARGE_CACHE_MB", NULL, 0, 1048576, {4096, 1024, 64}, {NULL}},
    [HAK_OPT_BACKGROUND_PURGE] = {"HAKMEM_BACKGROUND_PURGE", NULL, 0, 2, {0, 2, 2}, {"off", "on", "auto"}},
};

static size_t fmt_long(char *out, long v) {
  char tmp[24];
  size_t n = 0, len = 0;
  unsigned long u = v < 0 ? 0ul - (unsigned long)v : (unsigned long)v;
  do tmp[n++] = (char)('0' + u % 10); while ((u /= 10) != 0);
  if (v < 0) out[len++] = '-';
  while (n) out[len++] = tmp[--n];
  return len;
}

/* Append `text` to the line being built in line[0..*n) while 32 bytes of room remain (what is written
 * after it, a number and the end of the line, always fits). */
static void put(char *line, size_t *n, size_t size, const char *text) {
  for (; *text != '\0' && *n < size - 32; text++) line[(*n)++] = *text;
}
#define PUT(str) put(line, &n, sizeof line, (str))

static void warn_value(const struct option_spec *s, const char *env, const char *text, long used) {
  char line[320];
  size_t n = 0;
  PUT("hakmem: ");
  PUT(env);
  PUT("=\"");
  /* at most 64 characters of the value: the rest of the line (names, range, the value used) always fits */
  size_t shown = 0;
  for (; text[shown] != '\0' && shown < 64; shown++) /* control bytes shown as '?': the warning stays one line */
    line[n++] = (unsigned char)text[shown] < 0x20 || text[shown] == 0x7f ? '?' : text[shown];
  if (text[shown] != '\0') PUT("...");
  PUT("\" is not valid (");
  if (s->names[0]) {
    for (int i = 0; i < 3 && s->names[i]; i++) {
      if (i) PUT("|");
      PUT(s->names[i]);
    }
    PUT(" or ");
  }
  n += fmt_long(line + n, s->min);
  PUT("..");
  n += fmt_long(line + n, s->max);
  PUT("); using ");
  if (s->names[0] && used >= 0 && used <= 2 && s->names[used]) {
    PUT(s->names[used]);
  } else {
    n += fmt_long(line + n, used);
  }
  line[n++] = '\n';
  hak_warn_raw(line, n);
}

/* Parse `text` for option `s`; returns false if malformed or out of range. */
static bool parse_value(const struct option_spec *s, const char *text, long *out) {
  for (int i = 0; i < 3; i++) {
    if (s->names[i] && strcasecmp(text, s->names[i]) == 0) {
      *out = i;
      return true;
    }
  }
  /* yes/no words only for the on-off options (0..1 without names of their own): "off" for a delay or a
   * size meant 0, the opposite of what a reader of it would guess (a review: a delay of "off" purged at
   * once) */
  if (s->min == 0 && s->max == 1 && s->names[0] == NULL) {
    if (strcasecmp(text, "true") == 0 || strcasecmp(text, "on") == 0 || strcasecmp(text, "yes") == 0) text = "1";
    if (strcasecmp(text, "false") == 0 || strcasecmp(text, "off") == 0 || strcasecmp(text, "no") == 0) text = "0";
  }
  if (*text != '-' && (*text < '0' || *text > '9')) return false; /* strtol would skip blanks and a '+' */
  char *end = NULL;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < s->min || v > s->max) return false;
  *out = v;
  return true;
}

/* Options given a value by the environment or hak_option_set: a profile set later leaves them alone. */
static _Atomic uint32_t explicitly_set;

static void mark_explicit(enum hak_option opt) {
  atomic_fetch_or_explicit(&explicitly_set, (uint32_t)1 << opt, memory_order_relaxed);
}

/* The presets of `profile` for every option not set explicitly. */
static void apply_profile(long profile) {
  uint32_t explicit_mask = atomic_load_explicit(&explicitly_set, memory_order_relaxed);
  for (int i = 0; i < HAK_OPT_COUNT; i++)
    if (i != HAK_OPT_PROFILE && i != HAK_OPT_VERBOSE && !(explicit_mask & ((uint32_t)1 << i)))
      hak_opts.value[i] = specs[i].preset[profile];
}

static void read_env(enum hak_option opt) {
  const struct option_spec *s = &specs[opt];
  const char *env = s->env, *text = secure_getenv(env);
  if (text == NULL && s->alias != NULL) {
    env = s->alias;
    text = secure_getenv(env);
  }
  if (text == NULL) return;
  long v;
  if (parse_value(s, text, &v)) {
    hak_opts.value[opt] = v;
    mark_explicit(opt);
  } else {
    warn_value(s, env, text, hak_opts.value[opt]);
  }
}

void hak_options_init(void) {
  hak_opts.value[HAK_OPT_PROFILE] = PROFILE_BALANCED;
  hak_opts.value[HAK_OPT_VERBOSE] = 1;
  read_env(HAK_OPT_VERBOSE);
  read_env(HAK_OPT_PROFILE);
  apply_profile(hak_opts.value[HAK_OPT_PROFILE]);
  for (int i = 0; i < HAK_OPT_COUNT; i++)
    if (i != HAK_OPT_PROFILE && i != HAK_OPT_VERBOSE) read_env((enum hak_option)i);
  const char *secure = secure_getenv("HAKMEM_SECURE");
  /* empty counts as unset, as in the launcher (tools/hakmem: ${HAKMEM_SECURE:-0}) */
  if (!HAK_SECURE && secure != NULL && secure[0] != '\0' && strcmp(secure, "0") != 0) {
    static const char msg[] = "hakmem: HAKMEM_SECURE is set but this is the default build; hardened mode is "
                              "libhakmem-secure.so (hakmem run --secure)\n";
    hak_warn_raw(msg, sizeof msg - 1);
  }
}

HAK_API long hak_option_get(enum hak_option option) {
  if ((unsigned)option >= HAK_OPT_COUNT) return -1;
  hak_init();
  return hak_opts.value[option];
}

HAK_API int hak_option_set(enum hak_option option, long value) {
  if ((unsigned)option >= HAK_OPT_COUNT) return EINVAL;
  hak_init();
  const struct option_spec *s = &specs[option];
  if (value < s->min || value > s->max) return EINVAL;
  hak_opts.value[option] = value;
  if (option == HAK_OPT_PROFILE) apply_profile(value);
  else mark_explicit(option);
  return 0;
}

void hak_options_print(void) {
  char line[64 * HAK_OPT_COUNT];
  size_t n = 0;
  PUT("hakmem: options:");
  for (int i = 0; i < HAK_OPT_COUNT; i++) {
    long v = hak_opts.value[i];
    PUT(" ");
    PUT(specs[i].env);
    PUT("=");
    if (v >= 0 && v <= 2 && specs[i].names[v] != NULL) {
      PUT(specs[i].names[v]);
    } else {
      n += fmt_long(line + n, v);
    }
  }
  line[n++] = '\n';
  hak_warn_raw(line, n);
}

HAK_API const char *hak_option_name(enum hak_option option) {
  return (unsigned)option < HAK_OPT_COUNT ? specs[option].env : NULL;
}

const char *hak_option_value_name(enum hak_option option, long value) {
  if ((unsigned)option >= HAK_OPT_COUNT || value < 0 || value > 2) return NULL;
  return specs[option].names[value];
}
