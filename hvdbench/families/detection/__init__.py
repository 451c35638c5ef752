"""The detection family, shared by hvdbench/models/ssd/, retinanet/ and maskrcnn/.

    data.py     the `detection` dataset kind (letterboxed canvases, boxes, labels, RLE masks)
    metric.py   CocoMap: COCO box (and mask) AP@[.50:.95] over every rank's detections
    torch.py    the models' shared PyTorch pieces: on_device, targets, evaluation stats, the loss
                wrapper, NarrowResNet (single-device code)
    coco.py     `prepare_coco`: COCO 2017 -> detection shards
    scenes.py   `prepare_digit_scenes`: generated scenes of scikit-learn's real digits

Their `hvdbench prepare coco` and `prepare digit-scenes` commands are hvdbench/models/ssd/cli.py.
"""
