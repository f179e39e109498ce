// Synthetic talking-face videos for tests: one mp4 per utterance of a speech corpus, an N x N face whose
// mouth opens and closes with the speech, with the utterance's audio. Reproducible from a seed.
//
//   usage: make_face_video WAV_SCP UTT2SPK OUTDIR SEED [--size N (default 64)] [--fps F (default 25)]
//                          [--audio NOISY_WAV_SCP] [--first-speaker K (default 0)]
//
// WAV_SCP and UTT2SPK are Kaldi lists as tests/e2e/make_speech_corpus.sh writes them ('ID
// /path.wav', 'ID SPEAKER'; WAV files, read with libsndfile). Writes OUTDIR/video/ID.mp4
// (H.264 N x N at F frames/s, yuv420p, and AAC audio, made by the ffmpeg command-line tool:
// raw rgb24 frames are piped into it), OUTDIR/video.scp ('ID /abs/path.mp4', in WAV_SCP's
// order) and OUTDIR/utt2spk (the same utterances' speakers), the lists only once every video
// is made. --audio puts the audio of a second list with the same ids (noisy copies, e.g. from
// make_aug_data corrupt) in the videos; the mouth still follows the clean WAV_SCP, as a real
// mouth follows the speech and not the noise. N must be even (yuv420p). The videos are made
// by MAKE_FACE_VIDEO_JOBS processes (default 4); the output does not depend on how many.
//
// The model. Every draw comes from a SplitMix64 stream (kernels/base/rng.h) keyed on the seed,
// a purpose and the item it is for, so any one video depends only on (SEED, speaker, id).
//   speaker   numbered by the order of first appearance in UTT2SPK plus --first-speaker K (so
//             a held-out set can use other identities): face ellipse size and aspect, skin
//             colour (light to dark), hair colour, volume, length and hairline (height, fall
//             to the sides, widow's peak, parting slant; some are bald), eye spacing, height
//             and size, iris colour, nose length, lip colour, mouth width and height,
//             and a texture of 2-6 freckles or blotches at fixed face-relative places
//   session   (an utterance, keyed on the speaker and a hash of its id) background colours (a
//             vertical gradient), lighting gain, colour cast and left-right slope, head
//             position offset (+-5% of the frame) and scale (+-4%)
//   frame     head motion, a random walk pulled back to the session's pose (about a pixel at
//             N = 64, a degree of roll), and pixel noise (sd 2.5 of 255)
//   mouth     a dark ellipse (with teeth) inside the lips whose height follows the speech
//             energy: the RMS in dB of the clean audio in each 1/F s frame, mapped to 0..1
//             between the utterance's 10th and 95th percentiles and smoothed over 3 frames; at
//             0 the lips are a thin closed line, and the mouth widens a little as it opens
// Everything is drawn per pixel in floats, as coverage of ellipses (distance to the outline
// over the pixel size, so edges are anti-aliased over about a pixel), then clamped to 0..255.
#include "kernels/base/rng.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <sndfile.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

// Stream purposes of this generator (make_aug_data uses 100-300).
enum { P_SPEAKER = 401, P_SESSION = 402, P_MOTION = 403, P_PIXEL = 404 };

#define PIXEL_NOISE 2.5

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("make_face_video: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) die("out of memory");
    return p;
}

static double uni(rng_t *g, double a, double b) { return a + (b - a) * rng_uniform(g); }
static double clamp01(double x) { return x < 0 ? 0 : x > 1 ? 1 : x; }

// FNV-1a: a session's streams are keyed on its id, so a video does not change when other
// utterances are added to or left out of the list.
static uint64_t hash_id(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

// ---- Kaldi lists ----------------------------------------------------------------------------

typedef struct {
    char *key, *val;
    uint64_t num;  // utt2spk: the speaker's number
} entry_t;

typedef struct {
    entry_t *e;
    size_t n;
} list_t;

// 'KEY VALUE' a line, the value being the rest of the line; blank lines are skipped.
static list_t read_list(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) die("cannot open %s: %s", path, strerror(errno));
    list_t l = {0};
    size_t cap = 0, lcap = 0;
    char *line = NULL;
    ssize_t len;
    for (size_t ln = 1; (len = getline(&line, &lcap, f)) >= 0; ln++) {
        while (len > 0 && strchr(" \t\r\n", line[len - 1])) line[--len] = 0;
        char *k = line + strspn(line, " \t");
        if (!*k) continue;
        char *v = k + strcspn(k, " \t");
        if (!*v) die("%s:%zu: no value after '%s'", path, ln, k);
        *v++ = 0;
        v += strspn(v, " \t");
        if (l.n == cap) {
            cap = cap ? 2 * cap : 64;
            l.e = realloc(l.e, cap * sizeof *l.e);
            if (!l.e) die("out of memory");
        }
        l.e[l.n] = (entry_t){strdup(k), strdup(v), 0};
        if (!l.e[l.n].key || !l.e[l.n].val) die("out of memory");
        l.n++;
    }
    if (ferror(f)) die("cannot read %s", path);
    fclose(f);
    free(line);
    return l;
}

static int by_key(const void *a, const void *b) { return strcmp(((const entry_t *)a)->key, ((const entry_t *)b)->key); }

// A copy sorted by key, for lookup(); the original keeps the file's order.
static entry_t *sorted_copy(const list_t *l) {
    entry_t *s = xmalloc(l->n * sizeof *s);
    if (l->n) memcpy(s, l->e, l->n * sizeof *s);
    qsort(s, l->n, sizeof *s, by_key);
    return s;
}

static const entry_t *lookup(const entry_t *sorted, size_t n, const char *key) {
    const entry_t k = {(char *)key, NULL, 0};
    return bsearch(&k, sorted, n, sizeof *sorted, by_key);
}

// Speakers numbered by first appearance (plus `first`), so the identities do not depend on how
// the speaker names sort.
static void number_speakers(list_t *u2s, uint64_t first) {
    const char **names = xmalloc(u2s->n * sizeof *names);
    size_t ns = 0;
    for (size_t i = 0; i < u2s->n; i++) {
        size_t j = 0;
        while (j < ns && strcmp(names[j], u2s->e[i].val) != 0) j++;
        if (j == ns) names[ns++] = u2s->e[i].val;
        u2s->e[i].num = first + j;
    }
    free(names);
}

// ---- audio ----------------------------------------------------------------------------------

// The samples of a sound file, channels averaged.
static float *read_audio(const char *path, int64_t *n, int *rate) {
    SF_INFO info = {0};
    SNDFILE *f = sf_open(path, SFM_READ, &info);
    if (!f) die("cannot read %s: %s", path, sf_strerror(NULL));
    const int ch = info.channels;
    if (ch < 1 || info.samplerate < 1 || info.frames < 1) die("%s: no audio", path);
    float *x = xmalloc((size_t)info.frames * (size_t)ch * sizeof *x);
    if (sf_readf_float(f, x, info.frames) != info.frames) die("cannot read %s: short read", path);
    sf_close(f);
    for (int64_t j = 0; j < info.frames; j++) {
        float s = 0;
        for (int c = 0; c < ch; c++) s += x[j * ch + c];
        x[j] = s / (float)ch;
    }
    *n = info.frames;
    *rate = info.samplerate;
    return x;
}

// Every file is checked before any work starts, so a bad one gives one error line (not also
// ffmpeg's, nor those of videos cut short).
static void check_audio(const char *path) {
    SF_INFO info = {0};
    SNDFILE *f = sf_open(path, SFM_READ, &info);
    if (!f) die("cannot read %s: %s", path, sf_strerror(NULL));
    sf_close(f);
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double percentile(const double *sorted, int n, double p) {
    const double t = p * (n - 1);
    const int i = (int)t;
    return i + 1 < n ? sorted[i] + (t - i) * (sorted[i + 1] - sorted[i]) : sorted[n - 1];
}

// Mouth opening per video frame, 0..1: the frame's RMS in dB between the utterance's 10th and
// 95th percentiles (so neither the session's loudness nor its background noise matters),
// smoothed [1 2 1] / 4 as a mouth moves slower than the energy. As many frames as cover the
// audio (ffmpeg's -shortest trims the last).
static double *mouth_track(const float *x, int64_t n, int rate, int fps, int *frames) {
    const int nf = (int)((n * fps + rate - 1) / rate);
    double *db = xmalloc((size_t)nf * sizeof *db), *sorted = xmalloc((size_t)nf * sizeof *sorted);
    double *open = xmalloc((size_t)nf * sizeof *open);
    for (int i = 0; i < nf; i++) {
        const int64_t lo = (int64_t)i * rate / fps, end = (int64_t)(i + 1) * rate / fps, hi = end < n ? end : n;
        double e = 0;
        for (int64_t j = lo; j < hi; j++) e += (double)x[j] * x[j];
        db[i] = 10 * log10(e / (double)(hi > lo ? hi - lo : 1) + 1e-12);
    }
    memcpy(sorted, db, (size_t)nf * sizeof *db);
    qsort(sorted, (size_t)nf, sizeof *sorted, cmp_double);
    const double lo = percentile(sorted, nf, 0.10), hi = percentile(sorted, nf, 0.95);
    // An utterance without dynamics (silence, a steady tone) keeps the mouth shut.
    for (int i = 0; i < nf; i++) sorted[i] = hi - lo > 3 ? clamp01((db[i] - lo) / (hi - lo)) : 0;
    for (int i = 0; i < nf; i++)
        open[i] = 0.25 * sorted[i > 0 ? i - 1 : 0] + 0.5 * sorted[i] + 0.25 * sorted[i + 1 < nf ? i + 1 : nf - 1];
    free(db);
    free(sorted);
    *frames = nf;
    return open;
}

// ---- the face -------------------------------------------------------------------------------

// Lengths are in image widths, positions relative to the head's centre (y down).
typedef struct {
    double fa, fb;  // face half-width, half-height
    double skin[3], hair[3], iris[3], lip[3];
    double cap_a, cap_b, hair_low;          // hair volume behind the face (cap_a 0: bald), its lowest point
    double hl, hl_fall, hl_peak, hl_slant;  // hairline: height, fall to the sides, widow's peak, parting slant
    double eye_dx, eye_y, eye_r;            // eye half-spacing, height, radius
    double nose_len, mouth_y, mouth_w, mouth_h, lip_th;
    int nblot;
    struct {
        double u, v, r, alpha, tint[3];
    } blot[6];
} face_t;

static face_t make_face(uint64_t seed, uint64_t speaker) {
    static const double light[3] = {236, 200, 176}, dark[3] = {98, 64, 46};
    static const double hairs[6][3] = {{28, 24, 22},    {68, 44, 30},  {112, 76, 46},
                                       {204, 172, 112}, {152, 68, 36}, {168, 166, 162}};
    static const double irises[5][3] = {{88, 54, 30}, {70, 112, 164}, {78, 122, 70}, {122, 96, 50}, {112, 122, 132}};
    rng_t g = rng_init(seed, P_SPEAKER, speaker, 0);
    face_t f;
    f.fa = uni(&g, 0.24, 0.29);
    f.fb = f.fa * uni(&g, 1.15, 1.40);
    const double tone = rng_uniform(&g);
    const double *hair = hairs[rng_below(&g, 6)], *iris = irises[rng_below(&g, 5)];
    for (int c = 0; c < 3; c++) {
        f.skin[c] = light[c] + tone * (dark[c] - light[c]) + uni(&g, -8, 8);
        f.hair[c] = hair[c] * uni(&g, 0.85, 1.15);
        f.iris[c] = iris[c] * uni(&g, 0.85, 1.15);
    }
    f.lip[0] = f.skin[0] * uni(&g, 0.72, 0.88);
    f.lip[1] = f.skin[1] * uni(&g, 0.45, 0.6);
    f.lip[2] = f.skin[2] * uni(&g, 0.5, 0.65);
    const int bald = rng_uniform(&g) < 0.15;
    f.cap_a = bald ? 0 : f.fa * uni(&g, 1.04, 1.18);
    f.cap_b = f.fb * uni(&g, 0.98, 1.08);
    f.hair_low = f.fb * uni(&g, -0.2, 0.7);
    f.hl = bald ? 3 * f.fb : f.fb * uni(&g, 0.5, 0.8);
    f.hl_fall = f.fb * uni(&g, 0.1, 0.35);
    f.hl_peak = rng_uniform(&g) < 0.3 ? f.fb * uni(&g, 0.05, 0.15) : 0;
    f.hl_slant = f.fb * uni(&g, -0.12, 0.12);
    f.eye_dx = f.fa * uni(&g, 0.34, 0.46);
    f.eye_y = -f.fb * uni(&g, 0.05, 0.2);
    f.eye_r = f.fa * uni(&g, 0.12, 0.17);
    f.nose_len = f.fb * uni(&g, 0.26, 0.4);
    const double nose_end = f.eye_y + f.nose_len;
    f.mouth_y = nose_end + (f.fb - nose_end) * uni(&g, 0.33, 0.45);
    f.mouth_w = f.fa * uni(&g, 0.3, 0.45);
    f.mouth_h = f.fb * uni(&g, 0.12, 0.17);
    f.lip_th = f.fb * uni(&g, 0.035, 0.06);
    // The texture: moles and freckles (darker) or blotches (redder), anywhere on the face.
    f.nblot = 2 + (int)rng_below(&g, 5);
    for (int k = 0; k < f.nblot; k++) {
        const double r = 0.8 * sqrt(rng_uniform(&g)), a = uni(&g, 0, 2 * 3.14159265358979);
        f.blot[k].u = f.fa * r * cos(a);
        f.blot[k].v = f.fb * r * sin(a);
        f.blot[k].r = f.fa * uni(&g, 0.04, 0.1);
        f.blot[k].alpha = uni(&g, 0.35, 0.65);
        const int red = rng_uniform(&g) < 0.4;
        const double dk = uni(&g, 0.55, 0.8);
        for (int c = 0; c < 3; c++) f.blot[k].tint[c] = f.skin[c] * (red ? (c == 0 ? 1.0 : 0.78) : dk);
    }
    return f;
}

typedef struct {
    double bg_top[3], bg_bottom[3];
    double gain, cast[3], light;  // lighting: gain, colour cast, left-right slope
    double x0, y0, scale;         // head position offset and scale
} session_t;

static session_t make_session(uint64_t seed, uint64_t speaker, const char *id) {
    rng_t g = rng_init(seed, P_SESSION, speaker, hash_id(id));
    session_t s;
    for (int c = 0; c < 3; c++) {
        s.bg_top[c] = uni(&g, 40, 220);
        s.bg_bottom[c] = s.bg_top[c] * uni(&g, 0.75, 1.1);
    }
    s.gain = uni(&g, 0.8, 1.15);
    for (int c = 0; c < 3; c++) s.cast[c] = uni(&g, 0.92, 1.08);
    s.light = uni(&g, -0.3, 0.3);
    s.x0 = uni(&g, -0.05, 0.05);
    s.y0 = uni(&g, -0.03, 0.05);
    s.scale = uni(&g, 0.96, 1.04);
    return s;
}

typedef struct {
    double dx, dy, roll, scale;
} pose_t;

// A step of an Ornstein-Uhlenbeck walk: the head drifts and nods but stays about the session's
// pose (stationary sd about 1% of the frame, 0.7 degrees of roll, 0.3% of scale).
static void move(pose_t *p, rng_t *g) {
    p->dx += -0.05 * p->dx + 0.003 * rng_normal(g);
    p->dy += -0.05 * p->dy + 0.003 * rng_normal(g);
    p->roll += -0.05 * p->roll + 0.004 * rng_normal(g);
    p->scale += -0.05 * (p->scale - 1) + 0.001 * rng_normal(g);
}

// How much of the pixel at (u, v) (pixel size px) the ellipse centred at (cx, cy) with
// half-axes (a, b) covers: the first-order distance to the outline, (f - 1) / |grad f| with
// f = |((u - cx) / a, (v - cy) / b)|, over the pixel size.
static double ellipse(double u, double v, double cx, double cy, double a, double b, double px) {
    const double dx = u - cx, dy = v - cy;
    if (fabs(dx) > a + px || fabs(dy) > b + px) return 0;
    const double ex = dx / a, ey = dy / b, f = sqrt(ex * ex + ey * ey);
    if (f < 1e-9) return 1;
    const double gx = ex / a, gy = ey / b;
    return clamp01(0.5 - (f - 1) * f / sqrt(gx * gx + gy * gy) / px);
}

static void blend(double *c, const double *col, double alpha) {
    for (int k = 0; k < 3; k++) c[k] += alpha * (col[k] - c[k]);
}

static void scaled(double *out, const double *col, double s) {
    for (int k = 0; k < 3; k++) out[k] = col[k] * s;
}

// The face layers, back to front, at head coordinates (u, v).
static void shade_face(const face_t *f, double u, double v, double px, double open, double *c) {
    double col[3];
    scaled(col, f->skin, 0.8);
    blend(c, col, ellipse(u, v, 0, 0.95 * f->fb, 0.5 * f->fa, 0.7 * f->fb, px));  // neck
    if (f->cap_a > 0)
        blend(c, f->hair,
              ellipse(u, v, 0, -0.1 * f->fb, f->cap_a, f->cap_b, px) * clamp01(0.5 + (f->hair_low - v) / px));
    scaled(col, f->skin, 0.9);
    for (int s = -1; s <= 1; s += 2)
        blend(c, col, ellipse(u, v, s * f->fa, f->eye_y + 0.15 * f->fb, 0.14 * f->fa, 0.17 * f->fb, px));
    const double face = ellipse(u, v, 0, 0, f->fa, f->fb, px);
    if (face <= 0) return;
    // What lies inside an outline is mixed first and then laid on by the outline's coverage,
    // so a partly covered edge pixel shows no rim of the layer beneath.
    double skin[3] = {f->skin[0], f->skin[1], f->skin[2]};
    for (int k = 0; k < f->nblot; k++)
        blend(skin, f->blot[k].tint,
              f->blot[k].alpha * ellipse(u, v, f->blot[k].u, f->blot[k].v, f->blot[k].r, f->blot[k].r, px));
    const double x = u / f->fa;
    const double hairline = -f->hl + f->hl_fall * x * x + f->hl_peak * exp(-x * x / 0.05) + f->hl_slant * x;
    blend(skin, f->hair, clamp01(0.5 + (hairline - v) / px));
    blend(c, skin, face);
    // eyebrows, eyes (white, iris, pupil)
    scaled(col, f->hair, 0.7);
    const double white[3] = {238, 236, 230}, pupil[3] = {18, 16, 16};
    for (int s = -1; s <= 1; s += 2) {
        const double ex = s * f->eye_dx, r = f->eye_r;
        blend(c, col, 0.9 * ellipse(u, v, ex, f->eye_y - 1.9 * r, 1.35 * r, 0.32 * r, px));
        const double eye = ellipse(u, v, ex, f->eye_y, r, 0.62 * r, px);
        if (eye <= 0) continue;
        double in[3] = {white[0], white[1], white[2]};
        blend(in, f->iris, ellipse(u, v, ex, f->eye_y, 0.5 * r, 0.5 * r, px));
        blend(in, pupil, ellipse(u, v, ex, f->eye_y, 0.22 * r, 0.22 * r, px));
        blend(c, in, eye);
    }
    // nose: a shadow down one side, the tip, the nostrils
    const double nose_end = f->eye_y + f->nose_len;
    scaled(col, f->skin, 0.82);
    blend(c, col,
          0.6 * ellipse(u, v, 0.07 * f->fa, f->eye_y + 0.55 * f->nose_len, 0.05 * f->fa, 0.45 * f->nose_len, px));
    blend(c, col, 0.8 * ellipse(u, v, 0, nose_end, 0.16 * f->fa, 0.045 * f->fb, px));
    scaled(col, f->skin, 0.4);
    for (int s = -1; s <= 1; s += 2)
        blend(c, col, ellipse(u, v, s * 0.07 * f->fa, nose_end + 0.01 * f->fb, 0.04 * f->fa, 0.02 * f->fb, px));
    // mouth: the lips, and inside them the opening (dark, teeth at the top)
    const double mw = f->mouth_w * (1 + 0.15 * open), mh = f->mouth_h * open;
    blend(c, f->lip, ellipse(u, v, 0, f->mouth_y, mw, f->lip_th + 1.1 * mh, px));
    if (mh > 1e-4) {
        const double teeth[3] = {226, 220, 204};
        double in[3] = {52, 18, 24};
        blend(in, teeth, ellipse(u, v, 0, f->mouth_y - 0.75 * mh, 0.6 * mw, 0.35 * mh, px));
        blend(c, in, ellipse(u, v, 0, f->mouth_y, 0.85 * mw, mh, px));
    }
}

// One frame, RGB floats 0..255 before noise.
static void render(const face_t *f, const session_t *s, const pose_t *p, double open, int n, float *img) {
    const double scale = s->scale * p->scale, px = 1.0 / (n * scale);
    const double cx = 0.5 + s->x0 + p->dx, cy = 0.5 + s->y0 + p->dy, cr = cos(p->roll), sr = sin(p->roll);
    for (int y = 0; y < n; y++)
        for (int x = 0; x < n; x++) {
            const double X = (x + 0.5) / n, Y = (y + 0.5) / n;
            // into the head's frame: the roll and the scale undone
            const double u = (cr * (X - cx) + sr * (Y - cy)) / scale, v = (-sr * (X - cx) + cr * (Y - cy)) / scale;
            double c[3];
            for (int k = 0; k < 3; k++) c[k] = s->bg_top[k] + Y * (s->bg_bottom[k] - s->bg_top[k]);
            shade_face(f, u, v, px, open, c);
            float *o = img + 3 * ((size_t)y * n + x);
            for (int k = 0; k < 3; k++) o[k] = (float)(c[k] * s->gain * s->cast[k] * (1 + s->light * (X - 0.5)));
        }
}

// Noise (sum of four uniforms: near-normal at a quarter of the cost of Box-Muller) and the
// clamp to bytes.
static void to_bytes(const float *img, size_t len, rng_t *g, unsigned char *out) {
    for (size_t i = 0; i < len; i++) {
        const uint64_t r = rng_next_u64(g);
        const double sum =
            (double)(r & 0xffff) + (double)(r >> 16 & 0xffff) + (double)(r >> 32 & 0xffff) + (double)(r >> 48);
        const double v = img[i] + PIXEL_NOISE * 1.7320508 * (sum / 65536.0 - 2.0);
        out[i] = (unsigned char)(v <= 0 ? 0 : v >= 255 ? 255 : (int)(v + 0.5));
    }
}

// ---- the videos -----------------------------------------------------------------------------

// `s` in single quotes for sh (each ' as '\'').
static char *sh_quote(const char *s) {
    char *q = xmalloc(4 * strlen(s) + 3), *o = q;
    *o++ = '\'';
    for (; *s; s++)
        if (*s == '\'') {
            memcpy(o, "'\\''", 4);
            o += 4;
        } else
            *o++ = *s;
    *o++ = '\'';
    *o = 0;
    return q;
}

typedef struct {
    int size, fps;
    uint64_t seed;
} opts_t;

static void make_video(const opts_t *o, const char *id, uint64_t speaker, const char *clean, const char *audio,
                       const char *mp4) {
    int64_t n;
    int rate, nf;
    float *x = read_audio(clean, &n, &rate);
    double *open = mouth_track(x, n, rate, o->fps, &nf);
    free(x);
    const face_t f = make_face(o->seed, speaker);
    const session_t s = make_session(o->seed, speaker, id);
    char *qa = sh_quote(audio), *qv = sh_quote(mp4);
    char *cmd = xmalloc(strlen(qa) + strlen(qv) + 512);
    sprintf(cmd,
            "ffmpeg -nostdin -loglevel error -y -f rawvideo -pix_fmt rgb24 -s %dx%d -r %d -i - -i %s -map 0:v "
            "-map 1:a -c:v libx264 -preset ultrafast -crf 20 -pix_fmt yuv420p -c:a aac -b:a 64k -shortest %s",
            o->size, o->size, o->fps, qa, qv);
    FILE *pipe = popen(cmd, "w");
    if (!pipe) die("cannot start ffmpeg for %s: %s", mp4, strerror(errno));
    const size_t len = (size_t)3 * o->size * o->size;
    float *img = xmalloc(len * sizeof *img);
    unsigned char *bytes = xmalloc(len);
    rng_t walk = rng_init(o->seed, P_MOTION, hash_id(id), 0);
    pose_t p = {0, 0, 0, 1};
    for (int i = 0; i < nf; i++) {
        move(&p, &walk);
        render(&f, &s, &p, open[i], o->size, img);
        rng_t noise = rng_init(o->seed, P_PIXEL, hash_id(id), (uint64_t)i);
        to_bytes(img, len, &noise, bytes);
        if (fwrite(bytes, 1, len, pipe) != len) die("writing frames of %s to ffmpeg: %s", mp4, strerror(errno));
    }
    if (fflush(pipe) != 0) die("writing frames of %s to ffmpeg: %s", mp4, strerror(errno));
    const int st = pclose(pipe);
    if (st == -1) die("ffmpeg for %s: %s", mp4, strerror(errno));
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        die("ffmpeg failed making %s (%s %d)", mp4, WIFEXITED(st) ? "exit status" : "signal",
            WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    free(img);
    free(bytes);
    free(open);
    free(cmd);
    free(qa);
    free(qv);
}

static long parse_int(const char *s, const char *what, long lo, long hi) {
    char *end;
    errno = 0;
    const long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        die("%s must be an integer in %ld..%ld, not '%s'", what, lo, hi, s);
    return v;
}

static void usage(void) {
    fprintf(stderr,
            "usage: make_face_video WAV_SCP UTT2SPK OUTDIR SEED [--size N (default 64)] [--fps F (default 25)]\n"
            "                       [--audio NOISY_WAV_SCP] [--first-speaker K]\n");
    exit(2);
}

// A worker told to stop finishes its video first.
static volatile sig_atomic_t stop;
static void on_term(int sig) {
    (void)sig;
    stop = 1;
}

static void make_dir(const char *path) {
    if (mkdir(path, 0755) != 0 && errno != EEXIST) die("cannot make %s: %s", path, strerror(errno));
}

static void write_lists(const char *dir, const list_t *wav, const entry_t *u2s, size_t nu2s) {
    char path[4096];
    snprintf(path, sizeof path, "%s/video.scp", dir);
    FILE *scp = fopen(path, "w");
    if (!scp) die("cannot write %s: %s", path, strerror(errno));
    snprintf(path, sizeof path, "%s/utt2spk", dir);
    FILE *spk = fopen(path, "w");
    if (!spk) die("cannot write %s: %s", path, strerror(errno));
    for (size_t i = 0; i < wav->n; i++) {
        fprintf(scp, "%s %s/video/%s.mp4\n", wav->e[i].key, dir, wav->e[i].key);
        fprintf(spk, "%s %s\n", wav->e[i].key, lookup(u2s, nu2s, wav->e[i].key)->val);
    }
    if (fclose(scp) != 0 || fclose(spk) != 0) die("cannot write the lists in %s", dir);
}

int main(int argc, char **argv) {
    const char *pos[4], *noisy = NULL;
    int npos = 0;
    opts_t o = {64, 25, 0};
    uint64_t first = 0;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-' && argv[i][1] == '-') {
            if (i + 1 >= argc) usage();
            const char *opt = argv[i], *val = argv[++i];
            if (strcmp(opt, "--size") == 0)
                o.size = (int)parse_int(val, "--size", 16, 2048);
            else if (strcmp(opt, "--fps") == 0)
                o.fps = (int)parse_int(val, "--fps", 1, 240);
            else if (strcmp(opt, "--audio") == 0)
                noisy = val;
            else if (strcmp(opt, "--first-speaker") == 0)
                first = (uint64_t)parse_int(val, "--first-speaker", 0, 1L << 40);
            else
                usage();
        } else if (npos < 4)
            pos[npos++] = argv[i];
        else
            usage();
    }
    if (npos != 4) usage();
    if (o.size % 2) die("--size must be even (yuv420p), not %d", o.size);
    o.seed = (uint64_t)parse_int(pos[3], "SEED", 0, 0x7fffffffffffffffL);
    // A pipe closed early by ffmpeg must come back as a write error, not kill us silently.
    signal(SIGPIPE, SIG_IGN);

    list_t wav = read_list(pos[0]), u2s = read_list(pos[1]), aud = {0};
    number_speakers(&u2s, first);
    entry_t *u2s_sorted = sorted_copy(&u2s), *aud_sorted = NULL;
    if (noisy) {
        aud = read_list(noisy);
        aud_sorted = sorted_copy(&aud);
    }
    for (size_t i = 0; i < wav.n; i++) {  // every id resolved before any work is done
        const char *id = wav.e[i].key;
        if (!lookup(u2s_sorted, u2s.n, id)) die("%s: '%s' has no speaker in %s", pos[0], id, pos[1]);
        if (noisy && !lookup(aud_sorted, aud.n, id)) die("'%s' is not in %s", id, noisy);
        if (strchr(id, '/') || strlen(id) > 255) die("%s: id '%s' cannot name a file", pos[0], id);
        check_audio(wav.e[i].val);
        if (noisy) check_audio(lookup(aud_sorted, aud.n, id)->val);
    }
    make_dir(pos[2]);
    char *dir = realpath(pos[2], NULL), path[4096];
    if (!dir) die("cannot resolve %s: %s", pos[2], strerror(errno));
    if (strlen(dir) > 3000) die("%s: path too long", dir);
    snprintf(path, sizeof path, "%s/video", dir);
    make_dir(path);
    // Most of the time goes to starting ffmpeg (about 0.1 s a video), so the utterances are
    // dealt out to MAKE_FACE_VIDEO_JOBS processes (default 4: more than 2 CPUs' worth, as a
    // worker waits on ffmpeg much of the time); each video depends only on the seed, its
    // speaker and its id, never on the split.
    const char *env = getenv("MAKE_FACE_VIDEO_JOBS");
    int jobs = env ? (int)parse_int(env, "MAKE_FACE_VIDEO_JOBS", 1, 64) : 4;
    if ((size_t)jobs > wav.n) jobs = wav.n ? (int)wav.n : 1;
    pid_t pids[64];
    fflush(NULL);
    for (int j = 0; j < jobs; j++) {
        if ((pids[j] = fork()) < 0) die("cannot start a worker: %s", strerror(errno));
        if (pids[j] > 0) continue;
        struct sigaction sa = {.sa_handler = on_term, .sa_flags = SA_RESTART};
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);
        for (size_t i = (size_t)j; i < wav.n && !stop; i += (size_t)jobs) {
            const char *id = wav.e[i].key;
            const char *audio = noisy ? lookup(aud_sorted, aud.n, id)->val : wav.e[i].val;
            snprintf(path, sizeof path, "%s/video/%s.mp4", dir, id);
            make_video(&o, id, lookup(u2s_sorted, u2s.n, id)->num, wav.e[i].val, audio, path);
        }
        exit(stop ? 3 : 0);
    }
    // A failed worker has said why; the others stop after the video at hand (so ffmpeg does
    // not complain of a cut stream), and no lists are written.
    int failed = 0;
    for (int left = jobs; left > 0; left--) {
        int st;
        const pid_t pid = wait(&st);
        if (pid < 0) die("waiting for the workers: %s", strerror(errno));
        for (int j = 0; j < jobs; j++)
            if (pids[j] == pid) pids[j] = 0;
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) continue;
        if (!failed && !WIFEXITED(st))
            fprintf(stderr, "make_face_video: error: a worker died of signal %d\n", WTERMSIG(st));
        if (!failed)
            for (int j = 0; j < jobs; j++)
                if (pids[j] > 0) kill(pids[j], SIGTERM);
        failed = 1;
    }
    if (failed) return 1;
    write_lists(dir, &wav, u2s_sorted, u2s.n);
    return 0;
}
