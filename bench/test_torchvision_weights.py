#!/usr/bin/env python3
"""Tests of bench/torchvision_weights.py on a real checkpoint, registered with CTest (bench/CMakeLists.txt).

    python3 bench/test_torchvision_weights.py --case mapping|refusals|torch --minidet build/cpu/examples/minidet/minidet
                                              --work DIR

Each case trains the tiny detector for one step (`minidet train`, about a second on the synthetic shapes) and
takes its last.ckpt: BatchNorm statistics and num_batches_tracked have moved, the optimizer state is there.
  mapping    no torch, no numpy: every model entry maps to a twin name and back, the twin-named entries come
             back byte for byte and in minidet's order, and the rebuilt checkpoint evaluates exactly as the
             original under `minidet eval`.
  refusals   no torch: a renamed entry, a name no rule knows, a wrong shape or dtype and a checkpoint without
             its config are refused, naming the entry.
  torch      to-torch and from-torch through the twin (build_model), float32 and float64, and the same refusals
             through the command line; prints "skipped: needs torch" where torch or torchvision is missing.
Exits non-zero on the first failed check, saying which.
"""
import argparse
import array
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from minidet_checkpoint import Entry, read_checkpoint, write_checkpoint  # noqa: E402
import torchvision_weights as tw  # noqa: E402

SCRIPT = os.path.join(HERE, "torchvision_weights.py")
TINY_RUN = ["--device", "cpu", "--threads", "1", "--set", "schedule.steps=1", "--set", "schedule.batch=2",
            "--set", "data.train_images=2", "--set", "data.test_images=4", "--set", "schedule.eval_every=0",
            "--set", "schedule.detection_images=0"]


def check(condition, what):
    if not condition:
        raise SystemExit(f"FAILED: {what}")
    print(f"ok: {what}")


def refused(fn, *names):
    """fn() raises WeightsError whose message names every one of names; returns the message."""
    try:
        fn()
    except tw.WeightsError as e:
        message = str(e)
        check(all(name in message for name in names), f"refused, naming {', '.join(names)}")
        return message
    raise SystemExit(f"FAILED: not refused (expected an error naming {', '.join(names)})")


def train_checkpoint(minidet, work):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    subprocess.run([minidet, "train", "--out", os.path.join(work, "run")] + TINY_RUN, check=True,
                   stdout=subprocess.DEVNULL)
    return os.path.join(work, "run", "last.ckpt")


def model_items(entries):
    return [(name, e) for name, e in entries.items() if name.startswith(tw.MODEL)]


def evaluate(minidet, checkpoint, out):
    subprocess.run([minidet, "eval", "--checkpoint", checkpoint, "--device", "cpu", "--threads", "1", "--out", out],
                   check=True, stdout=subprocess.DEVNULL)
    with open(out, "rb") as f:
        return f.read()


def widen(entry):
    """A float32 entry as float64, exactly (array's "f" and "d" are the machine's float and double)."""
    return Entry("float64", entry.shape, array.array("d", array.array("f", entry.data)).tobytes())


def as_float64(entries):
    """The checkpoint with every float32 model entry widened to float64, as a float64 model would save it."""
    return {name: widen(e) if name.startswith(tw.MODEL) and e.dtype == "float32" else e
            for name, e in entries.items()}


# ---- the cases ----------------------------------------------------------------------------------------------

def case_mapping(minidet, work):
    path = train_checkpoint(minidet, work)
    entries = read_checkpoint(path)
    copy = os.path.join(work, "copy.ckpt")
    write_checkpoint(copy, entries)
    with open(path, "rb") as a, open(copy, "rb") as b:
        check(a.read() == b.read(), "minidet_checkpoint.py reads and writes the file back byte for byte")

    weights = tw.model_entries(entries)
    twin_names = [tw.minidet_to_torch_name(p) for p in weights]
    check(len(set(twin_names)) == len(weights), f"the {len(weights)} model entries get distinct twin names")
    check(all(tw.torch_to_minidet_name(k) == p for p, k in zip(weights, twin_names)), "every twin name maps back")
    for mine, theirs in [("rpn.head.conv.weight", "rpn.head.conv.0.0.weight"),
                         ("roi_heads.box_head.fc6.bias", "roi_heads.box_head.fc6.bias"),
                         ("roi_heads.box_head.cls_score.weight", "roi_heads.box_predictor.cls_score.weight"),
                         ("backbone.stage4.0.conv1.offset_conv.weight", "backbone.stage4.0.conv1.offset_conv.weight"),
                         ("backbone.stem.1.num_batches_tracked", "backbone.stem.1.num_batches_tracked")]:
        check(mine in weights and tw.minidet_to_torch_name(mine) == theirs, f"{mine} <-> {theirs}")

    # The twin's order is not minidet's (torch lists buffers beside their parameters): --like restores it.
    twin = {tw.minidet_to_torch_name(p): e for p, e in reversed(list(weights.items()))}
    back = tw.to_minidet(twin, entries)
    out = os.path.join(work, "back.ckpt")
    write_checkpoint(out, tw.minidet_checkpoint(back, tw.config_json(entries)))
    rebuilt = read_checkpoint(out)
    check(model_items(rebuilt) == model_items(entries), "model entries come back byte for byte, in minidet's order")
    check(rebuilt[tw.CONFIG_ENTRY] == entries[tw.CONFIG_ENTRY], "the config comes along from --like")
    check(evaluate(minidet, out, os.path.join(work, "back.json")) ==
          evaluate(minidet, path, os.path.join(work, "original.json")),
          "minidet eval of the rebuilt checkpoint gives the original's detections")


def case_refusals(minidet, work):
    entries = read_checkpoint(train_checkpoint(minidet, work))
    twin = {tw.minidet_to_torch_name(p): e for p, e in tw.model_entries(entries).items()}

    renamed = dict(twin)
    renamed["backbone.stage4.0.conv1.conv.weight"] = renamed.pop("backbone.stage4.0.conv1.weight")
    refused(lambda: tw.to_minidet(renamed, entries),
            "backbone.stage4.0.conv1.weight (minidet: model.backbone.stage4.0.conv1.weight): missing from the "
            "state_dict", "backbone.stage4.0.conv1.conv.weight (minidet: model.backbone.stage4.0.conv1.conv.weight): "
            "in the state_dict but not in --like")
    old_name = dict(twin)
    old_name["rpn.head.conv.weight"] = old_name.pop("rpn.head.conv.0.0.weight")  # torchvision < 0.13
    refused(lambda: tw.to_minidet(old_name, entries), "no rule", "rpn.head.conv.weight")
    refused(lambda: tw.minidet_to_torch_name("rpn.head.extra.weight"), "rpn.head.extra.weight: no rule")

    reshaped = dict(twin)
    fc6 = reshaped["roi_heads.box_head.fc6.weight"]
    reshaped["roi_heads.box_head.fc6.weight"] = Entry(fc6.dtype, tuple(reversed(fc6.shape)), fc6.data)
    refused(lambda: tw.to_minidet(reshaped, entries),
            "roi_heads.box_head.fc6.weight (minidet: model.roi_heads.box_head.fc6.weight): shape (6272, 256) in "
            "the state_dict, (256, 6272) in --like")
    widened = dict(twin)
    widened["rpn.head.cls_logits.bias"] = widen(twin["rpn.head.cls_logits.bias"])
    refused(lambda: tw.to_minidet(widened, entries), "rpn.head.cls_logits.bias", "float64 in the state_dict, float32")

    no_config = {name: e for name, e in entries.items() if name != tw.CONFIG_ENTRY}
    refused(lambda: tw.config_json(no_config), "no 'minidet.config' entry")

    if not torch_available():  # as on CI: the commands say what they need instead of a traceback
        result = subprocess.run([sys.executable, SCRIPT, "to-torch", "x.ckpt", "x.pt"], capture_output=True, text=True)
        check(result.returncode == 1 and "to-torch needs PyTorch and torchvision" in result.stderr,
              "without torch, to-torch says it needs PyTorch")


def case_torch(minidet, work):
    if not torch_available():
        print("skipped: needs torch and torchvision")
        return
    import torch
    from detector_torch import build_model
    path = train_checkpoint(minidet, work)
    entries = read_checkpoint(path)
    for dtype in ("float32", "float64"):
        source = path
        if dtype == "float64":
            source = os.path.join(work, "float64.ckpt")
            write_checkpoint(source, as_float64(entries))
        original = read_checkpoint(source)
        pt, back, plain = (os.path.join(work, f"{dtype}.{ext}") for ext in ("pt", "back.ckpt", "plain.ckpt"))
        command(["to-torch", source, pt])
        state = torch.load(pt)
        model = build_model(torch, "cpu").to(getattr(torch, dtype))
        model.load_state_dict(state, strict=True)
        check(all(str(t.dtype) in (f"torch.{dtype}", "torch.int64") for t in state.values()),
              f"{dtype}: to-torch keeps the dtype and the twin loads the state_dict strictly")
        model.eval()
        with torch.no_grad():
            model([torch.rand(3, 128, 128, dtype=getattr(torch, dtype))])
        command(["from-torch", pt, back, "--like", source])
        check(model_items(read_checkpoint(back)) == model_items(original), f"{dtype}: from-torch --like: same bytes")
        command(["from-torch", pt, plain])
        check(model_items(read_checkpoint(plain)) == model_items(original),
              f"{dtype}: from-torch without --like: same bytes, in minidet's order")

    state = torch.load(os.path.join(work, "float32.pt"))
    state["backbone.stage4.0.conv1.conv.weight"] = state.pop("backbone.stage4.0.conv1.weight")
    state["roi_heads.box_head.fc7.weight"] = state["roi_heads.box_head.fc7.weight"][:, :128].clone()
    torch.save(state, os.path.join(work, "bad.pt"))
    message = command(["from-torch", os.path.join(work, "bad.pt"), os.path.join(work, "bad.ckpt")], fails=True)
    check("backbone.stage4.0.conv1.weight (minidet: model.backbone.stage4.0.conv1.weight): missing" in message and
          "backbone.stage4.0.conv1.conv.weight" in message and
          "roi_heads.box_head.fc7.weight (minidet: model.roi_heads.box_head.fc7.weight): shape (256, 128)" in message,
          "from-torch refuses a renamed entry and a wrong shape, naming both")
    bad = dict(entries)
    conv1 = bad["model.backbone.stage4.0.conv1.weight"]
    bad["model.backbone.stage4.0.conv1.weight"] = Entry(conv1.dtype, (128, 64, 3, 3), conv1.data[:len(conv1.data) // 2])
    write_checkpoint(os.path.join(work, "bad.ckpt"), bad)
    message = command(["to-torch", os.path.join(work, "bad.ckpt"), os.path.join(work, "bad2.pt")], fails=True)
    check("model.backbone.stage4.0.conv1.weight (twin: backbone.stage4.0.conv1.weight): shape (128, 64, 3, 3) in "
          in message and "(128, 128, 3, 3) in the twin" in message, "to-torch refuses a wrong shape, naming it")


def torch_available():
    try:
        import torch  # noqa: F401
        import torchvision  # noqa: F401
    except ImportError:
        return False
    return True


def command(arguments, fails=False):
    result = subprocess.run([sys.executable, SCRIPT] + arguments, capture_output=True, text=True)
    if (result.returncode != 0) != fails:
        raise SystemExit(f"FAILED: torchvision_weights.py {' '.join(arguments)} exited {result.returncode}\n"
                         f"{result.stdout}{result.stderr}")
    return result.stderr


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", required=True, choices=("mapping", "refusals", "torch"))
    parser.add_argument("--minidet", required=True, help="the minidet program")
    parser.add_argument("--work", required=True, help="a scratch folder (emptied first)")
    args = parser.parse_args()
    {"mapping": case_mapping, "refusals": case_refusals, "torch": case_torch}[args.case](args.minidet, args.work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
