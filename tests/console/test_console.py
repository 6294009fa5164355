"""The netacl console in a real browser (Debian's chromium, headless, through chromedriver and
Selenium), against a running `netacl serve`. Run by crates/cli/tests/cli/console_browser.rs.

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
from selenium.webdriver.common.action_chains import ActionChains
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
    # The page's console messages, to find CSP violations and uncaught errors.
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(os.environ.get("NETACL_CHROMEDRIVER", "/usr/bin/chromedriver"))
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_page_load_timeout(30)
    return driver


def check_browser_log(driver):
    """No Content-Security-Policy violation and no uncaught error since the last call (the
    page's console messages, as Chromium reports them)."""
    bad = [e["message"] for e in driver.get_log("browser")
           if "Content Security Policy" in e["message"] or "Uncaught" in e["message"]]
    assert not bad, bad


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
    # A field for every signal of `netacl eval`'s request object (the path gives the scope).
    keys = {i.get_attribute("data-key") for i in driver.find_elements(By.CSS_SELECTOR, "#try-form [data-key]")}
    assert keys == {"path", "client_ip", "connecting_ip", "country", "subdivision", "asn", "ja3", "ja4",
                    "user_agent", "hostname", "http_message_signature"}, keys
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
    # The columns in the order, each head above its cells.
    heads = [th.text for th in driver.find_elements(By.CSS_SELECTOR, "#rules-table thead th")]
    assert heads[:5] == ["Priority", "Description", "Action", "Scope", "Signals"], heads
    cells = row(driver, "shadowed rule").find_elements(By.CSS_SELECTOR, "td")
    assert len(cells) == len(heads), (heads, len(cells))
    assert "findings" in cells[heads.index("Findings")].get_attribute("class"), heads
    assert "traffic" in cells[heads.index("Matched / evaluated (1 h)")].get_attribute("class"), heads
    assert cells[heads.index("Active")].find_elements(By.CSS_SELECTOR, "input[type=checkbox]"), heads
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


def open_editor_of(driver, description):
    driver.find_element(By.ID, "nav-rules").click()
    visible(driver, "rules")
    tr = wait(driver, lambda d: row(d, description))
    tr.find_element(By.CSS_SELECTOR, 'button[data-control="edit"]').click()
    visible(driver, "editor")
    return tr.get_attribute("data-id")


def preview_with(driver, button_id, requests):
    """Pastes `requests` (one JSON object a line), presses `button_id`, and waits for the
    answer: (title, requests replayed, decisions changed, transitions text)."""
    box = driver.find_element(By.ID, "preview-requests")
    box.clear()
    box.send_keys("\n".join(json.dumps(r) for r in requests))
    driver.find_element(By.ID, button_id).click()
    wait(driver, lambda d: d.find_elements(By.ID, "preview-summary"))
    title = driver.find_element(By.CSS_SELECTOR, "#preview-result h3").text
    replayed = driver.find_element(By.CSS_SELECTOR, "#preview-summary .preview-requests").text
    changed = driver.find_element(By.CSS_SELECTOR, "#preview-summary .preview-changed").text
    found = driver.find_elements(By.CSS_SELECTOR, "#preview-result ul.transitions")
    return title, replayed, changed, found[0].text if found else ""


def last_write(driver):
    """The newest sapi event of the tenant's log: (method, path; the method in lower case, as
    the log writes it), through the console's API."""
    return driver.execute_async_script("""
        const done = arguments[0];
        fetch("/console/session").then((r) => r.json()).then((s) =>
          fetch("/console/api/api/v2/logs?per_page=1&q=type:sapi", {headers: {"X-CSRF-Token": s.csrf_token}}))
          .then((r) => r.json()).then((logs) => done([logs[0].details.request.method,
                                                       logs[0].details.request.path]),
                                      (e) => done(String(e)));
    """)


def check_update_and_delete(driver):
    """An edited rule previewed as an update (only the changed fields) and as a deletion, saved
    as a PATCH, and deleted in two steps."""
    # The marked rule (block 198.51.100.0/24) made inactive, as an update: 198.51.100.200 is no
    # longer blocked; 198.51.100.7 still is (by the shadowed rule, 198.51.100.0/25).
    requests = [{"client_ip": "198.51.100.7"}, {"client_ip": "198.51.100.200"},
                {"client_ip": "192.0.2.1"}]
    open_editor_of(driver, MARKUP)
    assert driver.find_element(By.ID, "write-mode").is_displayed()
    driver.find_element(By.ID, "f-mode-update").click()
    # Nothing changed yet: said, nothing sent.
    driver.find_element(By.ID, "preview-rule").click()
    wait(driver, lambda d: "nothing to update" in d.find_element(By.ID, "preview-error").text)
    driver.find_element(By.ID, "f-active").click()
    title, replayed, changed, transitions = preview_with(driver, "preview-rule", requests)
    assert title == "Impact of this update", title
    assert (replayed, changed, transitions) == ("3", "1", "block → none: 1"), (replayed, changed, transitions)
    # The deletion of the same rule: the same change of decisions.
    title, replayed, changed, transitions = preview_with(driver, "preview-delete", requests)
    assert title == "Impact of deleting this rule", title
    assert (changed, transitions) == ("1", "block → none: 1"), (changed, transitions)
    driver.save_screenshot(os.path.join(SHOTS, "console-preview-delete.png"))
    driver.find_element(By.ID, "cancel-rule").click()
    visible(driver, "rules")
    tr = wait(driver, lambda d: row(d, MARKUP))
    assert tr.find_element(By.CSS_SELECTOR, "input[type=checkbox]").is_selected()  # nothing saved

    # The shadowed rule: its description changed by a PATCH of that field alone.
    shadowed_id = open_editor_of(driver, "shadowed rule")
    driver.find_element(By.ID, "f-mode-update").click()
    driver.find_element(By.ID, "f-description").send_keys(" (patched)")
    driver.find_element(By.ID, "save-rule").click()
    # Still shadowed: the editor stays open on the saved rule with the finding.
    note = wait(driver, lambda d: d.find_element(By.ID, "editor-findings").text or None)
    assert "shadowed by" in note, note
    assert driver.find_element(By.ID, "f-description").get_attribute("value") == "shadowed rule (patched)"
    driver.find_element(By.ID, "cancel-rule").click()
    visible(driver, "rules")
    wait(driver, lambda d: row(d, "shadowed rule (patched)") is not None)
    method, path = last_write(driver)
    assert method == "patch" and path.endswith(shadowed_id), (method, path)
    # Deleted in two steps from its editor.
    open_editor_of(driver, "shadowed rule (patched)")
    delete = driver.find_element(By.ID, "delete-rule")
    delete.click()
    assert shadowed_id in delete.text and driver.find_element(By.ID, "editor").is_displayed()
    delete.click()
    visible(driver, "rules")
    wait(driver, lambda d: "Deleted rule " + shadowed_id in d.find_element(By.ID, "rules-note").text)
    wait(driver, lambda d: row(d, "shadowed rule (patched)") is None)
    assert last_write(driver) == ["delete", "/api/v2/network-acls/" + shadowed_id]


def active_is(driver, script):
    return driver.execute_script("const a = document.activeElement; return " + script)


def press(driver, *keys):
    ActionChains(driver).send_keys(*keys).perform()


def tab_to(driver, script, backwards=False, limit=60):
    """Presses Tab (Shift+Tab backwards) until `script` (about `a`, the focused element) holds."""
    for _ in range(limit):
        if active_is(driver, script):
            return
        if backwards:
            ActionChains(driver).key_down(Keys.SHIFT).send_keys(Keys.TAB).key_up(Keys.SHIFT).perform()
        else:
            press(driver, Keys.TAB)
    raise AssertionError("Tab never reached: " + script)


def check_keyboard(driver):
    """The main flows with the keyboard alone: the rules view focused at its filter, a rule
    created in the editor, its toggle (the focus kept through the redraw), a tried request
    (the new log rule monitored), and a rollback confirmed after Escape closed it once."""
    driver.get(BASE + "/console")  # signed in: the rules view, the focus at the filter
    visible(driver, "rules")
    wait(driver, lambda d: active_is(d, 'a.id === "rule-filter"'))
    tab_to(driver, 'a.id === "new-rule"')
    press(driver, Keys.ENTER)
    visible(driver, "editor")
    assert active_is(driver, 'a.id === "f-description"')
    press(driver, "keyboard rule")
    tab_to(driver, 'a.id === "f-priority"')
    press(driver, "3")
    tab_to(driver, 'a.id === "f-action"')
    press(driver, "log")  # typed on a select: the option that starts so
    assert driver.find_element(By.ID, "f-action").get_attribute("value") == "log"
    tab_to(driver, 'a.id === "f-match-ipv4_cidrs"')
    press(driver, "198.51.100.0/24")
    tab_to(driver, 'a.id === "save-rule"')
    press(driver, Keys.ENTER)
    visible(driver, "rules")
    # The focus is on the saved rule's row.
    tr = wait(driver, lambda d: row(d, "keyboard rule"))
    rule_id = tr.get_attribute("data-id")
    wait(driver, lambda d: active_is(d, 'a.dataset && a.dataset.id === "%s"' % rule_id))
    # Its toggle, with Space; the focus stays on it through the table's redraw.
    on_toggle = 'a.dataset && a.dataset.control === "active" && a.closest("tr").dataset.id === "%s"' % rule_id
    tab_to(driver, on_toggle)
    press(driver, Keys.SPACE)
    wait(driver, lambda d: not row(d, "keyboard rule").find_element(
        By.CSS_SELECTOR, "input[type=checkbox]").is_selected())
    wait(driver, lambda d: active_is(d, on_toggle))
    press(driver, Keys.SPACE)
    wait(driver, lambda d: row(d, "keyboard rule").find_element(
        By.CSS_SELECTOR, "input[type=checkbox]").is_selected())
    assert active_is(driver, on_toggle)
    # A tried request: blocked by the marked rule, the keyboard rule monitoring it.
    tab_to(driver, 'a.id === "nav-try"', backwards=True)
    press(driver, Keys.ENTER)
    visible(driver, "try")
    assert active_is(driver, 'a.id === "t-path"')
    tab_to(driver, 'a.id === "t-client_ip"')
    press(driver, "198.51.100.7", Keys.ENTER)
    wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#decision .decision-action")
         and d.find_element(By.CSS_SELECTOR, "#decision .decision-action").text == "block")
    assert "keyboard rule" in driver.find_element(By.CSS_SELECTOR, "#decision .decision-monitored").text
    assert "monitored" in row(driver, "keyboard rule").get_attribute("class")
    # A rollback to the version before the toggle's last change (the rule inactive).
    tab_to(driver, 'a.id === "nav-history"', backwards=True)
    press(driver, Keys.ENTER)
    visible(driver, "history")
    wait(driver, lambda d: len(versions(d)) > 2)
    target = versions(driver)[1]
    on_rollback = 'a.classList.contains("rollback") && a.closest("tr").dataset.version === "%d"' % target
    tab_to(driver, on_rollback)
    press(driver, Keys.ENTER)
    visible(driver, "rollback-confirm")
    assert active_is(driver, 'a.id === "rollback-go"')
    press(driver, Keys.ESCAPE)  # closed, the focus back on the button that opened it
    wait(driver, lambda d: not d.find_element(By.ID, "rollback-confirm").is_displayed())
    assert active_is(driver, on_rollback)
    press(driver, Keys.ENTER)
    visible(driver, "rollback-confirm")
    assert active_is(driver, 'a.id === "rollback-go"')
    press(driver, Keys.ENTER)
    done = wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, "#rollback-result .ok"))
    assert "Rolled back to version %d" % target in done.text, done.text
    wait(driver, lambda d: active_is(d, 'a.classList.contains("ok")'))
    driver.find_element(By.ID, "nav-rules").click()
    wait(driver, lambda d: row(d, "keyboard rule") is not None and not row(d, "keyboard rule").find_element(
        By.CSS_SELECTOR, "input[type=checkbox]").is_selected())


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
    deciding = driver.find_element(By.CSS_SELECTOR, "#decision .decision-rule").text
    assert MARKUP in deciding, deciding  # its description, as text
    assert not driver.find_elements(By.CSS_SELECTOR, "#try-result img, #try-result b")
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
    check_update_and_delete(driver)
    check_keyboard(driver)
    check_browser_log(driver)

    # Filtering.
    driver.find_element(By.ID, "nav-rules").click()
    flt = driver.find_element(By.ID, "rule-filter")
    flt.send_keys("no rule has this text")
    wait(driver, lambda d: d.find_element(By.ID, "rules-count").text.startswith("0 of"))
    # A tried request whose deciding rule the filter hides: the filter is set to it, and
    # "show in the table" moves the focus to its highlighted row.
    try_request(driver, "198.51.100.7", "block")
    marked = wait(driver, lambda d: row(d, MARKUP))
    assert flt.get_attribute("value") == marked.get_attribute("data-id"), flt.get_attribute("value")
    assert "deciding" in marked.get_attribute("class")
    assert "filter was set" in driver.find_element(By.ID, "try-result").text
    driver.find_element(By.CSS_SELECTOR, "#decision .decision-rule button.link").click()
    wait(driver, lambda d: active_is(d, 'a.dataset && a.dataset.id === "%s"' % marked.get_attribute("data-id")))
    driver.find_element(By.ID, "nav-rules").click()
    flt.clear()
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
    check_browser_log(driver)
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
