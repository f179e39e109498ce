// Log mel filterbank features computed as Kaldi's compute-fbank-feats (and torchaudio's
// torchaudio.compliance.kaldi.fbank) do with their defaults, except dither (off here):
//
//   frames     25 ms windows every 10 ms, snip_edges=true: only frames that fit entirely,
//              so n samples give 1 + (n - L) / S frames (0 when n < L), L = 400, S = 160 at 16 kHz
//   per frame  [dither] -> remove the DC offset (frame mean) -> pre-emphasis
//              x[i] -= 0.97 x[i-1] (x[0] -= 0.97 x[0]) -> povey window (hann^0.85, symmetric)
//              -> zero-pad to the next power of two (512 at 16 kHz) -> real FFT -> |X|^2
//   mel banks  num_bins triangles equally spaced in mel = 1127 ln(1 + f / 700) between
//              20 Hz and Nyquist; weight of FFT bin k (k < fft_size / 2, the Nyquist bin is
//              not used) is max(0, min(up, down)) of its mel position, as in Kaldi's MelBanks
//   output     ln(max(energy, FLT_EPSILON)); no energy coefficient
//
// Input scale: samples are multiplied by `input_scale` (32768 by default) before framing.
// audio_read() gives 16-bit audio as v / 32768, while Kaldi works on the integer values v,
// so the default reproduces Kaldi's numbers (and places the epsilon floor where Kaldi has
// it). Dither, when on, is Gaussian noise of standard deviation `dither` in those scaled
// units (Kaldi's default is 1.0), drawn from kernels/base/rng.h keyed on (dither_seed, dither_stream,
// frame): deterministic and independent of which rank computes the utterance.
//
// The FFT is FFTW single precision, planned once per fbank_t (FFTW_ESTIMATE: the same plan
// on every rank and run) and reused. FFTW's planner is not thread-safe, so fbank_init and
// fbank_free take a process-wide lock around planning and plan destruction; after init,
// separate fbank_t objects may compute in separate threads.
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef struct {
    int num_bins;            // 80
    double frame_length_ms;  // 25
    double frame_shift_ms;   // 10
    double low_freq;         // 20 Hz
    double high_freq;        // 0: Nyquist; negative: offset below Nyquist (Kaldi's convention)
    double preemphasis;      // 0.97
    int remove_dc_offset;    // 1
    double input_scale;      // 32768
    double dither;           // 0 (Kaldi's default is 1.0)
    uint64_t dither_seed;    // 0
} fbank_opts_t;

typedef struct {
    fbank_opts_t opts;
    int sample_rate;
    int frame_length;  // L samples
    int frame_shift;   // S samples
    int fft_size;      // next power of two >= L
    int num_bins;      // F
    float *window;     // (L,) povey window
    // Mel banks, sparse: bin b weights FFT bins first[b] .. first[b] + len[b] - 1 with
    // weights[at[b] ...].
    int *bank_first, *bank_len, *bank_at;
    float *bank_weights;
    double *bank_center_hz;  // (F,) centre frequency of each triangle
    // FFTW buffers (fftwf_malloc'ed) and plan.
    float *fft_in;           // (fft_size,)
    void *fft_out;           // fftwf_complex (fft_size / 2 + 1,)
    void *plan;              // fftwf_plan
    float *power;            // (fft_size / 2 + 1,)
    double *frame;           // (L,) scratch
    uint64_t dither_stream;  // set per utterance by the caller when dither > 0
} fbank_t;

fbank_opts_t fbank_default_opts(void);
// The FFT library's version ("fftw-3.3.10-sse2-avx").
const char *fbank_fft_library(void);
// Returns 0, or -1 with one sentence in err (bad rate, too many bins for the FFT size, ...).
int fbank_init_opts(fbank_t *fb, int sample_rate, const fbank_opts_t *opts, char *err, size_t errcap);
// Kaldi defaults with num_bins bins (dither off). Returns 0 or -1 (writes the reason to stderr).
int fbank_init(fbank_t *fb, int sample_rate, int num_bins);
// Number of frames for n samples (snip_edges=true).
int64_t fbank_num_frames(const fbank_t *fb, int64_t n_samples);
int64_t fbank_frames_of(int64_t n_samples, int64_t frame_length, int64_t frame_shift);
// Window or hop of `ms` milliseconds in samples, rounded down as Kaldi does.
int fbank_samples_of_ms(int sample_rate, double ms);
// out: (fbank_num_frames(n), num_bins) row-major.
void fbank_compute(fbank_t *fb, const float *samples, int64_t n, float *out);
void fbank_free(fbank_t *fb);

// Kaldi's mel scale.
double fbank_mel(double hz);
double fbank_mel_inv(double mel);
// Dense weight of FFT bin k in mel bin b (0 outside the triangle).
float fbank_bank_weight(const fbank_t *fb, int b, int k);
