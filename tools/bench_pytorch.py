#!/usr/bin/python3
"""The `spkddp bench` step in PyTorch: the encoder + AAM-softmax, forward, backward and an
Adam update on a fixed random batch, on the CPU or a GPU. Prints samples/s.
  --model ecapa      ECAPA-TDNN (SpeechBrain topology, the module definitions of
                     tests/golden/make_ecapa_golden.py), width --channels (512)
  --model resnet34   (and the other depths) WeSpeaker's own ResNet as pyannote.audio ships it
                     (tools/wespeaker_resnet.py: pip install --no-deps pyannote.audio einops), or,
                     where that is not installed, tests/golden/make_resnet_golden.py's, which
                     computes the same; width --channels (m_channels, 32), embedding 256
  --model campplus   3D-Speaker's own CAMPPlus (pip install --no-deps speakerlab), init_channels
                     --channels (128), --growth-rate (32), --bn-size (4), embedding 512;
                     --recompute: its memory_efficient checkpointing (off: its fastest)
usage: bench_pytorch.py [--model ecapa] [--channels C] [--batch 32] [--frames 200] [--feat 80]
                        [--classes 1000] [--steps 5] [--warmup 2] [--threads N]
                        [--device cpu|cuda] [--precision fp32|tf32|bf16] [--cudnn-benchmark]
                        [--channels-last]
fp32: float32 throughout (on CUDA with TF32 off, as spkddp's fp32). tf32: CUDA TF32 tensor
cores (--tf32 is the same). bf16: torch.autocast(dtype=torch.bfloat16) around the forward and
the loss, the mixed precision a PyTorch user turns on (weights, gradients and Adam stay
float32; on CUDA PyTorch's own TF32 defaults for what stays fp32). cuDNN picks its own
algorithms (--cudnn-benchmark lets it time them). --channels-last: the 2-D models in PyTorch's
channels_last memory format (what its oneDNN and cuDNN convolutions take without reordering).
On CUDA it also prints the peak memory PyTorch's allocator held, on the CPU the peak RSS.
"""
import argparse
import os
import resource
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "golden"))
sys.path.insert(0, HERE)
from golden_common import aam_logits  # noqa: E402
from make_ecapa_golden import build_ecapa  # noqa: E402

DEPTHS = ["resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "resnet221", "resnet293"]


def build(a):
    """(model, embedding size, where its code comes from)"""
    if a.model == "ecapa":
        return build_ecapa(a.feat, a.channels or 512, 128, 128, 192), 192, "SpeechBrain topology"
    if a.model == "campplus":
        from speakerlab.models.campplus.DTDNN import CAMPPlus
        model = CAMPPlus(feat_dim=a.feat, embedding_size=512, growth_rate=a.growth_rate, bn_size=a.bn_size,
                         init_channels=a.channels or 128, memory_efficient=a.recompute)
        return model, 512, "3D-Speaker's speakerlab, memory_efficient %s" % a.recompute
    m = a.channels or 32
    try:
        import wespeaker_resnet
        return wespeaker_resnet.build(a.model, a.feat, 256, m), 256, "WeSpeaker's resnet.py (pyannote.audio)"
    except ImportError:
        from make_resnet_golden import ResNet
        return ResNet(a.model, a.feat, m, 256), 256, "tests/golden/make_resnet_golden.py"


def embedding(model, x):
    out = model(x)
    return out[-1] if isinstance(out, tuple) else out.squeeze(1)  # WeSpeaker's: (0, embedding)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--channels", type=int, default=0, help="0: the model's (ECAPA 512, ResNet 32)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--frames", type=int, default=200)
    ap.add_argument("--feat", type=int, default=80)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--precision", default="fp32", choices=["fp32", "tf32", "bf16"])
    ap.add_argument("--tf32", action="store_true", help="the same as --precision tf32")
    ap.add_argument("--cudnn-benchmark", action="store_true")
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--model", default="ecapa", choices=["ecapa", "campplus"] + DEPTHS)  # spkddp bench's flags pass through
    ap.add_argument("--growth-rate", type=int, default=32, help="campplus")
    ap.add_argument("--bn-size", type=int, default=4, help="campplus")
    ap.add_argument("--recompute", action="store_true", help="campplus: speakerlab's memory_efficient")
    a = ap.parse_args()
    if a.tf32:
        a.precision = "tf32"
    torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    if a.device == "cuda":
        if a.precision != "bf16":
            torch.backends.cudnn.allow_tf32 = a.precision == "tf32"
            torch.backends.cuda.matmul.allow_tf32 = a.precision == "tf32"
        torch.backends.cudnn.benchmark = a.cudnn_benchmark
    torch.manual_seed(0)
    model, emb_dim, code = build(a)
    model = model.to(dev)
    if a.channels_last:
        model = model.to(memory_format=torch.channels_last)
    head = torch.nn.Parameter(torch.empty(a.classes, emb_dim, device=dev))
    torch.nn.init.xavier_uniform_(head)
    opt = torch.optim.Adam(list(model.parameters()) + [head], lr=1e-3)
    x = torch.randn(a.batch, a.frames, a.feat, device=dev)
    y = torch.randint(0, a.classes, (a.batch,), device=dev)

    def sync():
        if a.device == "cuda":
            torch.cuda.synchronize()

    t0 = 0.0
    for s in range(a.warmup + a.steps):
        if s == a.warmup:
            sync()
            t0 = time.perf_counter()
            c0 = time.process_time()
        opt.zero_grad(set_to_none=True)
        with torch.autocast(a.device, dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            emb = embedding(model, x)
            logits, _ = aam_logits(emb, head, y, 0.2, 30.0)
            loss = F.cross_entropy(logits, y)
        loss.backward()
        opt.step()
    sync()
    dt = time.perf_counter() - t0
    cpu = time.process_time() - c0
    where = f"{a.threads} threads" if a.device == "cpu" else \
        f"{torch.cuda.get_device_name()}, cudnn.benchmark {a.cudnn_benchmark}"
    if a.device == "cuda":
        mem = f", peak memory {torch.cuda.max_memory_reserved() / 2**20:.0f} MiB"
    else:
        mem = f", peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB"
    layout = ", channels_last" if a.channels_last else ""
    width = a.channels or {"ecapa": 512, "campplus": 128}.get(a.model, 32)
    print(f"pytorch {torch.__version__}: {a.model} C={width} "
          f"({code}{layout}) batch {a.batch}, T={a.frames}, F={a.feat}, "
          f"{a.precision}, {where}: {a.steps * a.batch / dt:.2f} samples/s, {dt / a.steps:.3f} s/step, "
          f"CPU {cpu / a.steps:.3f} s/step{mem}")


if __name__ == "__main__":
    main()
