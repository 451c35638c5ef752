"""`hvdbench prepare c4`: the lm family's C4 writer on the command line (listed in llama31_8b's
SPEC.prepare_commands; gpt_oss_20b trains on the same data)."""

import click

from hvdbench.cli.lists import FiniteRange
from hvdbench.cli.prepare import OUT, OVERWRITE, WORKERS, summary


@click.command("c4")
@click.option("--src", "sources", required=True, multiple=True, metavar="FILE|DIR|builtin:pydoc",
              help="C4 JSON lines ({\"text\": ...} per line, gzip or plain), folders of them (their *.json* "
                   "files; only c4-train.* when the folder has any), or builtin:pydoc: CPython's own documentation in "
                   "C4's place (no download). Repeatable.")
@OUT
@click.option("--tokenizer", type=click.Path(dir_okay=False),
              help="A Hugging Face tokenizers file (Llama 3.1's tokenizer.json, MLPerf's; gated, never fetched). "
                   "Default: a byte-level BPE trained on the training documents.")
@click.option("--vocab-size", type=click.IntRange(min=258), default=None,
              help="Tokens of the trained BPE (default: 32000 for files, 2048 for builtin:pydoc).")
@click.option("--tokenizer-docs", type=click.IntRange(min=1), default=100_000, show_default=True,
              help="Training documents the BPE is trained on (the first ones).")
@click.option("--eos-token", help="The end-of-document token of --tokenizer (default: the first of "
                                  "<|end_of_text|>, </s>, <|endoftext|>, <eos> it has).")
@click.option("--seq-len", type=click.IntRange(min=1), default=None,
              help="Tokens per sequence, predictions (default: 8192, the reference's, for files; 256 for "
                   "builtin:pydoc). Each sample holds seq-len + 1 tokens.")
@click.option("--val-src", multiple=True, metavar="FILE|DIR",
              help="Validation documents (MLPerf: c4-validation-91205-samples.en.json.gz). Default: hold out "
                   "--val-fraction of the first --src's documents.")
@click.option("--val-sequences", type=click.IntRange(min=1), default=1024, show_default=True,
              help="Validation sequences kept: the first ones, in order (the reference evaluates on 1,024).")
@click.option("--val-fraction", type=FiniteRange(0, 1, min_open=True, max_open=True), default=0.1,
              show_default=True, help="Seeded share of the first source's documents held out without --val-src.")
@click.option("--strict", is_flag=True,
              help="Fail at the first line that is not a JSON object with a string 'text' (default: count and "
                   "skip it, naming the first few).")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seeds the held-out documents and the order of the training sequences.")
@WORKERS
@OVERWRITE
def c4(sources, out, tokenizer, vocab_size, tokenizer_docs, eos_token, seq_len, val_src, val_sequences, val_fraction,
       strict, seed, workers, overwrite):
    """C4's JSON lines -> fixed-length token sequences in HDF5 (llama31_8b, gpt_oss_20b).

    Documents are tokenized, joined with an end-of-document token and cut into sequences of
    --seq-len + 1 tokens, as MLPerf's reference preprocesses C4. One training shard per input file;
    ranks of an MPI launch split the files; a rerun resumes.

    \b
    Example:
      hvdbench prepare c4 --src builtin:pydoc --out data/c4-debug
      hvdbench prepare c4 --src c4/en --val-src c4-validation-91205-samples.en.json.gz \\
          --tokenizer llama-3.1-8b/tokenizer.json --out data/c4
      mpirun -np 8 hvdbench prepare c4 --src c4/en --val-src c4-val.json.gz --tokenizer tokenizer.json --out data/c4
    """
    from hvdbench.data.parallel import PrepareOptions, env_rank
    from hvdbench.families.lm.c4 import C4Options, prepare_c4
    from hvdbench.output import line

    opts = C4Options(seq_len=seq_len, vocab_size=vocab_size, tokenizer_docs=tokenizer_docs, eos_token=eos_token,
                     val_sequences=val_sequences, val_fraction=val_fraction, strict=strict, seed=seed)
    manifest = prepare_c4(list(sources), out, tokenizer=tokenizer, val_src=list(val_src) or None, opts=opts,
                          options=PrepareOptions(workers=workers, overwrite=overwrite))
    summary(manifest, out)
    if env_rank() != 0:
        return
    tokens, bad = manifest["tokens"], manifest["bad_lines"]
    line(f"{manifest['documents']['train']:,} training documents, {tokens['train']:,} tokens; validation: "
         f"{manifest['validation']}; tokenizer: {manifest['tokenizer']} (vocabulary {manifest['vocab_size']:,})")
    if manifest["empty_documents"] or bad["count"]:
        line(f"skipped {manifest['empty_documents']:,} empty document(s) and {bad['count']:,} bad line(s)"
             + (f", e.g. {bad['first'][0]}" if bad["first"] else ""))
    if manifest.get("note"):
        line(f"note: {manifest['note']}")
