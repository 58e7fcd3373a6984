"""A batch as the caller gets it (Batch), and what rides with it: each
sample's augmentation draws (Params) and a mixed batch's record (Mix)."""

import collections
from typing import Any, NamedTuple, Optional, Tuple

import torch

from ._errors import ProtocolError
from .v1 import loader_pb2 as pb

_PHOTO = ("jitter_order", "jitter", "gray", "sigma", "num_ops", "op", "magnitude")
_ERASE = ("erased", "erase_top", "erase_left", "erase_height", "erase_width", "erase_noise")


class Params(NamedTuple):
    top: torch.Tensor
    left: torch.Tensor
    flip: torch.Tensor
    height: Optional[torch.Tensor] = None
    width: Optional[torch.Tensor] = None
    jitter_order: Optional[torch.Tensor] = None  # _PHOTO
    jitter: Optional[torch.Tensor] = None
    gray: Optional[torch.Tensor] = None
    sigma: Optional[torch.Tensor] = None
    num_ops: Optional[torch.Tensor] = None
    op: Optional[torch.Tensor] = None
    magnitude: Optional[torch.Tensor] = None
    erased: Optional[torch.Tensor] = None  # _ERASE
    erase_top: Optional[torch.Tensor] = None
    erase_left: Optional[torch.Tensor] = None
    erase_height: Optional[torch.Tensor] = None
    erase_width: Optional[torch.Tensor] = None
    erase_noise: Optional[Tuple[int, ...]] = None


assert Params._fields[5:] == _PHOTO + _ERASE
Params.__doc__ = """Each sample's random crop origin (top, left; int64, in the
padded image) and horizontal flip (bool), as tensors of length N. For a
pipeline that opens with resize, center_crop or random_resized_crop,
(top, left, height, width) is instead the box of the source image that was
resampled (torchvision's RandomResizedCrop.get_params (i, j, h, w)); for
other pipelines height and width are None.

The photometric ops' draws, None unless the pipeline has one of
color_jitter, random_grayscale, gaussian_blur, auto_augment, rand_augment,
trivial_augment_wide: jitter_order (int64 [N, 4], torchvision's fn_idx:
0 brightness, 1 contrast, 2 saturation, 3 hue) and jitter (float32 [N, 4],
the factors in that order, 0 for a part that is off); gray (bool [N]);
sigma (float32 [N]); num_ops (int64 [N]) and, sample after sample, op
(int64, torchvision's order: 0 Identity, 1 ShearX, ... 14 Invert) and
magnitude (float32): sample i's operations are op[s:s + num_ops[i]] with
s = num_ops[:i].sum(). random_erasing's, None unless the pipeline ends
with it: erased (bool [N]) and the erased box of the output image,
erase_top, erase_left, erase_height, erase_width (int64 [N]), and
erase_noise, the key of value=random's noise (a tuple of N unsigned
64-bit Python ints, 0 without noise)."""

Mix = collections.namedtuple("Mix", "kind lam box")
Mix.__doc__ = """What a batch's mixup or cutmix drew: kind ("mixup" or
"cutmix"), lam (torchvision's lam, a float: each sample's own share) and,
for cutmix, box (top, left, height, width), the region of every image
pasted from its rolled partner (None for mixup). Sample i was mixed with
sample i-1, sample 0 with the last (torch's roll(1, 0))."""
_MIX_KINDS = {pb.MIX_KIND_MIXUP: "mixup", pb.MIX_KIND_CUTMIX: "cutmix"}


def params_of(p):
    """A wire AugmentParams as Params; fields the daemon left empty are None."""
    hw = (_long(p.height), _long(p.width)) if len(p.height) or len(p.width) else (None, None)

    def opt(values, dtype, per=1):
        if not len(values):
            return None
        t = torch.tensor(values, dtype=dtype)
        if per == 1:
            return t
        if len(values) % per:
            raise ProtocolError(f"loaderd: {len(values)} color_jitter values, want {per} per sample")
        return t.reshape(-1, per)

    photo: Tuple[Any, ...] = (None,) * len(_PHOTO)
    if any(len(getattr(p, f)) for f in _PHOTO):
        photo = (opt(p.jitter_order, torch.int64, 4), opt(p.jitter, torch.float32, 4), opt(p.gray, torch.bool),
                 opt(p.sigma, torch.float32), opt(p.num_ops, torch.int64), opt(p.op, torch.int64),
                 opt(p.magnitude, torch.float32))
    erase: Tuple[Any, ...] = (None,) * len(_ERASE)
    if len(p.erased):
        erase = (opt(p.erased, torch.bool), opt(p.erase_top, torch.int64), opt(p.erase_left, torch.int64),
                 opt(p.erase_height, torch.int64), opt(p.erase_width, torch.int64), tuple(p.erase_noise))
    return Params(_long(p.top), _long(p.left), torch.tensor(p.flip, dtype=torch.bool), *hw, *photo, *erase)


def mix_of(header, m, labels, device):
    """(Mix, soft labels) of a batch, or (None, None) on a stream without
    batch ops. The soft labels are torchvision's, float32 [N, classes] on
    device: one_hot(labels) * lam + one_hot(labels).roll(1, 0) * (1 - lam),
    computed as its MixUp and CutMix do (in place, float32)."""
    if not header.batch_mix:
        return None, None
    classes = int(header.num_classes)
    kind = _MIX_KINDS.get(m.kind) if m is not None else None
    if kind is None or classes <= 0:
        raise ProtocolError(f"loaderd: a mixed stream's batch with mix record {m} over {classes} classes")
    if len(labels) and not (0 <= int(labels.min()) and int(labels.max()) < classes):
        raise ProtocolError(f"loaderd: a mixed batch's labels fall outside the {classes} classes")
    soft = torch.nn.functional.one_hot(labels.to(device), classes).to(torch.float32)
    rolled = soft.roll(1, 0).mul_(1.0 - m.lam)
    soft.mul_(m.lam).add_(rolled)
    box = (m.box_top, m.box_left, m.box_height, m.box_width) if kind == "cutmix" else None
    return Mix(kind, m.lam, box), soft


class Batch:
    """One batch: images, labels and where they came from.

    images is a view on the daemon's shared memory (transport "shm") or on
    a buffer of the client's own (transport "inline", or pin=True). Its
    data never changes while any tensor viewing it lives, and writing into
    it never reaches another batch: the memory goes back to the daemon only
    once the batch is released (by the iterator, or release()) AND no view
    of it is left; a view kept longer is copied out of the way when the
    memory is needed (see python/README.md). Every other field is an
    ordinary tensor or int.
    """

    __slots__ = ("images", "labels", "indices", "params", "epoch", "index", "seq", "mix", "soft_labels",
                 "fields", "targets", "_session", "_released")

    def __init__(self, session, seq, epoch, index, images, labels, indices, params, mix=None, soft_labels=None,
                 fields=None, targets=None):
        self._session = session
        self._released = False
        self.seq = seq            # position in its stream: 0, 1, 2, ...
        self.epoch = epoch        # epoch the batch belongs to
        self.index = index        # batch index within the epoch: (epoch, index) is a resume point
        self.images = images      # [N, C, H, W] (chw) or [N, H, W, C] (hwc)
        self.labels = labels      # int64 [N]
        self.indices = indices    # int64 [N]: dataset index of each sample
        self.params = params      # Params, or None unless include_params
        self.mix = mix            # Mix, or None unless the augment spec ends with mixup or cutmix
        self.soft_labels = soft_labels  # float32 [N, classes] with mix, on images' device; else None
        self.fields = fields      # {name: [bytes or None]} for the dataset's fields=; else None
        self.targets = targets    # float32 [N, classes] multi-hot of a multi-label dataset; else None

    def release(self):
        """Tell the stream the caller is done with the batch: its memory
        goes back to the daemon as soon as no tensor views it. Idempotent;
        the iterator does it by itself (see Dataset)."""
        if not self._released:
            self._released = True
            self._session.release(self.seq)

    @property
    def released(self):
        return self._released

    def __iter__(self):
        # images, labels = batch; the soft labels of a mixed batch, the
        # multi-hot targets of a multi-label one
        target = self.labels if self.soft_labels is None else self.soft_labels
        return iter((self.images, target if self.targets is None else self.targets))

    def __len__(self):
        return len(self.labels)

    def __repr__(self):
        return (f"Batch(epoch={self.epoch}, index={self.index}, n={len(self.labels)}, "
                f"images={tuple(self.images.shape)} {self.images.dtype}{', released' if self._released else ''})")


def _long(values):
    # About 10 µs for 256 values, whichever way (list, numpy, fromiter).
    return torch.tensor(values, dtype=torch.int64)
