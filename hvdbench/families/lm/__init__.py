"""The language-model family: pre-training on fixed-length token sequences of C4, shared by
hvdbench/models/llama31_8b/ and gpt_oss_20b/ (and named by the spec-only deepseekv3_671b and
llama31_405b, which train on the same kind of data).

    data.py       the `lm_tokens` dataset kind: sequences of seq_len + 1 tokens (seq_len predictions)
    metric.py     validation log-perplexity (mean token cross-entropy), and its MoE variant that also
                  reports how evenly the router spreads tokens over the experts
    recipe.py     the references' MLLOG keys for the closed division and their AdamW constants
    tokenizer.py  a given Hugging Face tokenizer file (Llama 3.1's, gated) or a byte-level BPE trained here
    c4.py         `prepare_c4`: C4's JSON lines (or CPython's pydoc text in their place) -> lm_tokens shards
    torch.py      the models' shared PyTorch pieces: next-token loss, parameter groups, AdamW with the
                  reference's gradient clipping and cosine schedule (single-device code)

Its `hvdbench prepare c4` command is hvdbench/models/llama31_8b/cli.py.
"""
