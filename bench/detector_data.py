"""The synthetic shapes for bench/detector_torch.py, and their VOC mAP@0.5.

The shapes re-draw data/shapes/shapes_dataset.h with numpy's generator: the same distributions (a background
colour, 5% empty images, 1-4 objects of 10%-50% of the side, a redraw when the IoU with an earlier object
exceeds 0.3, object colours at least 160 away from the background, larger objects painted first, uniform
noise of +-24), not the same pixels. Boxes are the tight box of each mask, [min_x, min_y, max_x + 1,
max_y + 1]; labels 1 square, 2 circle, 3 triangle. collate() and batches() make the batches minidet's loader
makes (data/loader/loader.h): float32 images in [0, 1], random horizontal flips, shuffled epochs, drop_last.

voc_map50() follows data/eval/voc_eval.h: per class, detections by decreasing score each take the object of
their image and class with the highest IoU when it is > 0.5 and not yet taken; all-point interpolated AP;
the mean over the classes that have objects. numpy and torch are passed in, so importing this costs nothing.

minidet's own data, for an exact comparison (detector_torch.py --data, --plan):
  CocoSplit     an export_shapes_coco folder's split (<dir>/train.json with <dir>/train/, or test): the very
                images minidet trains on (examples/export_shapes_coco.cpp), decoded with torchvision.io, with
                the boxes and labels minidet's CocoDataset gives (data/coco/coco_dataset.h).
  plan_batches  replays a run's batches.jsonl (engine/batch_plan.h): the same images in the same
                order, mirrored where minidet's flip mirrored them, as float32 bit for bit what its loader made.
  coco_results  detections as a COCO results file, which `minidet eval --gt --results` scores.
"""
import json
import math
import os

IMAGE_SIZE = 128
NUM_CLASSES = 3
FLIP = 0.5  # engine/run_config.h, Schedule::flip_probability


def inside_shape(np, kind, orientation, u, v):
    """data/shapes/rasterize.h: 1 square, 2 circle, 3 triangle (pointing up, turned by quarter turns)."""
    if kind == 1:
        return (np.abs(u) <= 1) & (np.abs(v) <= 1)
    if kind == 2:
        return u * u + v * v <= 1
    for _ in range(orientation & 3):
        u, v = v, -u
    return (v <= 1) & (np.abs(u) <= (1 + v) / 2)


def rasterize(np, kind, orientation, cx, cy, size):
    """The shape's mask over the whole image: pixel centres (x + 0.5, y + 0.5) inside the shape."""
    half = size / 2
    x0, y0 = max(0, math.floor(cx - half)), max(0, math.floor(cy - half))
    x1, y1 = min(IMAGE_SIZE, math.ceil(cx + half) + 1), min(IMAGE_SIZE, math.ceil(cy + half) + 1)
    ys, xs = np.mgrid[y0:y1, x0:x1]
    mask = np.zeros((IMAGE_SIZE, IMAGE_SIZE), dtype=bool)
    mask[y0:y1, x0:x1] = inside_shape(np, kind, orientation, (xs + 0.5 - cx) / half, (ys + 0.5 - cy) / half)
    return mask


def tight_box(np, mask):
    ys, xs = np.nonzero(mask)
    return (float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1))


def box_iou(a, b):
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def draw_image(np, rng):
    """One image as data/shapes/shapes_dataset.h draws it: (H, W, 3) uint8, boxes (M, 4), labels (M)."""
    background = rng.integers(0, 256, 3)
    wanted = 0 if rng.random() < 0.05 else int(rng.integers(1, 5))
    objects = []  # (box, label, mask, colour)
    for _ in range(wanted):
        for _attempt in range(30):
            kind = int(rng.integers(1, NUM_CLASSES + 1))
            size = (0.10 + 0.40 * rng.random()) * IMAGE_SIZE
            cx = size / 2 + (IMAGE_SIZE - size) * rng.random()
            cy = size / 2 + (IMAGE_SIZE - size) * rng.random()
            mask = rasterize(np, kind, int(rng.integers(0, 4)), cx, cy, size)
            if not mask.any():
                continue
            box = tight_box(np, mask)
            if any(box_iou(box, placed[0]) > 0.3 for placed in objects):
                continue
            colour = rng.integers(0, 256, 3)
            for _ in range(1, 20):
                if np.abs(colour - background).sum() >= 160:
                    break
                colour = rng.integers(0, 256, 3)
            objects.append((box, kind, mask, colour))
            break
    objects.sort(key=lambda o: (o[0][2] - o[0][0]) * (o[0][3] - o[0][1]), reverse=True)  # stable: larger first
    image = np.empty((IMAGE_SIZE, IMAGE_SIZE, 3), dtype=np.int16)
    image[:] = background
    for _, _, mask, colour in objects:
        image[mask] = colour
    image = np.clip(image + rng.integers(-24, 25, image.shape), 0, 255).astype(np.uint8)
    boxes = np.array([o[0] for o in objects], dtype=np.float32).reshape(-1, 4)
    labels = np.array([o[1] for o in objects], dtype=np.int64)
    return image, boxes, labels


def make_shapes(np, count, seed):
    rng = np.random.default_rng(seed)
    return [draw_image(np, rng) for _ in range(count)]


def collate(torch, np, samples, rng=None):
    """A CPU batch as minidet's loader makes it: images (B, 3, H, W) float32 in [0, 1], boxes and labels per
    image; with rng, each image is flipped left-right with probability FLIP (boxes x -> W - x)."""
    images, boxes, labels = [], [], []
    for image, b, l in samples:
        if rng is not None and rng.random() < FLIP:
            image = image[:, ::-1]
            b = np.stack([IMAGE_SIZE - b[:, 2], b[:, 1], IMAGE_SIZE - b[:, 0], b[:, 3]], axis=1).reshape(-1, 4)
        images.append(image)
        boxes.append(torch.from_numpy(np.ascontiguousarray(b, dtype=np.float32)))
        labels.append(torch.from_numpy(l))
    pixels = torch.from_numpy(np.ascontiguousarray(np.stack(images))).permute(0, 3, 1, 2).float().div_(255)
    return pixels.contiguous(), boxes, labels


def batches(torch, np, data, batch, seed):
    """Endless shuffled batches (drop_last), a new permutation every epoch, random flips."""
    rng = np.random.default_rng(seed)
    while True:
        order = rng.permutation(len(data))
        for start in range(0, len(data) - batch + 1, batch):
            yield collate(torch, np, [data[i] for i in order[start:start + batch]], rng)


def voc_map50(np, truth, detections):
    """VOC mAP@0.5, all-point interpolation. truth[i] = (boxes (M, 4), labels (M)); detections: tuples
    (image, label, score, box). A class without objects has no AP and is left out of the mean."""
    aps = []
    for label in range(1, NUM_CLASSES + 1):
        objects = [boxes[labels == label] for boxes, labels in truth]
        taken = [np.zeros(len(o), dtype=bool) for o in objects]
        total = sum(len(o) for o in objects)
        if total == 0:
            continue
        ranked = sorted((d for d in detections if d[1] == label), key=lambda d: -d[2])  # stable: ties keep order
        hits = []
        for image, _, _, box in ranked:
            ious = [box_iou(box, o) for o in objects[image]]
            best = int(np.argmax(ious)) if ious else -1
            hit = best >= 0 and ious[best] > 0.5 and not taken[image][best]
            if hit:
                taken[image][best] = True
            hits.append(hit)
        true_positives = np.cumsum(hits) if hits else np.zeros(0)
        recall = true_positives / total
        precision = true_positives / np.arange(1, len(hits) + 1)
        envelope = np.maximum.accumulate(precision[::-1])[::-1] if hits else precision
        aps.append(float(np.sum(np.diff(np.concatenate([[0.0], recall])) * envelope)))
    return float(np.mean(aps)) if aps else -1.0


# ---- minidet's own data: an export_shapes_coco folder, a run's batch plan, COCO results ---------------------------

def pixel_values(torch, np):
    """The float32 of each uint8 value as minidet's loader computes it (data/loader/loader.cpp: value / 255.0f,
    one IEEE float32 division), as a lookup table. numpy's float32 division is that division; torch's
    x.float() / 255 may multiply by the reciprocal instead (CUDA does for a scalar divisor), which is one bit
    off for about half of the 256 values."""
    return torch.from_numpy(np.arange(256, dtype=np.float32) / np.float32(255))


class CocoSplit:
    """<folder>/<split>.json and its images in <folder>/<split>/, as export_shapes_coco writes them; read as
    data/coco/coco_dataset.h reads them: labels 1..C number the categories by increasing id, boxes (x, y,
    x + w, y + h) clipped to the image, and a training sample leaves out crowd and zero-size boxes. Images
    are decoded with torchvision.io (PNG or JPEG; no PIL needed) and kept as uint8 (3, H, W)."""

    def __init__(self, torch, np, folder, split):
        from torchvision.io import ImageReadMode, read_image
        self.json_path = os.path.join(folder, split + ".json")
        with open(self.json_path) as f:
            coco = json.load(f)
        self.category_ids = sorted(c["id"] for c in coco["categories"])  # label - 1 -> category id
        label_of = {category: label + 1 for label, category in enumerate(self.category_ids)}
        self.image_ids = [image["id"] for image in coco["images"]]
        self.index_of = {image_id: index for index, image_id in enumerate(self.image_ids)}
        objects = {image_id: [] for image_id in self.image_ids}
        sizes = {image["id"]: (image["width"], image["height"]) for image in coco["images"]}
        for a in coco.get("annotations", []):
            width, height = sizes[a["image_id"]]
            x, y, w, h = a["bbox"]
            box = (min(max(x, 0.0), width), min(max(y, 0.0), height),
                   min(max(x + w, 0.0), width), min(max(y + h, 0.0), height))
            if a.get("iscrowd", 0) or (box[2] - box[0]) * (box[3] - box[1]) <= 0:
                continue
            objects[a["image_id"]].append((box, label_of[a["category_id"]]))
        self.images, self.boxes, self.labels = [], [], []
        for image in coco["images"]:
            pixels = read_image(os.path.join(folder, split, image["file_name"]), ImageReadMode.RGB)
            if tuple(pixels.shape[1:]) != (image["height"], image["width"]):
                raise SystemExit(f"{image['file_name']}: {tuple(pixels.shape[1:])} pixels, but {self.json_path} "
                                 f"says {image['height']}x{image['width']}")
            self.images.append(pixels)
            found = objects[image["id"]]
            self.boxes.append(np.array([b for b, _ in found], dtype=np.float64).reshape(-1, 4))
            self.labels.append(torch.tensor([l for _, l in found], dtype=torch.int64))

    def __len__(self):
        return len(self.images)


def read_plan(path, steps):
    """The first `steps` lines of a run's batches.jsonl (engine/batch_plan.h)."""
    plan = []
    with open(path) as f:
        for line in f:
            if line.strip():
                plan.append(json.loads(line))
    if len(plan) < steps:
        raise SystemExit(f"{path} plans {len(plan)} steps, fewer than the {steps} to train")
    for step, line in enumerate(plan[:steps], start=1):
        if line["step"] != step:
            raise SystemExit(f"{path}: line {step} is step {line['step']} (a plan holds each step once, in order)")
    return plan[:steps]


def drawn_plan(np, count, batch, seed, steps):
    """A plan of our own when there is none to replay: shuffled epochs (drop_last), flips with probability FLIP,
    from numpy's generator, in batches.jsonl's form."""
    rng = np.random.default_rng(seed)
    plan, epoch = [], 0
    while len(plan) < steps:
        order = rng.permutation(count)
        for start in range(0, count - batch + 1, batch):
            if len(plan) == steps:
                break
            indices = [int(i) for i in order[start:start + batch]]
            plan.append({"step": len(plan) + 1, "epoch": epoch, "indices": indices,
                         "flipped": [bool(rng.random() < FLIP) for _ in indices]})
        epoch += 1
    return plan


def split_batch(torch, np, split, positions, flipped, table):
    """Images positions of `split` as minidet's loader batches them: (B, 3, H, W) float32 (all of one size), a
    flipped image mirrored with its boxes (transforms.h: column x from W - 1 - x, box (W - x2, y1, W - x1, y2),
    in double and then float32 as minidet computes it), boxes and labels per image."""
    images, boxes, labels = [], [], []
    for position, flip in zip(positions, flipped):
        pixels, b = table[split.images[position].long()], split.boxes[position]
        if flip:
            width = pixels.shape[-1]
            pixels = pixels.flip(-1)
            b = np.stack([width - b[:, 2], b[:, 1], width - b[:, 0], b[:, 3]], axis=1).reshape(-1, 4)
        images.append(pixels)
        boxes.append(torch.from_numpy(b.astype(np.float32)))
        labels.append(split.labels[position])
    if len({tuple(image.shape) for image in images}) > 1:
        raise SystemExit("the twin batches images of one size only (minidet pads a batch; torchvision would too, "
                         "differently)")
    return torch.stack(images), boxes, labels


def plan_batches(torch, np, split, plan):
    """The batches of `plan`, in order. A plan read from a run names its images by COCO id (the split's own
    files) and by minidet's dataset index; the two must agree, or the folder is not the run's data."""
    table = pixel_values(torch, np)
    for line in plan:
        if "image_ids" in line:
            positions = [split.index_of.get(image_id) for image_id in line["image_ids"]]
            if None in positions or positions != line["indices"]:
                raise SystemExit(f"step {line['step']}: image ids {line['image_ids']} at dataset indices "
                                 f"{line['indices']} are not so in {split.json_path}: is it the run's data?")
        else:
            positions = line["indices"]
        yield split_batch(torch, np, split, positions, line["flipped"], table)


def coco_results(split, detections):
    """detections [(position, label, score, (x1, y1, x2, y2))] as a COCO results list, with the split's image
    and category ids (the file `minidet eval --results` reads)."""
    return [{"image_id": split.image_ids[position], "category_id": split.category_ids[label - 1],
             "bbox": [box[0], box[1], box[2] - box[0], box[3] - box[1]], "score": score}
            for position, label, score, box in detections]
