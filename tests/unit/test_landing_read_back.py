"""What bronze read of a file still being written, from its rows: the prefix of the file."""

from __future__ import annotations

from lakehouse.landing.read_back import prefix_read


def test_rows_that_are_the_files_first_lines_give_the_bytes_read():
    data = b"one\ntwo\r\nthree\rfour"
    assert prefix_read([b"one", b"two", b"three", b"four"], data) == len(data)  # read whole
    assert prefix_read([b"two", b"one"], data) == len(b"one\ntwo\r\n")  # rows in any order
    assert prefix_read([b"one", b"tw"], data) == len(b"one\ntw")  # a line cut mid-write
    assert prefix_read([], data) == 0  # listed while still empty
    assert prefix_read([b"", b"a"], b"\na\n") == 3  # empty lines are lines


def test_rows_that_are_not_the_files_first_lines_are_a_rewrite():
    data = b"one\ntwo\n"
    assert prefix_read([b"one", b"TWO"], data) is None
    assert prefix_read([b"one", b"two", b"three"], data) is None  # more read than there is now
    assert prefix_read([b"two"], data) is None  # not a prefix
    assert prefix_read([b"one", b"twox"], data) is None  # longer than the line now
