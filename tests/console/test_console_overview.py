"""The console's traffic counts, tenant overview, keys and managed lists in a real browser
(Debian's chromium, headless, through chromedriver and Selenium), against a running
`netacl serve` with a fresh tenant. Run by crates/cli/tests/cli/console_browser.rs.

Environment: NETACL_BASE, NETACL_CLIENT_ID, NETACL_CLIENT_SECRET (the bootstrap client, which
holds every scope, create:edge_summaries included), NETACL_READER_ID, NETACL_READER_SECRET (a
client holding read:network_acls only), NETACL_SHOTS (screenshots for the README, and of the page
on failure), NETACL_PAST_TRAFFIC (JSON `[[minutes ago, decisions, blocked], ...]`: an edge's
earlier reports of the last hour, written into the log before the server started).
"""
import datetime
import http.cookiejar
import json
import math
import os
import sys
import time
import traceback
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

BASE = os.environ["NETACL_BASE"]
SHOTS = os.environ["NETACL_SHOTS"]
CLIENT = (os.environ["NETACL_CLIENT_ID"], os.environ["NETACL_CLIENT_SECRET"])
READER = (os.environ["NETACL_READER_ID"], os.environ["NETACL_READER_SECRET"])
PAST = json.loads(os.environ.get("NETACL_PAST_TRAFFIC", "[]"))
BUSY = "overview busy rule"
QUIET = "overview quiet rule"


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
    return WebDriverWait(driver, seconds,
                         ignored_exceptions=(StaleElementReferenceException,)).until(condition)


def visible(driver, element_id):
    return wait(driver, EC.visibility_of_element_located((By.ID, element_id)))


def sign_in(driver, client_id, secret):
    driver.get(BASE + "/console")
    visible(driver, "signin")
    driver.find_element(By.ID, "client_id").send_keys(client_id)
    driver.find_element(By.ID, "client_secret").send_keys(secret, Keys.ENTER)
    visible(driver, "rules")
    wait(driver, lambda d: "rules" in d.find_element(By.ID, "rules-count").text)


def row(driver, description):
    for tr in driver.find_elements(By.CSS_SELECTOR, "#rules-body tr"):
        if tr.find_elements(By.CSS_SELECTOR, "td")[1].text == description:
            return tr
    return None


class Session:
    """The console's own API, from Python: a session cookie and its CSRF token."""

    def __init__(self, client_id, secret):
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        self.csrf = None
        info = self.call("POST", "/console/session",
                         {"client_id": client_id, "client_secret": secret})
        self.csrf = info["csrf_token"]

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(BASE + path, data=data, method=method)
        request.add_header("Accept", "application/json")
        if body is not None:
            request.add_header("Content-Type", "application/json")
        if self.csrf:
            request.add_header("X-CSRF-Token", self.csrf)
        with self.opener.open(request, timeout=20) as answer:
            text = answer.read()
            return json.loads(text) if text else None

    def api(self, method, path, body=None):
        return self.call(method, "/console/api/" + path, body)


def rule_body(description, priority, cidr):
    return {"description": description, "active": True, "priority": priority,
            "rule": {"action": {"block": True}, "scope": "tenant",
                     "match": {"ipv4_cidrs": [cidr]}}}


def summary(rule_id, evaluated, matched):
    return {"rule_id": rule_id, "action": "block", "scope": "tenant", "policy_version": 1,
            "interval_s": 60, "evaluated": evaluated, "matched": matched,
            "connections_refused": 0}


def seed():
    """Two rules, and two reports of an edge about the first: 30 matched of 100 evaluated."""
    s = Session(*CLIENT)
    busy = s.api("POST", "api/v2/network-acls", rule_body(BUSY, 5, "203.0.113.0/24"))["id"]
    s.api("POST", "api/v2/network-acls", rule_body(QUIET, 6, "198.51.100.0/24"))
    s.api("POST", "_netacl/v1/edge/summaries", {"summaries": [summary(busy, 40, 10)]})
    time.sleep(0.01)  # another report: another date
    s.api("POST", "_netacl/v1/edge/summaries", {"summaries": [summary(busy, 60, 20)]})
    return busy


def traffic_cell(driver, description):
    tr = row(driver, description)
    if tr is None:
        return None
    cell = tr.find_elements(By.CSS_SELECTOR, "td.traffic")
    return cell[0] if cell and cell[0].text else None


def text_of(driver, element_id):
    return driver.find_element(By.ID, element_id).text


def check_counts(driver):
    cell = wait(driver, lambda d: traffic_cell(d, BUSY))
    assert cell.find_element(By.CSS_SELECTOR, ".counts").text == "30 / 100", cell.text
    # Matched over evaluated: twelve bars each.
    bars = cell.find_elements(By.CSS_SELECTOR, "svg.spark rect.front")
    behind = cell.find_elements(By.CSS_SELECTOR, "svg.spark rect.behind")
    assert len(bars) == 12 and len(behind) == 12, (len(bars), len(behind))
    # Reported just now: the newest bucket is the only one with a bar; evaluated (100) is
    # taller than matched (30).
    heights = [float(b.get_attribute("height")) for b in bars]
    assert heights[-1] > 0 and all(h == 0 for h in heights[:-1]), heights
    assert float(behind[-1].get_attribute("height")) > heights[-1]
    # The column's head is above its cells.
    heads = [th.text for th in driver.find_elements(By.CSS_SELECTOR, "#rules-table thead th")]
    cells = row(driver, BUSY).find_elements(By.CSS_SELECTOR, "td")
    at = heads.index("Matched / evaluated (1 h)")
    assert "traffic" in cells[at].get_attribute("class"), (heads, at)
    quiet = wait(driver, lambda d: traffic_cell(d, QUIET))
    assert quiet.text == "no traffic reported", quiet.text
    driver.save_screenshot(os.path.join(SHOTS, "console-rules-counts.png"))


def log_types(driver):
    return [td.text for td in driver.find_elements(By.CSS_SELECTOR, "#log-body td.log-type")]


def percent(share):
    """As the console writes a share: to a tenth of a percent."""
    tenths = math.floor(share * 1000 + 0.5) / 10
    return ("%d" % tenths if tenths == int(tenths) else str(tenths)) + " %"


def expected_buckets():
    """(decisions, blocked) per bucket, oldest first: the reports seeded now (bucket 11) and
    the earlier ones (one in the middle of a bucket each)."""
    decisions, blocked = [0] * 12, [0] * 12
    decisions[11], blocked[11] = 100, 30
    for minutes_ago, d, b in PAST:
        slot = 11 - int(minutes_ago // 5)
        decisions[slot] += d
        blocked[slot] += b
    return decisions, blocked


def check_traffic_charts(driver):
    """The last hour's decisions per second and blocked share, per bucket, as two charts and a
    table."""
    decisions, blocked = expected_buckets()
    rate_bars = driver.find_elements(By.CSS_SELECTOR, "#ov-chart-rate rect.bar")
    share_bars = driver.find_elements(By.CSS_SELECTOR, "#ov-chart-share rect.bar")
    assert len(rate_bars) == 12 and len(share_bars) == 12, (len(rate_bars), len(share_bars))
    heights = [float(b.get_attribute("height")) for b in rate_bars]
    for i, d in enumerate(decisions):
        assert (heights[i] > 0) == (d > 0), (i, heights, decisions)
    # The tallest bar is the busiest bucket; a bucket without decisions has no share bar.
    assert heights.index(max(heights)) == decisions.index(max(decisions)), (heights, decisions)
    for i, d in enumerate(decisions):
        empty = "empty" in share_bars[i].get_attribute("class")
        assert empty == (d == 0), (i, share_bars[i].get_attribute("class"))
    shares = [float(b.get_attribute("height")) for b in share_bars]
    # Shares are drawn to one scale: 50 % is taller than 10 %.
    half = [i for i in range(12) if decisions[i] and blocked[i] * 2 == decisions[i]]
    tenth = [i for i in range(12) if decisions[i] and blocked[i] * 10 == decisions[i]]
    if half and tenth:
        assert shares[half[0]] > shares[tenth[0]], shares
    # The same figures as a table.
    driver.find_element(By.CSS_SELECTOR, "#ov-traffic details summary").click()
    rows = [[td.text for td in tr.find_elements(By.CSS_SELECTOR, "td")]
            for tr in driver.find_elements(By.CSS_SELECTOR, "#ov-buckets tbody tr")]
    assert [int(r[1]) for r in rows] == decisions, (rows, decisions)
    assert [int(r[3]) for r in rows] == blocked, (rows, blocked)
    assert rows[11][4] == "30 %" and rows[0][4] == "—", rows
    # A bar's title names its bucket's figures.
    title = rate_bars[11].find_element(By.TAG_NAME, "title").get_attribute("textContent")
    assert "100 decisions" in title and "30 blocked" in title, title
    driver.find_element(By.CSS_SELECTOR, "#ov-traffic details summary").click()  # closed again


def check_overview(driver):
    driver.find_element(By.ID, "nav-overview").click()
    visible(driver, "overview")
    decisions, blocked = expected_buckets()
    share = percent(sum(blocked) / sum(decisions))
    wait(driver, lambda d: text_of(d, "ov-blocked") == share if d.find_elements(
        By.ID, "ov-blocked") else False)
    assert text_of(driver, "ov-decisions") == str(sum(decisions)), text_of(driver, "ov-decisions")
    assert text_of(driver, "ov-rules") == "2 / 2", text_of(driver, "ov-rules")
    assert text_of(driver, "ov-compile").endswith(" ms")
    check_traffic_charts(driver)
    # The logs: every write and the reports; filtered by type, then by date too.
    wait(driver, lambda d: len(log_types(d)) >= 4)
    Select(driver.find_element(By.ID, "log-type")).select_by_value("acls_summary")
    driver.find_element(By.ID, "log-apply").click()
    reports = 2 + len(PAST)
    wait(driver, lambda d: text_of(d, "log-page") == "1–%d of %d" % (reports, reports))
    assert set(log_types(driver)) == {"acls_summary"}
    # From three minutes ago (local time, as typed in the field): the two reports made now.
    since = (datetime.datetime.now() - datetime.timedelta(minutes=3)).strftime("%Y-%m-%dT%H:%M:%S")
    driver.execute_script("arguments[0].value = arguments[1]",
                          driver.find_element(By.ID, "log-from"), since)
    driver.find_element(By.ID, "log-apply").click()
    wait(driver, lambda d: log_types(d) == ["acls_summary", "acls_summary"])
    assert text_of(driver, "log-page") == "1–2 of 2", text_of(driver, "log-page")
    driver.execute_script("window.scrollTo(0, 0)")
    driver.save_screenshot(os.path.join(SHOTS, "console-overview.png"))
    Select(driver.find_element(By.ID, "log-type")).select_by_value("sapi")
    driver.find_element(By.ID, "log-apply").click()
    wait(driver, lambda d: log_types(d) and set(log_types(d)) == {"sapi"})


def check_keys_and_lists(driver):
    driver.find_element(By.ID, "nav-keys").click()
    visible(driver, "keys")
    wait(driver, lambda d: text_of(d, "keys-count") == "0 keys")
    # Refused: too short a material, the API's message at its field.
    driver.find_element(By.ID, "k-name").send_keys("proxy")
    driver.find_element(By.ID, "k-value").send_keys("c2hvcnQ=")
    driver.find_element(By.ID, "k-create").click()
    error = wait(driver, lambda d: d.find_element(
        By.CSS_SELECTOR, '#key-form .field-error[data-for="value"]').text or None)
    assert driver.find_element(By.ID, "k-value").get_attribute("aria-invalid") == "true", error
    # Created with generated material: sent once, then gone from the page.
    driver.find_element(By.ID, "k-generate").click()
    material = driver.find_element(By.ID, "k-value").get_attribute("value")
    assert len(material) == 44, material
    driver.find_element(By.ID, "k-create").click()
    wait(driver, lambda d: "created" in text_of(d, "key-note"))
    wait(driver, lambda d: text_of(d, "keys-count") == "1 key")
    assert driver.find_element(By.ID, "k-value").get_attribute("value") == ""
    page = driver.execute_script(
        "return document.body.innerText + [...document.querySelectorAll('input, textarea')]"
        ".map((i) => i.value).join(' ')")
    assert material not in page and material not in driver.page_source
    assert "proxy" in driver.find_element(By.CSS_SELECTOR, "#keys-body tr").text
    # Deleted, in two steps.
    delete = driver.find_element(By.CSS_SELECTOR, "#keys-body tr button.danger")
    delete.click()
    assert text_of(driver, "keys-count") == "1 key"
    driver.find_element(By.CSS_SELECTOR, "#keys-body tr button.danger").click()
    wait(driver, lambda d: text_of(d, "keys-count") == "0 keys")

    # A managed list: a malformed entry refused at the field, then saved.
    tr = wait(driver, lambda d: d.find_element(
        By.CSS_SELECTOR, '#lists-body tr[data-name="auth0.tor"]'))
    tr.find_element(By.CSS_SELECTOR, "button").click()
    visible(driver, "list-form")
    items = driver.find_element(By.ID, "l-items")
    items.send_keys("192.0.2.0/24\nnot-an-address")
    driver.find_element(By.ID, "l-save").click()
    error = wait(driver, lambda d: d.find_element(
        By.CSS_SELECTOR, '#list-form .field-error[data-for="items"]').text or None)
    assert "items[1]" in error and "line 2" in error, error
    items.clear()
    items.send_keys("192.0.2.0/24\n198.51.100.7")
    driver.find_element(By.ID, "l-save").click()
    wait(driver, lambda d: d.find_element(
        By.CSS_SELECTOR, '#lists-body tr[data-name="auth0.tor"] td.entries').text == "2")
    driver.save_screenshot(os.path.join(SHOTS, "console-keys.png"))


def check_read_only(driver):
    driver.find_element(By.ID, "sign-out").click()
    visible(driver, "signin")
    sign_in(driver, *READER)
    # Counts are readable with read:network_acls.
    wait(driver, lambda d: traffic_cell(d, BUSY))
    driver.find_element(By.ID, "nav-keys").click()
    visible(driver, "keys")
    wait(driver, lambda d: "read:network_acl_keys" in text_of(d, "keys-error"))
    assert not driver.find_element(By.ID, "key-form").is_displayed()
    wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#lists-body tr"))
    assert not driver.find_elements(By.CSS_SELECTOR, "#lists-body button")
    assert not driver.find_elements(By.CSS_SELECTOR, "#keys-body button")
    driver.find_element(By.ID, "nav-overview").click()
    visible(driver, "overview")
    wait(driver, lambda d: "read:logs" in text_of(d, "log-error"))
    wait(driver, lambda d: d.find_elements(By.ID, "ov-blocked"))


def main():
    started = time.monotonic()
    driver = browser()
    try:
        seed()
        sign_in(driver, *CLIENT)
        check_counts(driver)
        check_overview(driver)
        check_keys_and_lists(driver)
        check_read_only(driver)
        check_browser_log(driver)
    except Exception:
        traceback.print_exc()
        path = os.path.join(SHOTS, "overview-failure.png")
        try:
            driver.save_screenshot(path)
            print("screenshot of the failure: " + path, file=sys.stderr)
        except Exception:
            pass
        sys.exit(1)
    finally:
        driver.quit()
    print(json.dumps({"overview_test_seconds": round(time.monotonic() - started, 1)}))
    print("console overview: all checks passed")


if __name__ == "__main__":
    main()
