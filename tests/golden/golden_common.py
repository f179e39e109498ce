"""What the golden generators share (make_ecapa_golden.py, make_resnet_golden.py,
make_campplus_golden.py): the AAM-softmax head of SpeechBrain and WeSpeaker (easy_margin off),
and one training step of a model in float64 written to an HDF5 file for
tests/model/test_*_golden.c.

The file: root attributes (the sizes the test rebuilds the model from, margin, scale, seed,
torch_version); /order parameter names in registration order; /state_order BatchNorm buffer
names; /params/<name>, /grads/<name> (loss gradient), /state/<name> running statistics before
and /state_after/<name> after one training forward (momentum 0.1, unbiased variance); /emb
(B, E) training-mode embeddings, /emb_eval eval-mode ones from /state, /cos (B, S), /loss,
/grad_input (B, T, F); /input (B, T, F) and /labels int32 (one label repeated).
"""
import copy
import math
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def aam_logits(emb, weight, labels, margin, scale):
    cos = F.linear(F.normalize(emb, dim=1), F.normalize(weight, dim=1))
    sin = torch.sqrt(torch.clamp(1.0 - cos.pow(2), 0.0, 1.0))
    phi = cos * math.cos(margin) - sin * math.sin(margin)
    th = math.cos(math.pi - margin)
    mm = math.sin(math.pi - margin) * margin
    phi = torch.where(cos > th, phi, cos - mm)
    onehot = F.one_hot(labels, weight.shape[0]).to(cos.dtype)
    return scale * (onehot * phi + (1.0 - onehot) * cos), cos



def train_step_grads(model, W, x, labels, margin, scale):
    """One training step of copies of model and W (in their dtype): every parameter's gradient
    (the classifier's as "classifier.weight") and the input's."""
    model, W = copy.deepcopy(model).train(), nn.Parameter(W.detach().clone())
    x = x.clone().requires_grad_(True)
    logits, _ = aam_logits(model(x).squeeze(1), W, labels, margin, scale)
    F.cross_entropy(logits, labels).backward()
    grads = {n: p.grad.detach() for n, p in model.named_parameters()}
    grads["classifier.weight"] = W.grad.detach()
    return grads, x.grad.detach()


def write_golden(out_path, build, attrs, seed, feats, emb_dim, num_speakers, batch, frames, margin, scale,
                 bn_types, accept=None, f32_errors=False):
    """Draws the model (build() after torch.manual_seed(seed)), its classifier, BatchNorm
    parameters and statistics (modules of bn_types) and the input in float32, runs the eval
    forward and one training step in float64 and writes out_path. attrs: (name, value) pairs,
    in order, for the file's root attributes. accept(model, x): whether an input will do (the
    model in float64; it may run it); inputs are drawn again until it does. f32_errors: also run
    the step in float32 (PyTorch's own float32 training step) and record how far its gradients
    are from the float64 ones (root attributes torch_f32_grad_error, all parameters together,
    and torch_f32_input_grad_error): the accuracy float32 itself allows a deep network.
    """
    import h5py  # here, not at the top: tools/bench_pytorch.py imports the models without it

    SEED, FEATS, EMB_DIM, NUM_SPEAKERS, BATCH, FRAMES, MARGIN, SCALE = (
        seed, feats, emb_dim, num_speakers, batch, frames, margin, scale)
    torch.manual_seed(SEED)
    model = build()
    classifier_weight = torch.empty(NUM_SPEAKERS, EMB_DIM)
    nn.init.xavier_uniform_(classifier_weight)

    bn_names = []
    with torch.no_grad():
        for name, mod in model.named_modules():
            if isinstance(mod, bn_types):
                bn_names.append(name)
                c = mod.num_features
                if mod.affine:
                    mod.weight.copy_(1.0 + 0.1 * torch.randn(c))
                    mod.bias.copy_(0.1 * torch.randn(c))
                mod.running_mean.copy_(0.1 * torch.randn(c))
                mod.running_var.copy_(1.0 + 0.1 * torch.rand(c))

    while True:
        x = torch.randn(BATCH, FRAMES, FEATS) + (0.5 + 1.5 * torch.rand(BATCH, 1, 1))
        labels = torch.randint(0, NUM_SPEAKERS, (BATCH,))
        if accept is None or accept(copy.deepcopy(model).double(), x.double()):
            break
    if len(set(labels.tolist())) == BATCH:
        labels[BATCH - 1] = labels[0]
    assert len(set(labels.tolist())) < BATCH

    param_order = [n for n, _ in model.named_parameters()] + ["classifier.weight"]
    state_names = [n for n, _ in model.named_buffers() if not n.endswith("num_batches_tracked")]

    f32_grads = train_step_grads(model, classifier_weight, x, labels, MARGIN, SCALE) if f32_errors else None
    model = model.double()
    W = nn.Parameter(classifier_weight.double())
    xd = x.double()

    params_before = {n: p.detach().clone() for n, p in model.named_parameters()}
    params_before["classifier.weight"] = W.detach().clone()
    state_before = {n: b.detach().clone() for n, b in model.named_buffers()
                    if n in state_names}

    # Eval-mode embedding, using the initial running statistics.
    model.eval()
    with torch.no_grad():
        emb_eval = model(xd).squeeze(1)

    # One training-mode forward + backward.
    model.train()
    xin = xd.clone().requires_grad_(True)
    emb = model(xin).squeeze(1)
    logits, cos = aam_logits(emb, W, labels, MARGIN, SCALE)
    loss = F.cross_entropy(logits, labels)
    loss.backward()

    grads = {n: p.grad.detach() for n, p in model.named_parameters()}
    grads["classifier.weight"] = W.grad.detach()
    state_after = {n: b.detach().clone() for n, b in model.named_buffers()
                   if n in state_names}

    print(f"loss = {loss.item():.10f}")

    f32 = lambda t: t.detach().cpu().numpy().astype(np.float32)
    sdt = h5py.string_dtype(encoding="utf-8")
    with h5py.File(out_path, "w") as h:
        for k, v in attrs:
            h.attrs[k] = v
        h.attrs["torch_version"] = str(torch.__version__)
        if f32_grads is not None:
            g32, x32 = f32_grads
            dd = sum(((g32[n].double() - grads[n]) ** 2).sum().item() for n in param_order)
            rr = sum((grads[n] ** 2).sum().item() for n in param_order)
            h.attrs["torch_f32_grad_error"] = math.sqrt(dd / rr)
            h.attrs["torch_f32_input_grad_error"] = ((x32.double() - xin.grad).norm() / xin.grad.norm()).item()
            print(f"PyTorch's float32 step: gradients {h.attrs['torch_f32_grad_error']:.3g}, input gradient "
                  f"{h.attrs['torch_f32_input_grad_error']:.3g} from float64")

        h["input"] = f32(x)
        h["labels"] = labels.numpy().astype(np.int32)
        h.create_dataset("order", data=np.array(param_order, dtype=object), dtype=sdt)
        h.create_dataset("state_order", data=np.array(state_names, dtype=object), dtype=sdt)
        for n in param_order:
            h[f"params/{n}"] = f32(params_before[n])
            h[f"grads/{n}"] = f32(grads[n])
        for n in state_names:
            h[f"state/{n}"] = f32(state_before[n])
            h[f"state_after/{n}"] = f32(state_after[n])
        h["emb"] = f32(emb)
        h["emb_eval"] = f32(emb_eval)
        h["loss"] = np.float32(loss.item())
        h["cos"] = f32(cos)
        h["grad_input"] = f32(xin.grad)

    for n in param_order:
        print(f"  {n} {tuple(params_before[n].shape)}")
    print(f"trainable params: {sum(v.numel() for v in params_before.values())}")
    print(f"labels = {labels.tolist()}")
    print(f"wrote {out_path} ({os.path.getsize(out_path)} bytes)")

