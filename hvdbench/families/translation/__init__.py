"""The translation family, shared by hvdbench/models/transformer/ and gnmt/ (llama2_lora/ uses its
tokenizer).

    data.py      the `translation` dataset kind; the dataset's tokenizer file (`tokenizer_path`)
    tokens.py    byte-level BPE (`tokenizers`), special tokens, `Detokenizer`
    bleu.py      BLEU: sufficient statistics per batch, exactly reduced over ranks (sacrebleu)
    catalogs.py  the built-in English-German corpus (installed gettext catalogs)
    prepare.py   `prepare_translation`: parallel text -> translation shards
    torch.py     the models' shared PyTorch pieces: padding trim, label-smoothed loss, beam and
                 greedy search, BLEU of a decoded batch, Adam with clipping (single-device code)

Its `hvdbench prepare translation` command is hvdbench/models/transformer/cli.py.
"""
