# A real browser for the tests that read the Airflow UI as a person does (tests/airflow_browser.py):
# Debian's Chromium and its WebDriver. Selenium (requirements.txt) is given the driver's path, so
# nothing is downloaded at test time.
APT_GET := $(if $(filter 0,$(shell id -u)),,sudo )apt-get

TEST_PREREQS += browser

.PHONY: browser

browser:  ## headless Chromium and chromedriver from Debian's packages (for the UI tests)
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
	    $(APT_LOCK) sh -c '$(APT_GET) update -qq && DEBIAN_FRONTEND=noninteractive $(APT_GET) install -y -qq chromium chromium-driver'; }
