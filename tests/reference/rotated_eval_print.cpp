// rotated_eval_print: prints minidet's evaluation of a COCO results file against a COCO ground-truth file,
// every number at full precision, for tests/reference/rotated_eval_reference.py to compare with its own
// re-implementation of the two algorithms on shapely's polygon areas.
//
//   rotated_eval_print GT.json RESULTS.json
//
// The files are read as `minidet eval --gt --results` reads them (data/coco/coco_format.h: 4-number boxes or
// detectron2's 5-number XYWHA boxes). The output, one item per line, numbers printed with %.17g:
//   rotated_iou 0|1                 whether overlap was measured on rotated boxes
//   coco_stats s0 .. s11            the COCO summary (data/eval/coco_eval.h)
//   coco_category ID AP             AP@[.5:.95] per category, ascending ids
//   voc all|11 ID AP                VOC AP@0.5 per category, all-point and 11-point (-1 without objects)
//   voc_map all|11 mAP
#include <cstdio>
#include <exception>

#include "data/coco/coco_format.h"
#include "data/eval/coco_eval.h"
#include "data/eval/voc_eval.h"

int main(int argc, char** argv) {
  using namespace minidet::data;
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s GT.json RESULTS.json\n", argv[0]);
    return 2;
  }
  try {
    const CocoInstances instances = read_coco_instances(argv[1]);
    const std::vector<Detection> detections = read_coco_results(argv[2], &instances);
    const GroundTruth truth = ground_truth_from_coco(instances);
    const CocoEvalResult coco = evaluate_coco(truth, detections);
    std::printf("rotated_iou %d\ncoco_stats", coco.rotated_iou ? 1 : 0);
    for (double value : coco.stats) std::printf(" %.17g", value);
    std::printf("\n");
    for (size_t k = 0; k < coco.category_ids.size(); ++k)
      std::printf("coco_category %lld %.17g\n", static_cast<long long>(coco.category_ids[k]), coco.category_ap(k));
    for (bool eleven : {false, true}) {
      const VocResult voc = evaluate_voc(truth, detections, {0.5, eleven});
      for (const VocClassResult& row : voc.classes)
        std::printf("voc %s %lld %.17g\n", eleven ? "11" : "all", static_cast<long long>(row.category_id),
                    row.average_precision);
      std::printf("voc_map %s %.17g\n", eleven ? "11" : "all", voc.mean_average_precision);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rotated_eval_print: %s\n", e.what());
    return 1;
  }
  return 0;
}
