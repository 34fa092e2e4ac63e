"""Every browser test fails on a console error, an uncaught page error, a CSP violation or a 4xx/5xx
response seen during it (tests/support/browser.py watches every page), save what its `provokes` marker
allows: one pattern for each error the test causes on purpose, with a comment saying which.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.browser import SEEN, unallowed

_CHECKED = pytest.StashKey[int]()


def _fail_on_new_problems(item: pytest.Item) -> None:
    start = item.stash.get(_CHECKED, len(SEEN))
    new, item.stash[_CHECKED] = SEEN[start:], len(SEEN)
    found = unallowed(new, [pattern for mark in item.iter_markers("provokes") for pattern in mark.args])
    if found:
        pytest.fail("problems in the browser:\n" + "\n".join(found), pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    item.stash[_CHECKED] = len(SEEN)
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    result = yield
    _fail_on_new_problems(item)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    # After the test's pages are closed: what came between its end and their closing counts too.
    result = yield
    _fail_on_new_problems(item)
    return result
