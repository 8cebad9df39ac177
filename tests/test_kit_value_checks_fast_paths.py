"""The shortcuts on the gloo ranks' hot path give what the slow paths gave.

`student_values.plain` copies a row of plain scalars whole, `schema.nesting_depth`
passes over a row of scalars by the types it holds, `schema.Nested` accepts a row of
numbers by the same means, and a failed `OneOf` option puts its line together only
when read (`schema.Unfit`). Each is checked here against a plain recursive oracle
written from the docstrings, on values built to sit on the edges: subclasses of
list, dict, int and float, bools among numbers, rows at the depth limit.
"""
from __future__ import annotations

import pickle
import random

import numpy as np
import pytest

from shardlab.autograder.kit.schema import (MAX_DEPTH, TENSOR_VALUES, Fields, ListOf, Malformed, MapOf, Null,
                                            Number, OneOf, Unfit, check, nesting_depth)
from shardlab.autograder.kit.student_values import MAX_PLAIN_DEPTH, plain
from shardlab.autograder.sandbox.gloo.ranks.board import Board, create_board

pytestmark = pytest.mark.pure


class Row(list):
    """A list subclass: not what json.loads makes."""


class Table(dict):
    pass


class Count(int):
    pass


class Fraction(float):
    pass


def oracle_plain(value, depth=0):
    """plain() as its docstring says, one value at a time."""
    if depth > MAX_PLAIN_DEPTH:
        raise TypeError("value nested too deeply")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if isinstance(value, (list, tuple)):
        return [oracle_plain(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {str(k): oracle_plain(v, depth + 1) for k, v in value.items()}
    raise TypeError("not plain")


def oracle_depth(value) -> int:
    if isinstance(value, dict):
        return 1 + max((oracle_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((oracle_depth(v) for v in value), default=0)
    return 0


def nested(depth: int, leaf) -> list:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


ROWS = [
    [0.5, -1.0, float("inf")],
    [1, 2, 3],
    [True, False, 1, 2.5],
    [None, "a", 3],
    (1.5, 2.5),
    [],
    [Count(3), Fraction(0.25)],
    [np.float32(0.5), np.int64(7)],
    Row([1.0, 2.0]),
    [[1.0, 2.0], [3.0]],
]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: type(r).__name__ + str(len(r)))
def test_plain_gives_a_row_what_the_one_value_at_a_time_oracle_gives(row):
    got = plain(row)
    want = oracle_plain(row)
    assert got == want
    assert [type(v) for v in got] == [type(v) for v in want]      # a Count comes back an int, a bool a bool
    assert type(got) is list and got is not row


def test_plain_still_refuses_a_row_below_the_depth_limit_and_keeps_one_at_it():
    assert plain(nested(MAX_PLAIN_DEPTH, 1.0)) == nested(MAX_PLAIN_DEPTH, 1.0)
    with pytest.raises(TypeError, match="nested too deeply"):
        plain(nested(MAX_PLAIN_DEPTH + 1, 1.0))
    with pytest.raises(TypeError, match="nested too deeply"):
        plain(nested(MAX_PLAIN_DEPTH + 1, []))


def test_plain_still_refuses_a_row_with_an_object_in_it():
    with pytest.raises(TypeError, match="not a plain number"):
        plain([1.0, object()])


def _random_value(rng: random.Random, depth: int):
    """A small value, now and then deeper than MAX_DEPTH: one container in a level goes on down."""
    kind = rng.random()
    if depth > MAX_DEPTH + 3 or kind < 0.3:
        return rng.choice([1, 2.5, True, None, "s", Count(1)])
    items = [rng.choice([0.5, 3, False, None, Fraction(2.0)]) for _ in range(rng.randint(0, 3))]
    items.insert(rng.randint(0, len(items)), _random_value(rng, depth + 1))
    if kind < 0.65:
        return items
    if kind < 0.8:
        return Row(items)
    if kind < 0.95:
        return {str(i): v for i, v in enumerate(items)}
    return Table(enumerate(items))


def test_nesting_depth_agrees_with_a_recursive_count_on_random_values():
    rng = random.Random(7)
    for _ in range(2000):
        value = _random_value(rng, 0)
        want = oracle_depth(value)
        assert nesting_depth(value) == (want if want <= MAX_DEPTH else MAX_DEPTH + 1), value


def test_nesting_depth_finds_a_container_after_many_scalars():
    # a row of a thousand numbers with one deep list at its end is not passed over
    row = [0.5] * 1000 + [nested(MAX_DEPTH + 5, 1.0)]
    assert nesting_depth({"result": row}) == MAX_DEPTH + 1
    assert nesting_depth(Row([Table(a=[1])])) == 3


def test_a_tensor_row_with_a_string_or_a_subclass_is_still_looked_at_one_by_one():
    with pytest.raises(Malformed, match=r"values\[1\] is 'x', not a number"):
        check([1.0, "x"], TENSOR_VALUES, "values", "values")
    check([Count(1), Fraction(0.5), True], TENSOR_VALUES, "values")      # numbers all, bools allowed
    with pytest.raises(Malformed, match="not a number"):
        check({"v": [1.0, True]}, Fields({"v": ListOf(Number())}), "v", "")


def test_a_failed_option_reads_as_before_and_pickles_as_its_line():
    schema = Fields({"grads": ListOf(MapOf(OneOf((Null(), TENSOR_VALUES))))})
    with pytest.raises(Malformed) as caught:
        check({"grads": [{"w": "x"}]}, schema, "result", "result")
    assert str(caught.value) == "result: result['grads'][0]['w'] is 'x', not null or a number"
    with pytest.raises(Unfit) as unfit:
        Null().check([1.0], "result['w']")
    assert str(unfit.value) == "result['w'] is a list of 1 items, not null"
    again = pickle.loads(pickle.dumps(unfit.value))
    assert type(again) is Malformed and str(again) == str(unfit.value)


def test_the_board_poll_says_what_its_full_read_says(tmp_path):
    path = str(tmp_path / "board")
    create_board(path, 3)
    boards = [Board(path, 3, r) for r in range(3)]
    tag = 0b111
    assert boards[0].posted((0, 1, 2), tag, 0) == [False, False, False]
    boards[0].post(tag, 0, [5] + [0] * 9)
    boards[2].post(tag, 0, [6] + [0] * 9)
    for board in boards:
        posted = board.posted((0, 1, 2), tag, 0)
        assert posted == board.read((0, 1, 2), tag, 0)[0].tolist() == [True, False, True]
    assert boards[1].posted((0, 1, 2), tag, 1) == [False, False, False]
