import pytest

from queuectl.domain.backoff import backoff_delay


@pytest.mark.parametrize(
    "attempts, base, cap, expected",
    [
        (0, 2, 3600, 1.0),
        (1, 2, 3600, 2.0),
        (3, 2, 3600, 8.0),
        (11, 2, 3600, 2048.0),
        (12, 2, 3600, 3600.0),  # 4096 capped
        (5, 1, 3600, 1.0),  # base 1: a constant one second
        (3, 1.5, 100, 3.375),
        (4, 3, 10, 10.0),
        (2, 2, 0, 0.0),
        (1, 1, 0, 0.0),
    ],
)
def test_delay_is_base_to_the_attempts_capped(attempts, base, cap, expected):
    assert backoff_delay(attempts, base, cap) == pytest.approx(expected)


@pytest.mark.parametrize("attempts", [1024, 10**6, 10**100, 10**400])
def test_huge_attempts_return_the_cap_without_overflow(attempts):
    assert backoff_delay(attempts, 2, 3600) == 3600.0


@pytest.mark.parametrize("attempts", [10**100, 10**400])
def test_huge_attempts_with_a_base_near_one_reach_the_cap(attempts):
    assert backoff_delay(attempts, 1.0000001, 60) == 60.0
    assert backoff_delay(10**6, 1.0000001, 60) == pytest.approx(1.10517, rel=1e-5)  # e ** 0.1


def test_tiny_base_grows_slowly_and_exactly():
    assert backoff_delay(10, 1.01, 3600) == pytest.approx(1.01**10)


@pytest.mark.parametrize("args", [(-1, 2, 10), (1, 0.5, 10), (1, 2, -1)])
def test_bad_arguments_raise(args):
    with pytest.raises(ValueError):
        backoff_delay(*args)
