"""The skip contract of tests/conftest.py: pytest exits 77 (CTest's SKIP_RETURN_CODE) only when
every test skipped; a failure next to a skip keeps the failing status."""
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def run_pytest(tmp_path, body):
    (tmp_path / "conftest.py").write_text((HERE / "conftest.py").read_text())
    (tmp_path / "test_case.py").write_text("import pytest\n\n" + body)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                          capture_output=True, text=True, cwd=tmp_path).returncode


def test_all_skipped_exits_77(tmp_path):
    assert run_pytest(tmp_path, "def test_a():\n    pytest.skip('no GPU')\n") == 77


def test_a_failure_beside_a_skip_is_a_failure(tmp_path):
    body = "def test_a():\n    pytest.skip('no GPU')\n\ndef test_b():\n    assert False\n"
    assert run_pytest(tmp_path, body) == 1


def test_a_pass_beside_a_skip_is_a_pass(tmp_path):
    body = "def test_a():\n    pytest.skip('no GPU')\n\ndef test_b():\n    pass\n"
    assert run_pytest(tmp_path, body) == 0
