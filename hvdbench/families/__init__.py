"""Model families: code that several model folders share, so that no model folder imports another.

    hvdbench/families/detection/     the `detection` kind, COCO mAP, COCO and digit-scene writers,
                                     the detection models' shared torch pieces   (ssd, retinanet, maskrcnn)
    hvdbench/families/translation/   the `translation` kind, BLEU, the BPE tokenizer, the writer of
                                     parallel text, the translation models' shared torch pieces
                                     (transformer, gnmt; llama2_lora uses the tokenizer)
    hvdbench/families/images/        the `images` kind, the image-tree and built-in digits writers
                                     (resnet50, stable_diffusion, flux1's debug flavor)
    hvdbench/families/lm/            the `lm_tokens` kind (fixed-length token sequences), the C4 writer
                                     and its tokenizer, log-perplexity, the LMs' shared torch pieces
                                     (llama31_8b, gpt_oss_20b)

A family module keeps a model folder's rules (docs/adding-a-model.md): its torch.py / tf.py are
single-device code and the only files that import a framework; it imports no model folder and
none of the trainer's, sweep's, study's, results' or CLI packages. The `hvdbench prepare` command
of a family's writer lives in the cli.py of the model folder that lists it (ssd, resnet50,
transformer, llama31_8b): only a model folder's cli.py imports the CLI.
Code only one model uses stays in that model's folder.
"""
