#!/usr/bin/env python3
"""Weights between a minidet checkpoint and torchvision's twin (build_model of bench/detector_torch.py).

    python3 bench/torchvision_weights.py to-torch runs/a/best.ckpt twin.pt
    python3 bench/torchvision_weights.py from-torch twin.pt twin.ckpt [--like runs/a/best.ckpt | --config FILE]

Names. A minidet checkpoint holds each parameter and buffer as "model.<path>", <path> its named_parameters() /
named_buffers() path (docs/checkpoint-format.md); the twin's state_dict() key is the same path except where
torchvision's own modules name things otherwise. RULES below is the one table, first match wins, read both
ways (<rest>: any dotted tail, <p>: one name such as weight, bias, running_mean):

    minidet path (after "model.")          twin state_dict key
    backbone.<rest>                        backbone.<rest>            the twin's Backbone uses minidet's names
    rpn.head.conv.<p>                      rpn.head.conv.0.0.<p>      torchvision >= 0.13: Conv2dNormActivation
    rpn.head.cls_logits.<p>                rpn.head.cls_logits.<p>
    rpn.head.bbox_pred.<p>                 rpn.head.bbox_pred.<p>
    roi_heads.box_head.fc6.<p>             roi_heads.box_head.fc6.<p>
    roi_heads.box_head.fc7.<p>             roi_heads.box_head.fc7.<p>
    roi_heads.box_head.cls_score.<p>       roi_heads.box_predictor.cls_score.<p>
    roi_heads.box_head.bbox_pred.<p>       roi_heads.box_predictor.bbox_pred.<p>

Tensors go across as they are, bytes and dtype unchanged: both sides store conv weights (out, in, kh, kw),
linear weights (out, in), the fc6 input flattened from (C, 7, 7), and the deformable offsets as channel
g*2*kh*kw + 2k = dy, + 1 = dx for offset group g and tap k = i*kw + j (ops/deform_conv2d/deform_conv2d.h and
torchvision.ops.deform_conv2d), so the offset predictor's weights need no permutation. BatchNorm's
num_batches_tracked is an int64 scalar buffer on both sides and travels like any other entry.

to-torch builds the twin, casts it to the checkpoint's floating dtype (float32 or float64), loads the mapped
model entries with strict checking and saves its state_dict. The checkpoint's other entries (optim., sched.,
rng., progress., minidet.) are not weights and are left out.

from-torch reads a state_dict, checks it against the twin (in its own dtype) and writes a minidet checkpoint
that `minidet eval --checkpoint` and `minidet detect` load: the model entries, progress.step and
progress.epoch (0: the weights are not a point of a minidet run) and minidet.config, the run config that
rebuilds the model: --like's (whose model entries must then match name for name, shape and dtype, and whose
order is kept), a config.json (--config), or else the default config with the synthetic shapes' classes. No
optimizer state is written, so `minidet train --resume` refuses the file.

A missing, extra or mismatched name is refused; every one is listed, e.g.
    model.backbone.stage4.0.conv1.weight (twin: backbone.stage4.0.conv1.weight): shape (128, 64, 3, 3) in
    a.ckpt, (128, 128, 3, 3) in the twin
Only the weights transfer: the twin's thresholds, anchors and sizes are build_model's, whatever the
checkpoint's config says (a config with other layer sizes is refused by shape).
"""
import argparse
import collections.abc
import json
import os
import re
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from minidet_checkpoint import (MAGIC, CheckpointError, Entry, from_torch, read_checkpoint,  # noqa: E402
                                to_torch, write_checkpoint)

RULES = [
    ("backbone.<rest>", "backbone.<rest>"),
    ("rpn.head.conv.<p>", "rpn.head.conv.0.0.<p>"),
    ("rpn.head.cls_logits.<p>", "rpn.head.cls_logits.<p>"),
    ("rpn.head.bbox_pred.<p>", "rpn.head.bbox_pred.<p>"),
    ("roi_heads.box_head.fc6.<p>", "roi_heads.box_head.fc6.<p>"),
    ("roi_heads.box_head.fc7.<p>", "roi_heads.box_head.fc7.<p>"),
    ("roi_heads.box_head.cls_score.<p>", "roi_heads.box_predictor.cls_score.<p>"),
    ("roi_heads.box_head.bbox_pred.<p>", "roi_heads.box_predictor.bbox_pred.<p>"),
]
MODEL = "model."
CONFIG_ENTRY = "minidet.config"
# The shapes' names of labels 1..3 (data/shapes/shapes_dataset.h): the default config's classes. Every other
# key keeps minidet's default (RunConfig::from_json starts from the defaults), which the twin is built to.
DEFAULT_CONFIG = {"classes": ["square", "circle", "triangle"], "category_ids": [1, 2, 3]}
MAX_LISTED = 20  # problems listed in one error


class WeightsError(ValueError):
    pass


# ---- the name mapping ---------------------------------------------------------------------------------------

PLACEHOLDERS = {"<rest>": r"(?P<rest>.+)", "<p>": r"(?P<p>[^.]+)"}


def _pattern(template):
    parts = re.split(r"(<rest>|<p>)", template)
    return re.compile("".join(PLACEHOLDERS.get(part, re.escape(part)) for part in parts) + r"\Z")


_COMPILED = [((_pattern(mine), mine), (_pattern(theirs), theirs)) for mine, theirs in RULES]


def _translate(name, side):
    for rule in _COMPILED:
        match = rule[side][0].match(name)
        if match:
            return re.sub(r"<(rest|p)>", lambda m: match.group(m.group(1)), rule[1 - side][1])
    return None


def minidet_to_torch_name(path):
    """The twin's state_dict key of a minidet parameter or buffer path (an entry name without "model.")."""
    key = _translate(path, 0)
    if key is None:
        raise WeightsError(f"{path}: no rule of the mapping table (bench/torchvision_weights.py) names it")
    return key


def torch_to_minidet_name(key):
    """The minidet path of a twin state_dict key."""
    path = _translate(key, 1)
    if path is None:
        raise WeightsError(f"{key}: no rule of the mapping table (bench/torchvision_weights.py) names it")
    return path


def _counterpart(name, side):
    other = _translate(name, side)
    return other if other is not None else "no rule"


# ---- checks -------------------------------------------------------------------------------------------------

def model_entries(entries):
    """{path: Entry} of a checkpoint's "model." entries, in file order."""
    return {name[len(MODEL):]: e for name, e in entries.items() if name.startswith(MODEL)}


def check_names(got, expected, got_where, expected_where, label):
    """got, expected: {name: (dtype, shape)}. Refuses, listing each, every name missing from got, extra in got
    or of another shape or dtype. label(name) is how a message shows a name."""
    problems = []
    for name, (dtype, shape) in expected.items():
        if name not in got:
            problems.append(f"{label(name)}: missing from {got_where}")
        elif got[name][1] != shape:
            problems.append(f"{label(name)}: shape {got[name][1]} in {got_where}, {shape} in {expected_where}")
        elif got[name][0] != dtype:
            problems.append(f"{label(name)}: {got[name][0]} in {got_where}, {dtype} in {expected_where}")
    problems += [f"{label(name)}: in {got_where} but not in {expected_where}" for name in got if name not in expected]
    if problems:
        shown = problems[:MAX_LISTED]
        if len(problems) > MAX_LISTED:
            shown.append(f"... and {len(problems) - MAX_LISTED} more")
        count = f"{len(problems)} problem" + ("s" if len(problems) > 1 else "")
        raise WeightsError(f"{got_where} does not fit {expected_where} ({count}):\n  " + "\n  ".join(shown))


def _specs(entries):
    return {name: (e.dtype, tuple(e.shape)) for name, e in entries.items()}


def _tensor_specs(tensors):
    return {name: (str(t.dtype).replace("torch.", ""), tuple(t.shape)) for name, t in tensors.items()}


def _floating_dtype(dtypes, where):
    for dtype in dtypes:
        if dtype in ("float32", "float64"):
            return dtype
    raise WeightsError(f"{where} holds no float32 or float64 tensor")


def to_minidet(twin_entries, like=None, where="the state_dict", like_where="--like"):
    """{path: Entry} of twin-named entries. With like (a minidet checkpoint's entries), they must match its model
    entries name for name, shape and dtype, and come out in its order."""
    unnamed = [key for key in twin_entries if _translate(key, 1) is None]
    if unnamed:
        raise WeightsError(f"{where}: no rule of the mapping table names " + ", ".join(unnamed))
    mapped = {torch_to_minidet_name(key): e for key, e in twin_entries.items()}
    if like is None:
        return mapped
    expected = _specs(model_entries(like))
    check_names(_specs(mapped), expected, where, like_where,
                lambda path: f"{_counterpart(path, 0)} (minidet: {MODEL}{path})")
    return {path: mapped[path] for path in expected}


def minidet_checkpoint(weights, config_json):
    """A checkpoint's entries from {path: Entry} and the run config's JSON text: what load_run_checkpoint needs."""
    entries = {MODEL + path: e for path, e in weights.items()}
    for counter in ("progress.step", "progress.epoch"):  # restore_training_state reads both
        entries[counter] = Entry("int64", (1,), struct.pack("<q", 0))
    text = config_json.encode("utf-8")
    entries[CONFIG_ENTRY] = Entry("uint8", (len(text),), text)
    return entries


def config_json(like=None, like_where="--like", config_path=None):
    if like is not None:
        if CONFIG_ENTRY not in like:
            raise WeightsError(f"{like_where} has no '{CONFIG_ENTRY}' entry: not a minidet training checkpoint")
        return like[CONFIG_ENTRY].data.decode("utf-8")
    if config_path is not None:
        with open(config_path) as f:
            try:
                return json.dumps(json.load(f), separators=(",", ":"))
            except json.JSONDecodeError as e:
                raise WeightsError(f"{config_path} is not valid JSON ({e})")
    return json.dumps(DEFAULT_CONFIG, separators=(",", ":"))


# ---- with torch ---------------------------------------------------------------------------------------------

def load_minidet_weights(torch, model, entries, where="the checkpoint"):
    """Loads a minidet checkpoint's model entries (read_checkpoint's dict) into the twin, after casting the twin
    to their floating dtype. Entries that are not "model." ones are ignored. Returns the model."""
    weights = model_entries(entries)
    model.to(getattr(torch, _floating_dtype((e.dtype for e in weights.values()), where)))
    expected = {torch_to_minidet_name(key): spec for key, spec in _tensor_specs(model.state_dict()).items()}
    check_names(_specs(weights), expected, where, "the twin",
                lambda path: f"{MODEL}{path} (twin: {_counterpart(path, 0)})")
    model.load_state_dict({minidet_to_torch_name(path): to_torch(torch, e) for path, e in weights.items()}, strict=True)
    return model


def twin_entries(torch, model, state_dict, where):
    """Entries of a twin state_dict, checked against the twin cast to its floating dtype, in the order a minidet
    checkpoint lists them: every parameter, then every buffer (Module::named_parameters, named_buffers)."""
    if not isinstance(state_dict, collections.abc.Mapping) or not all(torch.is_tensor(t) for t in state_dict.values()):
        raise WeightsError(f"{where}: expected a state_dict (a dict of tensors, as torch.save(model.state_dict()) "
                           f"writes), got {type(state_dict).__name__}")
    state_dict = dict(state_dict)
    specs = _tensor_specs(state_dict)
    model.to(getattr(torch, _floating_dtype((dtype for dtype, _ in specs.values()), where)))
    check_names(specs, _tensor_specs(model.state_dict()), where, "the twin",
                lambda key: f"{key} (minidet: {MODEL}{_counterpart(key, 1)})")
    order = [key for key, _ in model.named_parameters()] + [key for key, _ in model.named_buffers()]
    return {key: from_torch(torch, state_dict[key]) for key in order}


def to_torch_command(args):
    import torch
    from detector_torch import build_model
    entries = read_checkpoint(args.checkpoint)
    model = load_minidet_weights(torch, build_model(torch, "cpu"), entries, args.checkpoint)
    torch.save(model.state_dict(), args.out)
    weights = model_entries(entries)
    dtype = _floating_dtype((e.dtype for e in weights.values()), args.checkpoint)
    print(f"{args.out}: the twin's state_dict, {len(weights)} tensors ({dtype}) from {args.checkpoint} "
          f"({len(entries) - len(weights)} entries that are not weights left out)")


def from_torch_command(args):
    import torch
    from detector_torch import build_model
    with open(args.state_dict, "rb") as f:
        if f.read(len(MAGIC)) == MAGIC:
            raise WeightsError(f"{args.state_dict} is a minidet checkpoint, not a state_dict (to-torch reads it)")
    try:  # weights_only: a state_dict needs no pickled code, so none is run
        state_dict = torch.load(args.state_dict, map_location="cpu", weights_only=True)
    except OSError:
        raise
    except Exception as e:
        raise WeightsError(f"{args.state_dict}: not a state_dict that torch.load reads ({type(e).__name__}: "
                           f"{str(e).splitlines()[0] if str(e) else ''})")
    twin = twin_entries(torch, build_model(torch, "cpu"), state_dict, args.state_dict)
    like = read_checkpoint(args.like) if args.like else None
    weights = to_minidet(twin, like, args.state_dict, args.like)
    write_checkpoint(args.out, minidet_checkpoint(weights, config_json(like, args.like, args.config)))
    source = f"the config of {args.like}" if args.like else args.config or "the default config"
    print(f"{args.out}: {len(weights)} model entries from {args.state_dict}, with {source}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    to = commands.add_parser("to-torch", help="a minidet checkpoint -> the twin's state_dict (torch.save)")
    to.add_argument("checkpoint")
    to.add_argument("out")
    back = commands.add_parser("from-torch", help="the twin's state_dict -> a minidet checkpoint")
    back.add_argument("state_dict")
    back.add_argument("out")
    source = back.add_mutually_exclusive_group()
    source.add_argument("--like", help="a minidet checkpoint: its config, and the model entries to match")
    source.add_argument("--config", help="a run config JSON (a run folder's config.json)")
    args = parser.parse_args(argv)
    try:
        (to_torch_command if args.command == "to-torch" else from_torch_command)(args)
    except ImportError as e:
        sys.exit(f"torchvision_weights: {args.command} needs PyTorch and torchvision ({e})")
    except (WeightsError, CheckpointError, OSError) as e:
        sys.exit(f"torchvision_weights: {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
