"""The netacl console in a real browser (Debian's chromium, headless, through chromedriver and
Selenium), against a running `netacl serve`. Run by crates/cli/tests/console_browser.rs.

Environment: NETACL_BASE (http://127.0.0.1:PORT), NETACL_CLIENT_ID, NETACL_CLIENT_SECRET,
NETACL_READER_ID, NETACL_READER_SECRET (a client holding read:network_acls only),
NETACL_SHOTS (a directory: screenshots of the views for the README, and of the page on failure),
NETACL_BIG_BASE (optional: a server whose tenant holds 10,000 rules, timed).
"""
import json
import os
import sys
import time
import traceback

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

BASE = os.environ["NETACL_BASE"]
SHOTS = os.environ["NETACL_SHOTS"]
MARKUP = '<img src=x onerror="window.__pwned=1"><b>bold</b>'


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = os.environ.get("NETACL_CHROMIUM", "/usr/bin/chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1000", "--no-first-run", "--disable-extensions"):
        options.add_argument(arg)
    service = Service(os.environ.get("NETACL_CHROMEDRIVER", "/usr/bin/chromedriver"))
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_page_load_timeout(30)
    return driver


def wait(driver, condition, seconds=15):
    # The table is redrawn after every change: an element read meanwhile is read again.
    return WebDriverWait(driver, seconds,
                         ignored_exceptions=(StaleElementReferenceException,)).until(condition)


def visible(driver, element_id):
    return wait(driver, EC.visibility_of_element_located((By.ID, element_id)))


def sign_in(driver, base, client_id, secret):
    driver.get(base + "/console")
    visible(driver, "signin")
    user = driver.find_element(By.ID, "client_id")
    password = driver.find_element(By.ID, "client_secret")
    assert user.get_attribute("autocomplete") == "username"
    assert password.get_attribute("autocomplete") == "current-password"
    user.clear()
    user.send_keys(client_id)
    password.send_keys(secret)
    password.send_keys(Keys.ENTER)  # the keyboard submits the form
    # The rules view is the first view after sign-in.
    visible(driver, "rules")
    wait(driver, lambda d: "rules" in d.find_element(By.ID, "rules-count").text)


def row(driver, description):
    for tr in driver.find_elements(By.CSS_SELECTOR, "#rules-body tr"):
        if tr.find_elements(By.CSS_SELECTOR, "td")[1].text == description:
            return tr
    return None


def fill_rule(driver, description, priority, cidrs):
    driver.find_element(By.ID, "new-rule").click()
    visible(driver, "editor")
    driver.find_element(By.ID, "f-description").send_keys(description)
    driver.find_element(By.ID, "f-priority").send_keys(str(priority))
    Select(driver.find_element(By.ID, "f-action")).select_by_value("block")
    Select(driver.find_element(By.ID, "f-scope")).select_by_value("tenant")
    field = driver.find_element(By.ID, "f-match-ipv4_cidrs")
    field.clear()
    field.send_keys(cidrs)
    driver.find_element(By.ID, "save-rule").click()


def try_request(driver, client_ip, expected):
    driver.find_element(By.ID, "nav-try").click()
    visible(driver, "try")
    ip = driver.find_element(By.ID, "t-client_ip")
    ip.clear()
    ip.send_keys(client_ip)
    driver.find_element(By.ID, "try-submit").click()
    # The previous result is cleared on submit: wait for this request's decision.
    wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, "#decision .decision-action").text
         == expected)


def check_console(driver):
    sign_in(driver, BASE, os.environ["NETACL_CLIENT_ID"], os.environ["NETACL_CLIENT_SECRET"])

    # No token or secret in the page's storage or URL.
    storage = driver.execute_script(
        "return JSON.stringify([Object.keys(localStorage), Object.keys(sessionStorage)])")
    assert storage == "[[],[]]", storage
    assert "secret" not in driver.current_url and "token" not in driver.current_url
    # The session cookie is HttpOnly: the page's script cannot read it.
    assert "netacl_console" not in driver.execute_script("return document.cookie")

    # A rule refused by the API: its message shown at the field it names.
    fill_rule(driver, "refused rule", 30, "198.51.100.0/33")
    error = wait(driver, lambda d: d.find_element(
        By.CSS_SELECTOR, '.field-error[data-for="rule.match.ipv4_cidrs"]').text or None)
    assert "ipv4_cidrs[0]" in error, error
    assert driver.find_element(By.ID, "f-match-ipv4_cidrs").get_attribute("aria-invalid") == "true"
    driver.save_screenshot(os.path.join(SHOTS, "console-editor-error.png"))
    driver.find_element(By.ID, "cancel-rule").click()
    visible(driver, "rules")

    # A rule created through the editor, whose description holds markup: shown as text.
    fill_rule(driver, MARKUP, 10, "198.51.100.0/24")
    visible(driver, "rules")
    tr = wait(driver, lambda d: row(d, MARKUP))
    cells = tr.find_elements(By.CSS_SELECTOR, "td")
    assert cells[2].text == "block", cells[2].text
    assert not tr.find_elements(By.CSS_SELECTOR, "img, b"), "markup was rendered"
    assert driver.execute_script("return window.__pwned === undefined")

    # It decides a tried request, and is highlighted in the table.
    try_request(driver, "198.51.100.7", "block")
    tr = wait(driver, lambda d: row(d, MARKUP))
    assert "deciding" in tr.get_attribute("class"), tr.get_attribute("class")
    driver.save_screenshot(os.path.join(SHOTS, "console-try.png"))

    # Toggled off, it no longer decides.
    box = tr.find_element(By.CSS_SELECTOR, "input[type=checkbox]")
    assert box.is_selected()
    box.click()
    def toggled_off(d):
        tr = row(d, MARKUP)
        return tr is not None and not tr.find_element(
            By.CSS_SELECTOR, "input[type=checkbox]").is_selected()
    wait(driver, toggled_off)
    try_request(driver, "198.51.100.7", "none")

    # Filtering.
    driver.find_element(By.ID, "nav-rules").click()
    flt = driver.find_element(By.ID, "rule-filter")
    flt.send_keys("no rule has this text")
    wait(driver, lambda d: d.find_element(By.ID, "rules-count").text.startswith("0 of"))
    flt.clear()
    flt.send_keys(Keys.SPACE, Keys.BACK_SPACE)
    wait(driver, lambda d: row(d, MARKUP) is not None)
    driver.save_screenshot(os.path.join(SHOTS, "console-rules.png"))

    # Signing out leaves nothing usable.
    driver.find_element(By.ID, "sign-out").click()
    visible(driver, "signin")
    driver.get(BASE + "/console")
    visible(driver, "signin")

    # A read-only client: no editor, toggles disabled.
    sign_in(driver, BASE, os.environ["NETACL_READER_ID"], os.environ["NETACL_READER_SECRET"])
    assert "read only" in driver.find_element(By.ID, "who").text
    assert not driver.find_element(By.ID, "new-rule").is_displayed()
    tr = wait(driver, lambda d: row(d, MARKUP))
    assert not tr.find_element(By.CSS_SELECTOR, "input[type=checkbox]").is_enabled()
    driver.find_element(By.ID, "sign-out").click()
    visible(driver, "signin")

    # A wrong secret is refused with a message.
    driver.find_element(By.ID, "client_id").send_keys(os.environ["NETACL_CLIENT_ID"])
    driver.find_element(By.ID, "client_secret").send_keys("wrong" + Keys.ENTER)
    wait(driver, lambda d: d.find_element(By.ID, "signin-error").text != "")
    assert driver.find_element(By.ID, "signin").is_displayed()


def check_big(driver, base):
    """The rules view of a 10,000-rule tenant: time from navigation to a rendered table."""
    driver.get(base + "/console")
    visible(driver, "signin")
    driver.find_element(By.ID, "client_id").send_keys(os.environ["NETACL_CLIENT_ID"])
    driver.find_element(By.ID, "client_secret").send_keys(os.environ["NETACL_CLIENT_SECRET"])
    driver.find_element(By.ID, "client_secret").send_keys(Keys.ENTER)
    visible(driver, "rules")
    wait(driver, lambda d: "rules" in d.find_element(By.ID, "rules-count").text, 60)
    # Now the measured part: a reload of the signed-in console until the table is interactive.
    start = time.monotonic()
    driver.get(base + "/console")
    wait(driver, lambda d: d.find_element(By.ID, "rules-count").text.endswith(" rules")
         and len(d.find_elements(By.CSS_SELECTOR, "#rules-body tr")) > 0, 60)
    flt = driver.find_element(By.ID, "rule-filter")
    flt.send_keys("x")
    wait(driver, lambda d: d.find_element(By.ID, "rules-count").text != "", 60)
    elapsed = time.monotonic() - start
    count = driver.find_element(By.ID, "rules-count").text
    print(json.dumps({"big_rules_view_seconds": round(elapsed, 3), "count": count}))


def main():
    driver = browser()
    try:
        check_console(driver)
        if os.environ.get("NETACL_BIG_BASE"):
            check_big(driver, os.environ["NETACL_BIG_BASE"])
    except Exception:
        traceback.print_exc()
        path = os.path.join(SHOTS, "failure.png")
        try:
            driver.save_screenshot(path)
            print("screenshot of the failure: " + path, file=sys.stderr)
        except Exception:
            pass
        sys.exit(1)
    finally:
        driver.quit()
    print("console: all checks passed")


if __name__ == "__main__":
    main()
