"""The Airflow UI as a person sees it: headless Chromium (Debian's chromium and chromium-driver, installed
by ``make browser``) driven by Selenium, logged in with the password Airflow generated."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from urllib.parse import quote


class AirflowBrowser:
    def __init__(self, base_url: str, airflow_home: Path):
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        driver_path = shutil.which("chromedriver")
        assert driver_path, (
            "no chromedriver on PATH: run `make browser` (Debian's chromium and chromium-driver)"
        )
        options = webdriver.ChromeOptions()
        for argument in (
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--window-size=1400,1000",
        ):
            options.add_argument(argument)
        # The driver path is given: Selenium Manager would try to download a driver from the internet.
        self.driver = webdriver.Chrome(service=Service(driver_path), options=options)
        self.base_url = base_url
        self.airflow_home = airflow_home

    def __enter__(self) -> AirflowBrowser:
        return self

    def __exit__(self, *exc) -> None:
        self.driver.quit()

    def log_in(self, user: str = "admin") -> None:
        """The login form, with the password the simple auth manager generated into AIRFLOW_HOME."""
        from selenium.webdriver.common.by import By

        password = json.loads(
            (self.airflow_home / "simple_auth_manager_passwords.json.generated").read_text()
        )[user]
        self.driver.get(self.base_url + "/")
        self._wait(lambda d: d.find_elements(By.NAME, "username"))
        self.driver.find_element(By.NAME, "username").send_keys(user)
        self.driver.find_element(By.NAME, "password").send_keys(password)
        self.driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        self._wait(lambda d: "/auth/login" not in d.current_url)

    def task_log_text(
        self, dag_id: str, run_id: str, task_id: str, expected: str, screenshot: Path
    ) -> str:
        """The page of a task instance's log once ``expected`` shows; a screenshot is kept for a person."""
        from selenium.webdriver.common.by import By

        self.driver.get(
            f"{self.base_url}/dags/{dag_id}/runs/{quote(run_id, safe='')}/tasks/{task_id}"
        )
        try:
            self._wait(lambda d: expected in d.find_element(By.TAG_NAME, "body").text, timeout=60)
        finally:
            self.driver.save_screenshot(str(screenshot))
        return self.driver.find_element(By.TAG_NAME, "body").text

    def _wait(self, condition, timeout: float = 30) -> None:
        from selenium.webdriver.support.ui import WebDriverWait

        WebDriverWait(self.driver, timeout).until(condition)
