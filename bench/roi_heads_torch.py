#!/usr/bin/env python3
"""torchvision's RoIHeads at bench_roi_heads's workloads, on the same GPU, for the ratio.

    python3 bench/roi_heads_torch.py --minidet-bin build/release/bench/bench_roi_heads   # runs both
    python3 bench/roi_heads_torch.py --minidet-json FILE   # FILE from: bench_roi_heads --skip-cpu --json FILE

The same configuration as minidet's RoIHeads: MultiScaleRoIAlign over one map (7x7, sampling 2; torchvision
infers the scale 1/stride from the image size, and uses aligned=False: the same cost), TwoMLPHead,
FastRCNNPredictor, matcher 0.5/0.5, sampler (batch, 0.25), box weights (10, 10, 5, 5), score 0.05, NMS 0.5,
100 detections. "train" is one forward in training mode (sampling, losses) plus the backward of the summed
losses; "infer" one forward in eval mode under no_grad. Workloads, proposals and objects are drawn as in
bench_roi_heads.cpp (same distributions, not the same numbers). torchvision subsamples with torch.randperm
and loops over the images in Python, with a host synchronisation per image (torch.where, nonzero).
"""
import os
import sys
from collections import OrderedDict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import main, time_median_ms  # noqa: E402

# name, images, channels, height, width, stride, proposals, objects, classes, representation, batch
WORKLOADS = (
    ("tiny", 8, 128, 16, 16, 8, 300, 4, 3, 256, 128),
    ("coco", 2, 256, 50, 68, 16, 1000, 10, 80, 1024, 512),
)


def random_boxes(torch, count, height, width, gen):
    side = min(height, width) / 3
    wh = 8 + torch.rand(count, 2, device="cuda", generator=gen) * side
    xy = torch.rand(count, 2, device="cuda", generator=gen) * (torch.tensor([width, height], device="cuda") - wh)
    return torch.cat([xy, xy + wh], dim=1)


def run_torch(torch, reps):
    device_name = "cuda:" + torch.cuda.get_device_name(0)
    try:
        from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead
        from torchvision.models.detection.roi_heads import RoIHeads
        from torchvision.ops import MultiScaleRoIAlign
    except ImportError:
        print("== torchvision: SKIPPED (not installed) ==")
        return device_name, []
    rows = []
    for name, images, channels, height, width, stride, props, objects, classes, rep, batch in WORKLOADS:
        torch.manual_seed(7)
        gen = torch.Generator(device="cuda").manual_seed(7)
        heads = RoIHeads(MultiScaleRoIAlign(["0"], 7, 2), TwoMLPHead(channels * 49, rep),
                         FastRCNNPredictor(rep, classes + 1), 0.5, 0.5, batch, 0.25, None, 0.05, 0.5, 100).cuda()
        image_h, image_w = height * stride, width * stride
        features = OrderedDict([("0", torch.randn(images, channels, height, width, device="cuda", generator=gen))])
        proposals = [random_boxes(torch, props, image_h, image_w, gen) for _ in range(images)]
        targets = [{"boxes": random_boxes(torch, objects, image_h, image_w, gen),
                    "labels": torch.randint(1, classes + 1, (objects,), device="cuda", generator=gen)}
                   for _ in range(images)]
        sizes = [(image_h, image_w)] * images
        shape = f"{name}:N={images},F={channels},P={props},C={classes}"

        def train():
            heads.train()
            heads.zero_grad(set_to_none=True)
            _, losses = heads(features, [p.clone() for p in proposals], sizes, targets)
            sum(losses.values()).backward()

        def infer():
            heads.eval()
            with torch.no_grad():
                return heads(features, proposals, sizes)[0]

        for pass_name, fn in (("train", train), ("infer", infer)):
            ms = time_median_ms(torch, fn, reps)
            row = {"bench": "roi_heads", "impl": "torchvision", "device": device_name, "shape": shape,
                   "pass": pass_name, "median_ms": round(ms, 4)}
            if pass_name == "infer":
                row["detections"] = int(sum(d["boxes"].shape[0] for d in infer()))
            rows.append(row)
    return device_name, rows


if __name__ == "__main__":
    sys.exit(main(__doc__, {"roi_heads"}, run_torch))
