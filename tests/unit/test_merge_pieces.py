"""A file group's stored slice merged piece by piece (`merge.merge_pieces`) gives what the merge
of the whole slice gives (`reference_merge`, row by row), with the slice cut anywhere: a worker
holds one piece and the batch's rows, not the whole slice and its merged copy."""

import pyarrow as pa

from dbt.adapters.hudilite.table.operations.merge import merge_pieces
from tests.unit.test_merge_slice import META, as_rows, random_case, reference_merge, slice_tables




def test_merges_of_random_slices_cut_in_random_pieces_equal_the_row_by_row_rule():
    """Keys stored twice (in one piece or two), updates, deletes, moves out, new keys, older
    and null precombine values, in random mixes and random cuts."""
    for seed in range(250):
        stored_rows, incoming_rows, precombine, rng = random_case(seed)
        base, batch = slice_tables(stored_rows, incoming_rows)
        cuts = sorted(rng.sample(range(1, max(2, len(stored_rows))), min(rng.randrange(0, 4), max(0, len(stored_rows) - 1))))
        bounds = [0] + cuts + [len(stored_rows)]
        pieces = [base.slice(a, b - a) for a, b in zip(bounds, bounds[1:]) if b > a]
        counts = [0, 0, 0, 0]
        stored_keys = base.column(META[2]).combine_chunks() if seed % 2 else None  # given, or hashed per piece
        out = list(merge_pieces(iter(pieces), base.slice(0, 0), batch, "p", ["id", "name", "version"], precombine,
                                None, counts, stored_keys))
        merged = pa.concat_tables(out) if out else base.slice(0, 0)
        expected, expected_changed, expected_removed = reference_merge(stored_rows, incoming_rows, "p", precombine)
        assert (as_rows(merged), counts[:2]) == (expected, [expected_changed, expected_removed]), (seed, cuts)
        assert counts[2] == len(expected)
        # The stored bloom footer is reused when as many rows came out as were stored, none of
        # them new: exactly when the keys stay as they were, in order.
        same_keys = [r[1] for r in as_rows(merged)] == [k for k, *_ in stored_rows]
        assert (counts[2] == len(stored_rows) and counts[3] == 0) == same_keys, seed
