#!/usr/bin/env python3
"""torchvision's classification reference recipe, with loaderd as its input
pipeline (docs/PYTORCH.md, "The torchvision reference recipe").

torchvision's references/classification/train.py run as

    train.py --auto-augment ta_wide --random-erase 0.1 --mixup-alpha 0.2 --cutmix-alpha 1.0

trains ImageNet on RandomResizedCrop(224), RandomHorizontalFlip(),
TrivialAugmentWide(), PILToTensor(), ConvertImageDtype(float), Normalize,
RandomErasing(0.1), then per batch RandomChoice([MixUp(0.2), CutMix(1.0)])
with soft targets and cross-entropy on them; it evaluates on Resize(256),
CenterCrop(224). Here the daemon does all of that; the loop receives
(images, soft_labels) and the evaluation (images, labels):

    # loaderd serve --unix /run/loaderd.sock \
    #   --dataset train=folder:/data/imagenet/train --dataset val=folder:/data/imagenet/val
    torchrun --nproc_per_node=8 python/examples/recipe_ta_wide.py --address unix:///run/loaderd.sock

--smoke makes a small folder of JPEGs of varied sizes, starts a daemon on
it, and runs a few steps of a tiny model on the CPU, then a checkpoint
and resume and an evaluation: what python/tests/test_recipe.py runs.
"""

import argparse
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402,F401 - finds the checkout's loaderd package
import loaderd  # noqa: E402

# The recipe as one augment spec: each op is the torchvision transform of the
# same name, in the reference's order; mixup and cutmix act on the batch and
# end the spec, and cutmix's switch (0.5 by default) is RandomChoice's.
def train_spec(size):
    return (f"random_resized_crop={size},flip,trivial_augment_wide,normalize=imagenet,out=f32:chw,"
            "random_erasing=0.1,mixup=0.2,cutmix=1.0")


def small_model(classes):
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, classes))


def evaluate(model, val, device):
    """Top-1 over this rank's share, summed over the ranks."""
    model.eval()
    right = torch.zeros(2, dtype=torch.long, device=device)
    with torch.no_grad():
        for images, labels in val:
            images, labels = images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
            right[0] += (model(images).argmax(1) == labels).sum()
            right[1] += len(labels)
    if dist.is_initialized():
        dist.all_reduce(right)
    model.train()
    return right[0].item() / max(right[1].item(), 1)


def train(a, address):
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if distributed:  # torchrun's environment; loaderd reads the ranks from torch.distributed
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    device = torch.device("cuda", loaderd.local_rank()) if torch.cuda.is_available() and not a.cpu else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    torch.manual_seed(a.seed)

    # (images, soft_labels): float32 [B, 3, size, size] and [B, classes]
    train_ds = loaderd.Dataset(address, a.train, a.batch, seed=a.seed, augment=train_spec(a.size),
                               drop_last=True, pin=device.type == "cuda", connect_timeout=60)
    # Resize(size*256/224), CenterCrop(size), Normalize: the training spec made deterministic
    info = train_ds.info()
    val_ds = loaderd.Dataset.eval(address, a.val, a.batch, augment=loaderd.eval_augment(train_spec(a.size)),
                                  pin=device.type == "cuda")
    classes = info.classes if isinstance(info.classes, int) else len(info.classes)

    model = small_model(classes).to(device) if a.smoke else __import__("torchvision").models.resnet50(num_classes=classes).to(device)
    if distributed:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9, weight_decay=a.wd)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=a.epochs * len(train_ds))

    start = 0
    if a.resume and os.path.exists(a.resume):
        ck = torch.load(a.resume, map_location="cpu")
        (model.module if distributed else model).load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        sched.load_state_dict(ck["sched"])
        train_ds.load_state_dict(ck["data"])  # the next loop starts at the saved batch
        start = ck["data"]["epoch"]

    steps = 0
    for epoch in range(start, a.epochs):
        train_ds.set_epoch(epoch)  # keeps a loaded mid-epoch position for that epoch
        for images, soft in train_ds:
            images, soft = images.to(device, non_blocking=True), soft.to(device, non_blocking=True)
            loss = F.cross_entropy(model(images), soft, label_smoothing=a.label_smoothing)  # on the soft targets
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            steps += 1
            if a.checkpoint and (not dist.is_initialized() or dist.get_rank() == 0):
                torch.save({"model": (model.module if distributed else model).state_dict(), "opt": opt.state_dict(),
                            "sched": sched.state_dict(), "data": train_ds.state_dict()}, a.checkpoint)
            if a.max_steps and steps >= a.max_steps:
                break
        else:
            acc = evaluate(model, val_ds, device)
            if not dist.is_initialized() or dist.get_rank() == 0:
                print(f"epoch {epoch}: loss {loss.item():.4f}, val top-1 {acc:.3f}, {steps} steps", flush=True)
            continue
        break  # --max-steps reached mid-epoch
    train_ds.close()
    val_ds.close()
    if distributed:
        dist.barrier()
        dist.destroy_process_group()
    return steps, loss.item()


def smoke(a):
    """A folder of 48 JPEGs of varied sizes in 4 classes, a daemon serving
    it, two steps, a checkpoint, a resumed run to the end of two epochs."""
    import numpy as np
    from PIL import Image
    tmp = tempfile.mkdtemp(prefix="recipe-smoke-")
    rng = np.random.default_rng(0)
    for c in range(4):
        os.makedirs(f"{tmp}/data/class{c}")
        for i in range(12):
            h, w = rng.integers(40, 96, size=2)
            px = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
            px[..., c % 3] = 200  # something to learn
            Image.fromarray(px).save(f"{tmp}/data/class{c}/{i}.jpg", quality=90)
    a.size, a.batch, a.epochs, a.cpu = 32, 8, 2, True
    a.checkpoint = a.resume = f"{tmp}/ck.pt"
    with loaderd.serve({"train": f"folder:{tmp}/data", "val": f"folder:{tmp}/data"}, workers=2) as d:
        # What the loop receives: soft labels, and which of MixUp and CutMix each batch took.
        ds = loaderd.Dataset(d.address, "train", a.batch, seed=a.seed, augment=train_spec(a.size), drop_last=True)
        kinds = set()
        for b in ds.batches():
            assert b.images.shape == (a.batch, 3, a.size, a.size) and b.images.dtype == torch.float32, b.images.shape
            assert b.soft_labels.shape == (a.batch, 4), b.soft_labels.shape
            assert torch.allclose(b.soft_labels.sum(1), torch.ones(a.batch)), b.soft_labels
            kinds.add(b.mix.kind)
        ds.close()
        print(f"smoke: batches mixed by {sorted(kinds)}", flush=True)
        assert kinds <= {"mixup", "cutmix"} and kinds, kinds
        a.max_steps = 2
        steps, loss = train(a, d.address)  # stops after 2 steps, checkpointed
        print(f"smoke: stopped after {steps} steps, loss {loss:.4f}", flush=True)
        a.max_steps = 0
        steps2, loss = train(a, d.address)  # resumes at the checkpoint's batch
        print(f"smoke: resumed for {steps2} steps, loss {loss:.4f}", flush=True)
    per_epoch = 48 // 8
    assert steps + steps2 == a.epochs * per_epoch, (steps, steps2)
    assert loss == loss, "loss is NaN"
    print("smoke: ok", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--address", help="the daemon's address (not with --smoke)")
    ap.add_argument("--train", default="train")
    ap.add_argument("--val", default="val")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--batch", type=int, default=32, help="per rank (the reference's --batch-size)")
    ap.add_argument("--epochs", type=int, default=600)
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--wd", type=float, default=2e-5)
    ap.add_argument("--label-smoothing", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--checkpoint", help="save the model, optimizer and data position here after every step")
    ap.add_argument("--resume", help="resume from this checkpoint, if it exists")
    ap.add_argument("--max-steps", type=int, default=0)
    ap.add_argument("--cpu", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="a few CPU steps of a tiny model on a made-up folder")
    a = ap.parse_args()
    if a.smoke:
        smoke(a)
    elif not a.address:
        ap.error("--address is required (or --smoke)")
    else:
        train(a, a.address)


if __name__ == "__main__":
    main()
