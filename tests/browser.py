"""Headless Chromium for the browser tests: the one check that it is there, the one way to
start it, and the waits every page test uses.

Importing this module skips the importing test module (with the command that installs what
is missing) when Debian's chromium / chromium-driver, selenium or uvicorn is not there.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
    pytest.skip(
        f"headless Chromium is not installed ({CHROMIUM}, {CHROMEDRIVER}); "
        "run .ci/install_browser.sh (apt-get install chromium chromium-driver)",
        allow_module_level=True,
    )
pytest.importorskip("selenium", reason="the browser tests need selenium (the 'dev' extra)")
pytest.importorskip("uvicorn", reason="the web table needs the 'web' extra (uvicorn)")

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.remote.webelement import WebElement  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

__all__ = [
    "WAIT_S",
    "By",
    "Keys",
    "Select",
    "WebDriver",
    "WebDriverWait",
    "WebElement",
    "animations_done",
    "new_browser",
    "table_attr",
    "wait",
]

WAIT_S = 15
"""The longest any page wait may take."""


def new_browser(
    width: int, height: int, *, emulate: bool | None = None, hide_scrollbars: bool = False
) -> WebDriver:
    """Headless Chromium with a ``width`` x ``height`` window; with ``emulate`` set, the
    device metrics are overridden to that size (``emulate=True``: as a mobile device)."""
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    args = [
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--disable-extensions",
        "--no-first-run",
    ]
    if hide_scrollbars:
        args.append("--hide-scrollbars")
    args.append(f"--window-size={width},{height}")
    for arg in args:
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(WAIT_S)
    driver.set_script_timeout(WAIT_S)
    if emulate is not None:
        driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": emulate},
        )
    return driver


def wait(driver: WebDriver, what: Callable[[WebDriver], Any], message: str) -> Any:
    """``what(driver)`` once it is truthy, polled for at most :data:`WAIT_S`."""
    return WebDriverWait(driver, WAIT_S, poll_frequency=0.05).until(what, message)


def table_attr(driver: WebDriver, name: str) -> str:
    """The table's ``data-NAME`` attribute ("" when absent)."""
    return driver.find_element(By.ID, "table").get_attribute(f"data-{name}") or ""


def animations_done(driver: WebDriver) -> bool:
    """No CSS animation or transition is running (the cards' short entry animation, ...)."""
    return driver.execute_script(
        "return document.getAnimations().every(a => a.playState !== 'running')"
    )
