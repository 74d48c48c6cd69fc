"""Reading UPDATE and DELETE statements aimed at hudilite tables (no Spark)."""

import pytest

from dbt.adapters.hudilite.sql.dml import parse_delete, parse_update, split_top_level


def test_update_assignments_and_where():
    sql = "update s.added set some_date = some_date + interval 1 hour where id > 10 and id < 21"
    assert parse_update(sql) == ({"some_date": "some_date + interval 1 hour"}, "id > 10 and id < 21")


def test_commas_and_keywords_inside_quotes_or_parentheses_do_not_split():
    sql = "UPDATE `s`.`t` SET name = concat(name, ', where x'), t.y = (a, b) WHERE id < 11;"
    assert parse_update(sql) == ({"name": "concat(name, ', where x')", "y": "(a, b)"}, "id < 11")
    assert split_top_level("a = 'nowhere' or somewhere_else = 1", "where") == ["a = 'nowhere' or somewhere_else = 1"]


def test_update_without_where_and_bad_assignments():
    assert parse_update("update s.t set a = 1") == ({"a": "1"}, None)
    with pytest.raises(ValueError, match="`a` is not `column = value`"):
        parse_update("update s.t set a")


def test_delete():
    assert parse_delete("delete from s.t where x = 1") == "x = 1"
    assert parse_delete("DELETE FROM s.t") is None


def test_comments_anywhere_outside_quotes_are_not_part_of_the_statement():
    from dbt.adapters.hudilite.sql.dml import strip_comments

    sql = "-- insert two rows\n/* and a block */\n  update /* x */ s.t set a = '--not a comment' -- tail\n where b = 1"
    assert " ".join(strip_comments(sql).split()) == "update s.t set a = '--not a comment' where b = 1"
    assert parse_update(sql) == ({"a": "'--not a comment'"}, "b = 1")


def test_any_target_spelling_and_an_alias():
    assert parse_update("update spark_catalog.s.`9 t` as x set x.a = 1 where x.b = 2") == ({"a": "1"}, "x.b = 2")
    assert parse_update("update t x set a = 1") == ({"a": "1"}, None)
    assert parse_delete("delete from 9t where a = 1") == "a = 1"
    assert parse_delete("delete from `s`.`t` as d where d.a = 1") == "d.a = 1"


def test_a_condition_never_grows_past_what_spark_reads():
    assert parse_delete("delete from s.t where id = 1 /* a /* b */ or true -- */") == "id = 1"
    assert parse_update("update s.t set v = 0 where id = 1 /* x /* y */ or true -- */") == ({"v": "0"}, "id = 1")
    assert parse_delete("delete from s.t where id = 1 -- note \\\nor true") == "id = 1"
