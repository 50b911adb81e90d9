"""The Airflow UI as a person sees it: headless Chromium (Debian's chromium and chromium-driver, installed
by ``make browser``) driven by Selenium, logged in with the password Airflow generated.

Airflow 3's UI is a React app (Chakra UI): its elements are found by what a person reads (button
text, aria labels, field labels) and the few stable names it gives (``dagRunId``, ``data-testid``),
never by its generated ids.
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
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

    def trigger(
        self,
        dag_id: str,
        params: dict[str, str | datetime],
        screenshot: Path,
        run_id: str | None = None,
    ) -> dict:
        """A single run from the Trigger dialog: each param typed into its field (found by the param's
        title), the Run ID under Advanced Options; the run's configuration as the dialog showed it
        just before the Trigger button was pressed."""
        from selenium.webdriver.common.by import By

        dialog = self._open_trigger_dialog(dag_id)
        for title, value in params.items():
            self._set_field(dialog, title, value)
        dialog.find_element(By.XPATH, ".//button[normalize-space()='Advanced Options']").click()
        if run_id:
            dialog.find_element(By.NAME, "dagRunId").send_keys(run_id)
        # The Configuration JSON editor (Monaco) mirrors the params: what the run will get. It
        # renders its lines after it appears (an empty editor was read once).
        lines = ".monaco-editor .view-lines"
        self._wait(
            lambda d: any(e.text.strip() for e in dialog.find_elements(By.CSS_SELECTOR, lines))
        )
        conf = json.loads(
            dialog.find_element(By.CSS_SELECTOR, lines).text.replace("\N{NO-BREAK SPACE}", " ")
        )
        self.driver.save_screenshot(str(screenshot))
        self._press(dialog, "Trigger")
        return conf

    def backfill(
        self, dag_id: str, first: datetime, last: datetime, reprocess: str, screenshot: Path
    ) -> str:
        """A backfill from the Trigger dialog's Backfill choice: its date range (logical dates
        ``first`` to ``last``), the reprocess behaviour by its label (e.g. "All Runs"); what the
        dialog said it would run, read before "Run Backfill" was pressed."""
        from selenium.webdriver.common.by import By

        dialog = self._open_trigger_dialog(dag_id)
        dialog.find_element(
            By.XPATH, ".//label[.//input[@type='radio' and @value='backfill']]"
        ).click()
        self._wait(
            lambda d: dialog.find_elements(By.XPATH, ".//button[normalize-space()='Run Backfill']")
        )
        # The behaviour first: the count of runs the dialog shows is asked for once both dates are
        # set, and a change of behaviour after that would leave the old count in view a moment.
        dialog.find_element(
            By.XPATH, f".//label[.//input[@type='radio']][normalize-space()='{reprocess}']"
        ).click()
        for label, moment in (("From", first), ("To", last)):
            picker = dialog.find_element(
                By.XPATH,
                f".//*[normalize-space(text())='{label}']/following::*[@data-testid='datetime-input'][1]",
            )
            self._pick_datetime(picker, moment)
        # The dialog asks the API how many runs the range makes ("N runs will be triggered").
        self._wait(lambda d: "will be triggered" in dialog.text)
        said = next(line for line in dialog.text.splitlines() if "will be triggered" in line)
        self.driver.save_screenshot(str(screenshot))
        self._press(dialog, "Run Backfill")
        return said

    def assets(self, expected: int, screenshot: Path) -> dict[str, str]:
        """The Assets page once it lists ``expected`` assets: name -> its "Last Asset Event" cell."""
        from selenium.webdriver.common.by import By

        self.driver.get(f"{self.base_url}/assets")
        cells = "td[data-testid='table-cell-name'] a"
        try:
            # The rows come in one response from the API, each with its last event.
            self._wait(lambda d: len(d.find_elements(By.CSS_SELECTOR, cells)) >= expected)
        finally:
            self.driver.save_screenshot(str(screenshot))
        rows = {}
        for row in self.driver.find_elements(By.CSS_SELECTOR, "tbody tr"):
            name = row.find_element(By.CSS_SELECTOR, cells).text
            event = row.find_element(
                By.CSS_SELECTOR, "td[data-testid='table-cell-last_asset_event']"
            )
            rows[name] = event.text
        return rows

    def _open_trigger_dialog(self, dag_id: str):
        from selenium.webdriver.common.by import By

        self.driver.get(f"{self.base_url}/dags/{dag_id}")
        button = "button[aria-label='Trigger Dag']"
        self._wait(lambda d: d.find_elements(By.CSS_SELECTOR, button))
        self.driver.find_element(By.CSS_SELECTOR, button).click()
        heading = f"Trigger Dag - {dag_id}"
        self._wait(
            lambda d: any(
                heading in e.text for e in d.find_elements(By.CSS_SELECTOR, "[role=dialog]")
            )
        )
        return next(
            e
            for e in self.driver.find_elements(By.CSS_SELECTOR, "[role=dialog]")
            if heading in e.text
        )

    def _set_field(self, dialog, title: str, value: str | datetime) -> None:
        """A Run Parameters field, found by its label (the param's title): a date-time picker, a
        choice (react-select: typed, then Enter) or a text input."""
        from selenium.webdriver.common.by import By
        from selenium.webdriver.common.keys import Keys

        field = dialog.find_element(
            By.XPATH, f".//label[normalize-space()='{title}']/ancestor::*[@data-part='root'][1]"
        )
        pickers = field.find_elements(By.CSS_SELECTOR, "[data-testid=datetime-input]")
        if pickers:
            self._pick_datetime(pickers[0], value)
            return
        box = field.find_element(By.CSS_SELECTOR, "input[type=text]")
        if box.get_attribute("role") == "combobox":
            box.send_keys(str(value))
            box.send_keys(Keys.ENTER)
            self._wait(
                lambda d: (
                    field.find_element(By.CSS_SELECTOR, "input[type=hidden]").get_attribute("value")
                    == str(value)
                )
            )
        else:
            box.send_keys(Keys.CONTROL, "a")
            box.send_keys(str(value))

    def _pick_datetime(self, picker, moment: datetime) -> None:
        """A date-time picker (a popover with a date and a time box, in UTC as the UI is set)."""
        from selenium.webdriver.common.by import By
        from selenium.webdriver.common.keys import Keys

        moment = moment.astimezone(UTC)
        picker.click()

        def popover(d):
            shown = [
                p
                for p in d.find_elements(By.CSS_SELECTOR, "[data-scope=popover][data-part=content]")
                if p.is_displayed()
                and p.find_elements(By.CSS_SELECTOR, "input[placeholder='HH:mm']")
            ]
            return shown[-1] if shown else None

        self._wait(popover)
        content = popover(self.driver)
        for placeholder, text in (
            ("YYYY/MM/DD", f"{moment:%Y/%m/%d}"),
            ("HH:mm", f"{moment:%H:%M}"),
        ):
            box = content.find_element(By.CSS_SELECTOR, f"input[placeholder='{placeholder}']")
            box.send_keys(Keys.CONTROL, "a")  # the time box fills itself in once a date is typed
            box.send_keys(text)
        box.send_keys(Keys.ESCAPE)
        shown = f"{moment:%b} {moment.day}, {moment:%Y %H:%M}"  # e.g. "Nov 20, 2026 01:00"
        self._wait(lambda d: shown in picker.text)

    def _press(self, dialog, text: str) -> None:
        """Press the dialog's button ``text`` and wait for the dialog to close."""
        from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
        from selenium.webdriver.common.by import By

        dialog.find_element(By.XPATH, f".//button[normalize-space()='{text}']").click()

        def closed(_) -> bool:
            try:
                return not dialog.is_displayed()
            except StaleElementReferenceException:  # removed from the page
                return True

        try:
            self._wait(closed)
        except TimeoutException:
            # An error the API returned (a run id taken, a backfill refused) shows in the dialog.
            raise AssertionError(
                f"{text!r}: the dialog stayed open, saying:\n{dialog.text}"
            ) from None

    def _wait(self, condition, timeout: float = 30) -> None:
        from selenium.webdriver.support.ui import WebDriverWait

        WebDriverWait(self.driver, timeout).until(condition)
