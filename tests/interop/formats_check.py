"""embed --format npy|ark against the HDF5 embeddings: `formats_check.py EMB.h5 E.npy E_ids.txt E.ark E.scp`.

numpy.load reads the .npy and the id list gives its rows; kaldi_io (PyPI kaldi-io) reads the
archive sequentially and through the scp. All must hold exactly the HDF5 file's float32 values.
"""
import sys

import kaldi_io
import numpy as np

from interop_data import spkddp_embeddings


def main(h5, npy, ids, ark, scp):
    want = spkddp_embeddings(h5)
    m = np.load(npy)
    names = open(ids).read().split("\n")[:-1]
    ok = m.dtype == np.float32 and m.shape == (len(want), len(next(iter(want.values())))) and names == list(want)
    ok = ok and all(np.array_equal(m[i], want[u]) for i, u in enumerate(names))
    print("npy: %s %s, %d ids: %s" % (m.dtype, m.shape, len(names), "identical" if ok else "DIFFERENT"))
    seq = list(kaldi_io.read_vec_flt_ark(ark))
    by_scp = dict(kaldi_io.read_vec_flt_scp(scp))
    ark_ok = [k for k, _ in seq] == list(want) and all(np.array_equal(v, want[k]) for k, v in seq)
    scp_ok = list(by_scp) == list(want) and all(np.array_equal(v, want[k]) for k, v in by_scp.items())
    print("ark: %d vectors read in order: %s; through the scp: %s" % (len(seq), "identical" if ark_ok else "DIFFERENT",
                                                                    "identical" if scp_ok else "DIFFERENT"))
    return ok and ark_ok and scp_ok


if __name__ == "__main__":
    sys.exit(0 if main(*sys.argv[1:]) else 1)
