"""dpcore/settings.py: what the DPCORE_* variables parse to, and the message a bad one gets."""
import pytest

from dpcore import settings


def test_spin_us_has_a_default_and_takes_microseconds():
    assert settings.load({}).spin_us == settings.Settings().spin_us > 0
    assert settings.load({"DPCORE_SPIN_US": "25"}).spin_us == 25.0
    assert settings.load({"DPCORE_SPIN_US": "0"}).spin_us == 0.0  # sleep after a short spin
    assert settings.load({"DPCORE_SPIN_US": "1e6"}).spin_us == settings.MAX_SPIN_US


@pytest.mark.parametrize("bad", ["fast", "-1", "nan", "inf", "1000001"])
def test_a_bad_spin_us_names_the_variable_and_the_range(bad):
    with pytest.raises(ValueError, match=r"DPCORE_SPIN_US=.*microseconds from 0 to 1000000"):
        settings.load({"DPCORE_SPIN_US": bad})


def test_a_trace_into_a_missing_folder_is_refused_at_init(tmp_path):
    with pytest.raises(ValueError, match="DPCORE_TRACE=.*no-such-folder"):
        settings.load({"DPCORE_TRACE": str(tmp_path / "no-such-folder" / "trace.json")})
    assert settings.load({"DPCORE_TRACE": str(tmp_path / "trace.json")}).trace


def test_a_misspelt_variable_is_warned_about_once():
    with pytest.warns(UserWarning, match="DPCORE_TIMOUT .*DPCORE_TIMEOUT"):
        settings.load({"DPCORE_TIMOUT": "5"})
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        settings.load({"DPCORE_TIMOUT": "5"})  # the second time: nothing
        settings.load({"DPCORE_CUDA": "0", "DPCORE_NATIVE": "1"})  # build switches are known


def test_a_bad_trace_fails_init_not_import(tmp_path):
    from mpi_helpers import run_python

    _, out = run_python(["-c", "import dpcore; print('imported', flush=True); dpcore.init()"],
                        env={"DPCORE_TRACE": str(tmp_path / "no-such-folder" / "t.json")},
                        status=1)
    assert "imported" in out and "DPCORE_TRACE=" in out and "does not exist" in out, out
