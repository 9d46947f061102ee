#!/usr/bin/env python3
"""Stage-by-stage and step-by-step parity of minidet's Faster R-CNN with torchvision's (the twin of
bench/detector_torch.py), from the same weights on the same images. docs/parity.md explains the results.

    python3 bench/detector_parity.py --minidet-bin build/cpu/bench/parity_minidet                 # float64, CPU
    python3 bench/detector_parity.py --minidet-bin build/gpu/bench/parity_minidet --device cuda --dtype float32 --steps 1

1. parity_minidet initialises minidet's detector from --seed, saves the weights, runs the fixed batch (8 test
   images with objects and 1 without) in eval mode and --steps AdamW steps in training mode, and writes every
   intermediate tensor (bench/parity_minidet.cpp lists them).
2. The weights go through the name mapping of bench/torchvision_weights.py into the twin.
3. The twin runs the same stages on the same images; in training mode its two samplers are replaced by ones
   that return the anchors and RoIs minidet sampled (the only random part of a step), so the losses, every
   gradient and the parameters after each AdamW step must agree.

Every comparison prints max |a - b| / max |b| (b: torchvision's) and passes when that is within the dtype's
tolerance; discrete outputs (proposal and detection counts, labels, the order) must be equal. The exit code
is the number of failed comparisons (0: parity). JSON lines with --json FILE.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from minidet_checkpoint import read_checkpoint, to_torch  # noqa: E402

# Relative tolerance per dtype: float64 on the CPU leaves only summation order; float32 (GPU) its rounding.
TOLERANCE = {"float64": 1e-10, "float32": 1e-4}


class Report:
    def __init__(self, dtype, json_path):
        self.tolerance, self.rows, self.failed, self.json_path = TOLERANCE[dtype], [], 0, json_path

    def close(self, stage, mine, theirs, tolerance=None):
        """mine, theirs: tensors of one shape (minidet's, torchvision's)."""
        tolerance = self.tolerance if tolerance is None else tolerance
        if tuple(mine.shape) != tuple(theirs.shape):
            return self.fail(stage, f"shapes differ: minidet {tuple(mine.shape)}, torchvision {tuple(theirs.shape)}")
        mine, theirs = mine.double().cpu(), theirs.double().cpu()
        scale = theirs.abs().max().item() if theirs.numel() else 0.0
        error = (mine - theirs).abs().max().item() if theirs.numel() else 0.0
        relative = error / scale if scale > 0 else error
        self.row(stage, relative <= tolerance, relative, f"max |diff| {error:.3g} of max |x| {scale:.3g}")

    def boxes(self, stage, mine, theirs, scale=None):
        """Per-image box lists that should be equal in order. Where they are not, but every box has a twin
        within the tolerance on the same image, the difference is the order of near-tied scores: exact in
        float64, and allowed in float32, where a fresh model's scores tie within rounding (reported)."""
        if [len(m) for m in mine] != [len(t) for t in theirs]:
            return self.fail(stage, f"counts differ: minidet {[len(m) for m in mine]}, torchvision {[len(t) for t in theirs]}")
        mine = [m.double().cpu() for m in mine]
        theirs = [t.detach().double().cpu() for t in theirs]
        scale = scale or max((t.abs().max().item() for t in theirs if t.numel()), default=1.0)
        ordered = max(((m - t).abs().max().item() for m, t in zip(mine, theirs) if t.numel()), default=0.0) / scale
        if ordered <= self.tolerance:
            return self.row(stage, True, ordered, "the same boxes in the same order")
        moved, matched = 0, 0.0
        for m, t in zip(mine, theirs):
            if not t.numel():
                continue
            nearest = (m[:, None, :] - t[None, :, :]).abs().amax(dim=2)  # (rows, rows)
            matched = max(matched, nearest.min(dim=1).values.max().item(), nearest.min(dim=0).values.max().item())
            moved += sum(int(j != i) for i, j in enumerate(nearest.argmin(dim=1).tolist()))
        matched /= scale
        ok = matched <= self.tolerance and self.tolerance >= TOLERANCE["float32"]
        self.row(stage, ok, matched, f"the same boxes, {moved} rows in another order (near-tied scores)"
                 if matched <= self.tolerance else f"other boxes (in order: {ordered:.2e})")

    def equal(self, stage, mine, theirs):
        same = tuple(mine.shape) == tuple(theirs.shape) and bool((mine.cpu() == theirs.cpu()).all())
        self.row(stage, same, None, "equal" if same else f"differ: minidet {mine.tolist()}, torchvision {theirs.tolist()}")

    def fail(self, stage, why):
        self.row(stage, False, None, why)

    def row(self, stage, ok, relative, detail):
        self.failed += not ok
        rel = "" if relative is None else f"{relative:.2e}"
        print(f"{'ok ' if ok else 'FAIL'} {stage:<44} {rel:>9}  {detail}", flush=True)
        self.rows.append({"stage": stage, "ok": ok, "relative": relative, "detail": detail})

    def write(self):
        if self.json_path:
            with open(self.json_path, "w") as f:
                for r in self.rows:
                    f.write(json.dumps(r) + "\n")


def per_image(dump, torch, prefix, count):
    return [to_torch(torch, dump[f"{prefix}.{n}"]) for n in range(count)]


def compare_eval(torch, model, dump, report, device, dtype):
    from torchvision.models.detection.image_list import ImageList

    model.eval()
    images = to_torch(torch, dump["input.images"]).to(device, dtype)
    n, size = images.shape[0], tuple(images.shape[-2:])
    sizes = [size] * n
    with torch.no_grad():
        features = model.backbone(images)
        report.close("backbone features", to_torch(torch, dump["eval.features"]), features)
        objectness, deltas = model.rpn.head([features])
        report.close("rpn objectness", to_torch(torch, dump["eval.objectness"]), objectness[0])
        report.close("rpn deltas", to_torch(torch, dump["eval.deltas"]), deltas[0])
        image_list = ImageList(images, sizes)
        anchors = model.rpn.anchor_generator(image_list, [features])
        report.close("anchors", to_torch(torch, dump["eval.anchors"]), anchors[0], tolerance=0.0)
        proposals, _ = model.rpn(image_list, {"0": features})
        mine = per_image(dump, torch, "eval.proposals", n)
        report.boxes("proposals", mine, proposals)
        # The second stage on minidet's proposals, so that it is compared on its own.
        mine_on_device = [p.to(device, dtype) for p in mine]
        pooled = model.roi_heads.box_roi_pool({"0": features}, mine_on_device, sizes)
        report.close("roi_align features", to_torch(torch, dump["eval.pooled"]), pooled)
        logits, box_deltas = model.roi_heads.box_predictor(model.roi_heads.box_head(pooled))
        report.close("box head class logits", to_torch(torch, dump["eval.class_logits"]), logits)
        report.close("box head deltas", to_torch(torch, dump["eval.box_deltas"]), box_deltas)
        # The whole detector, end to end through torchvision's own forward (its transform included).
        found = model(list(images))
    mine = {key: [to_torch(torch, dump[f"eval.detections.{i}.{key}"]) for i in range(n)] for key in ("boxes", "scores", "labels")}
    # Boxes with their label as a fifth column (scaled past any coordinate), so a match keeps the class.
    labelled = lambda boxes, labels: [torch.cat([b.double().cpu(), 1000.0 * l[:, None].double().cpu()], 1)  # noqa: E731
                                      for b, l in zip(boxes, labels)]
    report.boxes("detections (boxes and labels)", labelled(mine["boxes"], mine["labels"]),
                 labelled([f["boxes"] for f in found], [f["labels"] for f in found]),
                 scale=max((f["boxes"].abs().max().item() for f in found if f["boxes"].numel()), default=1.0))
    report.close("detections scores (decreasing)", torch.cat(mine["scores"]), torch.cat([f["scores"] for f in found]))


class ReplayedSamplers:
    """Stands in for torchvision's two BalancedPositiveNegativeSampler objects: returns, per image, the masks of
    what minidet sampled at the current step (the RPN's anchors; the RoIs as rows of cat(proposals, gt),
    the same layout torchvision's RoIHeads samples from)."""

    def __init__(self, torch, dump):
        self.torch, self.dump, self.step = torch, dump, 0

    def rpn(self, labels):
        positive = to_torch(self.torch, self.dump[f"step{self.step}.rpn_positive"])
        negative = to_torch(self.torch, self.dump[f"step{self.step}.rpn_negative"])
        device = labels[0].device
        return ([p.to(device, self.torch.uint8) for p in positive], [q.to(device, self.torch.uint8) for q in negative])

    def roi(self, labels):
        positive, negative = [], []
        for n, image_labels in enumerate(labels):
            rows = to_torch(self.torch, self.dump[f"step{self.step}.roi_candidate.{n}"]).to(image_labels.device)
            picked = self.torch.zeros_like(image_labels, dtype=self.torch.bool)
            picked[rows] = True
            positive.append((picked & (image_labels > 0)).to(self.torch.uint8))
            negative.append((picked & (image_labels == 0)).to(self.torch.uint8))
        return positive, negative


def use_replay(model, replay):
    """The twin's samplers replaced by the replay of minidet's draws, and its RPN labels in the model's dtype."""
    model.rpn.fg_bg_sampler = replay.rpn
    model.roi_heads.fg_bg_sampler = replay.roi
    rpn_loss = model.rpn.compute_loss

    def labels_in_model_dtype(objectness, deltas, labels, regression_targets):
        # torchvision makes the RPN's labels float32 whatever the model's dtype, and a float64 BCE with float32
        # targets is off by up to 1e-6 relative (the gradient is not): in float64 they must be float64.
        return rpn_loss(objectness, deltas, [l.to(objectness.dtype) for l in labels], regression_targets)

    model.rpn.compute_loss = labels_in_model_dtype


def twin_step(torch, model, dump, step, device, dtype):
    """One training forward and backward of the twin on the dumped batch: (its proposals, its losses)."""
    from torchvision.models.detection.image_list import ImageList

    images = to_torch(torch, dump["input.images"]).to(device, dtype)
    n, size = images.shape[0], tuple(images.shape[-2:])
    targets = [{"boxes": to_torch(torch, dump[f"input.boxes.{i}"]).to(device, dtype),
                "labels": to_torch(torch, dump[f"input.labels.{i}"]).to(device)} for i in range(n)]
    features = model.backbone(images)
    proposals, rpn_losses = model.rpn(ImageList(images, [size] * n), {"0": features}, targets)
    # The RoI heads sample from minidet's proposals (the sampled rows are positions in them), which are
    # torchvision's up to the order of near-tied scores (compared by the caller).
    mine = [p.to(device, dtype) for p in per_image(dump, torch, f"step{step}.proposals", n)]
    _, roi_losses = model.roi_heads({"0": features}, mine, [size] * n, targets)
    losses = {**rpn_losses, **roi_losses}
    model.zero_grad(set_to_none=True)
    sum(losses.values()).backward()
    return proposals, losses


def compare_steps(torch, model, dump, report, device, dtype, steps):
    """steps AdamW steps from the same weights with the same samples. In float32 the gradients are judged
    against the twin's in float64: minidet's error may be at most twice torchvision's own (float32 sums of
    thousands of terms that cancel are not more exact than that), and since AdamW's first update moves every
    parameter by about lr whatever the size of its gradient, float32 runs compare one step only."""
    import copy
    from torchvision_weights import minidet_to_torch_name

    n = sum(1 for key in dump if key.startswith("input.boxes."))
    replay = ReplayedSamplers(torch, dump)
    reference = copy.deepcopy(model).double() if dtype == torch.float32 else None
    for twin in (model, reference):
        if twin is not None:
            use_replay(twin, replay)
            twin.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-4)
    params = dict(model.named_parameters())
    for step in range(steps):
        replay.step = step
        where = f"step {step}: "
        proposals, losses = twin_step(torch, model, dump, step, device, dtype)
        report.boxes(where + "training proposals", per_image(dump, torch, f"step{step}.proposals", n), proposals)
        for name in ("loss_objectness", "loss_rpn_box_reg", "loss_classifier", "loss_box_reg"):
            report.close(where + name, to_torch(torch, dump[f"step{step}.loss.{name}"]), losses[name].detach())
        if reference is None:
            worst = worst_grad(torch, dump, f"step{step}.grad.", params, minidet_to_torch_name)
            report.close(where + f"gradients (worst: {worst[0]})", worst[1], worst[2])
        else:
            twin_step(torch, reference, dump, step, device, torch.float64)
            exact = {name: p.grad.double() for name, p in reference.named_parameters()}
            theirs = {name: p.grad for name, p in params.items()}
            mine = {minidet_to_torch_name(k[len(f"step{step}.grad."):]): to_torch(torch, e).to(device)
                    for k, e in dump.items() if k.startswith(f"step{step}.grad.")}
            error = lambda grads: max((relative_error(grads[k], exact[k]), k) for k in exact)  # noqa: E731
            (ours, our_name), (twins, twin_name) = error(mine), error(theirs)
            report.row(where + "gradients against the float64 twin", ours <= max(report.tolerance, 2 * twins), ours,
                       f"minidet worst {ours:.2e} ({our_name}), torchvision float32 worst {twins:.2e} ({twin_name})")
        optimizer.step()
    if reference is None:
        worst = worst_grad(torch, dump, "final.", {**params, **dict(model.named_buffers())}, minidet_to_torch_name)
        report.close(f"after {steps} AdamW steps: parameters and BatchNorm statistics (worst: {worst[0]})", worst[1],
                     worst[2])


def relative_error(a, b):
    scale = b.abs().max().item()
    return (a.double() - b.double()).abs().max().item() / (scale if scale > 0 else 1.0)


def worst_grad(torch, dump, prefix, tensors, rename):
    """The entry (under prefix) whose relative difference to its twin tensor is largest: (name, mine, theirs)."""
    worst = (None, torch.zeros(1), torch.zeros(1), -1.0)
    for key, entry in dump.items():
        if not key.startswith(prefix):
            continue
        name = rename(key[len(prefix):])
        if name not in tensors:
            raise SystemExit(f"detector_parity: {key} has no twin tensor {name}")
        if entry.dtype == "int64":  # BatchNorm's num_batches_tracked
            continue
        theirs = tensors[name].grad if prefix.endswith("grad.") else tensors[name]
        mine, theirs = to_torch(torch, entry).double(), theirs.detach().double().cpu()
        scale = theirs.abs().max().item()
        relative = (mine - theirs).abs().max().item() / (scale if scale > 0 else 1.0)
        if relative > worst[3]:
            worst = (name, mine, theirs, relative)
    return worst[:3]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minidet-bin", required=True, help="parity_minidet (built in bench/)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float64", choices=sorted(TOLERANCE))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=1, help="AdamW steps to compare")
    parser.add_argument("--json", help="write one JSON line per comparison here")
    parser.add_argument("--keep", help="folder for the dump and the weights (default: a temporary one)")
    args = parser.parse_args()
    if args.dtype == "float32" and args.steps > 1:
        parser.error("float32 compares one step (AdamW's first update is about lr for every parameter, so float32 "
                     "rounding in a near-zero gradient moves it by lr either way): use float64 for several")

    import torch
    torch.backends.cudnn.deterministic = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    from detector_torch import build_model
    from torchvision_weights import load_minidet_weights

    folder = args.keep or tempfile.mkdtemp(prefix="parity-")
    os.makedirs(folder, exist_ok=True)
    dump_path, weights_path = os.path.join(folder, "minidet.dump"), os.path.join(folder, "weights.ckpt")
    subprocess.run([args.minidet_bin, "--out", dump_path, "--save-weights", weights_path, "--seed", str(args.seed),
                    "--dtype", args.dtype, "--device", args.device, "--steps", str(args.steps),
                    "--set", "roi_heads.aligned=false"], check=True)
    dump = read_checkpoint(dump_path)
    dtype = getattr(torch, args.dtype)
    model = build_model(torch, "cpu")
    load_minidet_weights(torch, model, read_checkpoint(weights_path))
    model.to(args.device, dtype)

    report = Report(args.dtype, args.json)
    print(f"== parity of minidet and torchvision {__import__('torchvision').__version__} (torch {torch.__version__}), "
          f"{args.dtype} on {args.device}, seed {args.seed}: relative error = max |diff| / max |torchvision|, "
          f"tolerance {report.tolerance:g}")
    compare_eval(torch, model, dump, report, args.device, dtype)
    compare_steps(torch, model, dump, report, args.device, dtype, args.steps)
    report.write()
    print(f"{len(report.rows) - report.failed} passed, {report.failed} failed")
    return min(report.failed, 100)


if __name__ == "__main__":
    sys.exit(main())
