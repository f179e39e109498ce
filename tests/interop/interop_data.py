"""What the interop checks read: a spkddp feature dataset's utterances, spkddp's embeddings,
and the loader's mean normalisation (h5py and NumPy only)."""
import h5py
import numpy as np


def _ids(ds):
    return [s.decode() if isinstance(s, bytes) else s for s in ds[...]]


def utterances(path):
    """[(id, frames (T, F) float32)] of a spkddp feature dataset, in file order."""
    with h5py.File(path, "r") as f:
        feats = f["features"][...]
        if feats.ndim == 3:
            utts = [feats[i] for i in range(feats.shape[0])]
        else:
            off = f["offsets"][...]
            utts = [feats[off[i]:off[i + 1]] for i in range(len(off) - 1)]
        ids = _ids(f["utt_ids"]) if "utt_ids" in f else ["utt%07d" % i for i in range(len(utts))]
    return list(zip(ids, utts))


def cmn(x):
    """spkddp's loader: the mean frame in float64, subtracted in float32."""
    return x - x.astype(np.float64).mean(axis=0).astype(np.float32)


def spkddp_embeddings(path):
    """{utterance id: embedding} of an HDF5 file of spkddp embed."""
    with h5py.File(path, "r") as f:
        return dict(zip(_ids(f["utt_ids"]), f["embeddings"][...]))


def relative(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.linalg.norm(a - b) / np.linalg.norm(b)
