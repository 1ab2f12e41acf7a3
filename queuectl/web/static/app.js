// queuectl's dashboard: live regions refresh themselves while the tab is shown, a job's output follows
// while it runs, and a button with data-confirm asks first. No inline script anywhere (the CSP forbids it).
"use strict";

function every(seconds, step) {
  // Run step() every `seconds` while the page is visible; at once when it is shown again.
  let timer = null;
  const tick = async () => {
    timer = null;
    if (document.hidden) return;
    let more = true;
    try { more = await step(); } catch (e) { /* the next tick tries again */ }
    if (more !== false) timer = setTimeout(tick, seconds * 1000);
  };
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden && timer === null) tick();
  });
  timer = setTimeout(tick, seconds * 1000);
}

function live(region) {
  every(Number(region.dataset.interval) || 3, async () => {
    // Say which charts this tab shows: unchanged, they come back as a placeholder that keeps them.
    const url = new URL(region.dataset.live, location.href), shown = region.querySelector("[data-charts]");
    if (shown) url.searchParams.set("charts", shown.dataset.charts);
    const response = await fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" } });
    if (!response.ok) {
      region.dataset.stale = String(response.status);
      return true;
    }
    const next = document.createElement("template");
    next.innerHTML = await response.text(); // server-rendered, every value escaped there
    const kept = next.content.querySelector("[data-charts][data-kept]");
    if (kept && shown) kept.replaceWith(shown);
    region.replaceChildren(next.content);
    delete region.dataset.stale;
    return true;
  });
}

function follow(box) {
  const out = box.querySelector("#stdout"), err = box.querySelector("#stderr"), said = box.querySelector("#follow-state");
  // The page holds the output as read when it was made; follow on from there.
  let attempt = box.dataset.attempt || "", positions = [Number(box.dataset.out) || 0, Number(box.dataset.err) || 0];
  const step = async () => {
    const url = new URL(box.dataset.follow, location.href);
    url.searchParams.set("attempt", attempt);
    url.searchParams.set("out", positions[0]);
    url.searchParams.set("err", positions[1]);
    const response = await fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" } });
    if (!response.ok) { said.textContent = "could not read the output (" + response.status + ")"; return true; }
    const got = await response.json();
    if (got.restarted) {
      out.textContent = ""; err.textContent = "";
      const shown = document.getElementById("attempt");
      if (shown) shown.textContent = got.attempt;
    }
    for (const [n, lost] of got.lost.entries()) {
      if (lost) (n ? err : out).append(document.createTextNode("[" + lost + " bytes not kept]\n"));
    }
    out.append(document.createTextNode(got.stdout)); // text, never markup
    err.append(document.createTextNode(got.stderr));
    attempt = got.attempt === null ? "" : String(got.attempt);
    positions = [got.out, got.err];
    said.textContent = got.ended ? "the job has ended (" + got.state + ")" : "following: " + got.state;
    return !got.ended;
  };
  step().then((more) => { if (more) every(Number(box.dataset.interval) || 1, step); });
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("[data-live]").forEach(live);
  document.querySelectorAll("[data-follow]").forEach(follow);
  document.addEventListener("submit", (event) => {
    const button = event.submitter;
    if (button && button.dataset.confirm && !confirm(button.dataset.confirm)) event.preventDefault();
  });
});
