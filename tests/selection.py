"""What this run selected: for a fixture that starts a test's work ahead of the test (in a
process or a thread of its own) and must not start work whose test will not run."""

from typing import List


def selected_cases(request, test_name: str) -> List[str]:
    """The ids of the selected cases of `test_name` ('' for a test without parameters)."""
    return [item.callspec.id if hasattr(item, "callspec") else "" for item in request.session.items
            if getattr(item, "originalname", None) == test_name]
