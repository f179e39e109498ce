#!/usr/bin/env bash
# embed --format npy|ark (tests/interop/formats_check.py): numpy.load and kaldi_io read the
# same float32 values as the HDF5 embeddings, in the same order, under the same ids.
. "$(dirname "$0")/lib.sh" "$@"
need_python numpy kaldi_io h5py
export KALDI_ROOT=$WORK  # kaldi_io prints a banner when KALDI_ROOT names no directory
train_small_ecapa
run 2 $SPKDDP embed --ckpt "$CKPT" --data train.h5 --out e.h5 >/dev/null || fail "embed hdf5"
run 2 $SPKDDP embed --ckpt "$CKPT" --data train.h5 --format npy --out e.npy >out_npy || fail "embed npy"
run 2 $SPKDDP embed --ckpt "$CKPT" --data train.h5 --format ark --out e.ark >out_ark || fail "embed ark"
grep -q "wrote e.npy and e_ids.txt" out_npy || fail "npy: $(cat out_npy)"
grep -q "wrote e.ark and e.scp" out_ark || fail "ark: $(cat out_ark)"
$PY "$HERE/formats_check.py" e.h5 e.npy e_ids.txt e.ark e.scp || fail "npy/ark differ from the HDF5 embeddings"
expect_error 2 "embed: --format must be one of hdf5\|npy\|ark, got 'csv'" -- $SPKDDP embed --ckpt "$CKPT" --data train.h5 --format csv --out e.csv
finish
