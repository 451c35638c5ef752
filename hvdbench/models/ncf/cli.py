"""`hvdbench prepare movielens`: the `movielens` kind's writer on the command line (listed in
SPEC.prepare_commands, added to `hvdbench prepare` by hvdbench/cli/prepare.py)."""

import click

from hvdbench.cli.prepare import OUT, OVERWRITE, WORKERS, summary


@click.command()
@click.option("--src", required=True,
              help="Ratings file (or its folder): ml-20m/ml-25m ratings.csv, ml-1m ratings.dat, ml-100k "
                   "u.data; or builtin:ml-100k (MovieLens-100K inside the installed recbole wheel).")
@OUT
@click.option("--eval-negatives", type=click.IntRange(min=1), default=None,
              help="Never-rated items ranked against each user's held-out item [default: 999, MLPerf's; "
                   "99 for builtin:ml-100k, where heavy users have fewer than 999 unrated items].")
@click.option("--min-ratings", type=click.IntRange(min=2), default=20, show_default=True,
              help="Drop users with fewer ratings (MLPerf's filter; MovieLens keeps only such users).")
@click.option("--samples-per-shard", type=click.IntRange(min=1), default=1024, show_default=True,
              help="Rows per shard (a row: 1 + eval-negatives pairs).")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seeds the evaluation negatives and the order of the training pairs.")
@WORKERS
@OVERWRITE
def movielens(src, out, eval_negatives, min_ratings, samples_per_shard, seed, workers, overwrite):
    """MovieLens ratings -> NCF's leave-latest-out split (HR@10 with sampled negatives) in HDF5.

    Each user's latest rating is held out and ranked against never-rated items; the other ratings
    are the training positives (implicit feedback).

    \b
    Example:
      hvdbench prepare movielens --src builtin:ml-100k --out data/ml-100k
      hvdbench prepare movielens --src ml-20m/ratings.csv --out data/ml-20m
      hvdbench prepare movielens --src ml-1m/ratings.dat --out data/ml-1m --eval-negatives 999
    """
    from hvdbench.data.parallel import PrepareOptions
    from hvdbench.models.ncf.prepare import prepare_movielens

    summary(prepare_movielens(src, out, eval_negatives=eval_negatives, min_ratings=min_ratings,
                              samples_per_shard=samples_per_shard, seed=seed,
                              options=PrepareOptions(workers=workers, overwrite=overwrite)), out)
