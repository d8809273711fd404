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
