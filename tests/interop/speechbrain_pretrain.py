"""Pretrains a small SpeechBrain ECAPA_TDNN as SpeechBrain's VoxCeleb recipe does -- its
Classifier under AAM-softmax (LogSoftmaxWrapper(AdditiveAngularMargin)), Adam, random crops --
and saves it as the recipe saves it: DIR/embedding_model.ckpt, DIR/classifier.ckpt.

  speechbrain_pretrain.py DIR DATA EPOCHS

DATA: a spkddp feature dataset; its labels are the classes, in order. Each crop is
mean-normalised over its frames, as spkddp's loader does (interop_data.cmn), so the model
sees in spkddp what it saw here. Widths: spkddp's --channels 32 --attention-channels 16
--se-channels 16 --emb-dim 32.
"""
import sys

import h5py
import numpy as np
import torch
from interop_data import cmn, utterances
from speechbrain.lobes.models.ECAPA_TDNN import ECAPA_TDNN, Classifier
from speechbrain.nnet.losses import AdditiveAngularMargin, LogSoftmaxWrapper

FRAMES, BATCH, LR = 48, 32, 0.005


def main(out, data, epochs):
    torch.manual_seed(11)
    torch.set_num_threads(1)
    rng = np.random.default_rng(11)
    utts = [x for _, x in utterances(data)]
    with h5py.File(data, "r") as f:
        labels = f["labels"][...].astype(np.int64)
    feat, speakers = utts[0].shape[1], int(labels.max()) + 1
    enc = ECAPA_TDNN(input_size=feat, channels=[32, 32, 32, 32, 96], attention_channels=16, se_channels=16,
                     lin_neurons=32)
    cls = Classifier(input_size=32, out_neurons=speakers)
    loss_fn = LogSoftmaxWrapper(AdditiveAngularMargin(margin=0.2, scale=30))
    opt = torch.optim.Adam(list(enc.parameters()) + list(cls.parameters()), lr=LR)
    enc.train(), cls.train()
    for epoch in range(epochs):
        order, total, correct = rng.permutation(len(utts)), 0.0, 0
        for b in range(0, len(order) - BATCH + 1, BATCH):
            idx = order[b:b + BATCH]
            crops = []
            for i in idx:
                x = utts[i]
                start = rng.integers(0, len(x) - FRAMES + 1)
                crops.append(cmn(x[start:start + FRAMES]))
            target = torch.from_numpy(labels[idx])[:, None]
            cos = cls(enc(torch.from_numpy(np.stack(crops))))
            loss = loss_fn(cos, target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss) * len(idx)
            correct += int((cos.squeeze(1).argmax(1) == target[:, 0]).sum())
        seen = len(order) // BATCH * BATCH
        print("SpeechBrain pretraining: epoch %d/%d  loss %.4f  acc %.3f" % (epoch + 1, epochs, total / seen, correct / seen))
    torch.save(enc.state_dict(), out + "/embedding_model.ckpt")
    torch.save(cls.state_dict(), out + "/classifier.ckpt")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
