#!/usr/bin/python3
"""Reference log mel filterbanks for io/audio/fbank.c, from torchaudio's Kaldi-compatible fbank.

Writes three short deterministic 16 kHz signals next to this script (16-bit PCM):

  chirp_noise_16k.wav  0.6 s: linear chirp 100 Hz -> 7.5 kHz, white noise, a DC offset
  vowel_16k.flac       0.6 s: 0.1 s of digital silence, then a vowel-like harmonic signal
                       (f0 gliding 110 -> 150 Hz, three formant peaks, amplitude modulation)
  quiet_16k.wav        0.4 s: a 440 Hz tone plus noise within +-100 16-bit steps

and fbank_golden.h5 with, for each signal, a group named after the file stem holding

  samples  int16 (n,)        the samples in the audio file
  fbank    float32 (T, 80)   torchaudio.compliance.kaldi.fbank(samples as float64 16-bit
                             values, num_mel_bins=80, dither=0, other options at their
                             defaults), computed in float64 and stored as float32
  attrs    file, sample_rate, f32_vs_f64_max_abs (the same call in float32 against the
           float64 result: the rounding noise of a float32 implementation)

The samples are given to torchaudio as 16-bit integer values (not divided by 32768): that
is what Kaldi's compute-fbank-feats sees, and what io/audio/fbank.c reproduces by scaling the
normalised samples from io/audio/audio.c by 32768.

Usage:  /usr/bin/python3 tests/golden/make_fbank_golden.py [output-dir]
Needs Debian's python3-torchaudio (0.13.1, torch 1.13), python3-h5py and numpy.
Rerunning gives the same audio samples and features.
"""
import os
import sys
import wave

import h5py
import numpy as np
import torch
import torchaudio
import torchaudio.compliance.kaldi as kaldi

RATE = 16000
NUM_BINS = 80
SEED = 20240611


def quantize(x):
    return np.clip(np.round(x * 32768.0), -32768, 32767).astype(np.int16)


def chirp_noise(rng):
    n = int(0.6 * RATE)
    t = np.arange(n) / RATE
    f0, f1, dur = 100.0, 7500.0, n / RATE
    phase = 2 * np.pi * (f0 * t + 0.5 * (f1 - f0) / dur * t * t)
    x = 0.3 * np.sin(phase) + 0.02 * rng.standard_normal(n) + 0.05
    return quantize(x)


def vowel(rng):
    n = int(0.6 * RATE)
    lead = int(0.1 * RATE)
    m = n - lead
    t = np.arange(m) / RATE
    f0 = 110.0 + 40.0 * t / t[-1]
    phase = 2 * np.pi * np.cumsum(f0) / RATE
    formants = [(700.0, 90.0), (1200.0, 110.0), (2600.0, 160.0)]
    x = np.zeros(m)
    for h in range(1, 60):
        fh = h * f0
        amp = np.zeros(m)
        for fc, bw in formants:
            amp += 1.0 / (1.0 + ((fh - fc) / bw) ** 2)
        amp *= (fh < RATE / 2) / h ** 0.5
        x += amp * np.sin(h * phase + rng.uniform(0, 2 * np.pi))
    x *= 0.25 / np.max(np.abs(x))
    x *= 0.6 + 0.4 * np.sin(2 * np.pi * 4.0 * t)
    x += 0.002 * rng.standard_normal(m)
    return quantize(np.concatenate([np.zeros(lead), x]))


def quiet(rng):
    n = int(0.4 * RATE)
    t = np.arange(n) / RATE
    x = 60.0 * np.sin(2 * np.pi * 440.0 * t) + 15.0 * rng.standard_normal(n)
    return np.clip(np.round(x), -100, 100).astype(np.int16)


def write_wav(path, samples):
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(samples.astype("<i2").tobytes())


def write_flac(path, samples):
    torchaudio.save(path, torch.from_numpy(samples).unsqueeze(0), RATE, format="flac", bits_per_sample=16)
    back, rate = torchaudio.load(path)  # normalised: v / 32768
    back = (back[0].double() * 32768.0).numpy()
    assert rate == RATE and np.array_equal(back, samples.astype(np.float64)), "FLAC round trip changed the samples"


def reference(samples, dtype):
    wav = torch.from_numpy(samples.astype(np.float64)).to(dtype).unsqueeze(0)
    return kaldi.fbank(wav, num_mel_bins=NUM_BINS, dither=0.0, sample_frequency=RATE).double().numpy()


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    rng = np.random.default_rng(SEED)
    signals = [
        ("chirp_noise_16k", "chirp_noise_16k.wav", chirp_noise(rng)),
        ("vowel_16k", "vowel_16k.flac", vowel(rng)),
        ("quiet_16k", "quiet_16k.wav", quiet(rng)),
    ]
    h5_path = os.path.join(out_dir, "fbank_golden.h5")
    with h5py.File(h5_path, "w") as h5:
        h5.attrs["torch_version"] = np.bytes_(str(torch.__version__))
        h5.attrs["torchaudio_version"] = np.bytes_(str(torchaudio.__version__))
        h5.attrs["num_mel_bins"] = NUM_BINS
        h5.attrs["call"] = np.bytes_("torchaudio.compliance.kaldi.fbank(int16 values as float64, num_mel_bins=80, dither=0.0)")
        for name, fname, samples in signals:
            path = os.path.join(out_dir, fname)
            if fname.endswith(".flac"):
                write_flac(path, samples)
            else:
                write_wav(path, samples)
            ref64 = reference(samples, torch.float64)
            ref32 = reference(samples, torch.float32)
            diff = float(np.max(np.abs(ref64 - ref32)))
            g = h5.create_group(name)
            g.attrs["file"] = np.bytes_(fname)
            g.attrs["sample_rate"] = RATE
            g.attrs["f32_vs_f64_max_abs"] = diff
            g.create_dataset("samples", data=samples)
            g.create_dataset("fbank", data=ref64.astype(np.float32))
            print(f"{fname}: {len(samples)} samples, fbank {ref64.shape}, range "
                  f"[{ref64.min():.3f}, {ref64.max():.3f}], torchaudio float32 vs float64 max |diff| {diff:.3g}, "
                  f"{os.path.getsize(path)} bytes")
    print(f"{h5_path}: {os.path.getsize(h5_path)} bytes")


if __name__ == "__main__":
    main()
