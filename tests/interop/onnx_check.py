"""The ONNX export against spkddp embed: `onnx_check.py MODEL.onnx DATA EMB`.

The graph passes onnx.checker (full check: types and shapes inferred through every node);
ONNX Runtime (CPU) embeds every utterance of DATA from its raw frames (the graph does the
mean normalisation) and must give spkddp's embeddings EMB to a relative 1e-4, one utterance
at a time and in batches of the utterances that have the same length (the batch and frame
axes are dynamic).
"""
import collections
import sys

import numpy as np
import onnx
import onnxruntime as ort

from interop_data import relative, spkddp_embeddings, utterances

TOL = 1e-4


def main(model_path, data, emb_path):
    model = onnx.load(model_path)
    onnx.checker.check_model(model, full_check=True)
    dims = [[d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in (model.graph.input[0], model.graph.output[0])]
    print("onnx.checker: ok; opset %d; %s %s -> %s %s" % (model.opset_import[0].version, model.graph.input[0].name, dims[0],
                                                           model.graph.output[0].name, dims[1]))
    sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    ours = spkddp_embeddings(emb_path)
    utts = utterances(data)
    worst, lengths = 0.0, set()
    for uid, x in utts:  # one at a time
        y = sess.run(["embedding"], {"fbank": x[None]})[0][0]
        worst = max(worst, relative(y, ours[uid]))
        lengths.add(len(x))
    by_len = collections.defaultdict(list)
    for uid, x in utts:
        by_len[len(x)].append((uid, x))
    batches = [g for g in by_len.values() if len(g) > 1]
    for g in batches:
        y = sess.run(["embedding"], {"fbank": np.stack([x for _, x in g])})[0]
        for (uid, _), row in zip(g, y):
            worst = max(worst, relative(row, ours[uid]))
    print("ONNX Runtime %s: %d utterances of %d lengths (%d to %d frames), %d batches of equal lengths: "
          "largest relative difference %.3g (tolerance %g)" % (ort.__version__, len(utts), len(lengths), min(lengths),
                                                                max(lengths), len(batches), worst, TOL))
    return worst <= TOL and len(batches) > 0


if __name__ == "__main__":
    sys.exit(0 if main(*sys.argv[1:]) else 1)
