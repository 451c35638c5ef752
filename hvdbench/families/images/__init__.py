"""The images family, shared by hvdbench/models/resnet50/ and stable_diffusion/ (its debug flavor
trains on the digits, and its judge learns them).

    data.py      the `images` dataset kind (uint8 NHWC, one label each), ImageNet's MEAN and STD
    prepare.py   `prepare_images`: an ImageNet-style folder tree -> image shards
    digits.py    `prepare_digits` and `load`: scikit-learn's bundled real digits; `write_tree`

Their `hvdbench prepare images` and `prepare digits` commands are hvdbench/models/resnet50/cli.py.
"""
