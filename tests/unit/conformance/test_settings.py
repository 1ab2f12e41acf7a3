"""Settings, on both engines through the interface: defaults, aliases, validation and the rules between
settings, and a stored value broken by hand read as a configuration error."""

import pytest

from queuectl.domain.errors import InvalidConfig, InvalidInput
from support.backdoor import behind_queuectls_back
from support.engines import BOTH_ENGINES

pytestmark = BOTH_ENGINES


def test_settings_defaults_set_and_consistency(store):
    s = store.settings()
    assert (s["max-retries"], s["backoff-base"], s["backoff-max"], s["job-timeout"]) == (3, 2.0, 3600.0, None)
    assert store.set_setting("job_timeout", "2.5") == 2.5
    assert store.set_setting("job-timeout", "none") is None
    with pytest.raises(InvalidInput, match="must exceed 2 x heartbeat-interval"):
        store.set_setting("heartbeat-interval", "20")
    with pytest.raises(InvalidInput, match="unknown config key"):
        store.set_setting("colour", "1")
    with pytest.raises(InvalidInput, match="whole number"):
        store.set_setting("max-retries", "1.5")
    assert store.settings()["heartbeat-interval"] == 5.0


def test_a_stored_setting_broken_by_hand_is_invalid_config(store, db):
    behind_queuectls_back(db, "INSERT INTO config VALUES ('max-retries', '\"lots\"')")
    with pytest.raises(InvalidConfig, match="max-retries"):
        store.settings()
