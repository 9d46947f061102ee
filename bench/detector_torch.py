#!/usr/bin/env python3
"""torchvision's FasterRCNN built to the sizes of minidet's tiny detector, on the same GPU, for the ratio.

    python3 bench/detector_torch.py --minidet-bin build/release/bench/bench_detector   # runs both
    python3 bench/detector_torch.py --minidet-json FILE   # FILE from: bench_detector --skip-cpu --json FILE
    python3 bench/detector_torch.py --minidet-json FILE --cpu-threads 2   # also the CPU step, 2 threads
    python3 bench/detector_torch.py --time-to-accuracy [--minidet-json FILE]   # FILE: bench_detector
                                                                               # --time-to-accuracy --json FILE
    # minidet's own data, batches, flips and scoring (see "The exact comparison" below):
    python3 bench/detector_torch.py --time-to-accuracy --data /tmp/shapes128 --plan runs/NAME/batches.jsonl \
        --minidet-command build/release/examples/minidet/minidet [--init WEIGHTS.pt] [--seed 0] [--device cpu]

The model is minidet's DetectorConfig defaults rebuilt from torchvision parts:
  backbone   stem conv 3x3/2 (32) + BatchNorm + ReLU; four stages of one basic block, widths 32-64-128-128,
             strides 1-2-2-1, projection shortcuts where the shape changes, convs without bias (BatchNorm,
             momentum 0.1, eps 1e-5, trained); the last stage's conv1 is torchvision.ops.DeformConv2d fed by
             a zero-initialised 3x3 offset conv (18 channels, (dy, dx) per tap as minidet's layout).
             Kaiming-normal (fan_out, ReLU) conv weights. Features (N, 128, 16, 16), stride 8.
  RPN        AnchorGenerator sizes (16, 32, 64) x ratios (0.5, 1, 2); RPNHead (N(0, 0.01) weights);
             fg/bg IoU 0.7/0.3, 256 anchors per image at 0.5; train top-n 1000 -> NMS 0.7 -> 300; test 500 -> 100.
  RoI heads  MultiScaleRoIAlign(["0"], 7, sampling 2); TwoMLPHead(128*49, 256); FastRCNNPredictor(256, 4);
             fg/bg IoU 0.5/0.5, 128 RoIs per image at 0.25, box weights (10, 10, 5, 5); score 0.05, NMS 0.5,
             100 detections per image.
  transform  min_size = max_size = 128, image_mean 0, image_std 1: images are used as they come, in [0, 1].
  arithmetic FP32 throughout, as minidet's: TF32 off for cuDNN's convolutions and for matrix products.
  training   torch.optim.AdamW(lr 3e-3, betas (0.9, 0.999), eps 1e-8, weight decay 1e-4 on every parameter),
             minidet's warm-up + cosine schedule (LambdaLR with the same factor), 750 steps of 8 images,
             random horizontal flips (p 0.5), seed 0.
One step ("train") is what minidet's training loop does: move a CPU batch to the GPU (images in one copy, then
boxes and labels per image), forward in training mode, sum the four losses, record the total and the four
losses in a small device table that reaches the host in one copy every 20 steps (the loop's LossWatch,
engine/loss_watch.h: the progress line and the non-finite check), zero_grad, backward, AdamW step,
scheduler step. "infer" is one forward in eval mode under no_grad on a moved batch. Batches: 8 and
16 images, four distinct batches cycled. Each timed with CUDA events (10 warm-up runs, median of --reps), and
"train-stream" is the step in streams of 20 back to back, events around each stream (per step, median of 5),
as bench_detector's row of that name: the throughput of a training loop. Then,
over 20 more runs (one loss read) under torch.profiler, per run: CUDA kernels (kernel events), host-to-device and
device-to-host copies (Memcpy events), host synchronisations (cudaStreamSynchronize and cudaEventSynchronize
calls: a .cpu(), .item() or nonzero waits with one), cudaMalloc calls of the caching allocator
(segment.all.allocated) and the peak of torch.cuda.max_memory_allocated over those runs.

What differs from minidet, knowingly:
  - RoIAlign: torchvision's MultiScaleRoIAlign uses aligned=False (minidet: aligned=True, a half-pixel
    shift); the same cost.
  - GeneralizedRCNNTransform works per image: it normalises (a no-op numerically with mean 0, std 1),
    resizes at scale 1 (an identity bilinear interpolation) and pads into a new batch tensor. Those few
    kernels per image are part of torchvision's step and of its launch count; minidet takes the batch as
    the loader made it.
  - Sampling: torchvision draws its samples with torch.randperm on the GPU and loops over the images in
    Python, with host synchronisations (nonzero, where); minidet draws sampling priorities on the host.
  - AdamW: PyTorch's default (foreach) implementation; minidet's own Adam.
  - Weights: the same initialisation schemes, different random numbers.
  - Data: the synthetic shapes re-drawn with numpy in bench/detector_data.py: the same distributions, not
    the same pixels. For --time-to-accuracy all 2200 images are drawn before the clock starts; minidet draws
    each batch on its loader's background thread while the GPU trains.
  - Evaluation: VOC AP@0.5 as data/eval/voc_eval.h computes it, in bench/detector_data.py.

The exact comparison (--time-to-accuracy with --data): minidet's data, batches and scoring instead of the above.
  --data DIR       an export_shapes_coco folder (train.json, train/, test.json, test/). The command
                   export_shapes_coco --out DIR --size 128 --train 2000 --test 200 --seed 0
                   writes exactly the images, boxes and labels `minidet train` uses by default (test_minidet_cli
                   checks it bit for bit). Decoded with torchvision.io; pixels become float32 as minidet's loader
                   makes them (bench/detector_data.py pixel_values).
  --plan FILE      a run's batches.jsonl (engine/batch_plan.h): step k trains on the images the run's
                   step k trained on, in its order, mirrored where its random flip mirrored them (boxes
                   x -> W - x). Without --plan the twin shuffles and flips with numpy's generator seeded by --seed.
  --minidet-command  the minidet command (build/<preset>/examples/minidet/minidet), required with --data: each
                   evaluation writes the held-out detections as a COCO results file (results_step<N>.json in
                   --results-dir; test.json's image and category ids), scores it with
                   `minidet eval --gt test.json --results FILE --json` and takes mAP@0.5 (VOC all-point, as
                   minidet train logs it) and COCO AP from its --json line. (Not --minidet-bin: that one is
                   bench_detector, which bench_common.py runs first for the speed comparison.)
  --init FILE      a state_dict to start from (bench/torchvision_weights.py converts a minidet checkpoint).
  --seed N         torch's seed (initial weights, the samplers) and the drawn order; the data stay seed 0's.
  --device cpu     runs the mode on the CPU, to try it without a GPU (slow: a few steps).
What still differs with all of them: the samplers' random numbers (RPN and RoI sampling draw from torch's
generator, minidet's from its own) and the other points above that are not about data or scoring.
"""
import math
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import main, time_median_ms, time_stream_ms  # noqa: E402
from detector_data import (IMAGE_SIZE, NUM_CLASSES, CocoSplit, batches, coco_results, collate,  # noqa: E402
                           drawn_plan, make_shapes, pixel_values, plan_batches, read_plan, split_batch, voc_map50)

TRAIN_IMAGES, TEST_IMAGES = 2000, 200
BATCHES = (8, 16)
HELD_BATCHES = 4
STREAM_STEPS = 20  # one LossWatch window, as bench_detector's train-stream row
LOG_EVERY = 20  # engine/run_config.h, Schedule::log_every: how often the loop reads the losses
COUNTED_RUNS = LOG_EVERY
LOSS_NAMES = ("loss_objectness", "loss_rpn_box_reg", "loss_classifier", "loss_box_reg")
# engine/run_config.h, Schedule
STEPS, BATCH, LR, WEIGHT_DECAY, WARMUP, MIN_LR_FACTOR, SEED = 750, 8, 3e-3, 1e-4, 100, 0.01, 0


def shape_of(batch, prefix="tiny"):
    return f"{prefix}:N={batch},{IMAGE_SIZE}px,C={NUM_CLASSES}"


# ---- the model and one step ------------------------------------------------------------------------------------

def build_model(torch, device="cuda"):
    from torch import nn
    from torchvision.models.detection import FasterRCNN
    from torchvision.models.detection.anchor_utils import AnchorGenerator
    from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead
    from torchvision.models.detection.rpn import RPNHead
    from torchvision.ops import DeformConv2d, MultiScaleRoIAlign

    def conv(cin, cout, kernel, stride):
        """A conv that feeds a BatchNorm: no bias, Kaiming-normal (fan_out, ReLU), as minidet's make_conv."""
        layer = nn.Conv2d(cin, cout, kernel, stride, kernel // 2, bias=False)
        nn.init.kaiming_normal_(layer.weight, mode="fan_out", nonlinearity="relu")
        return layer

    class Deformable(DeformConv2d):
        """conv1 of the last stage: the offsets come from a zero-initialised conv, so it starts as a plain conv.
        Laid out as minidet's nn::DeformConv2d: its own weight, the offset predictor a child "offset_conv"."""

        def __init__(self, cin, cout, stride):
            # The predictor is made first so that the random draws come in the same order as before.
            offset_conv = nn.Conv2d(cin, 2 * 3 * 3, 3, stride, 1)
            nn.init.zeros_(offset_conv.weight)
            nn.init.zeros_(offset_conv.bias)
            super().__init__(cin, cout, 3, stride=stride, padding=1, bias=False)
            self.offset_conv = offset_conv
            nn.init.kaiming_normal_(self.weight, mode="fan_out", nonlinearity="relu")

        def forward(self, x):
            return super().forward(x, self.offset_conv(x))

    class Block(nn.Module):
        def __init__(self, cin, cout, stride, deformable):
            super().__init__()
            self.conv1 = Deformable(cin, cout, stride) if deformable else conv(cin, cout, 3, stride)
            self.norm1 = nn.BatchNorm2d(cout)
            self.conv2 = conv(cout, cout, 3, 1)
            self.norm2 = nn.BatchNorm2d(cout)
            self.shortcut = None
            if stride != 1 or cin != cout:
                self.shortcut = nn.Sequential(conv(cin, cout, 1, stride), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = self.norm2(self.conv2(torch.relu(self.norm1(self.conv1(x)))))
            return torch.relu(y + (self.shortcut(x) if self.shortcut is not None else x))

    class Backbone(nn.Module):
        """minidet's Backbone with its module names (stem, stage1..stageN, each a sequence of blocks), so that
        its state_dict keys are minidet's (bench/torchvision_weights.py). Every block of the last stage is
        deformable; a stage's first block carries its stride."""

        def __init__(self, stem=32, widths=(32, 64, 128, 128), strides=(1, 2, 2, 1), blocks=(1, 1, 1, 1)):
            super().__init__()
            self.stem = nn.Sequential(conv(3, stem, 3, 2), nn.BatchNorm2d(stem), nn.ReLU())
            self.stage_names, cin = [], stem
            for i, (width, stride, count) in enumerate(zip(widths, strides, blocks)):
                stage = nn.Sequential()
                for b in range(count):
                    stage.append(Block(cin, width, stride if b == 0 else 1, deformable=i == len(widths) - 1))
                    cin = width
                self.stage_names.append(f"stage{i + 1}")
                setattr(self, self.stage_names[-1], stage)
            self.out_channels = widths[-1]  # FasterRCNN reads it

        def forward(self, x):
            x = self.stem(x)
            for name in self.stage_names:
                x = getattr(self, name)(x)
            return x

    backbone = Backbone()
    anchors = AnchorGenerator(sizes=((16, 32, 64),), aspect_ratios=((0.5, 1.0, 2.0),))
    model = FasterRCNN(
        backbone, num_classes=None, min_size=IMAGE_SIZE, max_size=IMAGE_SIZE, image_mean=[0.0] * 3,
        image_std=[1.0] * 3, rpn_anchor_generator=anchors,
        rpn_head=RPNHead(backbone.out_channels, anchors.num_anchors_per_location()[0]),
        rpn_pre_nms_top_n_train=1000, rpn_pre_nms_top_n_test=500, rpn_post_nms_top_n_train=300,
        rpn_post_nms_top_n_test=100, rpn_nms_thresh=0.7, rpn_fg_iou_thresh=0.7, rpn_bg_iou_thresh=0.3,
        rpn_batch_size_per_image=256, rpn_positive_fraction=0.5, rpn_score_thresh=0.0,
        box_roi_pool=MultiScaleRoIAlign(featmap_names=["0"], output_size=7, sampling_ratio=2),
        box_head=TwoMLPHead(backbone.out_channels * 7 * 7, 256), box_predictor=FastRCNNPredictor(256, NUM_CLASSES + 1),
        box_score_thresh=0.05, box_nms_thresh=0.5, box_detections_per_img=100, box_fg_iou_thresh=0.5,
        box_bg_iou_thresh=0.5, box_batch_size_per_image=128, box_positive_fraction=0.25,
        bbox_reg_weights=(10.0, 10.0, 5.0, 5.0))
    return model.to(device)


def lr_factor(step, steps):
    """nn/optim/lr_scheduler.h's WarmupCosineLR (warm-up from 0.001 over min(WARMUP, steps / 5) steps)."""
    warmup = min(WARMUP, steps // 5)
    warm = 1.0 if step >= warmup else 0.001 * (1 - step / warmup) + step / warmup
    progress = min(step / steps, 1.0)
    return warm * (MIN_LR_FACTOR + (1 - MIN_LR_FACTOR) * 0.5 * (1 + math.cos(math.pi * progress)))


class Trainer:
    def __init__(self, torch, steps=STEPS, device="cuda", seed=SEED, init=None):
        """init: the path of a state_dict for build_model's model (loaded strictly) instead of the random start."""
        torch.manual_seed(seed)
        self.torch, self.steps, self.steps_done, self.device = torch, steps, 0, device
        self.watch = torch.zeros(LOG_EVERY + 1, 5, dtype=torch.float64, device=device)  # the loop's LossWatch
        self.watched_steps = []
        self.model = build_model(torch, device)
        if init:
            self.model.load_state_dict(torch.load(init, map_location=device))
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=LR, betas=(0.9, 0.999), eps=1e-8,
                                           weight_decay=WEIGHT_DECAY)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda step: lr_factor(step, steps))

    def step(self, batch):
        torch = self.torch
        self.steps_done += 1
        images, boxes, labels = batch
        images = images.to(self.device)
        targets = [{"boxes": b.to(self.device), "labels": l.to(self.device)} for b, l in zip(boxes, labels)]
        losses = self.model(list(images), targets)
        missing = [name for name in LOSS_NAMES if name not in losses]
        if missing:
            raise RuntimeError(f"torchvision's FasterRCNN returned no {missing} (got {sorted(losses)})")
        total = sum(losses[name] for name in LOSS_NAMES)
        parts = torch.stack([total.detach()] + [losses[name].detach() for name in LOSS_NAMES])
        self.watch[len(self.watched_steps)].copy_(parts)  # on the device, no sync
        self.watched_steps.append(self.steps_done)
        if self.steps_done % LOG_EVERY == 0 or self.steps_done in (1, self.steps):
            self.read_losses()
        self.optimizer.zero_grad(set_to_none=True)
        total.backward()
        self.optimizer.step()
        self.scheduler.step()

    def read_losses(self):
        """The loop's read of the watched losses: one device-to-host copy; a non-finite loss stops the run."""
        if not self.watched_steps:
            return
        rows = self.watch[:len(self.watched_steps)].cpu().tolist()
        for step, row in zip(self.watched_steps, rows):
            if not math.isfinite(row[0]):
                raise RuntimeError(f"the loss of step {step} is not finite: {dict(zip(('total',) + LOSS_NAMES, row))}")
        self.watched_steps = []

    def infer(self, images):
        with self.torch.no_grad():
            return self.model(list(images.to(self.device)))


# ---- counting ---------------------------------------------------------------------------------------------------

def count_per_run(torch, fn):
    """Per-run counts over COUNTED_RUNS runs of fn, from torch.profiler and the caching allocator."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    segments_before = torch.cuda.memory_stats().get("segment.all.allocated", 0)
    with warnings.catch_warnings():  # the profiler warns that it keeps one cycle's events: all we want
        warnings.simplefilter("ignore", UserWarning)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(COUNTED_RUNS):
                fn()
            torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    segments = torch.cuda.memory_stats().get("segment.all.allocated", 0) - segments_before
    # cudaDeviceSynchronize is left out: the step never calls it, but our synchronize above and the
    # profiler's own stop do (2 on PyTorch 2.11).
    kernels = d2h = h2d = syncs = 0
    for event in prof.events():
        name = event.name
        if event.device_type == DeviceType.CUDA:
            if name.startswith("Memcpy DtoH"):
                d2h += 1
            elif name.startswith("Memcpy HtoD"):
                h2d += 1
            elif not name.startswith(("Memcpy", "Memset")):
                kernels += 1
        elif name in ("cudaStreamSynchronize", "cudaEventSynchronize"):
            syncs += 1
    if kernels == 0:
        raise RuntimeError("torch.profiler recorded no CUDA kernel events, so launches cannot be counted "
                           "(is the profiler's CUPTI support available in this PyTorch build?)")
    per_run = lambda n: round(n / COUNTED_RUNS, 1)  # noqa: E731
    return {"launches": per_run(kernels), "d2h": per_run(d2h), "h2d": per_run(h2d), "syncs": per_run(syncs),
            "device_allocations": per_run(segments), "peak_bytes": int(peak)}


# ---- the benchmark -------------------------------------------------------------------------------------------

def import_numpy():
    try:
        import numpy
    except ImportError:
        raise SystemExit("detector_torch.py needs numpy (torchvision depends on it): pip install numpy")
    return numpy


def run_benchmark(torch, reps, device_name):
    np = import_numpy()
    data = make_shapes(np, HELD_BATCHES * max(BATCHES), seed=SEED)
    rng = np.random.default_rng(SEED)
    rows, trainers = [], []
    # All timings first, then the counts (the profiler slows every call while it records).
    for batch in BATCHES:
        trainer = Trainer(torch)
        held = [collate(torch, np, data[i * batch:(i + 1) * batch], rng) for i in range(HELD_BATCHES)]
        cycle = {"next": 0}

        def next_batch(held=held, cycle=cycle):
            cycle["next"] += 1
            return held[cycle["next"] % len(held)]

        trainer.model.train()
        train_ms = time_median_ms(torch, lambda: trainer.step(next_batch()), reps)
        stream_ms = time_stream_ms(torch, lambda: trainer.step(next_batch()), STREAM_STEPS, 5)
        trainer.model.eval()
        infer_ms = time_median_ms(torch, lambda: trainer.infer(next_batch()[0]), reps)
        trainers.append((batch, trainer, next_batch, train_ms, stream_ms, infer_ms))
    for batch, trainer, next_batch, train_ms, stream_ms, infer_ms in trainers:
        trainer.model.train()
        train_counts = count_per_run(torch, lambda: trainer.step(next_batch()))
        trainer.model.eval()
        infer_counts = count_per_run(torch, lambda: trainer.infer(next_batch()[0]))
        # The stream row has no counts of its own (bench_detector's neither): they are the train row's.
        for pass_name, ms, counts in (("train", train_ms, train_counts), ("train-stream", stream_ms, {}),
                                      ("infer", infer_ms, infer_counts)):
            rows.append({"bench": "detector", "impl": "torchvision", "device": device_name, "shape": shape_of(batch),
                         "pass": pass_name, "median_ms": round(ms, 4), **counts})
    print(f"{'shape':<22} {'pass':<12} {'median_ms':>10} {'launches':>9} {'d2h':>6} {'h2d':>6} {'syncs':>6} "
          f"{'mallocs':>8} {'peak_MiB':>9}")
    for r in rows:
        line = f"{r['shape']:<22} {r['pass']:<12} {r['median_ms']:>10.3f}"
        if "launches" in r:
            line += (f" {r['launches']:>9} {r['d2h']:>6} {r['h2d']:>6} {r['syncs']:>6} {r['device_allocations']:>8} "
                     f"{r['peak_bytes'] / 2**20:>9.1f}")
        print(line)
    return rows


def run_cpu_benchmark(torch, args):
    """The CPU rows, as bench_detector's CPU section measures them: batch 8, --cpu-threads threads, steady
    clock, median of 3 runs after 1 warm-up; with --minidet-json, the ratio to minidet's CPU rows."""
    import json
    np = import_numpy()
    torch.set_num_threads(args.cpu_threads)
    data = make_shapes(np, HELD_BATCHES * 8, seed=SEED)
    rng = np.random.default_rng(SEED)
    held = [collate(torch, np, data[i * 8:(i + 1) * 8], rng) for i in range(HELD_BATCHES)]
    trainer = Trainer(torch, device="cpu")
    cycle = {"next": 0}

    def next_batch():
        cycle["next"] += 1
        return held[cycle["next"] % len(held)]

    def median_ms(fn):
        fn()
        times = []
        for _ in range(3):
            start = time.perf_counter()
            fn()
            times.append(1000 * (time.perf_counter() - start))
        return sorted(times)[1]

    trainer.model.train()
    train_ms = median_ms(lambda: trainer.step(next_batch()))
    trainer.model.eval()
    infer_ms = median_ms(lambda: trainer.infer(next_batch()[0]))
    minidet = {}
    if args.minidet_json:
        with open(args.minidet_json) as f:
            for line in f:
                r = json.loads(line) if line.strip() else {}
                if r.get("bench") == "detector" and r.get("device") == "cpu":
                    minidet[r["pass"]] = r["median_ms"]
    print(f"\n== PyTorch {torch.__version__} on the CPU, {args.cpu_threads} threads, median of 3 after 1 warm-up ==")
    print(f"{'shape':<22} {'pass':<6} {'torch_ms':>10} {'minidet_ms':>11} {'ratio':>6}")
    rows = []
    for pass_name, ms in (("train", train_ms), ("infer", infer_ms)):
        mine = minidet.get(pass_name)
        ratio = f"{mine / ms:6.2f}" if mine else "   n/a"
        print(f"{shape_of(8):<22} {pass_name:<6} {ms:>10.1f} {mine or float('nan'):>11.1f} {ratio}")
        row = {"bench": "detector", "impl": "torchvision", "device": "cpu", "threads": args.cpu_threads,
               "shape": shape_of(8), "pass": pass_name, "median_ms": round(ms, 2)}
        if mine:
            row["minidet_ms"], row["ratio"] = mine, round(mine / ms, 3)
        print(json.dumps(row))
        rows.append(row)
    return rows


# ---- time to accuracy --------------------------------------------------------------------------------------------

def evaluate(torch, np, trainer, test):
    trainer.model.eval()
    detections = []
    for start in range(0, len(test), BATCH):
        images, _, _ = collate(torch, np, test[start:start + BATCH])
        for n, out in enumerate(trainer.infer(images)):
            boxes, scores, labels = (out[k].cpu().tolist() for k in ("boxes", "scores", "labels"))
            detections += [(start + n, labels[d], scores[d], boxes[d]) for d in range(len(scores))]
    trainer.model.train()
    return {"map50": voc_map50(np, [(b, l) for _, b, l in test], detections)}


def evaluate_with_minidet(torch, np, trainer, test, args, step):
    """--data: the held-out split's detections as a COCO results file, scored by `minidet eval --results --json`.
    Returns its numbers: map50 (VOC all-point AP@0.5), coco_ap, coco_ap50, coco_ap75, coco_ar100."""
    import json
    import subprocess
    table = pixel_values(torch, np)
    trainer.model.eval()
    detections = []
    for start in range(0, len(test), BATCH):
        positions = list(range(start, min(start + BATCH, len(test))))
        images, _, _ = split_batch(torch, np, test, positions, [False] * len(positions), table)
        for position, out in zip(positions, trainer.infer(images)):
            boxes, scores, labels = (out[k].cpu().tolist() for k in ("boxes", "scores", "labels"))
            detections += [(position, labels[d], scores[d], boxes[d]) for d in range(len(scores))]
    trainer.model.train()
    path = os.path.join(args.results_dir, f"results_step{step:05d}.json")
    with open(path, "w") as f:
        json.dump(coco_results(test, detections), f)
    scored = subprocess.run([args.minidet_command, "eval", "--gt", test.json_path, "--results", path, "--json"],
                            capture_output=True, text=True)
    if scored.returncode != 0 or "{" not in scored.stdout:
        raise SystemExit(f"{args.minidet_command} eval --gt {test.json_path} --results {path} failed: "
                         f"{scored.stderr.strip()}")
    return json.loads(scored.stdout[scored.stdout.rindex("{"):])


def time_to_accuracy(torch, args, device_name):
    np = import_numpy()
    steps = args.steps or STEPS
    start = time.perf_counter()
    if args.data:  # minidet's data, its batch plan or our own, scored by `minidet eval --results`
        train, test = CocoSplit(torch, np, args.data, "train"), CocoSplit(torch, np, args.data, "test")
        plan = read_plan(args.plan, steps) if args.plan else drawn_plan(np, len(train), BATCH, args.seed, steps)
        loader = plan_batches(torch, np, train, plan)
        evaluate_now = lambda step: evaluate_with_minidet(torch, np, trainer, test, args, step)  # noqa: E731
        print(f"read {len(train)} + {len(test)} images of {args.data} in {time.perf_counter() - start:.1f} s "
              f"(not timed); batches {'of ' + args.plan if args.plan else 'drawn with seed ' + str(args.seed)}; "
              f"results files in {args.results_dir}")
    else:
        train, test = make_shapes(np, TRAIN_IMAGES, seed=SEED), make_shapes(np, TEST_IMAGES, seed=SEED + 1)
        loader = batches(torch, np, train, BATCH, args.seed)
        evaluate_now = lambda step: evaluate(torch, np, trainer, test)  # noqa: E731
        print(f"rendered {TRAIN_IMAGES} + {TEST_IMAGES} shapes in {time.perf_counter() - start:.1f} s (not timed)")
    print(f"== time to accuracy on {device_name}: {steps} steps of {BATCH} images, mAP@0.5 on {len(test)} "
          f"held-out images every {args.eval_every} steps, target {args.target:.3f} ==", flush=True)
    trainer = Trainer(torch, steps, args.device, seed=args.seed, init=args.init)
    coco_ap = None
    train_seconds = eval_seconds = best_seconds = 0.0
    best, best_step, step = -1.0, 0, 0
    segment_start = time.perf_counter()
    while step < steps:
        step += 1
        trainer.step(next(loader))
        if step % args.eval_every and step != steps:
            continue
        trainer.read_losses()  # the loop reads the losses before it evaluates
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()  # the step's last kernels belong to the training clock
        eval_start = time.perf_counter()
        train_seconds += eval_start - segment_start
        scores = evaluate_now(step)
        map50 = scores["map50"]
        segment_start = time.perf_counter()
        eval_seconds += segment_start - eval_start
        coco = f"  COCO AP {scores['coco_ap']:.4f}" if "coco_ap" in scores else ""
        print(f"step {step:4d}  mAP@0.5 {map50:.4f}{coco}  training {train_seconds:.2f} s  evaluation "
              f"{eval_seconds:.2f} s", flush=True)
        if map50 > best:
            best, best_seconds, best_step, coco_ap = map50, train_seconds, step, scores.get("coco_ap")
        if map50 >= args.target:
            break
    reached = best >= args.target
    if reached:
        print(f"reached mAP@0.5 {best:.4f} >= {args.target:.3f} at step {best_step} after {best_seconds:.2f} s of "
              f"training ({eval_seconds:.2f} s of evaluation)")
    else:
        print(f"never reached mAP@0.5 {args.target:.3f} in {step} steps: best {best:.4f} at step {best_step} after "
              f"{best_seconds:.2f} s of training")
    row = {"bench": "detector", "impl": "torchvision", "device": device_name, "shape": shape_of(BATCH, "shapes"),
           "pass": "tta", "median_ms": round(1000 * best_seconds, 1), "target": args.target, "reached": reached,
           "map50": round(best, 4), "step": best_step, "steps_run": step,
           "train_seconds_total": round(train_seconds, 2), "eval_seconds": round(eval_seconds, 2)}
    if args.data:
        row.update({"coco_ap": coco_ap, "data": args.data, "plan": args.plan, "init": args.init, "seed": args.seed})
    return [row]


# ---- command line ------------------------------------------------------------------------------------------------

def add_arguments(parser):
    parser.add_argument("--time-to-accuracy", action="store_true",
                        help="train from scratch and report the training time to reach --target mAP@0.5")
    parser.add_argument("--target", type=float, default=0.95)
    parser.add_argument("--eval-every", type=int, default=50)
    parser.add_argument("--steps", type=int, default=0, help="training steps (0: the schedule's 500)")
    parser.add_argument("--cpu-threads", type=int, default=0,
                        help="also time the CPU step at batch 8 with this many threads (bench_detector's CPU rows "
                             "use 2); 0: GPU only")
    exact = parser.add_argument_group("time to accuracy on minidet's data (see the top)")
    exact.add_argument("--data", help="an export_shapes_coco folder: train.json, train/, test.json, test/")
    exact.add_argument("--plan", help="a minidet run's batches.jsonl to replay (needs --data)")
    exact.add_argument("--minidet-command", help="the minidet command, build/<preset>/examples/minidet/minidet, "
                                                 "whose `eval --gt --results` scores the twin (needed with --data)")
    exact.add_argument("--results-dir", help="where the COCO results files go (default: a new temporary folder)")
    exact.add_argument("--init", help="a state_dict (.pt) to start from instead of random weights")
    exact.add_argument("--seed", type=int, default=SEED, help="torch's seed and the drawn batch order")
    exact.add_argument("--device", default="cuda", help="cuda, cuda:N, or cpu (time to accuracy only)")


def minidet_bin_args(args):
    if not args.time_to_accuracy:
        return []
    extra = ["--time-to-accuracy", "--target", str(args.target), "--eval-every", str(args.eval_every)]
    return extra + (["--steps", str(args.steps)] if args.steps else [])


def check_exact_arguments(args):
    if not args.time_to_accuracy and (args.data or args.plan or args.init or args.device != "cuda"):
        raise SystemExit("--data, --plan, --init and --device are options of --time-to-accuracy")
    if args.plan and not args.data:
        raise SystemExit("--plan replays a run on its data: give the export_shapes_coco folder with --data")
    if args.data:
        if not args.minidet_command or not os.access(args.minidet_command, os.X_OK):
            raise SystemExit(f"--data needs --minidet-command, the minidet command (build/<preset>/examples/minidet/"
                             f"minidet), whose `eval --results` scores the twin; got {args.minidet_command!r}")
        if not args.results_dir:
            import tempfile
            args.results_dir = tempfile.mkdtemp(prefix="detector_torch_results_")
        os.makedirs(args.results_dir, exist_ok=True)


def run_torch(torch, reps, args):
    check_exact_arguments(args)
    # True FP32, as minidet computes: by default PyTorch lets cuDNN's convolutions round their inputs to TF32
    # on the tensor cores (torch.backends.cudnn.allow_tf32), which would time and train another arithmetic.
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    device_name = "cpu" if args.device == "cpu" else "cuda:" + torch.cuda.get_device_name(0)
    try:
        import torchvision  # noqa: F401
    except ImportError:
        raise SystemExit("detector_torch.py needs torchvision (FasterRCNN, DeformConv2d, MultiScaleRoIAlign)")
    if args.eval_every < 1:
        raise SystemExit("--eval-every must be >= 1")
    if args.time_to_accuracy:
        return device_name, time_to_accuracy(torch, args, device_name)
    rows = run_benchmark(torch, reps, device_name)
    if args.cpu_threads > 0:
        run_cpu_benchmark(torch, args)  # printed with its own ratio; the GPU rows go on to the GPU ratios
    return device_name, rows


if __name__ == "__main__":
    sys.exit(main(__doc__, {"detector"}, run_torch, add_arguments, minidet_bin_args))
