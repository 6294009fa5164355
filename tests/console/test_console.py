"""The netacl console in a real browser (Debian's chromium, headless, through chromedriver and
Selenium), against a running `netacl serve`. Run by crates/cli/tests/console_browser.rs.

Environment: NETACL_BASE (http://127.0.0.1:PORT), NETACL_CLIENT_ID, NETACL_CLIENT_SECRET,
NETACL_READER_ID, NETACL_READER_SECRET (a client holding read:network_acls only),
NETACL_SHOTS (a directory: screenshots of the views for the README, and of the page on failure),
NETACL_BIG_BASE (optional: a server whose tenant holds 10,000 rules, timed).

Prints one JSON line for the 10,000-rule timing ({"big_rules_view": ...}) read from the page's
Performance API (navigation start to the table drawn, the filter's answer to the next frame).
"""
import json
import os
import sys
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


def versions(driver):
    """The version numbers listed in the history view, newest first."""
    return [int(tr.get_attribute("data-version"))
            for tr in driver.find_elements(By.CSS_SELECTOR, "#history-body tr[data-version]")]


def history_row(driver, version):
    return driver.find_element(By.CSS_SELECTOR, '#history-body tr[data-version="%d"]' % version)


def open_history(driver):
    driver.find_element(By.ID, "nav-history").click()
    visible(driver, "history")
    wait(driver, lambda d: len(versions(d)) > 0)


def write_elsewhere(driver, body):
    """A write by another party meanwhile (the session's own credentials, from outside the
    console's script): POST /api/v2/network-acls; returns the status."""
    return driver.execute_async_script("""
        const [body, done] = arguments;
        fetch("/console/session").then((r) => r.json()).then((s) =>
          fetch("/console/api/api/v2/network-acls", {method: "POST", body: JSON.stringify(body),
            headers: {"Content-Type": "application/json", "X-CSRF-Token": s.csrf_token}}))
          .then((r) => done(r.status), (e) => done(String(e)));
    """, body)


def check_history_and_rollback(driver):
    """The toggle just made: its diff in the history, a stale rollback refused, then rolled back."""
    open_history(driver)
    listed = versions(driver)
    toggled, created = listed[0], listed[1]
    entry = history_row(driver, toggled).text
    assert "update network acl" in entry and os.environ["NETACL_CLIENT_ID"] in entry, entry
    # The current version has no rollback button; older ones have.
    assert not history_row(driver, toggled).find_elements(By.CSS_SELECTOR, "button.rollback")
    history_row(driver, toggled).find_element(By.CSS_SELECTOR, "button.diff").click()
    wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#history-diff table.fields td"))
    cells = [td.text for td in driver.find_elements(By.CSS_SELECTOR, "#history-diff table.fields td")]
    assert cells == ["active", "true", "false"], cells
    assert not driver.find_elements(By.CSS_SELECTOR, "#history-diff img, #history-diff b")

    # Rollback to the version that created the rule: the confirmation names it and the change.
    history_row(driver, created).find_element(By.CSS_SELECTOR, "button.rollback").click()
    visible(driver, "rollback-confirm")
    assert str(created) in driver.find_element(By.ID, "rollback-title").text
    plan = driver.find_element(By.ID, "rollback-plan").text
    assert "Reverted" in plan and "active" in plan, plan
    # Someone else writes meanwhile: the rollback the operator confirms is stale (409).
    status = write_elsewhere(driver, {"description": "made elsewhere", "active": True, "priority": 40,
                                      "rule": {"action": {"log": True}, "scope": "tenant",
                                               "match": {"geo_country_codes": ["FR"]}}})
    assert status == 201, status
    driver.find_element(By.ID, "rollback-go").click()
    stale = wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, "#rollback-result .stale"))
    assert "changed since" in stale.text and str(toggled) in stale.text, stale.text
    # Nothing changed: offered to reload, the other write is listed.
    driver.find_element(By.ID, "history-reload").click()
    wait(driver, lambda d: versions(d) and versions(d)[0] == toggled + 1)

    # Confirmed against the version now listed: the rule comes back active, the other write goes.
    history_row(driver, created).find_element(By.CSS_SELECTOR, "button.rollback").click()
    visible(driver, "rollback-confirm")
    plan = driver.find_element(By.ID, "rollback-plan").text
    assert "Deleted (created since)" in plan and "made elsewhere" in plan, plan
    driver.save_screenshot(os.path.join(SHOTS, "console-history.png"))
    driver.find_element(By.ID, "rollback-go").click()
    done = wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, "#rollback-result .ok"))
    assert "version %d" % (toggled + 2) in done.text, done.text
    wait(driver, lambda d: versions(d)[0] == toggled + 2)
    driver.find_element(By.ID, "nav-rules").click()
    visible(driver, "rules")
    wait(driver, lambda d: row(d, MARKUP) is not None and row(d, MARKUP).find_element(
        By.CSS_SELECTOR, "input[type=checkbox]").is_selected() and row(d, "made elsewhere") is None)
    try_request(driver, "198.51.100.7", "block")


def check_findings(driver):
    """A rule shadowed by the restored one: its finding shown at save and on its row."""
    fill_rule(driver, "shadowed rule", 20, "198.51.100.0/25")
    note = wait(driver, lambda d: d.find_element(By.ID, "editor-findings").text or None)
    assert "shadowed by" in note, note
    driver.find_element(By.ID, "cancel-rule").click()
    visible(driver, "rules")
    def finding(d):
        tr = row(d, "shadowed rule")
        cells = tr and tr.find_elements(By.CSS_SELECTOR, "td.findings .finding-shadowed")
        return cells[0] if cells else None
    cell = wait(driver, finding)
    assert cell.text.startswith("shadowed by"), cell.text
    marked = row(driver, MARKUP).get_attribute("data-id")
    link = cell.find_element(By.CSS_SELECTOR, "button.link")
    assert link.get_attribute("data-jump") == marked
    assert "1 finding" in driver.find_element(By.ID, "analysis-note").text
    driver.save_screenshot(os.path.join(SHOTS, "console-findings.png"))
    link.click()
    wait(driver, lambda d: "jumped" in row(d, MARKUP).get_attribute("class"))


def check_preview(driver):
    """A new rule's impact over pasted requests; a proposed rule refused at its field."""
    driver.find_element(By.ID, "nav-rules").click()
    driver.find_element(By.ID, "new-rule").click()
    visible(driver, "editor")
    driver.find_element(By.ID, "f-description").send_keys("preview rule")
    driver.find_element(By.ID, "f-priority").send_keys("5")
    Select(driver.find_element(By.ID, "f-action")).select_by_value("block")
    cidrs = driver.find_element(By.ID, "f-match-ipv4_cidrs")
    cidrs.send_keys("203.0.113.0/24")
    driver.find_element(By.ID, "preview-requests").send_keys(
        '{"client_ip": "203.0.113.9"}\n{"client_ip": "192.0.2.1"}\n{"client_ip": "198.51.100.7"}')
    driver.find_element(By.ID, "preview-rule").click()
    wait(driver, lambda d: d.find_elements(By.ID, "preview-summary"))
    assert driver.find_element(By.CSS_SELECTOR, "#preview-summary .preview-requests").text == "3"
    assert driver.find_element(By.CSS_SELECTOR, "#preview-summary .preview-changed").text == "1"
    transitions = driver.find_element(By.CSS_SELECTOR, "#preview-result ul.transitions").text
    assert transitions == "none → block: 1", transitions
    assert driver.find_elements(By.CSS_SELECTOR, "#preview-result svg.impact-chart rect.gained")
    examples = driver.find_element(By.CSS_SELECTOR, "#preview-result ul.examples").text
    assert "203.0.113.9" in examples and "192.0.2.1" not in examples, examples
    driver.save_screenshot(os.path.join(SHOTS, "console-preview.png"))
    # An invalid proposed rule: the API's message (path prefixed) at the field it names.
    cidrs.clear()
    cidrs.send_keys("203.0.113.0/33")
    driver.find_element(By.ID, "preview-rule").click()
    error = wait(driver, lambda d: d.find_element(
        By.CSS_SELECTOR, '.field-error[data-for="rule.match.ipv4_cidrs"]').text or None)
    assert "changes[0].network_acl.rule.match.ipv4_cidrs[0]" in error, error
    assert not driver.find_elements(By.ID, "preview-summary")
    driver.find_element(By.ID, "cancel-rule").click()
    visible(driver, "rules")
    assert row(driver, "preview rule") is None  # a preview saves nothing


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

    check_history_and_rollback(driver)
    check_findings(driver)
    check_preview(driver)

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
    # The history without rollback (the API's 403 would still be shown).
    open_history(driver)
    assert not driver.find_elements(By.CSS_SELECTOR, "#history-body button.rollback")
    assert driver.find_elements(By.CSS_SELECTOR, "#history-body button.diff")
    driver.find_element(By.ID, "sign-out").click()
    visible(driver, "signin")

    # A wrong secret is refused with a message.
    driver.find_element(By.ID, "client_id").send_keys(os.environ["NETACL_CLIENT_ID"])
    driver.find_element(By.ID, "client_secret").send_keys("wrong" + Keys.ENTER)
    wait(driver, lambda d: d.find_element(By.ID, "signin-error").text != "")
    assert driver.find_element(By.ID, "signin").is_displayed()


def check_big(driver, base):
    """The rules view of a 10,000-rule tenant, timed by the page's Performance API: from the
    navigation's start to the table drawn (the mark the console sets after drawing the loaded
    rules), then a filter keystroke's answer to the next frame. Printed, not asserted."""
    driver.get(base + "/console")
    visible(driver, "signin")
    driver.find_element(By.ID, "client_id").send_keys(os.environ["NETACL_CLIENT_ID"])
    driver.find_element(By.ID, "client_secret").send_keys(os.environ["NETACL_CLIENT_SECRET"])
    driver.find_element(By.ID, "client_secret").send_keys(Keys.ENTER)
    visible(driver, "rules")
    wait(driver, lambda d: d.find_element(By.ID, "rules-count").text == "10000 of 10000 rules", 60)
    # The analysis refuses a set this large: said so, not an error, and the table is drawn.
    note = wait(driver, lambda d: "not available" in d.find_element(By.ID, "analysis-note").text
                and d.find_element(By.ID, "analysis-note").text, 60)
    assert "10000 rules" in note, note
    assert driver.find_element(By.ID, "rules-error").text == ""
    assert len(driver.find_elements(By.CSS_SELECTOR, "#rules-body tr")) == 500
    # Now the measured part: a reload of the signed-in console until the table is interactive.
    driver.get(base + "/console")
    wait(driver, lambda d: d.execute_script(
        'return performance.getEntriesByName("console:rules-drawn").length') > 0, 60)
    drawn_ms = driver.execute_script(
        'return performance.getEntriesByName("console:rules-drawn")[0].startTime')
    assert driver.find_element(By.ID, "rules-count").text == "10000 of 10000 rules"
    filter_ms = driver.execute_async_script("""
        const done = arguments[0];
        const filter = document.getElementById("rule-filter");
        const start = performance.now();
        filter.value = "rule 9999:";
        filter.dispatchEvent(new Event("input"));
        requestAnimationFrame(() => setTimeout(() => done(performance.now() - start), 0));
    """)
    assert driver.find_element(By.ID, "rules-count").text == "1 of 10000 rules"
    weight = driver.execute_script("""
        const nav = performance.getEntriesByType("navigation")[0];
        const assets = performance.getEntriesByType("resource")
          .filter((e) => e.name.includes("/console/assets/"));
        const watch = performance.getEntriesByType("resource")
          .filter((e) => e.name.includes("/network-acls/watch"));
        return {page_bytes: nav.decodedBodySize + assets.reduce((n, e) => n + e.decodedBodySize, 0),
                page_files: 1 + assets.length,
                watch_bytes: watch.length ? watch[0].decodedBodySize : null,
                watch_ms: watch.length ? watch[0].duration : null};
    """)
    print(json.dumps({"big_rules_view": {
        "rules": 10000, "table_drawn_ms": round(drawn_ms), "filter_ms": round(filter_ms),
        "interactive_ms": round(drawn_ms + filter_ms), **weight,
        "load": os.getloadavg()[0]}}))


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
