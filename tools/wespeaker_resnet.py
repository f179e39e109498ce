"""WeSpeaker's ResNet classes as pyannote.audio ships them (WeSpeaker itself is not on PyPI):
pyannote/audio/models/embedding/wespeaker/resnet.py, loaded as a module of its own. Its package
__init__ files import the whole toolkit (Lightning, torchcodec, ...), so they are stood in for by
empty packages on the installed folders; the module itself needs torch and einops. Used by
tools/bench_pytorch.py and tests/interop/wespeaker_check.py (pip install --no-deps
pyannote.audio einops)."""
import importlib.util
import os
import sys
import types

BLOCKS = {"resnet18": ("BasicBlock", [2, 2, 2, 2]), "resnet34": ("BasicBlock", [3, 4, 6, 3]),
          "resnet50": ("Bottleneck", [3, 4, 6, 3]), "resnet101": ("Bottleneck", [3, 4, 23, 3]),
          "resnet152": ("Bottleneck", [3, 8, 36, 3]), "resnet221": ("Bottleneck", [6, 16, 48, 3]),
          "resnet293": ("Bottleneck", [10, 20, 64, 3])}


def module():
    """The resnet module, or ImportError when pyannote.audio is not installed."""
    spec = importlib.util.find_spec("pyannote")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("pyannote.audio is not installed")
    root = os.path.join(list(spec.submodule_search_locations)[0], "audio")
    for name, path in [("pyannote.audio", root), ("pyannote.audio.models", root + "/models"),
                       ("pyannote.audio.models.blocks", root + "/models/blocks"),
                       ("pyannote.audio.utils", root + "/utils")]:
        if name not in sys.modules:
            pkg = types.ModuleType(name)
            pkg.__path__ = [path]
            sys.modules[name] = pkg
    spec = importlib.util.spec_from_file_location("wespeaker_resnet", root + "/models/embedding/wespeaker/resnet.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def build(depth, feat_dim, embed_dim, m_channels=32):
    """WeSpeaker's ResNet of a depth (two_emb_layer False, TSTP): the ResNet<depth> function at
    m_channels 32, else the ResNet class with the same blocks."""
    ws = module()
    kw = dict(feat_dim=feat_dim, embed_dim=embed_dim, pooling_func="TSTP", two_emb_layer=False)
    if m_channels == 32:
        return getattr(ws, "ResNet" + depth[len("resnet"):])(**kw)
    block, blocks = BLOCKS[depth]
    return ws.ResNet(getattr(ws, block), blocks, m_channels=m_channels, **kw)
