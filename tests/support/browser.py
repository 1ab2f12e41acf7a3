"""A real browser for tests: Debian's chromium, headless, driven by Selenium through Debian's chromedriver
(`apt-get install chromium chromium-driver`; selenium comes from the venv's test extra).

Selenium never fetches anything: both paths are given (Service(executable_path=...), binary_location) and
SE_OFFLINE=true keeps Selenium Manager from the network. The browser runs with a fixed window size and
without its background traffic (updates, safe browsing), so that a run is the same on every machine.

Signing in: `sign_in` sends an Authorization header with every request through the DevTools protocol
(Network.setExtraHTTPHeaders). URL credentials (http://user:pass@host/) are not used: chromium then keeps
the user and password in the page's address, and a script's fetch() of an address resolved against it
is refused ("Request cannot be constructed from a URL that includes credentials"); a real browser that
signed in through its own prompt sends the header the same way this does.

Each page a test visits through `visit` is saved as a screenshot in the run's artefacts directory
(`artifacts_dir`): $QUEUECTL_TEST_ARTIFACTS, else `browser-artifacts` under pytest's base temporary
directory; the session prints where.
"""

from __future__ import annotations

import base64
import os
import re
from pathlib import Path

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
#: The window's size in pixels: the screenshots, and what fits on screen, are the same on every run.
WINDOW = (1280, 900)
ARGUMENTS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-dev-shm-usage", "--no-first-run",
             "--disable-default-apps", "--disable-sync", "--password-store=basic", "--mute-audio")


def missing() -> str | None:
    """Why a Browser cannot run here (no chromium, no chromedriver, no selenium), or None."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.access(path, os.X_OK):
            return f"{path} is missing (apt-get install chromium chromium-driver)"
    import importlib.util

    if importlib.util.find_spec("selenium") is None:
        return "selenium is not installed (pip install -e '.[test]')"
    return None


def artifacts_dir(base: Path) -> Path:
    """The directory the run's screenshots go to: $QUEUECTL_TEST_ARTIFACTS, else `base`/browser-artifacts."""
    path = Path(os.environ.get("QUEUECTL_TEST_ARTIFACTS") or base / "browser-artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


class Browser:
    """A headless chromium (see the module's docstring); `driver` is Selenium's WebDriver, `close` quits it.
    Screenshots go to `shots`, each named by the test's `name` and a counter; `arguments` are chromium's own
    beyond ARGUMENTS (e.g. --host-resolver-rules: names that resolve to this host, with no DNS)."""

    def __init__(self, shots: Path, name: str, arguments: tuple[str, ...] = ()):
        os.environ["SE_OFFLINE"] = "true"  # Selenium Manager: never download a driver or a browser
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for argument in (*ARGUMENTS, *arguments):
            options.add_argument(argument)
        options.add_argument(f"--window-size={WINDOW[0]},{WINDOW[1]}")
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        self.driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
        self.driver.set_page_load_timeout(30)
        self.shots = shots
        self.name = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:120]
        self.count = 0

    def sign_in(self, user: str, password: str) -> None:
        """Send `user`'s Basic credentials with every request from now on."""
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        self.driver.execute_cdp_cmd("Network.enable", {})
        self.driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {"Authorization": f"Basic {token}"}})

    def visit(self, url: str, what: str | None = None) -> None:
        """Load `url` and save a screenshot of it (`what` names it, else the address's path)."""
        self.driver.get(url)
        self.screenshot(what or url.split("//", 1)[-1].split("/", 1)[-1] or "root")

    def screenshot(self, what: str) -> Path:
        """Save the page as it is now as PNG; return the file's path."""
        self.count += 1
        path = self.shots / f"{self.name}-{self.count:02d}-{re.sub(r'[^A-Za-z0-9_.-]+', '_', what)[:60]}.png"
        self.driver.save_screenshot(str(path))
        return path

    def wait(self, condition, timeout: float = 20.0, message: str = ""):
        """Wait until `condition(driver)` is truthy and return its value; fail saying `message` after `timeout` s."""
        from selenium.webdriver.support.ui import WebDriverWait

        return WebDriverWait(self.driver, timeout, poll_frequency=0.1).until(condition, message)

    def console(self) -> list[dict]:
        """The browser console's entries since the last call."""
        return self.driver.get_log("browser")

    def close(self) -> None:
        """Quit the browser and its driver."""
        self.driver.quit()

