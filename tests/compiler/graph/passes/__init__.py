import pytest

pytest.register_assert_rewrite("tests.compiler.graph.passes.graphs")
