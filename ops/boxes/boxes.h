// Every box op in one include: geometry (area, clip, remove small), conversions, pairwise IoU.
// box_math.h holds the scalar box arithmetic that the kernels (and nms) share.
#pragma once

#include "ops/boxes/box_convert.h"
#include "ops/boxes/box_geometry.h"
#include "ops/boxes/box_iou.h"
